//! A driver that plays any [`Game`] the way the runtime does, checking on
//! every step what the runtime relies on (docs/games.md, "What a game must
//! guarantee"). A game's own tests call [`play`]; hold'em's and the test
//! game's do.

use rand::rngs::StdRng;
use rand::SeedableRng;

use super::{Game, Role, Told};
use crate::chips::{Chips, SeatNo};

/// The chips a list of stacks holds.
pub fn total(stacks: &[(SeatNo, Chips)]) -> u64 {
    stacks.iter().map(|(_, c)| c.0).sum()
}

/// Seats `players`, then plays `boundaries` boundaries of `G` from seed
/// `seed`, answering every decision with `answer` (or, where it returns
/// `None`, what the action clock does), and returns each settlement's
/// stacks.
///
/// # Panics
///
/// When the game breaks what the runtime relies on: a settlement that does
/// not hold exactly the `chips` on the table, or whose start stacks are
/// not what its seats held when the boundary began; a settlement without a
/// result event, or a result event without a settlement; an open decision
/// not announced by the events that opened it; a settlement taken twice;
/// a legal answer refused; a game that never ends.
pub fn play<G: Game>(
    game: &mut G,
    players: &[(SeatNo, &str, u64)],
    chips: u64,
    boundaries: usize,
    seed: u64,
    mut answer: impl FnMut(&G, SeatNo, &G::Legal) -> Option<G::Command>,
) -> Vec<Vec<(SeatNo, Chips)>> {
    let mut rng = StdRng::seed_from_u64(seed);
    for &(seat, player, stack) in players {
        game.sit(seat, player, Chips(stack)).expect("sit");
    }
    let mut settled = Vec::new();
    while settled.len() < boundaries {
        assert!(game.can_start(), "the seats allow a game");
        let before: Vec<(SeatNo, Chips)> = game
            .occupants()
            .into_iter()
            .map(|o| (o.seat, o.stack))
            .collect();
        let started = game.start(&mut rng).expect("can_start said it would start");
        assert!(game.in_progress(), "a started game is in progress");
        check_announced(game, &started);
        let mut steps = 0;
        let mut result = false;
        while let Some(open) = game.decision() {
            steps += 1;
            assert!(steps < 10_000, "a game that never ends");
            let command = match answer(game, open.seat, &open.legal) {
                Some(c) => c,
                None => game.on_timeout().expect("an open decision has a default"),
            };
            let events = game
                .apply(open.seat, open.number, command, &mut rng)
                .expect("a legal answer is applied");
            check_announced(game, &events);
            result |= events.iter().any(|e| G::role(&e.event) == Role::Result);
        }
        let s = game.take_settlement().expect("the game reached a boundary");
        assert!(result, "a settlement is told by a result event: {s:?}");
        assert!(!game.in_progress(), "a settled game is over");
        assert_eq!(total(&s.stacks()), chips, "chips conserved: {s:?}");
        for r in &s.seats {
            assert!(
                before.contains(&(r.seat, r.start)),
                "seat {} starts the settlement with {} chips, not what it held: {before:?}",
                r.seat,
                r.start
            );
        }
        assert!(
            game.take_settlement().is_none(),
            "a settlement is taken once"
        );
        settled.push(s.stacks());
    }
    settled
}

/// An open decision after `events` is announced by the last of them that
/// announces one, naming its seat and number, and `announce` names it
/// again; with none open, nothing announces one.
fn check_announced<G: Game>(game: &G, events: &[Told<G::Event>]) {
    let announced = events.iter().rev().find_map(|e| match G::role(&e.event) {
        Role::Decision { seat, number } => Some((seat, number)),
        _ => None,
    });
    match game.decision() {
        Some(open) => {
            let role = Role::Decision {
                seat: open.seat,
                number: open.number,
            };
            assert_eq!(
                announced,
                Some((open.seat, open.number)),
                "the open decision is announced: {events:?}"
            );
            let again = game
                .announce()
                .expect("an open decision can be announced again");
            assert_eq!(G::role(&again.event), role);
        }
        None => assert!(game.announce().is_none(), "nothing open, nothing announced"),
    }
}
