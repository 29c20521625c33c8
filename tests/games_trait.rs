//! The game trait's contract played by a game of the tests' own: Nim
//! (`tests/support/nim.rs`), a game of another shape than hold'em, through
//! the same driver hold'em's unit tests use (`pitboss::games::check`), and
//! its refusals. `tests/hosted_game.rs` hosts it in real servers.

#[path = "support/nim.rs"]
mod nim;

use nim::{Nim, NimCommand, NimEvent};
use pitboss::games::check::play;
use pitboss::games::holdem::rules::{Chips, PlayerId};
use pitboss::games::{Game, Role};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{json, Map, Value};

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
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
        7,
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
    assert_eq!(
        Nim::role(&events[1].event),
        Role::Decision { seat: 0, number: 1 }
    );
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
    assert_eq!(game.leave(2).unwrap_err().code, "not_seated");
    // Leaving mid-game forfeits it: the result, then the seat vacated.
    let gone = game.leave(0).unwrap();
    assert_eq!(gone[0].event, NimEvent::Won { game: 1, seat: 1 });
    assert_eq!(
        Nim::role(&gone[1].event),
        Role::Left {
            seat: 0,
            player: &PlayerId("ann".into()),
            stack: Chips(2)
        }
    );
    let s = game
        .take_settlement()
        .expect("the forfeit settles the game");
    assert_eq!(s.stacks(), vec![(0, Chips(2)), (1, Chips(4))]);
    assert!(Nim::command(&obj(json!({"take": "two"}))).is_err());
    assert_eq!(
        Nim::config(&obj(json!({"pile": 0, "stake": 1})))
            .unwrap_err()
            .code,
        "bad_field"
    );
}
