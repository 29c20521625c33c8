//! Rule violations.

use crate::types::ErrorCode;

/// Why a command was refused. A refused command never changes the game.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("it is not this seat's turn to act")]
    NotYourTurn,
    #[error("illegal action: {0}")]
    IllegalAction(String),
    #[error("bad amount: {0}")]
    BadAmount(String),
    #[error("not enough chips")]
    InsufficientChips,
    #[error("command is for hand {got} but the current hand is {expected}")]
    StaleHand { expected: u64, got: u64 },
    #[error("the action answers decision {got} but the open decision is {expected}")]
    StaleDecision { expected: u64, got: u64 },
    #[error("no hand is in progress")]
    NoHandInProgress,
    #[error("a hand is in progress")]
    HandInProgress,
    #[error("seat is taken")]
    SeatTaken,
    #[error("no such seat at this table")]
    SeatOutOfRange,
    #[error("nobody is sitting in that seat")]
    NotSeated,
    #[error("player is already seated at this table")]
    AlreadySeated,
    #[error("not enough players to start a hand")]
    NotEnoughPlayers,
    #[error("deck must hold 52 distinct cards")]
    BadDeck,
    #[error("buy-in is outside the table's limits")]
    BuyInOutOfRange,
    #[error("chip amount overflow")]
    Overflow,
    #[error("bad table config: {0}")]
    BadConfig(String),
    /// An engine invariant did not hold. Never expected; the command is
    /// refused like any other so the table stays usable.
    #[error("internal rule-engine error: {0}")]
    Internal(String),
}

impl RuleError {
    /// Stable machine-readable code for clients.
    pub fn code(&self) -> ErrorCode {
        match self {
            RuleError::NotYourTurn => ErrorCode::NotYourTurn,
            RuleError::IllegalAction(_) => ErrorCode::IllegalAction,
            RuleError::BadAmount(_) => ErrorCode::BadAmount,
            RuleError::InsufficientChips => ErrorCode::InsufficientFunds,
            RuleError::StaleHand { .. } => ErrorCode::StaleHand,
            RuleError::StaleDecision { .. } => ErrorCode::StaleDecision,
            RuleError::NoHandInProgress => ErrorCode::NoHandInProgress,
            RuleError::HandInProgress => ErrorCode::HandInProgress,
            RuleError::SeatTaken => ErrorCode::SeatTaken,
            RuleError::SeatOutOfRange => ErrorCode::BadField,
            RuleError::NotSeated => ErrorCode::NotSeated,
            RuleError::AlreadySeated => ErrorCode::AlreadySeated,
            RuleError::NotEnoughPlayers => ErrorCode::NotEnoughPlayers,
            RuleError::BadDeck => ErrorCode::BadDeck,
            RuleError::BuyInOutOfRange => ErrorCode::BuyInOutOfRange,
            RuleError::Overflow => ErrorCode::Overflow,
            RuleError::BadConfig(_) => ErrorCode::BadConfig,
            RuleError::Internal(_) => ErrorCode::Internal,
        }
    }
}
