//! Seats: leaving mid-hand, on one's turn or out of turn, folds out of turn
//! and the decision they open or keep, all-in players who leave, sitting
//! out, sitting down during a hand, and sits that are refused.

use super::*;

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
