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

use std::borrow::Cow;
use std::fmt;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::chips::{Chips, PlayerId, SeatNo};
use crate::types::ErrorCode;

pub mod check;
pub mod chess;
pub mod fields;
pub mod holdem;

/// The games this build hosts.
pub fn registry() -> crate::actors::table::Games {
    crate::actors::table::Games::default()
        .with::<holdem::Holdem>()
        .with::<chess::Chess>()
}

#[cfg(test)]
mod tests;

/// The game a table plays, chosen at creation (`"game"`) and stored with
/// the table: the name of a [`Game`] ([`Game::KIND`]). Which kinds a
/// process hosts is its registry's to say ([`crate::actors::table::Games`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GameKind(Cow<'static, str>);

impl GameKind {
    /// No-limit Texas hold'em: the default, so every body without `"game"`
    /// creates what it always did.
    pub const HOLDEM: GameKind = GameKind::named("holdem");

    /// A kind by its name, for a game's [`Game::KIND`].
    pub const fn named(name: &'static str) -> GameKind {
        GameKind(Cow::Borrowed(name))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A kind as a table stores it or a body names it: 1 to 32 lowercase
    /// ASCII letters, digits and underscores, else `None`. Whether a
    /// process hosts it is another question.
    pub fn parse(raw: &str) -> Option<GameKind> {
        let shaped = (1..=32).contains(&raw.len())
            && raw
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        shaped.then(|| GameKind(Cow::Owned(raw.to_string())))
    }
}

impl Serialize for GameKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
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

/// One seat's part in a settled boundary: its player, the stack it began
/// the boundary with (what Postgres holds) and the stack it ends with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeatResult {
    pub seat: SeatNo,
    pub player: PlayerId,
    pub start: Chips,
    pub end: Chips,
}

/// The chips each seat holds once a boundary (a hand's end, a game's end)
/// is settled: the runtime writes them under the table's fence and checks
/// that they add up to what the seats held before, so a game can move chips
/// between seats but never make or lose one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settlement<R> {
    /// The boundary's number (a hand's, a game's), increasing per table.
    pub number: u64,
    pub seats: Vec<SeatResult>,
    /// The game's own record of the boundary, stored as JSON beside it.
    pub result: R,
}

impl<R> Settlement<R> {
    /// Each seat's stack once settled.
    pub fn stacks(&self) -> Vec<(SeatNo, Chips)> {
        self.seats.iter().map(|s| (s.seat, s.end)).collect()
    }
}

/// A seated player as the runtime sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Occupant {
    pub seat: SeatNo,
    pub player: PlayerId,
    pub stack: Chips,
}

/// What an event means to the runtime, besides being told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role<'a> {
    /// Nothing the runtime acts on.
    Plain,
    /// It announces the open decision, `seat` to answer decision `number`:
    /// the runtime arms the action clock for it and adds the clock's
    /// deadline to its frame.
    Decision { seat: SeatNo, number: u64 },
    /// The first event of a boundary's result: it and every event after it
    /// in the same batch are held back until Postgres has recorded the
    /// settlement (I9).
    Result,
    /// The seat is vacated with this stack: the runtime pays it out.
    Left {
        seat: SeatNo,
        player: &'a PlayerId,
        stack: Chips,
    },
}

/// The contract between a game and the runtime.
///
/// `apply` must be deterministic: the same state, seat, decision, command
/// and random bytes give the same events and the same next state, so a
/// table can be rebuilt by replaying its commands. On a refusal the state is
/// unchanged.
pub trait Game: Clone + Send + Unpin + Sized + 'static {
    /// The name a table stores and clients see as `game_kind`.
    const KIND: GameKind;
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

    /// The game rebuilt at its last recorded boundary: boundary `number`
    /// settled, `state` as [`Game::boundary_state`] gave it then (`Null`
    /// for a table that never reached one), the seats as Postgres holds
    /// them.
    fn resume(
        config: Self::Config,
        number: u64,
        state: &Value,
        seats: Vec<Occupant>,
    ) -> Result<Self, Refusal>;

    /// The config this game plays under: a snapshot's `state.config`.
    fn settings(&self) -> &Self::Config;

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

    /// [`Game::apply`] for a game that keeps its own clock: `spent` is how
    /// long the open decision had been open when the command came (the
    /// runtime journals it and hands a replay the same figure). A game
    /// without a clock of its own ignores it.
    fn apply_timed(
        &mut self,
        seat: SeatNo,
        decision: u64,
        command: Self::Command,
        spent: std::time::Duration,
        rng: &mut dyn rand::RngCore,
    ) -> Result<Vec<Told<Self::Event>>, Refusal> {
        let _ = spent;
        self.apply(seat, decision, command, rng)
    }

    /// How long the seat of the open decision has to answer it, for a game
    /// that keeps its own clock (chess: the side's remaining time); the
    /// runtime's action clock runs for exactly that long and then asks
    /// [`Game::on_timeout`]. `None` (the default): the runtime's action
    /// timeout.
    fn clock(&self) -> Option<std::time::Duration> {
        None
    }

    /// `player` takes `seat` with `stack` chips (the runtime has moved
    /// them from the wallet under the fence).
    fn sit(
        &mut self,
        seat: SeatNo,
        player: &str,
        stack: Chips,
    ) -> Result<Vec<Told<Self::Event>>, Refusal>;

    /// The player in `seat` goes. A seat that takes part in the boundary in
    /// progress ([`Game::takes_part`]) may be vacated by that boundary's
    /// result (a [`Role::Left`] event after its settlement); any other is
    /// vacated at once, once the runtime has paid out its stack.
    fn leave(&mut self, seat: SeatNo) -> Result<Vec<Told<Self::Event>>, Refusal>;

    /// Starts the next hand or game if the seats allow one (`None` if they
    /// do not); its randomness comes only from `rng`.
    fn start(&mut self, rng: &mut dyn rand::RngCore) -> Option<Vec<Told<Self::Event>>>;

    /// Whether [`Game::start`] would start one now.
    fn can_start(&self) -> bool;

    /// Abandons the boundary in progress (a shutdown with no time left):
    /// every stack goes back to what it was at the last boundary, which is
    /// what Postgres holds. `None` when nothing is in progress.
    fn void(&mut self) -> Option<Vec<Told<Self::Event>>>;

    /// What the players are told when a settlement could not be recorded:
    /// the boundary is void, every stack as it was before it.
    fn unrecorded(settlement: &Settlement<Self::Result>) -> Told<Self::Event>;

    /// The number of the boundary in progress (or of the last one).
    fn number(&self) -> u64;

    /// Whether a boundary is in progress.
    fn in_progress(&self) -> bool;

    /// Whether `seat` takes part in the boundary in progress.
    fn takes_part(&self, seat: SeatNo) -> bool;

    /// The seated players and their stacks.
    fn occupants(&self) -> Vec<Occupant>;

    /// The open decision, if any.
    fn decision(&self) -> Option<Decision<Self::Legal>>;

    /// The event that announces the open decision, told again when the
    /// decision starts over after a pause.
    fn announce(&self) -> Option<Told<Self::Event>>;

    /// What the action clock does for the seat of the open decision when it
    /// runs out; `None` when nothing is open.
    fn on_timeout(&self) -> Option<Self::Command>;

    /// The settlement of the boundary just reached, if `apply` reached one
    /// and it is not yet taken; taking it moves the game past it.
    fn take_settlement(&mut self) -> Option<Settlement<Self::Result>>;

    /// What the game keeps across boundaries besides seats and stacks
    /// (hold'em's button), recorded with each settlement and handed back
    /// to [`Game::resume`].
    fn boundary_state(&self) -> Value;

    /// What an event means to the runtime.
    fn role(event: &Self::Event) -> Role<'_>;

    /// What `seat` may see (`None`: a watcher).
    fn view(&self, seat: Option<SeatNo>) -> Self::View;

    /// The seat `player` holds.
    fn seat_of(&self, player: &PlayerId) -> Option<SeatNo> {
        self.occupants()
            .into_iter()
            .find(|o| o.player == *player)
            .map(|o| o.seat)
    }

    /// Who holds `seat`.
    fn player_at(&self, seat: SeatNo) -> Option<PlayerId> {
        self.occupants()
            .into_iter()
            .find(|o| o.seat == seat)
            .map(|o| o.player)
    }
}
