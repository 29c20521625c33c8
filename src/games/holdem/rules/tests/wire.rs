//! Wire formats: events and legal actions serialise to the documented JSON
//! and round-trip, error codes are stable, a table serialised mid-hand plays
//! on identically, and a hand's summary records its start and end stacks.

use super::*;

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
