//! The trait's contract, played through it: hold'em as every hold'em
//! client knows it, and Nim, a game of another shape, with the same
//! driver. The driver does what the runtime does: it sits players, starts
//! a game, answers each open decision (or lets its clock run out), takes
//! each settlement and checks that it conserves chips.

use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{json, Map, Value};

use super::holdem::{Holdem, HoldemCommand};
use super::nim::{Nim, NimCommand, NimEvent};
use super::{Audience, Game, GameKind, Refusal};
use crate::game::{Action, Chips, EventKind, LegalAction, SeatNo};

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

fn holdem_config() -> Map<String, Value> {
    obj(json!({
        "small_blind": 1, "big_blind": 2, "seats": 6,
        "min_buy_in": 40, "max_buy_in": 200
    }))
}

fn total(stacks: &[(SeatNo, Chips)]) -> u64 {
    stacks.iter().map(|(_, c)| c.0).sum()
}

/// Seats `players`, then plays `games` boundaries of `G`, answering every
/// decision with `answer` (or, where it returns `None`, the clock's
/// default), and returns each settlement's stacks. Panics if a settlement
/// does not hold exactly the `chips` on the table.
fn play<G: Game>(
    game: &mut G,
    players: &[(SeatNo, &str, u64)],
    chips: u64,
    games: usize,
    mut answer: impl FnMut(&G, SeatNo, &G::Legal) -> Option<G::Command>,
) -> Vec<Vec<(SeatNo, Chips)>> {
    let mut rng = StdRng::seed_from_u64(7);
    for &(seat, player, stack) in players {
        game.sit(seat, player, Chips(stack)).expect("sit");
    }
    let mut settled = Vec::new();
    while settled.len() < games {
        game.start(&mut rng).expect("the seats allow a game");
        let mut steps = 0;
        while let Some(open) = game.decision() {
            steps += 1;
            assert!(steps < 10_000, "a game that never ends");
            let command = match answer(game, open.seat, &open.legal) {
                Some(c) => c,
                None => game.on_timeout().expect("an open decision has a default"),
            };
            game.apply(open.seat, open.number, command, &mut rng)
                .expect("a legal answer is applied");
        }
        let s = game.take_settlement().expect("the game reached a boundary");
        assert_eq!(total(&s.stacks), chips, "chips conserved: {s:?}");
        assert!(
            game.take_settlement().is_none(),
            "a settlement is taken once"
        );
        settled.push(s.stacks);
    }
    settled
}

#[test]
fn game_kinds_are_named_as_clients_see_them() {
    assert_eq!(GameKind::default(), GameKind::Holdem);
    assert_eq!(GameKind::parse("holdem"), Some(GameKind::Holdem));
    assert_eq!(GameKind::parse("Holdem"), None);
    assert_eq!(GameKind::parse("checkers"), None);
    assert_eq!(GameKind::Holdem.to_string(), "holdem");
    assert_eq!(
        serde_json::to_value(GameKind::Holdem).unwrap(),
        json!("holdem")
    );
    assert_eq!(GameKind::names(), "holdem");
    for kind in GameKind::ALL {
        assert_eq!(GameKind::parse(kind.as_str()), Some(kind));
    }
}

#[test]
fn holdem_config_is_parsed_as_the_admin_api_always_did() {
    let config = Holdem::config(&holdem_config()).expect("valid");
    assert_eq!((config.small_blind, config.big_blind), (Chips(1), Chips(2)));
    assert_eq!((config.ante, config.seats), (Chips(0), 6));
    let mut bad = holdem_config();
    bad.insert("big_blind".into(), json!(0));
    assert_eq!(Holdem::config(&bad).unwrap_err().code, "bad_amount");
    let mut bad = holdem_config();
    bad.remove("seats");
    let e = Holdem::config(&bad).unwrap_err();
    assert_eq!(
        (e.code.as_str(), e.message.as_str()),
        ("bad_field", "seats is required")
    );
    let mut bad = holdem_config();
    bad.insert("max_buy_in".into(), json!(10));
    assert_eq!(Holdem::config(&bad).unwrap_err().code, "bad_field");
}

#[test]
fn holdem_commands_are_the_act_frames_fields() {
    let c = Holdem::command(&obj(json!({"hand": 3, "action": "raise", "amount": 8})));
    assert_eq!(
        c,
        Ok(HoldemCommand::Act {
            hand: 3,
            action: Action::Raise(Chips(8))
        })
    );
    let code = |v: Value| Holdem::command(&obj(v)).unwrap_err().code;
    assert_eq!(code(json!({"action": "fold"})), "bad_field");
    assert_eq!(code(json!({"hand": 1, "action": "dance"})), "bad_field");
    assert_eq!(code(json!({"hand": 1, "action": "bet"})), "bad_amount");
    assert_eq!(
        code(json!({"hand": 1, "action": "bet", "amount": -1})),
        "bad_amount"
    );
}

#[test]
fn holdem_played_through_the_trait_settles_every_hand_conserving_chips() {
    let mut game = Holdem::new(Holdem::config(&holdem_config()).unwrap()).unwrap();
    let players = [(0, "ann", 100), (2, "bob", 80), (4, "cy", 60)];
    // Everybody calls or checks; the clock folds or checks for "cy".
    let settled = play(&mut game, &players, 240, 5, |g, seat, legal| {
        let hand = g.engine().hand_no();
        let action = legal.iter().find_map(|l| match l {
            LegalAction::Check => Some(Action::Check),
            LegalAction::Call { .. } => Some(Action::Call),
            _ => None,
        })?;
        (seat != 4).then_some(HoldemCommand::Act { hand, action })
    });
    assert_eq!(settled.len(), 5);
    assert_eq!(game.engine().hand_no(), 5);
    // The watcher's view hides every hole card between hands too, unless
    // shown; a seat's view is its own.
    assert_eq!(game.view(Some(2)).you, Some(2));
    assert_eq!(game.view(None).you, None);
}

#[test]
fn holdem_refuses_with_the_codes_clients_rely_on_and_changes_nothing() {
    let mut game = Holdem::new(Holdem::config(&holdem_config()).unwrap()).unwrap();
    let mut rng = StdRng::seed_from_u64(1);
    game.sit(0, "ann", Chips(100)).unwrap();
    assert_eq!(
        game.sit(0, "bob", Chips(100)).unwrap_err().code,
        "seat_taken"
    );
    assert!(
        game.start(&mut rng).is_none(),
        "one player cannot start a hand"
    );
    game.sit(1, "bob", Chips(100)).unwrap();
    let started = game.start(&mut rng).expect("two players start a hand");
    // Hole cards are told only to their seat.
    let mut holes: Vec<(Audience, SeatNo)> = started
        .iter()
        .filter_map(|t| match t.event {
            EventKind::HoleCards { seat, .. } => Some((t.to, seat)),
            _ => None,
        })
        .collect();
    holes.sort_by_key(|h| h.1);
    assert_eq!(holes, [(Audience::Seat(0), 0), (Audience::Seat(1), 1)]);
    let open = game.decision().expect("a turn is open");
    let other = 1 - open.seat;
    let fold = HoldemCommand::Act {
        hand: 1,
        action: Action::Fold,
    };
    let before = format!("{:?}", game.view(None));
    let code = |g: &mut Holdem, seat, decision, c, rng: &mut StdRng| -> Refusal {
        g.apply(seat, decision, c, rng).unwrap_err()
    };
    assert_eq!(
        code(&mut game, other, open.number, fold, &mut rng).code,
        "not_your_turn"
    );
    assert_eq!(
        code(&mut game, open.seat, open.number + 1, fold, &mut rng).code,
        "stale_decision"
    );
    let stale_hand = HoldemCommand::Act {
        hand: 9,
        action: Action::Fold,
    };
    assert_eq!(
        code(&mut game, open.seat, open.number, stale_hand, &mut rng).code,
        "stale_hand"
    );
    assert_eq!(format!("{:?}", game.view(None)), before, "nothing changed");
    assert!(game.take_settlement().is_none(), "no hand has ended");
    game.apply(open.seat, open.number, fold, &mut rng).unwrap();
    let s = game.take_settlement().expect("the fold ended the hand");
    assert_eq!((s.number, total(&s.stacks)), (1, 200));
}

#[test]
fn a_resumed_holdem_table_does_not_settle_its_past_hands_again() {
    let config = Holdem::config(&holdem_config()).unwrap();
    let seats = vec![
        (0, crate::game::PlayerId("ann".into()), Chips(90)),
        (1, crate::game::PlayerId("bob".into()), Chips(110)),
    ];
    let mut game = Holdem::resume(config, 41, Some(1), seats).unwrap();
    assert!(game.take_settlement().is_none());
    let settled = play(&mut game, &[], 200, 1, |_, _, _| None);
    assert_eq!(game.engine().hand_no(), 42);
    assert_eq!(total(&settled[0]), 200);
}

#[test]
fn nim_a_game_of_another_shape_plays_through_the_same_driver() {
    let config = Nim::config(&obj(json!({"pile": 10, "stake": 5}))).unwrap();
    let mut game = Nim::new(config).unwrap();
    // Seat 0 always takes what leaves a multiple of 4; seat 1 lets its
    // clock take one stone.
    let settled = play(
        &mut game,
        &[(0, "ann", 20), (1, "bob", 20)],
        40,
        3,
        |g, seat, _| {
            let pile = g.view(None).pile;
            (seat == 0).then_some(NimCommand::Take((pile % 4).max(1)))
        },
    );
    // Seat 0 moves first in game 1 and wins it; the loser moves first in
    // game 2 (bob, who loses again by timing out); game 3 likewise.
    assert_eq!(settled[0], vec![(0, Chips(25)), (1, Chips(15))]);
    assert_eq!(settled[2], vec![(0, Chips(35)), (1, Chips(5))]);
}

#[test]
fn nim_refuses_out_of_turn_stale_and_illegal_takes_and_changes_nothing() {
    let mut game = Nim::new(Nim::config(&obj(json!({"pile": 5, "stake": 1}))).unwrap()).unwrap();
    let mut rng = StdRng::seed_from_u64(3);
    game.sit(0, "ann", Chips(3)).unwrap();
    game.sit(1, "bob", Chips(3)).unwrap();
    let events = game.start(&mut rng).unwrap();
    assert_eq!(events[0].event, NimEvent::Started { game: 1, pile: 5 });
    let open = game.decision().unwrap();
    assert_eq!((open.seat, open.legal), (0, vec![1, 2, 3]));
    let take = |n| NimCommand::Take(n);
    let code =
        |g: &mut Nim, seat, d, c, rng: &mut StdRng| g.apply(seat, d, c, rng).unwrap_err().code;
    assert_eq!(
        code(&mut game, 1, open.number, take(1), &mut rng),
        "not_your_turn"
    );
    assert_eq!(
        code(&mut game, 0, open.number - 1, take(1), &mut rng),
        "stale_decision"
    );
    assert_eq!(
        code(&mut game, 0, open.number, take(4), &mut rng),
        "illegal_action"
    );
    assert_eq!(
        code(&mut game, 0, open.number, take(0), &mut rng),
        "illegal_action"
    );
    assert_eq!(game.view(None).pile, 5, "nothing changed");
    assert_eq!(game.leave(0).unwrap_err().code, "hand_in_progress");
    assert!(Nim::command(&obj(json!({"take": "two"}))).is_err());
    assert_eq!(
        Nim::config(&obj(json!({"pile": 0, "stake": 1})))
            .unwrap_err()
            .code,
        "bad_field"
    );
}
