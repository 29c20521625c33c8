//! The games this process hosts, by kind: how a table of each is rebuilt
//! from what Postgres holds and started. The manager hosts any table
//! through it and never names a game.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use actix::prelude::*;
use serde_json::{Map, Value};
use tracing::{error, info};

use super::replay::{self, Resumed};
use super::{Owner, Table, TableEnv, TableHandle};
use crate::games::{fields, Game, GameKind, Occupant, Refusal};
use crate::instruments;
use crate::lease::LeaseClock;
use crate::store;
use crate::types::{ErrorCode, Fence, TableId};

/// What a table needs besides its game to run.
pub struct TableParts {
    pub id: TableId,
    pub fence: Fence,
    pub env: TableEnv,
    pub clock: Arc<LeaseClock>,
    pub owner: Owner,
}

/// Starts a table's actor with its game inside.
type Start = Box<dyn FnOnce(&ArbiterHandle, TableParts) -> TableHandle + Send>;

/// A table's game rebuilt from Postgres, ready to be hosted.
pub struct Loaded(Start);

impl Loaded {
    fn of<G: Game>(game: G, resumed: Option<Resumed<G>>) -> Loaded {
        Loaded(Box::new(move |arbiter, p| {
            let addr = Table::start_in_arbiter(arbiter, move |_| {
                Table::new(p.id, p.fence, p.env, p.clock, p.owner, game).resuming(resumed)
            });
            TableHandle::of(&addr)
        }))
    }

    /// Starts the table's actor on `arbiter`.
    pub fn start(self, arbiter: &ArbiterHandle, parts: TableParts) -> TableHandle {
        (self.0)(arbiter, parts)
    }
}

/// A table as Postgres holds it: its last boundary, its seats, and the
/// journal of the hand (or game) in progress since (empty when none is).
pub struct Stored<'a> {
    pub config: &'a Value,
    pub number: u64,
    pub state: &'a Value,
    pub seats: Vec<Occupant>,
    pub journal: Vec<store::Entry>,
}

type Resume = fn(Stored<'_>) -> Result<Loaded, Refusal>;
type Configure = fn(&Map<String, Value>) -> Result<Value, Refusal>;

/// What the registry knows of one game.
#[derive(Clone)]
struct Entry {
    kind: GameKind,
    resume: Resume,
    configure: Configure,
    fields: &'static [&'static str],
}

fn configure<G: Game>(body: &Map<String, Value>) -> Result<Value, Refusal> {
    let config = G::config(body)?;
    serde_json::to_value(config).map_err(|e| {
        Refusal::new(
            ErrorCode::Internal,
            format!("a {} config is not JSON: {e}", G::KIND),
        )
    })
}

fn resume<G: Game>(stored: Stored<'_>) -> Result<Loaded, Refusal> {
    let config: G::Config = serde_json::from_value(stored.config.clone()).map_err(|e| {
        Refusal::new(
            ErrorCode::Internal,
            format!("the stored config is not a {} config: {e}", G::KIND),
        )
    })?;
    if !stored.journal.is_empty() {
        // The rules run on what Postgres holds: a panic there is the
        // journal's failure to replay, not the manager's.
        let replayed = catch_unwind(AssertUnwindSafe(|| {
            replay::resume::<G>(
                config.clone(),
                stored.number,
                stored.state,
                &stored.seats,
                &stored.journal,
            )
        }));
        let failure = match replayed {
            Ok(Ok((game, resumed))) => {
                info!(
                    event = "journal_replayed",
                    number = resumed.hand.number,
                    commands = stored.journal.len(),
                    "hosting the hand in progress from its journal"
                );
                metrics::counter!(instruments::JOURNAL_REPLAYS, "result" => "resumed").increment(1);
                return Ok(Loaded::of(game, Some(resumed)));
            }
            Ok(Err(e)) => e.message,
            Err(_) => "the rules panicked".to_string(),
        };
        // Never guessed at: the table is hosted at its last boundary (what
        // the seats hold), and the hand in progress is lost.
        error!(
            event = "journal_replay_failed",
            error = %failure,
            "the journal of the hand in progress does not replay; hosting at the last boundary"
        );
        metrics::counter!(instruments::JOURNAL_REPLAYS, "result" => "failed").increment(1);
    }
    let game = G::resume(config, stored.number, stored.state, stored.seats)?;
    Ok(Loaded::of(game, None))
}

/// The games a process hosts, in the order they were added.
#[derive(Clone, Default)]
pub struct Games {
    entries: Vec<Entry>,
}

impl Games {
    /// These games and `G` (in place of a game of the same kind).
    pub fn with<G: Game>(mut self) -> Games {
        self.entries.retain(|e| e.kind != G::KIND);
        self.entries.push(Entry {
            kind: G::KIND,
            resume: resume::<G>,
            configure: configure::<G>,
            fields: G::CONFIG_FIELDS,
        });
        self
    }

    /// `holdem, chess`: the names a refusal lists.
    pub fn names(&self) -> String {
        let names: Vec<&str> = self.entries.iter().map(|e| e.kind.as_str()).collect();
        names.join(", ")
    }

    /// Game `kind`'s config from the fields of a `POST /admin/tables` body
    /// besides `game`, as JSON to store with the table. A field the game
    /// does not take is refused (`bad_field`), listing `game` and the
    /// game's fields; a game this process does not host is refused naming
    /// the games it hosts.
    pub fn configure(&self, kind: &GameKind, body: &Map<String, Value>) -> Result<Value, Refusal> {
        let entry = self.entry(kind)?;
        let known: Vec<&str> = std::iter::once("game")
            .chain(entry.fields.iter().copied())
            .collect();
        fields::only_fields(body, &known)?;
        (entry.configure)(body)
    }

    /// The table of game `kind` rebuilt from what Postgres holds.
    pub fn resume(&self, kind: &GameKind, stored: Stored<'_>) -> Result<Loaded, Refusal> {
        let entry = self.entry(kind)?;
        (entry.resume)(stored)
    }

    fn entry(&self, kind: &GameKind) -> Result<&Entry, Refusal> {
        self.entries
            .iter()
            .find(|e| e.kind == *kind)
            .ok_or_else(|| self.not_hosted(kind.as_str()))
    }

    /// The refusal of a game named `name` that this process does not host.
    pub fn not_hosted(&self, name: &str) -> Refusal {
        Refusal::new(
            ErrorCode::BadField,
            format!(
                "game {name:?} is not one this server hosts; expected one of {}",
                self.names()
            ),
        )
    }
}
