//! The trait's contract, played through it: hold'em as every hold'em
//! client knows it, through the driver in [`super::check`] that does what
//! the runtime does (Nim, a game of another shape, plays through the same
//! driver in `tests/games_trait.rs`).

use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{json, Map, Value};

use super::check::{play, total};
use super::holdem::{Holdem, HoldemCommand};
use super::{Audience, Game, GameKind, Occupant, Refusal};
use crate::games::holdem::rules::{Action, Chips, EventKind, LegalAction, PlayerId, SeatNo};

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

#[test]
fn game_kinds_are_named_as_clients_see_them() {
    assert_eq!(GameKind::parse("holdem"), Some(GameKind::HOLDEM));
    assert_eq!(Holdem::KIND, GameKind::HOLDEM);
    for bad in ["", "Holdem", "hold em", "holdem!", &"x".repeat(33)] {
        assert_eq!(GameKind::parse(bad), None, "{bad:?}");
    }
    assert_eq!(GameKind::HOLDEM.to_string(), "holdem");
    assert_eq!(
        serde_json::to_value(GameKind::HOLDEM).unwrap(),
        json!("holdem")
    );
}

#[test]
fn the_registry_hosts_holdem_and_chess_and_refuses_what_it_does_not_host() {
    let games = super::registry();
    assert_eq!(games.names(), "holdem, chess");
    let checkers = GameKind::parse("checkers").unwrap();
    let e = games.configure(&checkers, &holdem_config()).unwrap_err();
    assert_eq!(
        (e.code.as_str(), e.message.as_str()),
        (
            "bad_field",
            "game \"checkers\" is not one this server hosts; expected one of holdem, chess"
        )
    );
    let config = games
        .configure(&GameKind::HOLDEM, &holdem_config())
        .unwrap();
    assert_eq!(config["big_blind"], 2);
    let mut stranger = holdem_config();
    stranger.insert("colour".into(), json!("red"));
    let e = games.configure(&GameKind::HOLDEM, &stranger).unwrap_err();
    assert_eq!(
        e.message,
        format!(
            "unknown field \"colour\"; expected game, {}",
            Holdem::CONFIG_FIELDS.join(", ")
        )
    );
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
    let settled = play(&mut game, &players, 240, 5, 7, |g, seat, legal| {
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
    assert_eq!((s.number, total(&s.stacks())), (1, 200));
}

#[test]
fn a_resumed_holdem_table_does_not_settle_its_past_hands_again() {
    let config = Holdem::config(&holdem_config()).unwrap();
    let seat = |seat, name: &str, stack| Occupant {
        seat,
        player: PlayerId(name.into()),
        stack: Chips(stack),
    };
    let seats = vec![seat(0, "ann", 90), seat(1, "bob", 110)];
    let mut game = Holdem::resume(config, 41, &json!({"button": 1}), seats).unwrap();
    assert_eq!(game.boundary_state(), json!({"button": 1}));
    assert!(game.take_settlement().is_none());
    let settled = play(&mut game, &[], 200, 1, 7, |_, _, _| None);
    assert_eq!(game.engine().hand_no(), 42);
    assert_eq!(total(&settled[0]), 200);
}
