//! What chess sends and keeps: its config, commands, events, snapshot view
//! and the record of a settled game.

use serde::{Deserialize, Serialize};

use super::EndReason;
use crate::chips::{Chips, PlayerId, SeatNo};

/// A chess table's settings: each side's starting time, what each move
/// adds to the mover's clock, and the chips each player puts up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChessConfig {
    pub clock_ms: u64,
    pub increment_ms: u64,
    pub stake: Chips,
}

/// The longest starting clock and increment a table may set (a day).
pub const MAX_CLOCK_MS: u64 = 24 * 60 * 60 * 1000;

/// What a seat sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChessCommand {
    /// A move in UCI (`e2e4`, `e7e8q`, castling as the king's two squares).
    Move(String),
    Resign,
    OfferDraw,
    AcceptDraw,
    /// The side to move ran out of time (the action clock's command; no
    /// client may send it).
    Flag,
}

/// One seat's chips once a game is settled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SeatStack {
    pub seat: SeatNo,
    pub player: PlayerId,
    pub stack: Chips,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChessEvent {
    Seated {
        seat: SeatNo,
        player: PlayerId,
        stack: Chips,
    },
    Left {
        seat: SeatNo,
        player: PlayerId,
        stack: Chips,
    },
    GameStarted {
        game: u64,
        white: PlayerId,
        black: PlayerId,
        fen: String,
        clocks_ms: [u64; 2],
    },
    /// `clocks_ms` is each side's time left as the decision opens (white,
    /// black); the side to move's runs down from it to the frame's
    /// `deadline_ms`.
    Turn {
        game: u64,
        seat: SeatNo,
        decision: u64,
        legal: Vec<String>,
        clocks_ms: [u64; 2],
        check: bool,
    },
    Action {
        game: u64,
        seat: SeatNo,
        action: &'static str,
        #[serde(rename = "move")]
        uci: String,
        san: String,
        fen: String,
        clocks_ms: [u64; 2],
    },
    DrawOffered {
        game: u64,
        seat: SeatNo,
    },
    GameEnded {
        game: u64,
        result: &'static str,
        reason: EndReason,
        moves: Vec<String>,
        clocks_ms: [u64; 2],
        stacks: Vec<SeatStack>,
    },
    /// The game was called off (an operator's freeze, or a result Postgres
    /// could not record): every stack is what it was before it.
    GameVoided {
        game: u64,
        stacks: Vec<SeatStack>,
    },
}

/// A snapshot's `state.game`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChessView {
    pub game: u64,
    pub fen: String,
    pub moves: Vec<String>,
    pub san: Vec<String>,
    pub to_act: Option<SeatNo>,
    pub decision: Option<u64>,
    pub legal: Vec<String>,
    pub check: bool,
    pub clocks_ms: [u64; 2],
    pub draw_offer: Option<SeatNo>,
    /// The last game's result while no game is in progress.
    pub result: Option<&'static str>,
    pub reason: Option<EndReason>,
    pub seats: Vec<SeatStack>,
}

/// What a settled game records beside its boundary.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChessResult {
    pub game: u64,
    pub result: &'static str,
    pub reason: EndReason,
    pub moves: Vec<String>,
    pub clocks_ms: [u64; 2],
}
