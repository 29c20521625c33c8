//! Positions and forced bets: where the button and the blinds sit and how
//! the button moves, who acts first before and after the flop, how antes
//! and short blinds are posted, and the big blind's option.

use super::*;

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
