//! The games a table can host, and the trait every game implements (I14).
//!
//! A game is a pure, deterministic state machine: given its state, a seat's
//! command and the randomness the runtime hands it, `apply` says what
//! happened, with no clock and no I/O. Everything else a table does (seats
//! and their players, wallets, buy-ins and cash-outs, watchers, decision
//! numbers, the action clock, fences, durability and fan-out) is the
//! runtime's. See docs/games.md.
//!
//! [`GameKind`] is what a table stores and what clients see as
//! `game_kind`; [`Game`] is the contract between a game and the runtime.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::game::{Chips, SeatNo};
use crate::types::ErrorCode;

pub mod holdem;

#[cfg(test)]
mod nim;
#[cfg(test)]
mod tests;

/// The game a table plays, chosen at creation (`"game"`) and stored with
/// the table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GameKind {
    /// No-limit Texas hold'em: the default, so every body without `"game"`
    /// creates what it always did.
    #[default]
    Holdem,
}

impl GameKind {
    /// Every game this build hosts.
    pub const ALL: [GameKind; 1] = [GameKind::Holdem];

    pub fn as_str(self) -> &'static str {
        match self {
            GameKind::Holdem => "holdem",
        }
    }

    /// The kind a table names, or `None` for a game this build does not
    /// host.
    pub fn parse(raw: &str) -> Option<GameKind> {
        GameKind::ALL.into_iter().find(|k| k.as_str() == raw)
    }

    /// `holdem, chess`: the names a refusal lists.
    pub fn names() -> String {
        GameKind::ALL.map(GameKind::as_str).join(", ")
    }
}

impl fmt::Display for GameKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who may be told an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Audience {
    Everyone,
    /// Only the player in this seat.
    Seat(SeatNo),
}

/// One thing that happened, with who may see it.
#[derive(Clone, Debug, PartialEq)]
pub struct Told<E> {
    pub to: Audience,
    pub event: E,
}

/// A game's refusal of a command: one of the protocol's stable error codes
/// (`illegal_action`, `stale_decision`, `bad_field`, ...) and a message
/// for a person. Nothing changed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
}

impl Refusal {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            message: message.into(),
        }
    }
}

/// The open decision: whose turn it is, its number (what a command must
/// name) and what that seat may send.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision<L> {
    pub seat: SeatNo,
    pub number: u64,
    pub legal: L,
}

/// The chips each seat holds once a boundary (a hand's end, a game's end)
/// is settled: the runtime writes them under the table's fence and checks
/// that they add up to what the seats held before, so a game can move chips
/// between seats but never make or lose one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settlement<R> {
    /// The boundary's number (a hand's, a game's), increasing per table.
    pub number: u64,
    pub stacks: Vec<(SeatNo, Chips)>,
    /// The game's own record of the boundary, stored as JSON beside it.
    pub result: R,
}

/// The contract between a game and the runtime.
///
/// `apply` must be deterministic: the same state, seat, decision, command
/// and random bytes give the same events and the same next state, so a
/// table can be rebuilt by replaying its commands. On a refusal the state is
/// unchanged.
pub trait Game: Clone + Send + Sized + 'static {
    /// Validated when the table is created and stored with it.
    type Config: Clone + Serialize + serde::de::DeserializeOwned + Send;
    /// What a seat may send, parsed from an `act` frame's game fields.
    type Command: Clone + fmt::Debug + Send;
    /// What happened; serialized as an `event` frame's `kind` and fields.
    type Event: Clone + fmt::Debug + Serialize + Send;
    /// What one seat (or a watcher, `None`) may see: a snapshot's
    /// `state.game`.
    type View: Serialize;
    /// The open decision's legal commands, as a `turn` event lists them.
    type Legal: Clone + fmt::Debug + Serialize;
    /// The game's record of a settled boundary.
    type Result: Clone + fmt::Debug + Serialize;

    /// The fields of a config, in the order a refusal of an unknown one
    /// lists them.
    const CONFIG_FIELDS: &'static [&'static str];

    /// The config from a `POST /admin/tables` body, whose fields the
    /// runtime has checked are `"game"` or in [`Game::CONFIG_FIELDS`]; a
    /// wrong field is refused (`bad_field`, `bad_amount`) naming it.
    fn config(body: &Map<String, Value>) -> Result<Self::Config, Refusal>;

    /// A fresh game for a validated config.
    fn new(config: Self::Config) -> Result<Self, Refusal>;

    /// The command of an `act` frame (its fields besides `type`, `table`
    /// and `decision`).
    fn command(fields: &Map<String, Value>) -> Result<Self::Command, Refusal>;

    /// Applies `seat`'s answer to decision `decision`. Randomness comes only
    /// from `rng`, which the runtime seeds and records.
    fn apply(
        &mut self,
        seat: SeatNo,
        decision: u64,
        command: Self::Command,
        rng: &mut dyn rand::RngCore,
    ) -> Result<Vec<Told<Self::Event>>, Refusal>;

    /// `player` takes `seat` with `stack` chips (the runtime has moved
    /// them from the wallet under the fence).
    fn sit(
        &mut self,
        seat: SeatNo,
        player: &str,
        stack: Chips,
    ) -> Result<Vec<Told<Self::Event>>, Refusal>;

    /// The player in `seat` goes; the runtime pays out the stack the
    /// settlement leaves it.
    fn leave(&mut self, seat: SeatNo) -> Result<Vec<Told<Self::Event>>, Refusal>;

    /// Starts the next hand or game if the seats allow one (`None` if they
    /// do not); its randomness comes only from `rng`.
    fn start(&mut self, rng: &mut dyn rand::RngCore) -> Option<Vec<Told<Self::Event>>>;

    /// The open decision, if any.
    fn decision(&self) -> Option<Decision<Self::Legal>>;

    /// What the action clock does for the seat of the open decision when it
    /// runs out; `None` when nothing is open.
    fn on_timeout(&self) -> Option<Self::Command>;

    /// The settlement of the boundary just reached, if `apply` reached one
    /// and it is not yet taken; taking it moves the game past it.
    fn take_settlement(&mut self) -> Option<Settlement<Self::Result>>;

    /// What `seat` may see (`None`: a watcher).
    fn view(&self, seat: Option<SeatNo>) -> Self::View;
}
