//! Rule-by-rule scenario tests for the table state machine.

use super::*;

fn pid(s: &str) -> PlayerId {
    PlayerId(s.to_string())
}

fn config(seats: u8, sb: u64, bb: u64, ante: u64) -> TableConfig {
    TableConfig {
        small_blind: Chips(sb),
        big_blind: Chips(bb),
        ante: Chips(ante),
        seats,
        min_buy_in: Chips(bb),
        max_buy_in: Chips(bb * 1000),
    }
}

/// A table with players "p<seat>" at the given seats; the first hand's
/// button will be the lowest dealt-in seat.
fn table(cfg: TableConfig, stacks: &[(SeatNo, u64)]) -> Game {
    let seats = stacks
        .iter()
        .map(|&(s, c)| (s, pid(&format!("p{s}")), Chips(c)))
        .collect();
    Game::resume(cfg, 0, None, seats).expect("resume")
}

/// A deck dealing `holes` (two cards each, in dealing order: first the seat
/// after the button, clockwise) and then `board`, followed by the unused
/// cards.
fn rigged(holes: &[&str], board: &str) -> Vec<Card> {
    let mut deck: Vec<Card> = holes
        .iter()
        .flat_map(|h| h.split_whitespace())
        .chain(board.split_whitespace())
        .map(|c| c.parse().expect("card"))
        .collect();
    for c in standard_deck() {
        if !deck.contains(&c) {
            deck.push(c);
        }
    }
    assert_eq!(deck.len(), 52);
    deck
}

fn start(g: &mut Game, deck: Vec<Card>) -> Vec<Event> {
    g.apply(Command::StartHand { deck }).expect("start hand")
}

fn act(g: &mut Game, seat: SeatNo, action: Action) -> Vec<Event> {
    try_act(g, seat, action).unwrap_or_else(|e| panic!("seat {seat} {action:?}: {e}"))
}

/// An action answering the open decision.
fn act_cmd(g: &Game, seat: SeatNo, action: Action) -> Command {
    Command::Act {
        hand: g.hand_no(),
        seat,
        decision: g.decision().unwrap_or(0),
        action,
    }
}

fn try_act(g: &mut Game, seat: SeatNo, action: Action) -> Result<Vec<Event>, RuleError> {
    let cmd = act_cmd(g, seat, action);
    g.apply(cmd)
}

/// Asserts the command is refused with `err` and changes nothing.
fn refused(g: &mut Game, cmd: Command, err: RuleError) {
    let before = g.clone();
    let json = serde_json::to_string(g).expect("json");
    assert_eq!(g.apply(cmd.clone()), Err(err), "{cmd:?}");
    assert_eq!(*g, before);
    assert_eq!(serde_json::to_string(g).expect("json"), json);
}

fn stack(g: &Game, seat: SeatNo) -> u64 {
    g.seats()
        .iter()
        .find(|s| s.seat == seat)
        .map_or(0, |s| s.stack.0)
}

fn kinds(events: &[Event]) -> Vec<&EventKind> {
    events.iter().map(|e| &e.kind).collect()
}

fn actions(events: &[Event]) -> Vec<(SeatNo, ActionKind, u64)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Action {
                seat,
                action,
                amount,
                ..
            } => Some((*seat, *action, amount.0)),
            _ => None,
        })
        .collect()
}

fn awards(events: &[Event]) -> Vec<(u64, Vec<SeatNo>)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::PotAwarded { amount, seats, .. } => Some((amount.0, seats.clone())),
            _ => None,
        })
        .collect()
}

fn shown(events: &[Event]) -> Option<Vec<SeatNo>> {
    events.iter().find_map(|e| match &e.kind {
        EventKind::Showdown { hands, .. } => Some(hands.iter().map(|h| h.seat).collect()),
        _ => None,
    })
}

fn streets(events: &[Event]) -> Vec<Street> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Street { street, .. } => Some(*street),
            _ => None,
        })
        .collect()
}

/// Whoever is to act folds (or checks when free) until the hand ends.
fn fold_around(g: &mut Game) -> Vec<Event> {
    let mut all = Vec::new();
    while let Some(seat) = g.to_act() {
        let hand = g.hand_no();
        all.extend(g.apply(Command::Timeout { hand, seat }).expect("timeout"));
    }
    all
}

fn check_down(g: &mut Game) -> Vec<Event> {
    let mut all = Vec::new();
    while let Some(seat) = g.to_act() {
        let a = if g.legal_actions().contains(&LegalAction::Check) {
            Action::Check
        } else {
            Action::Call
        };
        all.extend(act(g, seat, a));
    }
    all
}

// ----- positions -------------------------------------------------------------

#[test]
fn heads_up_button_posts_small_blind_and_acts_first_preflop() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (3, 100)]);
    let ev = start(&mut g, standard_deck());
    assert_eq!(g.button(), Some(0));
    assert_eq!(
        actions(&ev),
        vec![(0, ActionKind::SmallBlind, 1), (3, ActionKind::BigBlind, 2)]
    );
    assert_eq!(g.to_act(), Some(0));
    assert_eq!(
        g.legal_actions(),
        vec![
            LegalAction::Fold,
            LegalAction::Call { amount: Chips(1) },
            LegalAction::Raise {
                min: Chips(4),
                max: Chips(100)
            },
            LegalAction::AllIn { amount: Chips(100) },
        ]
    );
    assert!(matches!(
        ev.last().map(|e| &e.kind),
        Some(EventKind::Turn { seat: 0, .. })
    ));
}

#[test]
fn heads_up_big_blind_acts_first_after_the_flop() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (3, 100)]);
    start(&mut g, standard_deck());
    act(&mut g, 0, Action::Call);
    assert_eq!(g.to_act(), Some(3), "big blind has the option");
    let ev = act(&mut g, 3, Action::Check);
    assert_eq!(streets(&ev), vec![Street::Flop]);
    assert_eq!(g.to_act(), Some(3));
    act(&mut g, 3, Action::Check);
    assert_eq!(g.to_act(), Some(0));
}

#[test]
fn blinds_sit_left_of_the_button_and_the_seat_after_the_big_blind_acts_first() {
    let mut g = table(
        config(9, 5, 10, 0),
        &[(1, 500), (4, 500), (6, 500), (8, 500)],
    );
    let ev = start(&mut g, standard_deck());
    assert_eq!(g.button(), Some(1));
    assert_eq!(
        actions(&ev),
        vec![
            (4, ActionKind::SmallBlind, 5),
            (6, ActionKind::BigBlind, 10)
        ]
    );
    assert_eq!(g.to_act(), Some(8));
    // After the flop the first live seat after the button starts.
    act(&mut g, 8, Action::Call);
    act(&mut g, 1, Action::Call);
    act(&mut g, 4, Action::Call);
    act(&mut g, 6, Action::Check);
    assert_eq!(g.street(), Some(Street::Flop));
    assert_eq!(g.to_act(), Some(4));
}

#[test]
fn button_moves_clockwise_to_the_next_dealt_in_seat_skipping_empty_and_sitting_out_seats() {
    let mut g = table(
        config(6, 1, 2, 0),
        &[(0, 100), (2, 100), (3, 100), (5, 100)],
    );
    g.apply(Command::SitOut { seat: 3 }).expect("sit out");
    let mut buttons = Vec::new();
    for _ in 0..4 {
        start(&mut g, standard_deck());
        buttons.push(g.button().expect("button"));
        fold_around(&mut g);
    }
    assert_eq!(buttons, vec![0, 2, 5, 0]);
    assert_eq!(g.hand_no(), 4);
}

#[test]
fn resumed_table_moves_the_button_on_from_the_persisted_one() {
    let seats = vec![
        (1, pid("a"), Chips(50)),
        (4, pid("b"), Chips(50)),
        (7, pid("c"), Chips(50)),
    ];
    let mut g = Game::resume(config(9, 1, 2, 0), 41, Some(4), seats).expect("resume");
    assert_eq!(g.hand_no(), 41);
    assert!(g.can_start_hand());
    let ev = start(&mut g, standard_deck());
    assert_eq!(g.hand_no(), 42);
    assert_eq!(g.button(), Some(7));
    assert!(matches!(
        ev[0].kind,
        EventKind::HandStarted {
            hand: 42,
            button: 7,
            ..
        }
    ));
}

// ----- forced bets -----------------------------------------------------------

#[test]
fn antes_are_posted_by_every_dealt_in_player_before_the_blinds() {
    let mut g = table(config(6, 1, 2, 1), &[(0, 100), (1, 100), (2, 100)]);
    let total = g.total_chips();
    let ev = start(&mut g, standard_deck());
    assert_eq!(
        actions(&ev),
        vec![
            (1, ActionKind::Ante, 1),
            (2, ActionKind::Ante, 1),
            (0, ActionKind::Ante, 1),
            (1, ActionKind::SmallBlind, 1),
            (2, ActionKind::BigBlind, 2),
        ]
    );
    assert_eq!((stack(&g, 0), stack(&g, 1), stack(&g, 2)), (99, 98, 97));
    assert_eq!(g.total_chips(), total);
    // Antes are dead money: they do not count towards the call.
    assert_eq!(g.legal_actions()[1], LegalAction::Call { amount: Chips(2) });
}

#[test]
fn a_stack_too_short_for_the_ante_goes_all_in_and_plays_for_the_main_pot_only() {
    let mut g = table(config(6, 1, 2, 2), &[(0, 100), (1, 1), (2, 100)]);
    // Seat 1 (small blind) has the best hand, seat 0 the second best.
    let deck = rigged(&["Ah Ad", "7c 2d", "Kh Kd"], "3s 8h 9c Js 4d");
    let ev = start(&mut g, deck);
    assert_eq!(
        actions(&ev),
        vec![
            (1, ActionKind::Ante, 1),
            (2, ActionKind::Ante, 2),
            (0, ActionKind::Ante, 2),
            (2, ActionKind::BigBlind, 2),
        ],
        "the all-in small blind posts nothing more"
    );
    let view = g.view_for(None);
    assert!(view.seats.iter().any(|s| s.seat == 1 && s.all_in));
    let ev = check_down(&mut g);
    // Main pot: 1 from each; side pot: the other 3+3 between seats 0 and 2.
    assert_eq!(awards(&ev), vec![(3, vec![1]), (6, vec![0])]);
    assert_eq!((stack(&g, 0), stack(&g, 1), stack(&g, 2)), (102, 3, 96));
}

#[test]
fn a_short_big_blind_must_still_be_called_in_full() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100), (2, 1)]);
    let ev = start(&mut g, standard_deck());
    assert!(actions(&ev).contains(&(2, ActionKind::BigBlind, 1)));
    assert_eq!(g.to_act(), Some(0));
    assert_eq!(g.legal_actions()[1], LegalAction::Call { amount: Chips(2) });
    act(&mut g, 0, Action::Call);
    assert_eq!(g.legal_actions()[1], LegalAction::Call { amount: Chips(1) });
}

#[test]
fn big_blind_has_the_option_to_raise_when_everyone_limps() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100), (2, 100)]);
    start(&mut g, standard_deck());
    act(&mut g, 0, Action::Call);
    act(&mut g, 1, Action::Call);
    assert_eq!(g.to_act(), Some(2));
    assert_eq!(g.street(), Some(Street::Preflop));
    let legal = g.legal_actions();
    assert!(legal.contains(&LegalAction::Check));
    assert!(legal.contains(&LegalAction::Raise {
        min: Chips(4),
        max: Chips(100)
    }));
    act(&mut g, 2, Action::Check);
    assert_eq!(g.street(), Some(Street::Flop));
}

// ----- bet sizing ------------------------------------------------------------

#[test]
fn minimum_bet_is_the_big_blind() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100)]);
    start(&mut g, standard_deck());
    act(&mut g, 0, Action::Call);
    act(&mut g, 1, Action::Check);
    assert_eq!(
        g.legal_actions(),
        vec![
            LegalAction::Fold,
            LegalAction::Check,
            LegalAction::Bet {
                min: Chips(2),
                max: Chips(98)
            },
            LegalAction::AllIn { amount: Chips(98) },
        ]
    );
    let bet = |g: &Game, x| act_cmd(g, 1, Action::Bet(Chips(x)));
    let cmd = bet(&g, 1);
    refused(
        &mut g,
        cmd,
        RuleError::BadAmount("the minimum bet is 2".into()),
    );
    let cmd = bet(&g, 99);
    refused(&mut g, cmd, RuleError::InsufficientChips);
    let cmd = act_cmd(&g, 1, Action::Raise(Chips(4)));
    refused(
        &mut g,
        cmd,
        RuleError::IllegalAction("there is no bet to raise; bet instead".into()),
    );
    let ev = act(&mut g, 1, Action::Bet(Chips(2)));
    assert_eq!(actions(&ev), vec![(1, ActionKind::Bet, 2)]);
}

#[test]
fn minimum_raise_is_the_size_of_the_last_full_raise() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100)]);
    start(&mut g, standard_deck());
    act(&mut g, 0, Action::Raise(Chips(6)));
    assert!(g.legal_actions().contains(&LegalAction::Raise {
        min: Chips(10),
        max: Chips(100)
    }));
    let cmd = act_cmd(&g, 1, Action::Raise(Chips(9)));
    refused(
        &mut g,
        cmd,
        RuleError::BadAmount("the minimum raise is to 10".into()),
    );
    act(&mut g, 1, Action::Raise(Chips(20)));
    assert!(g.legal_actions().contains(&LegalAction::Raise {
        min: Chips(34),
        max: Chips(100)
    }));
}

#[test]
fn short_all_in_raise_does_not_reopen_betting_for_players_who_already_acted() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100), (2, 25)]);
    start(&mut g, standard_deck());
    act(&mut g, 0, Action::Raise(Chips(20)));
    act(&mut g, 1, Action::Call);
    // Big blind's all-in to 25 is a raise of 5, short of the 18 needed.
    let ev = act(&mut g, 2, Action::AllIn);
    assert_eq!(actions(&ev), vec![(2, ActionKind::AllIn, 25)]);
    assert_eq!(g.to_act(), Some(0));
    assert_eq!(
        g.legal_actions(),
        vec![LegalAction::Fold, LegalAction::Call { amount: Chips(5) }]
    );
    for action in [Action::Raise(Chips(50)), Action::AllIn] {
        let err = g.clone().apply(act_cmd(&g, 0, action)).expect_err("closed");
        assert_eq!(err.code(), "illegal_action");
    }
    act(&mut g, 0, Action::Call);
    assert_eq!(
        g.legal_actions(),
        vec![LegalAction::Fold, LegalAction::Call { amount: Chips(5) }]
    );
}

#[test]
fn short_all_in_raise_still_lets_players_who_have_not_acted_raise() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 30), (1, 100), (2, 100), (3, 100)]);
    start(&mut g, standard_deck());
    assert_eq!(g.to_act(), Some(3));
    act(&mut g, 3, Action::Raise(Chips(20)));
    act(&mut g, 0, Action::AllIn); // to 30: short by 8
    assert_eq!(g.to_act(), Some(1));
    assert!(g.legal_actions().contains(&LegalAction::Raise {
        min: Chips(48),
        max: Chips(100)
    }));
}

#[test]
fn short_all_ins_adding_up_to_a_full_raise_reopen_betting() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 30), (1, 40), (2, 100), (3, 100)]);
    start(&mut g, standard_deck());
    act(&mut g, 3, Action::Raise(Chips(20))); // full raise of 18
    act(&mut g, 0, Action::AllIn); // 30: +10, short
    act(&mut g, 1, Action::AllIn); // 40: +10, short, but +20 over seat 3's 20
    act(&mut g, 2, Action::Call);
    assert_eq!(g.to_act(), Some(3));
    assert!(g.legal_actions().contains(&LegalAction::Raise {
        min: Chips(58),
        max: Chips(100)
    }));
}

#[test]
fn calling_without_enough_chips_calls_all_in_for_less() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100), (2, 5)]);
    start(&mut g, standard_deck());
    act(&mut g, 0, Action::Raise(Chips(10)));
    act(&mut g, 1, Action::Fold);
    assert_eq!(
        g.legal_actions(),
        vec![LegalAction::Fold, LegalAction::AllIn { amount: Chips(5) }]
    );
    let ev = act(&mut g, 2, Action::Call);
    assert_eq!(actions(&ev)[0], (2, ActionKind::AllIn, 5));
    // Seat 0's unmatched 5 comes back; the pot is 5 + 5 + 1.
    assert!(!g.hand_in_progress());
    assert_eq!(awards(&ev).iter().map(|a| a.0).sum::<u64>(), 11);
}

#[test]
fn raising_to_ones_whole_stack_is_an_all_in_even_below_the_minimum_raise() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 7)]);
    start(&mut g, standard_deck());
    act(&mut g, 0, Action::Raise(Chips(6)));
    let ev = act(&mut g, 1, Action::Raise(Chips(7)));
    assert_eq!(actions(&ev), vec![(1, ActionKind::AllIn, 7)]);
    assert_eq!(
        g.legal_actions(),
        vec![LegalAction::Fold, LegalAction::Call { amount: Chips(1) }]
    );
}

// ----- flow --------------------------------------------------------------------

#[test]
fn all_in_players_are_skipped_in_the_turn_order() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 10), (2, 100)]);
    start(&mut g, standard_deck());
    act(&mut g, 0, Action::Call);
    act(&mut g, 1, Action::AllIn);
    act(&mut g, 2, Action::Call);
    act(&mut g, 0, Action::Call);
    assert_eq!(g.street(), Some(Street::Flop));
    assert_eq!(g.to_act(), Some(2));
    act(&mut g, 2, Action::Check);
    assert_eq!(g.to_act(), Some(0));
    act(&mut g, 0, Action::Check);
    assert_eq!(g.street(), Some(Street::Turn));
    assert_eq!(g.to_act(), Some(2));
}

#[test]
fn no_raise_is_offered_when_no_opponent_could_call_it() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 50), (1, 100)]);
    start(&mut g, standard_deck());
    act(&mut g, 0, Action::AllIn);
    assert_eq!(
        g.legal_actions(),
        vec![LegalAction::Fold, LegalAction::Call { amount: Chips(48) }]
    );
    let err = try_act(&mut g, 1, Action::Raise(Chips(100))).expect_err("no raise");
    assert_eq!(
        err,
        RuleError::IllegalAction("no opponent can call a raise; call or fold".into())
    );
}

#[test]
fn remaining_streets_are_dealt_without_betting_once_at_most_one_player_can_act() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 50), (1, 100)]);
    start(&mut g, standard_deck());
    act(&mut g, 0, Action::AllIn);
    let ev = act(&mut g, 1, Action::Call);
    assert_eq!(
        streets(&ev),
        vec![Street::Flop, Street::Turn, Street::River]
    );
    assert!(!ev.iter().any(|e| matches!(e.kind, EventKind::Turn { .. })));
    assert!(matches!(
        ev.last().map(|e| &e.kind),
        Some(EventKind::HandEnded { .. })
    ));
    assert!(!g.hand_in_progress());
    assert_eq!(g.to_act(), None);
    assert_eq!(stack(&g, 0) + stack(&g, 1), 150);
}

#[test]
fn blinds_that_put_everyone_all_in_run_the_board_out_at_once() {
    let mut g = table(config(6, 5, 10, 0), &[(0, 3), (1, 8)]);
    let ev = start(&mut g, standard_deck());
    assert!(!g.hand_in_progress());
    assert_eq!(streets(&ev).len(), 3);
    assert_eq!(stack(&g, 0) + stack(&g, 1), 11);
}

#[test]
fn everyone_folding_ends_the_hand_without_a_showdown() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100), (2, 100)]);
    start(&mut g, standard_deck());
    act(&mut g, 0, Action::Raise(Chips(6)));
    act(&mut g, 1, Action::Fold);
    let ev = act(&mut g, 2, Action::Fold);
    assert_eq!(shown(&ev), None);
    // The unmatched 4 of the raise goes back; the pot is 1 + 2 + 2.
    assert_eq!(awards(&ev), vec![(5, vec![0])]);
    assert_eq!((stack(&g, 0), stack(&g, 1), stack(&g, 2)), (103, 99, 98));
    let summary = g.last_summary().expect("summary");
    assert_eq!(summary.pots.len(), 1);
    assert_eq!(summary.pots[0].winners, vec![(0, Chips(5))]);
    // The winner's cards were never shown, not even between hands.
    let view = g.view_for(Some(&pid("p1")));
    assert!(view.seats.iter().all(|s| s.seat == 1 || s.cards.is_none()));
}

#[test]
fn uncalled_part_of_a_bet_is_returned_to_the_bettor() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 30)]);
    let deck = rigged(&["Kc Kd", "2c 7h"], "Ks 3d 8h 9s Jc");
    start(&mut g, deck);
    act(&mut g, 0, Action::Call);
    act(&mut g, 1, Action::Check);
    act(&mut g, 1, Action::Check);
    act(&mut g, 0, Action::Bet(Chips(50)));
    let ev = act(&mut g, 1, Action::AllIn); // 28 more: a call for less
    assert_eq!(awards(&ev), vec![(60, vec![1])]);
    assert_eq!((stack(&g, 0), stack(&g, 1)), (70, 60));
    let summary = g.last_summary().expect("summary");
    let pots: u64 = summary.pots.iter().map(|p| p.amount.0).sum();
    assert_eq!(pots, 60);
}

#[test]
fn side_pots_for_several_all_ins_go_to_the_best_eligible_hands() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 20), (1, 50), (2, 100), (3, 200)]);
    // Dealing starts after the button (seat 0): seats 1, 2, 3, 0.
    let deck = rigged(&["Ks Kh", "4h 6c", "Qs Qh", "As Ah"], "2c 7d 9h Jd 3s");
    start(&mut g, deck);
    act(&mut g, 3, Action::AllIn);
    act(&mut g, 0, Action::AllIn);
    act(&mut g, 1, Action::AllIn);
    let ev = act(&mut g, 2, Action::AllIn);
    assert_eq!(
        awards(&ev),
        vec![(80, vec![0]), (90, vec![1]), (100, vec![3])]
    );
    assert_eq!(
        (stack(&g, 0), stack(&g, 1), stack(&g, 2), stack(&g, 3)),
        (80, 90, 0, 200)
    );
    // All-in showdown: every live hand is tabled.
    assert_eq!(shown(&ev).map(|s| s.len()), Some(4));
}

#[test]
fn split_pot_odd_chip_goes_to_the_first_winner_clockwise_from_the_button() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100), (2, 100)]);
    // Broadway on the board: everyone who stays plays the board.
    let deck = rigged(&["2c 3h", "4c 5h", "6c 7h"], "Ts Jh Qd Kc Ad");
    start(&mut g, deck);
    act(&mut g, 0, Action::Call);
    act(&mut g, 1, Action::Fold);
    let ev = check_down(&mut g);
    // Pot of 5 between seats 2 and 0; seat 2 is first after the button.
    assert_eq!(awards(&ev), vec![(5, vec![2, 0])]);
    let summary = g.last_summary().expect("summary");
    assert_eq!(summary.pots[0].winners, vec![(2, Chips(3)), (0, Chips(2))]);
    assert_eq!((stack(&g, 0), stack(&g, 1), stack(&g, 2)), (100, 99, 101));
}

#[test]
fn timeout_checks_when_checking_is_legal_and_folds_otherwise() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100)]);
    start(&mut g, standard_deck());
    let hand = g.hand_no();
    refused(
        &mut g,
        Command::Timeout { hand, seat: 1 },
        RuleError::NotYourTurn,
    );
    act(&mut g, 0, Action::Call);
    let ev = g
        .apply(Command::Timeout { hand, seat: 1 })
        .expect("timeout");
    assert_eq!(actions(&ev)[0], (1, ActionKind::Check, 2));
    act(&mut g, 1, Action::Bet(Chips(10)));
    let ev = g
        .apply(Command::Timeout { hand, seat: 0 })
        .expect("timeout");
    assert_eq!(actions(&ev)[0], (0, ActionKind::Fold, 0));
    assert!(!g.hand_in_progress());
}

// ----- seats -------------------------------------------------------------------

#[test]
fn leaving_mid_hand_folds_at_once_and_vacates_the_seat_when_the_hand_ends() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100), (2, 100)]);
    start(&mut g, standard_deck());
    assert_eq!(g.to_act(), Some(0));
    // Seat 1 leaves out of turn: folded now, still seated until the end.
    let ev = g.apply(Command::Leave { seat: 1 }).expect("leave");
    assert_eq!(actions(&ev), vec![(1, ActionKind::Fold, 1)]);
    assert_eq!(g.seat_of(&pid("p1")), Some(1));
    assert_eq!(g.to_act(), Some(0));
    refused(
        &mut g,
        Command::SitIn { seat: 1 },
        RuleError::IllegalAction("the player is leaving this seat".into()),
    );
    // Nobody may take the seat or re-seat the player before the hand ends.
    refused(
        &mut g,
        Command::Sit {
            seat: 1,
            player: pid("x"),
            stack: Chips(100),
        },
        RuleError::SeatTaken,
    );
    act(&mut g, 0, Action::Call);
    let ev = act(&mut g, 2, Action::Check);
    assert!(!ev.iter().any(|e| matches!(e.kind, EventKind::Left { .. })));
    let ev = check_down(&mut g);
    let left: Vec<_> = ev
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Left {
                seat,
                player,
                stack,
            } => Some((*seat, player.clone(), stack.0)),
            _ => None,
        })
        .collect();
    assert_eq!(left, vec![(1, pid("p1"), 99)]);
    assert_eq!(g.seat_of(&pid("p1")), None);
}

#[test]
fn leaving_on_ones_turn_folds_and_passes_the_turn() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100), (2, 100)]);
    start(&mut g, standard_deck());
    let ev = g.apply(Command::Leave { seat: 0 }).expect("leave");
    assert_eq!(actions(&ev), vec![(0, ActionKind::Fold, 0)]);
    assert_eq!(g.to_act(), Some(1));
}

#[test]
fn leaving_out_of_turn_can_end_the_hand() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100)]);
    start(&mut g, standard_deck());
    let ev = g.apply(Command::Leave { seat: 1 }).expect("leave");
    assert!(!g.hand_in_progress());
    // The big blind's 2 are dead money: seat 0 takes them with its own 1.
    assert_eq!(awards(&ev), vec![(3, vec![0])]);
    assert!(matches!(
        ev.last().map(|e| &e.kind),
        Some(EventKind::Left { seat: 1, .. })
    ));
    assert_eq!(stack(&g, 0), 102);
}

#[test]
fn a_fold_out_of_turn_that_takes_options_away_opens_a_new_decision() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 20), (1, 100), (2, 100)]);
    start(&mut g, standard_deck());
    act(&mut g, 0, Action::AllIn);
    assert_eq!(g.to_act(), Some(1));
    let old = g.decision().expect("an open decision");
    let raise_on_old = act_cmd(&g, 1, Action::Raise(Chips(60)));

    // The big blind leaves: nobody is left who could call seat 1's raise.
    let ev = g.apply(Command::Leave { seat: 2 }).expect("leave");
    let turn = ev.iter().find_map(|e| match &e.kind {
        EventKind::Turn {
            seat,
            decision,
            legal,
            ..
        } => Some((*seat, *decision, legal.clone())),
        _ => None,
    });
    let (seat, decision, legal) = turn.expect("a new turn for seat 1");
    assert_eq!((seat, decision), (1, old + 1));
    assert!(
        !legal.iter().any(|l| matches!(l, LegalAction::Raise { .. })),
        "{legal:?}"
    );
    // The raise sent for the turn it saw is late, not illegal.
    refused(
        &mut g,
        raise_on_old,
        RuleError::StaleDecision {
            expected: old + 1,
            got: old,
        },
    );
    act(&mut g, 1, Action::Call);
}

#[test]
fn a_fold_out_of_turn_that_changes_nothing_for_the_player_to_act_keeps_the_decision() {
    let mut g = table(
        config(6, 1, 2, 0),
        &[(0, 100), (1, 100), (2, 100), (3, 100)],
    );
    start(&mut g, standard_deck());
    let to_act = g.to_act().expect("someone to act");
    let open = g.decision();
    let other = [0, 1, 2, 3]
        .into_iter()
        .find(|&s| s != to_act && s != 2 && s != 1)
        .expect("a seat that is neither to act nor a blind");
    let ev = g.apply(Command::Leave { seat: other }).expect("leave");
    assert!(
        !ev.iter().any(|e| matches!(e.kind, EventKind::Turn { .. })),
        "{ev:?}"
    );
    assert_eq!(g.decision(), open);
    assert_eq!(g.to_act(), Some(to_act));
}

#[test]
fn an_all_in_player_who_leaves_stays_in_the_pot_and_leaves_with_the_winnings() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 20), (1, 100), (2, 100)]);
    let deck = rigged(&["2c 7h", "3c 8h", "As Ad"], "Kd Qs 5h 9c 4d");
    start(&mut g, deck);
    act(&mut g, 0, Action::AllIn);
    let ev = g.apply(Command::Leave { seat: 0 }).expect("leave");
    assert!(ev.is_empty());
    act(&mut g, 1, Action::Call);
    act(&mut g, 2, Action::Call);
    let ev = check_down(&mut g);
    assert!(ev.iter().any(|e| matches!(
        e.kind,
        EventKind::Left {
            seat: 0,
            stack: Chips(60),
            ..
        }
    )));
}

#[test]
fn leaving_between_hands_or_when_not_dealt_in_vacates_at_once() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100), (2, 100)]);
    let ev = g.apply(Command::Leave { seat: 2 }).expect("leave");
    assert_eq!(
        kinds(&ev),
        vec![&EventKind::Left {
            seat: 2,
            player: pid("p2"),
            stack: Chips(100)
        }]
    );
    g.apply(Command::Sit {
        seat: 2,
        player: pid("late"),
        stack: Chips(50),
    })
    .expect("sit");
    g.apply(Command::SitOut { seat: 2 }).expect("sit out");
    start(&mut g, standard_deck());
    let ev = g.apply(Command::Leave { seat: 2 }).expect("leave");
    assert!(matches!(ev[0].kind, EventKind::Left { seat: 2, .. }));
    refused(&mut g, Command::Leave { seat: 2 }, RuleError::NotSeated);
    refused(
        &mut g,
        Command::Leave { seat: 6 },
        RuleError::SeatOutOfRange,
    );
}

#[test]
fn sitting_out_players_and_empty_stacks_are_not_dealt_in() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 0), (2, 100), (3, 100)]);
    g.apply(Command::SitOut { seat: 3 }).expect("sit out");
    let ev = start(&mut g, standard_deck());
    let dealt: Vec<SeatNo> = ev
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::HoleCards { seat, .. } => Some(seat),
            _ => None,
        })
        .collect();
    assert_eq!(dealt, vec![0, 2]);
    assert!(!g
        .seats()
        .iter()
        .any(|s| s.in_hand && (s.seat == 1 || s.seat == 3)));
    fold_around(&mut g);
    // Sitting back in counts from the next hand.
    let ev = g.apply(Command::SitIn { seat: 3 }).expect("sit in");
    assert_eq!(kinds(&ev), vec![&EventKind::SatIn { seat: 3 }]);
    start(&mut g, standard_deck());
    assert!(g.seats().iter().any(|s| s.seat == 3 && s.in_hand));
}

#[test]
fn sitting_out_during_a_hand_takes_effect_from_the_next_hand() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100), (2, 100)]);
    start(&mut g, standard_deck());
    let ev = g.apply(Command::SitOut { seat: 1 }).expect("sit out");
    assert_eq!(kinds(&ev), vec![&EventKind::SatOut { seat: 1 }]);
    assert!(g
        .seats()
        .iter()
        .any(|s| s.seat == 1 && s.in_hand && s.sitting_out));
    // Repeating it is harmless.
    assert_eq!(g.apply(Command::SitOut { seat: 1 }), Ok(vec![]));
    fold_around(&mut g);
    start(&mut g, standard_deck());
    assert!(g.seats().iter().any(|s| s.seat == 1 && !s.in_hand));
}

#[test]
fn a_player_who_sits_down_during_a_hand_is_dealt_into_the_next_one() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100)]);
    start(&mut g, standard_deck());
    let ev = g
        .apply(Command::Sit {
            seat: 4,
            player: pid("new"),
            stack: Chips(80),
        })
        .expect("sit");
    assert_eq!(
        kinds(&ev),
        vec![&EventKind::Seated {
            seat: 4,
            player: pid("new"),
            stack: Chips(80)
        }]
    );
    assert!(g.seats().iter().any(|s| s.seat == 4 && !s.in_hand));
    fold_around(&mut g);
    start(&mut g, standard_deck());
    assert!(g.seats().iter().any(|s| s.seat == 4 && s.in_hand));
}

#[test]
fn sit_is_refused_for_a_bad_seat_a_taken_seat_a_seated_player_or_a_bad_buy_in() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100)]);
    let sit = |seat, name: &str, stack| Command::Sit {
        seat,
        player: pid(name),
        stack: Chips(stack),
    };
    refused(&mut g, sit(6, "x", 100), RuleError::SeatOutOfRange);
    refused(&mut g, sit(0, "x", 100), RuleError::SeatTaken);
    refused(&mut g, sit(1, "p0", 100), RuleError::AlreadySeated);
    refused(&mut g, sit(1, "x", 1), RuleError::BuyInOutOfRange);
    refused(&mut g, sit(1, "x", 2001), RuleError::BuyInOutOfRange);
    assert!(g.apply(sit(1, "x", 2000)).is_ok());
}

// ----- refusals ----------------------------------------------------------------

#[test]
fn refused_commands_return_typed_errors_and_leave_the_state_unchanged() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100), (2, 100)]);
    let act_cmd = |hand, seat, action| Command::Act {
        hand,
        seat,
        decision: 1,
        action,
    };
    refused(
        &mut g,
        act_cmd(1, 0, Action::Call),
        RuleError::NoHandInProgress,
    );
    refused(
        &mut g,
        Command::VoidHand {
            reason: VoidReason::Shutdown,
        },
        RuleError::NoHandInProgress,
    );
    refused(
        &mut g,
        Command::StartHand {
            deck: standard_deck()[..51].to_vec(),
        },
        RuleError::BadDeck,
    );
    let mut dup = standard_deck();
    dup[51] = dup[0];
    refused(&mut g, Command::StartHand { deck: dup }, RuleError::BadDeck);
    start(&mut g, standard_deck());
    refused(
        &mut g,
        Command::StartHand {
            deck: standard_deck(),
        },
        RuleError::HandInProgress,
    );
    refused(&mut g, act_cmd(1, 1, Action::Call), RuleError::NotYourTurn);
    refused(
        &mut g,
        act_cmd(0, 0, Action::Call),
        RuleError::StaleHand {
            expected: 1,
            got: 0,
        },
    );
    refused(
        &mut g,
        act_cmd(2, 0, Action::Call),
        RuleError::StaleHand {
            expected: 1,
            got: 2,
        },
    );
    refused(
        &mut g,
        act_cmd(1, 9, Action::Call),
        RuleError::SeatOutOfRange,
    );
    refused(
        &mut g,
        act_cmd(1, 0, Action::Check),
        RuleError::IllegalAction("cannot check facing a bet: 2 to call".into()),
    );
    refused(
        &mut g,
        act_cmd(1, 0, Action::Bet(Chips(10))),
        RuleError::IllegalAction("there is already a bet on this street; raise instead".into()),
    );
    refused(
        &mut g,
        act_cmd(1, 0, Action::Raise(Chips(3))),
        RuleError::BadAmount("the minimum raise is to 4".into()),
    );
    refused(
        &mut g,
        act_cmd(1, 0, Action::Raise(Chips(101))),
        RuleError::InsufficientChips,
    );
    refused(
        &mut g,
        act_cmd(1, 0, Action::Raise(Chips(u64::MAX))),
        RuleError::InsufficientChips,
    );
    refused(&mut g, Command::SitOut { seat: 5 }, RuleError::NotSeated);
    // The hand is over once everyone else folds; acting again is refused.
    fold_around(&mut g);
    refused(
        &mut g,
        act_cmd(1, 2, Action::Check),
        RuleError::NoHandInProgress,
    );
}

#[test]
fn starting_a_hand_needs_two_dealt_in_players() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 0)]);
    assert!(!g.can_start_hand());
    refused(
        &mut g,
        Command::StartHand {
            deck: standard_deck(),
        },
        RuleError::NotEnoughPlayers,
    );
}

#[test]
fn chip_totals_that_would_overflow_are_refused() {
    let mut cfg = config(2, 1, 2, 0);
    cfg.max_buy_in = Chips(u64::MAX / 2);
    let seats = vec![
        (0, pid("a"), Chips(u64::MAX / 2)),
        (1, pid("b"), Chips(u64::MAX / 2 + 2)),
    ];
    assert_eq!(
        Game::resume(cfg.clone(), 0, None, seats).map(|_| ()),
        Err(RuleError::Overflow)
    );
    let mut g =
        Game::resume(cfg, 0, None, vec![(0, pid("a"), Chips(u64::MAX - 5))]).expect("resume");
    refused(
        &mut g,
        Command::Sit {
            seat: 1,
            player: pid("b"),
            stack: Chips(10),
        },
        RuleError::Overflow,
    );
}

#[test]
fn resume_refuses_bad_seats_duplicates_and_bad_configs() {
    let cfg = config(3, 1, 2, 0);
    let r = |button, seats: Vec<(SeatNo, &str)>| {
        let seats = seats
            .into_iter()
            .map(|(s, p)| (s, pid(p), Chips(10)))
            .collect();
        Game::resume(cfg.clone(), 0, button, seats).map(|_| ())
    };
    assert_eq!(r(None, vec![(3, "a")]), Err(RuleError::SeatOutOfRange));
    assert_eq!(r(Some(3), vec![]), Err(RuleError::SeatOutOfRange));
    assert_eq!(r(None, vec![(0, "a"), (0, "b")]), Err(RuleError::SeatTaken));
    assert_eq!(
        r(None, vec![(0, "a"), (1, "a")]),
        Err(RuleError::AlreadySeated)
    );
    let mut bad = cfg.clone();
    bad.seats = 11;
    assert_eq!(
        Game::new(bad).map(|_| ()).map_err(|e| e.code().as_str()),
        Err("bad_config")
    );
}

#[test]
fn table_config_validation_enforces_seats_blinds_and_buy_in_limits() {
    let good = config(6, 1, 2, 0);
    assert_eq!(good.validate(), Ok(()));
    type Tweak = fn(&mut TableConfig);
    let cases: [(&str, Tweak); 7] = [
        ("one seat", |c| c.seats = 1),
        ("eleven seats", |c| c.seats = 11),
        ("zero small blind", |c| c.small_blind = Chips(0)),
        ("sb above bb", |c| c.small_blind = Chips(3)),
        ("min buy-in below bb", |c| c.min_buy_in = Chips(1)),
        ("min above max", |c| c.max_buy_in = Chips(1)),
        ("max buy-in overflows", |c| c.max_buy_in = Chips(u64::MAX)),
    ];
    for (name, f) in cases {
        let mut c = good.clone();
        f(&mut c);
        assert!(
            matches!(c.validate(), Err(RuleError::BadConfig(_))),
            "{name}"
        );
    }
}

#[test]
fn void_hand_restores_start_stacks_keeps_the_hand_number_and_the_button() {
    let mut g = table(config(6, 1, 2, 1), &[(0, 100), (1, 100), (2, 100)]);
    start(&mut g, standard_deck());
    fold_around(&mut g);
    assert_eq!(g.button(), Some(0));
    let before: Vec<u64> = (0..3).map(|s| stack(&g, s)).collect();
    start(&mut g, standard_deck());
    assert_eq!(g.button(), Some(1));
    act(&mut g, 1, Action::Raise(Chips(10)));
    g.apply(Command::Leave { seat: 0 }).expect("leave");
    let ev = g
        .apply(Command::VoidHand {
            reason: VoidReason::Shutdown,
        })
        .expect("void");
    assert_eq!(
        kinds(&ev)[0],
        &EventKind::HandVoided {
            hand: 2,
            stacks: vec![
                SeatChips {
                    seat: 0,
                    stack: Chips(before[0])
                },
                SeatChips {
                    seat: 1,
                    stack: Chips(before[1])
                },
                SeatChips {
                    seat: 2,
                    stack: Chips(before[2])
                },
            ],
            reason: VoidReason::Shutdown,
        }
    );
    assert!(matches!(kinds(&ev)[1], EventKind::Left { seat: 0, .. }));
    assert!(!g.hand_in_progress());
    assert_eq!(g.hand_no(), 2);
    assert_eq!(g.button(), Some(0));
    assert_eq!(g.last_summary().map(|s| s.hand), Some(1));
    start(&mut g, standard_deck());
    assert_eq!(g.hand_no(), 3);
}

// ----- visibility ---------------------------------------------------------------

#[test]
fn hole_cards_are_sent_only_to_their_owner() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100), (2, 100)]);
    let ev = start(&mut g, standard_deck());
    let mut seen = 0;
    for e in &ev {
        match &e.kind {
            EventKind::HoleCards { seat, .. } => {
                assert_eq!(e.to, Audience::Seat(*seat));
                seen += 1;
            }
            _ => assert_eq!(e.to, Audience::All),
        }
    }
    assert_eq!(seen, 3);
}

#[test]
fn view_shows_only_the_viewers_own_cards_during_a_hand() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100), (2, 100)]);
    start(&mut g, standard_deck());
    for viewer in [
        None,
        Some(pid("p0")),
        Some(pid("p1")),
        Some(pid("stranger")),
    ] {
        let view = g.view_for(viewer.as_ref());
        for s in &view.seats {
            let own = viewer.as_ref() == Some(&s.player);
            assert_eq!(s.cards.is_some(), own, "{viewer:?} sees seat {}", s.seat);
        }
        let mine = viewer.as_ref().and_then(|v| g.seat_of(v));
        assert_eq!(view.you, mine);
        assert_eq!(!view.legal.is_empty(), mine == Some(0));
    }
}

#[test]
fn at_showdown_a_beaten_hand_is_mucked_and_folded_cards_stay_hidden() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100), (2, 100)]);
    // Seat 1 folds; seat 2 bets the river and shows; seat 0 loses and mucks.
    let deck = rigged(&["Ac Ad", "Kc Kd", "2h 7s"], "Ks 3d 8h 9s Jc");
    start(&mut g, deck);
    act(&mut g, 0, Action::Call);
    act(&mut g, 1, Action::Fold);
    act(&mut g, 2, Action::Check);
    for _ in 0..2 {
        act(&mut g, 2, Action::Check);
        act(&mut g, 0, Action::Check);
    }
    act(&mut g, 2, Action::Bet(Chips(10)));
    let ev = act(&mut g, 0, Action::Call);
    assert_eq!(shown(&ev), Some(vec![2]));
    let view = g.view_for(None);
    let cards: Vec<(SeatNo, bool)> = view
        .seats
        .iter()
        .map(|s| (s.seat, s.cards.is_some()))
        .collect();
    assert_eq!(cards, vec![(0, false), (1, false), (2, true)]);
    assert_eq!(view.board.len(), 5);
    // The loser still sees their own cards.
    let own = g.view_for(Some(&pid("p0")));
    assert!(own.seats[0].cards.is_some());
}

#[test]
fn a_better_hand_shown_after_the_first_is_tabled_too() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100)]);
    // River checked through: the seat after the button (1) shows first.
    let deck = rigged(&["2h 7s", "Ac Ad"], "Ks 3d 8h 9s Jc");
    start(&mut g, deck);
    let ev = check_down(&mut g);
    let shown_hands = ev.iter().find_map(|e| match &e.kind {
        EventKind::Showdown { hands, .. } => Some(hands.clone()),
        _ => None,
    });
    let shown_hands = shown_hands.expect("showdown");
    assert_eq!(
        shown_hands.iter().map(|h| h.seat).collect::<Vec<_>>(),
        vec![1, 0]
    );
    assert_eq!(shown_hands[1].rank, "one pair, aces");
    assert_eq!(shown_hands[0].rank, "high card, king");
}

// ----- wire formats ----------------------------------------------------------

#[test]
fn events_and_legal_actions_serialise_to_the_documented_json() {
    let turn = Event {
        to: Audience::All,
        kind: EventKind::Turn {
            hand: 3,
            seat: 1,
            decision: 5,
            legal: vec![
                LegalAction::Fold,
                LegalAction::Check,
                LegalAction::Call { amount: Chips(4) },
                LegalAction::Bet {
                    min: Chips(2),
                    max: Chips(200),
                },
                LegalAction::Raise {
                    min: Chips(8),
                    max: Chips(200),
                },
                LegalAction::AllIn { amount: Chips(200) },
            ],
        },
    };
    assert_eq!(
        serde_json::to_value(&turn).expect("json"),
        serde_json::json!({
            "to": "All", "kind": "turn", "hand": 3, "seat": 1, "decision": 5,
            "legal": [
                {"action": "fold"}, {"action": "check"}, {"action": "call", "amount": 4},
                {"action": "bet", "min": 2, "max": 200}, {"action": "raise", "min": 8, "max": 200},
                {"action": "all_in", "amount": 200}
            ]
        })
    );
    let hole = Event {
        to: Audience::Seat(2),
        kind: EventKind::HoleCards {
            hand: 1,
            seat: 2,
            cards: ["Ah".parse().expect("card"), "Td".parse().expect("card")],
        },
    };
    assert_eq!(
        serde_json::to_value(&hole).expect("json"),
        serde_json::json!({"to": {"Seat": 2}, "kind": "hole_cards", "hand": 1, "seat": 2, "cards": ["Ah", "Td"]})
    );
    let blind = EventKind::Action {
        hand: 1,
        seat: 0,
        action: ActionKind::SmallBlind,
        amount: Chips(1),
    };
    assert_eq!(
        serde_json::to_value(&blind).expect("json"),
        serde_json::json!({"kind": "action", "hand": 1, "seat": 0, "action": "small_blind", "amount": 1})
    );
}

#[test]
fn every_event_of_a_hand_round_trips_through_json() {
    let mut g = table(config(6, 1, 2, 1), &[(0, 100), (1, 100), (2, 100)]);
    let mut ev = start(&mut g, standard_deck());
    ev.extend(check_down(&mut g));
    for e in ev {
        let json = serde_json::to_string(&e).expect("json");
        assert_eq!(
            serde_json::from_str::<Event>(&json).expect("parse"),
            e,
            "{json}"
        );
    }
}

#[test]
fn error_codes_are_stable() {
    let cases = [
        (RuleError::NotYourTurn, "not_your_turn"),
        (RuleError::IllegalAction(String::new()), "illegal_action"),
        (RuleError::BadAmount(String::new()), "bad_amount"),
        (RuleError::InsufficientChips, "insufficient_funds"),
        (
            RuleError::StaleHand {
                expected: 1,
                got: 2,
            },
            "stale_hand",
        ),
        (RuleError::SeatTaken, "seat_taken"),
        (RuleError::NotSeated, "not_seated"),
        (RuleError::SeatOutOfRange, "bad_field"),
        (RuleError::AlreadySeated, "already_seated"),
        (RuleError::HandInProgress, "hand_in_progress"),
        (RuleError::NoHandInProgress, "no_hand_in_progress"),
        (RuleError::NotEnoughPlayers, "not_enough_players"),
        (RuleError::BuyInOutOfRange, "buy_in_out_of_range"),
        (RuleError::Overflow, "overflow"),
        (RuleError::BadConfig(String::new()), "bad_config"),
        (RuleError::BadDeck, "bad_deck"),
    ];
    for (e, code) in cases {
        assert_eq!(e.code(), code);
    }
}

#[test]
fn a_table_serialised_mid_hand_plays_on_identically() {
    let mut g = table(config(6, 1, 2, 1), &[(0, 100), (1, 100), (2, 100)]);
    start(&mut g, standard_deck());
    act(&mut g, 0, Action::Raise(Chips(6)));
    let json = serde_json::to_string(&g).expect("json");
    let mut copy: Game = serde_json::from_str(&json).expect("parse");
    assert_eq!(copy, g);
    assert_eq!(check_down(&mut copy), check_down(&mut g));
    assert_eq!(copy, g);
}

#[test]
fn summary_records_start_and_end_stacks_and_chips_stay_constant_within_the_hand() {
    let mut g = table(config(6, 1, 2, 1), &[(0, 100), (1, 50), (2, 70)]);
    let total = g.total_chips();
    start(&mut g, standard_deck());
    assert_eq!(g.total_chips(), total);
    act(&mut g, 0, Action::Raise(Chips(10)));
    assert_eq!(g.total_chips(), total);
    check_down(&mut g);
    assert_eq!(g.total_chips(), total);
    let s = g.last_summary().expect("summary");
    assert_eq!(s.hand, 1);
    let start: u64 = s.seats.iter().map(|r| r.start_stack.0).sum();
    let end: u64 = s.seats.iter().map(|r| r.end_stack.0).sum();
    assert_eq!((start, end), (220, 220));
    for p in &s.pots {
        assert_eq!(p.winners.iter().map(|w| w.1 .0).sum::<u64>(), p.amount.0);
    }
}
