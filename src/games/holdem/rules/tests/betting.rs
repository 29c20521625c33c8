//! Bet sizing and the flow of a hand: minimum bets and raises, short
//! all-ins and when they reopen betting, calls all-in for less, the turn
//! order, streets dealt without betting once at most one player can act,
//! fold-outs, uncalled bets, side pots, split pots and timeouts.

use super::*;

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
