//! The games this process hosts, by kind: how a table of each is rebuilt
//! from what Postgres holds and started. The manager hosts any table
//! through it and never names a game.

use std::collections::HashMap;
use std::sync::Arc;

use actix::prelude::*;
use serde_json::{Map, Value};

use super::{Owner, Table, TableEnv, TableHandle};
use crate::games::{Game, GameKind, Occupant, Refusal};
use crate::lease::LeaseClock;
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
    fn of<G: Game>(game: G) -> Loaded {
        Loaded(Box::new(move |arbiter, p| {
            let addr = Table::start_in_arbiter(arbiter, move |_| {
                Table::new(p.id, p.fence, p.env, p.clock, p.owner, game)
            });
            TableHandle::of(&addr)
        }))
    }

    /// Starts the table's actor on `arbiter`.
    pub fn start(self, arbiter: &ArbiterHandle, parts: TableParts) -> TableHandle {
        (self.0)(arbiter, parts)
    }
}

/// A table as Postgres holds it at its last boundary.
pub struct Stored<'a> {
    pub config: &'a Value,
    pub number: u64,
    pub state: &'a Value,
    pub seats: Vec<Occupant>,
}

type Resume = fn(Stored<'_>) -> Result<Loaded, Refusal>;
type Configure = fn(&Map<String, Value>) -> Result<Value, Refusal>;

/// What the registry knows of one game.
#[derive(Clone, Copy)]
struct Entry {
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
    let game = G::resume(config, stored.number, stored.state, stored.seats)?;
    Ok(Loaded::of(game))
}

/// The games a process hosts, in the order they were added.
#[derive(Clone, Default)]
pub struct Games {
    by_kind: HashMap<GameKind, Entry>,
    order: Vec<GameKind>,
}

impl Games {
    /// These games and `G`.
    pub fn with<G: Game>(mut self) -> Games {
        let entry = Entry {
            resume: resume::<G>,
            configure: configure::<G>,
            fields: G::CONFIG_FIELDS,
        };
        if self.by_kind.insert(G::KIND, entry).is_none() {
            self.order.push(G::KIND);
        }
        self
    }

    pub fn hosts(&self, kind: &GameKind) -> bool {
        self.by_kind.contains_key(kind)
    }

    /// `holdem, chess`: the names a refusal lists.
    pub fn names(&self) -> String {
        let names: Vec<&str> = self.order.iter().map(GameKind::as_str).collect();
        names.join(", ")
    }

    /// The config fields game `kind` takes, in the order a refusal lists
    /// them; `None` for a game this process does not host.
    pub fn config_fields(&self, kind: &GameKind) -> Option<&'static [&'static str]> {
        self.by_kind.get(kind).map(|e| e.fields)
    }

    /// Game `kind`'s config from a `POST /admin/tables` body, as JSON to
    /// store with the table.
    pub fn configure(&self, kind: &GameKind, body: &Map<String, Value>) -> Result<Value, Refusal> {
        let entry = self.entry(kind)?;
        (entry.configure)(body)
    }

    /// The table of game `kind` rebuilt from what Postgres holds.
    pub fn resume(&self, kind: &GameKind, stored: Stored<'_>) -> Result<Loaded, Refusal> {
        let entry = self.entry(kind)?;
        (entry.resume)(stored)
    }

    fn entry(&self, kind: &GameKind) -> Result<&Entry, Refusal> {
        self.by_kind.get(kind).ok_or_else(|| {
            Refusal::new(
                ErrorCode::BadField,
                format!(
                    "game {kind:?} is not one this server hosts; expected one of {}",
                    self.names()
                ),
            )
        })
    }
}
