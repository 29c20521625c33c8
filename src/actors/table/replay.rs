//! Rebuilding the hand (or game) in progress from the journal (I15): the
//! game as its last boundary left it, then each journalled command applied
//! again, in order, with the randomness it was applied with. The game is
//! deterministic given its state, the command and that randomness, so the
//! result is the hand exactly as its owner held it: the same cards, the
//! same decision, the same stacks. Every owner change hosts a table this
//! way ([`resume`]).

use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde_json::Value;

use super::play::Journalled;
use crate::chips::{Chips, PlayerId};
use crate::games::{Audience, Game, Occupant, Refusal, Role, Told};
use crate::store::{Entry, EntryKind};
use crate::types::ErrorCode;

/// The randomness command `seq` of a hand with `seed` is given: a ChaCha20
/// stream of the seed of its own, so a refused command (never journalled)
/// shifts nothing, and a replay draws exactly what the hand drew.
pub(super) fn rng(seed: &[u8; 32], seq: u32) -> ChaCha20Rng {
    let mut rng = ChaCha20Rng::from_seed(*seed);
    rng.set_stream(u64::from(seq));
    rng
}

/// The seats a start row keeps: `[[seat, player, stack], …]`.
pub(super) fn seats_json(seats: &[Occupant]) -> Value {
    Value::Array(
        seats
            .iter()
            .map(|o| serde_json::json!([o.seat, o.player.0, o.stack.0]))
            .collect(),
    )
}

/// Who was dealt in, as a start row keeps it.
pub(super) fn seats_at_deal(start: &Entry) -> Result<Vec<Occupant>, Refusal> {
    let broken = || {
        Refusal::new(
            ErrorCode::Internal,
            format!("start {} does not name its seats", start.number),
        )
    };
    let seats = start
        .command
        .as_ref()
        .and_then(|c| c.get("seats"))
        .and_then(Value::as_array)
        .ok_or_else(broken)?;
    seats
        .iter()
        .map(|s| {
            let seat = s
                .get(0)
                .and_then(Value::as_u64)
                .and_then(|v| u8::try_from(v).ok());
            let player = s.get(1).and_then(Value::as_str);
            let stack = s.get(2).and_then(Value::as_u64);
            match (seat, player, stack) {
                (Some(seat), Some(player), Some(stack)) => Ok(Occupant {
                    seat,
                    player: PlayerId(player.to_owned()),
                    stack: Chips(stack),
                }),
                _ => Err(broken()),
            }
        })
        .collect()
}

/// The events a replay produced (each was told when first applied).
pub(super) type Replayed<G> = Vec<Told<<G as Game>::Event>>;

/// What one journalled command told when it was first applied: its events
/// (a boundary's result aside, which is told only once recorded), each
/// with who could see it, numbered on from `told_after`.
pub(super) struct Retold<G: Game> {
    /// The `seq` of the last event told before these (`None` for a row
    /// journalled before this was kept).
    pub told_after: Option<u64>,
    /// The deadline its decision was announced with.
    pub deadline_ms: Option<i64>,
    /// Each event with its only viewer (`None`: everyone); an event to an
    /// empty seat was told to nobody and is left out.
    pub events: Vec<(Option<PlayerId>, G::Event)>,
}

/// The commands' events as first told, one [`Retold`] per journal entry.
pub(super) type History<G> = Vec<Retold<G>>;

/// The hand in progress from Postgres alone: the game at its last
/// boundary (`number`, with the `state` the boundary stored) with the
/// seats its start row names, then its journal replayed. Returns the game,
/// the events the replay produced, and each entry's events as told.
pub(super) fn rebuild<G: Game>(
    config: G::Config,
    number: u64,
    state: &Value,
    entries: &[Entry],
) -> Result<(G, Replayed<G>, History<G>), Refusal> {
    let start = entries
        .first()
        .ok_or_else(|| Refusal::new(ErrorCode::Internal, "a journal without a start"))?;
    let mut game = G::resume(config, number, state, seats_at_deal(start)?)?;
    let (told, history) = replay(&mut game, entries)?;
    Ok((game, told, history))
}

/// A table hosted with its hand (or game) in progress, as its journal
/// left it.
pub struct Resumed<G: Game> {
    /// The journal's place: the hand's number, its seed, its next seq.
    pub(super) hand: Journalled,
    /// The open decision's deadline (Unix ms), as its owner announced it.
    pub(super) deadline_ms: Option<i64>,
    /// The boundary's result, when the journal reached one its owner had
    /// not recorded yet (it stopped between the last command and the
    /// boundary write): the new owner records it, then tells it.
    pub(super) result: Vec<Told<G::Event>>,
    /// What the journalled commands told, for a client that reconnects
    /// with a `since` from an earlier hosting. Empty when seats changed
    /// during the hand outside the journal (a sit or a stand-up of a
    /// player not in it): those events are not kept, so a client catching
    /// up from the history alone would miss them.
    pub(super) history: History<G>,
}

/// The game in progress at a table from what Postgres holds alone: the
/// last boundary, the seats as they are now, and the journal since.
///
/// Seats taken or vacated during the hand by players who do not take part
/// in it are not journalled (their buy-in or cash-out is recorded, so the
/// seats are the truth): they are sat or stood up again after the replay.
/// A seat that takes part in the hand and is gone from Postgres means the
/// journal and the seats disagree, which is refused.
pub(super) fn resume<G: Game>(
    config: G::Config,
    number: u64,
    state: &Value,
    seats: &[Occupant],
    entries: &[Entry],
) -> Result<(G, Resumed<G>), Refusal> {
    let (mut game, told, history) = rebuild::<G>(config, number, state, entries)?;
    let broken = |what: String| Refusal::new(ErrorCode::Internal, what);
    let mut reseated = false;
    for o in game.occupants() {
        if seats
            .iter()
            .any(|s| s.seat == o.seat && s.player == o.player)
        {
            continue;
        }
        if game.takes_part(o.seat) {
            return Err(broken(format!(
                "seat {} takes part in the hand but Postgres no longer seats {}",
                o.seat, o.player.0
            )));
        }
        game.leave(o.seat)?;
        reseated = true;
    }
    for s in seats {
        if game.player_at(s.seat).is_none() {
            game.sit(s.seat, &s.player.0, s.stack)?;
            reseated = true;
        }
    }
    let (Some(start), Some(last)) = (entries.first(), entries.last()) else {
        return Err(broken("a journal without a start".into()));
    };
    let seed = start
        .seed
        .ok_or_else(|| broken("a start without its seed".into()))?;
    let hand = Journalled {
        number: start.number,
        seed,
        next: last.seq.saturating_add(1),
    };
    let deadline_ms = game
        .decision()
        .and_then(|_| entries.iter().rev().find_map(|e| e.deadline_ms));
    let result = match told.iter().position(|e| G::role(&e.event) == Role::Result) {
        Some(at) => told[at..].to_vec(),
        None => Vec::new(),
    };
    Ok((
        game,
        Resumed {
            hand,
            deadline_ms,
            result,
            history: if reseated { Vec::new() } else { history },
        },
    ))
}

/// Applies a hand's journal to `game` (which stands at the boundary before
/// it): the start first (seq 0, its seed), then every later entry in
/// `seq` order. Returns the events the commands produced, and each
/// entry's events as they were told when it was first applied.
///
/// Refused when the journal does not fit the game: no start, a gap in the
/// sequence, a command the game refuses now. A journal that does not replay
/// is never guessed at.
pub(super) fn replay<G: Game>(
    game: &mut G,
    entries: &[Entry],
) -> Result<(Replayed<G>, History<G>), Refusal> {
    let broken = |what: String| Refusal::new(ErrorCode::Internal, what);
    let Some((start, rest)) = entries.split_first() else {
        return Err(broken("a journal without a start".into()));
    };
    let seed = match (start.kind, start.seq, start.seed) {
        (EntryKind::Start, 0, Some(seed)) => seed,
        _ => return Err(broken(format!("entry {} is not a start", start.seq))),
    };
    let mut told = game
        .start(&mut rng(&seed, 0))
        .ok_or_else(|| broken("the game does not start again".into()))?;
    if game.number() != start.number {
        return Err(broken(format!(
            "the start dealt boundary {}, the journal holds {}",
            game.number(),
            start.number
        )));
    }
    let mut history = vec![retold(game, start, &told)];
    for (at, entry) in rest.iter().enumerate() {
        let expected = u32::try_from(at + 1).unwrap_or(u32::MAX);
        if entry.seq != expected || entry.number != start.number {
            return Err(broken(format!(
                "entry {}/{} where {}/{expected} was due",
                entry.number, entry.seq, start.number
            )));
        }
        let seat = entry
            .seat
            .ok_or_else(|| broken(format!("entry {} names no seat", entry.seq)))?;
        let mut draw = rng(&seed, entry.seq);
        let spent = Duration::from_millis(entry.spent_ms.unwrap_or(0));
        let events = match entry.kind {
            EntryKind::Act => {
                let fields = match &entry.command {
                    Some(Value::Object(fields)) => fields,
                    _ => return Err(broken(format!("act {} has no fields", entry.seq))),
                };
                let command = G::command(fields)?;
                game.apply_timed(seat, decision(entry)?, command, spent, &mut draw)?
            }
            EntryKind::Timeout => {
                let command = game
                    .on_timeout()
                    .ok_or_else(|| broken(format!("no default for timeout {}", entry.seq)))?;
                game.apply_timed(seat, decision(entry)?, command, spent, &mut draw)?
            }
            EntryKind::Leave => game.leave(seat)?,
            EntryKind::Start => return Err(broken(format!("a second start at {}", entry.seq))),
        };
        history.push(retold(game, entry, &events));
        told.extend(events);
    }
    Ok((told, history))
}

/// What `entry`'s `events` told when first applied to the game as it
/// stands now: the table tells each event to everyone or to the seat's
/// player, and holds a result back until it is recorded.
fn retold<G: Game>(game: &G, entry: &Entry, events: &[Told<G::Event>]) -> Retold<G> {
    let told = events
        .iter()
        .take_while(|e| G::role(&e.event) != Role::Result)
        .filter_map(|e| match e.to {
            Audience::Everyone => Some((None, e.event.clone())),
            Audience::Seat(seat) => game.player_at(seat).map(|p| (Some(p), e.event.clone())),
        })
        .collect();
    Retold {
        told_after: entry.told_after,
        deadline_ms: entry.deadline_ms,
        events: told,
    }
}

fn decision(entry: &Entry) -> Result<u64, Refusal> {
    entry.decision.ok_or_else(|| {
        Refusal::new(
            ErrorCode::Internal,
            format!("entry {} names no decision", entry.seq),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chips::{Chips, SeatNo};
    use crate::games::holdem::rules::LegalAction;
    use crate::games::holdem::Holdem;
    use crate::games::Occupant;
    use serde_json::json;

    fn holdem() -> Holdem {
        let body = json!({
            "small_blind": 1, "big_blind": 2, "seats": 6,
            "min_buy_in": 40, "max_buy_in": 200
        });
        let config = Holdem::config(body.as_object().unwrap()).unwrap();
        let mut game = Holdem::new(config).unwrap();
        for (seat, name) in [(0, "ann"), (2, "bob"), (4, "cy")] {
            game.sit(seat, name, Chips(100)).unwrap();
        }
        game
    }

    /// What a player sees: the table's view from each seat and a
    /// watcher's, and the open decision.
    fn seen(game: &Holdem) -> Value {
        let seats: Vec<Value> = [None, Some(0), Some(2), Some(4)]
            .into_iter()
            .map(|s: Option<SeatNo>| serde_json::to_value(game.view(s)).unwrap())
            .collect();
        let open = game.decision().map(|d| (d.seat, d.number));
        json!({ "views": seats, "decision": open })
    }

    /// Plays a hand the way the table does (each command with its own
    /// stream of the seed), journalling what it applied, for `steps`
    /// commands: acts (a check, else a call), the clock's act at the third, and one
    /// refused act before each (not journalled).
    fn journalled(game: &mut Holdem, seed: [u8; 32], steps: u32) -> Vec<Entry> {
        let seats = seats_json(&game.occupants());
        game.start(&mut rng(&seed, 0)).unwrap();
        let mut entries = vec![Entry::start(game.number(), seed, seats)];
        for seq in 1..=steps {
            let Some(open) = game.decision() else { break };
            let hand = game.number();
            // A refused act (a stale decision) draws nothing and is left
            // out.
            let stale =
                Holdem::command(json!({"hand": hand, "action": "fold"}).as_object().unwrap())
                    .unwrap();
            assert!(game
                .apply(open.seat, open.number + 7, stale, &mut rng(&seed, seq))
                .is_err());
            let entry = if seq != 3 {
                let action = if open.legal.contains(&LegalAction::Check) {
                    "check"
                } else {
                    "call"
                };
                let fields = json!({"hand": hand, "action": action});
                let command = Holdem::command(fields.as_object().unwrap()).unwrap();
                game.apply(open.seat, open.number, command, &mut rng(&seed, seq))
                    .unwrap();
                Entry {
                    number: hand,
                    seq,
                    kind: EntryKind::Act,
                    seat: Some(open.seat),
                    decision: Some(open.number),
                    command: Some(fields),
                    seed: None,
                    deadline_ms: None,
                    told_after: None,
                    spent_ms: None,
                }
            } else {
                let command = game.on_timeout().unwrap();
                game.apply(open.seat, open.number, command, &mut rng(&seed, seq))
                    .unwrap();
                Entry {
                    number: hand,
                    seq,
                    kind: EntryKind::Timeout,
                    seat: Some(open.seat),
                    decision: Some(open.number),
                    command: None,
                    seed: None,
                    deadline_ms: None,
                    told_after: None,
                    spent_ms: None,
                }
            };
            entries.push(entry);
        }
        entries
    }

    /// The game as the boundary before the hand left it, rebuilt the way
    /// a new owner rebuilds it.
    fn at_boundary(game: &Holdem) -> Holdem {
        let seats: Vec<Occupant> = game.occupants();
        Holdem::resume(
            game.settings().clone(),
            game.number(),
            &game.boundary_state(),
            seats,
        )
        .unwrap()
    }

    #[test]
    fn a_replayed_journal_is_the_hand_its_owner_held_cards_decision_and_stacks() {
        for (i, steps) in [0u32, 1, 2, 3, 5].into_iter().enumerate() {
            let seed = [u8::try_from(i).unwrap().wrapping_mul(37).wrapping_add(1); 32];
            let mut owner = holdem();
            let before = at_boundary(&owner);
            let entries = journalled(&mut owner, seed, steps);
            let mut heir = before;
            replay(&mut heir, &entries).expect("the journal replays");
            assert_eq!(seen(&heir), seen(&owner), "after {steps} commands");
            assert_eq!(heir.in_progress(), owner.in_progress());
            assert!(owner.in_progress(), "the hand is still being played");
        }
    }

    #[test]
    fn a_hand_is_rebuilt_from_what_postgres_holds_alone() {
        let mut owner = holdem();
        let (number, state) = (owner.number(), owner.boundary_state());
        let entries = journalled(&mut owner, [5; 32], 4);
        // The round trip through JSON, as the rows are stored.
        let stored: Vec<Entry> = entries
            .iter()
            .map(|e| Entry {
                command: e
                    .command
                    .as_ref()
                    .map(|c| serde_json::from_str(&c.to_string()).unwrap()),
                ..e.clone()
            })
            .collect();
        let (heir, _, _): (Holdem, _, _) =
            rebuild(owner.settings().clone(), number, &state, &stored).expect("rebuilt");
        assert_eq!(seen(&heir), seen(&owner));
        // A start that does not name its seats is not guessed at.
        let mut unnamed = stored.clone();
        unnamed[0].command = None;
        assert!(rebuild::<Holdem>(owner.settings().clone(), number, &state, &unnamed).is_err());
    }

    #[test]
    fn another_seed_deals_other_cards_so_the_seed_is_what_decides() {
        let mut a = holdem();
        let mut b = holdem();
        journalled(&mut a, [1; 32], 0);
        journalled(&mut b, [2; 32], 0);
        assert_ne!(seen(&a), seen(&b));
    }

    #[test]
    fn a_journal_with_a_gap_or_without_a_start_is_refused() {
        let mut owner = holdem();
        let before = at_boundary(&owner);
        let entries = journalled(&mut owner, [9; 32], 3);
        assert_eq!(entries.len(), 4, "a start and three commands");
        let mut gap = entries.clone();
        gap.remove(2);
        assert!(replay(&mut at_boundary(&before), &gap).is_err());
        assert!(replay(&mut at_boundary(&before), &entries[1..]).is_err());
        assert!(replay(&mut at_boundary(&before), &[]).is_err());
        let mut heir = at_boundary(&before);
        replay(&mut heir, &entries).unwrap();
        assert_eq!(seen(&heir), seen(&owner));
    }

    #[test]
    fn the_history_keeps_each_entrys_events_as_told_and_no_result() {
        let mut owner = holdem();
        let before = at_boundary(&owner);
        let entries = journalled(&mut owner, [3; 32], 40);
        assert!(!owner.in_progress(), "the hand was played to its end");
        let mut heir = before;
        let (told, history) = replay(&mut heir, &entries).unwrap();
        assert_eq!(history.len(), entries.len(), "one per entry");
        // The deal's hole cards go to each seat's own player.
        let own: Vec<String> = history[0]
            .events
            .iter()
            .filter_map(|(only, _)| only.as_ref().map(|p| p.0.clone()))
            .collect();
        assert_eq!(own, ["ann", "bob", "cy"]);
        // The result is told once recorded, never from the history.
        let kept: usize = history.iter().map(|r| r.events.len()).sum();
        let results = told
            .iter()
            .position(|e| Holdem::role(&e.event) == Role::Result)
            .expect("a result");
        assert_eq!(kept, results, "everything before the result");
        assert!(history
            .iter()
            .flat_map(|r| &r.events)
            .all(|(_, e)| Holdem::role(e) != Role::Result));
    }
}
