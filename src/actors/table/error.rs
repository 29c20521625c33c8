//! Why a table refused what a session asked: typed, with what happened.
//! The table returns these; the one mapping to a wire code and the text a
//! client reads is `From<TableError> for ClientError` below, which the
//! session applies (as `HostError`'s is beside it).

use crate::games::Refusal;
use crate::protocol::ClientError;
use crate::types::{ErrorCode, PauseReason};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// The table's game refused the command; nothing changed.
    #[error("{0}")]
    Refused(Refusal),
    #[error("you have no seat at this table")]
    NotSeated,
    #[error("that seat is taken")]
    SeatTaken,
    #[error("already seated at this table")]
    AlreadySeated,
    #[error("wallet balance is too low")]
    InsufficientFunds,
    /// Frozen, or freezing because the rules and Postgres disagree.
    #[error("the table is frozen")]
    Frozen,
    /// Postgres holds the table in a state that takes no buy-in.
    #[error("the table is not open")]
    NotOpen,
    /// A buy-in Postgres recorded as this copy stopped: the seat is the
    /// player's wherever the table is hosted next.
    #[error("the buy-in was recorded and the table stopped: the seat holds it")]
    SeatHeldWhileStopping,
    /// Postgres refused the buy-in for a reason the table answers itself
    /// (it froze); nothing was recorded.
    #[error("the table could not record the buy-in")]
    BuyInNotRecorded,
    /// Nothing was recorded and nothing stands in the way: try again.
    #[error("the buy-in could not be recorded right now; try again")]
    TryBuyingInAgain,
    #[error("the server is shutting down")]
    ShuttingDown,
    #[error("the table is being released; join it again in a moment")]
    Releasing,
    #[error("the table is paused ({0}); it resumes on its own")]
    Paused(PauseReason),
    /// The connection ended while its join was on the way.
    #[error("the connection is gone")]
    ConnectionGone,
    /// The connection cannot take even a snapshot within its cap.
    #[error("the connection is not reading")]
    TooSlow,
}

impl From<Refusal> for TableError {
    fn from(r: Refusal) -> TableError {
        TableError::Refused(r)
    }
}

impl TableError {
    /// The protocol's code for it.
    pub fn code(&self) -> ErrorCode {
        match self {
            TableError::Refused(r) => r.code,
            TableError::NotSeated => ErrorCode::NotSeated,
            TableError::SeatTaken => ErrorCode::SeatTaken,
            TableError::AlreadySeated => ErrorCode::AlreadySeated,
            TableError::InsufficientFunds => ErrorCode::InsufficientFunds,
            TableError::Frozen
            | TableError::NotOpen
            | TableError::SeatHeldWhileStopping
            | TableError::BuyInNotRecorded => ErrorCode::TableFrozen,
            TableError::TryBuyingInAgain
            | TableError::Releasing
            | TableError::Paused(_)
            | TableError::ConnectionGone => ErrorCode::Unavailable,
            TableError::ShuttingDown => ErrorCode::Draining,
            TableError::TooSlow => ErrorCode::TooSlow,
        }
    }
}

impl From<TableError> for ClientError {
    fn from(e: TableError) -> ClientError {
        match e {
            TableError::Refused(r) => ClientError::new(r.code, r.message),
            other => ClientError::new(other.code(), other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_keeps_the_code_and_words_clients_have_always_been_told() {
        let cases = [
            (
                TableError::NotSeated,
                "not_seated",
                "you have no seat at this table",
            ),
            (TableError::SeatTaken, "seat_taken", "that seat is taken"),
            (TableError::Frozen, "table_frozen", "the table is frozen"),
            (
                TableError::ShuttingDown,
                "draining",
                "the server is shutting down",
            ),
            (
                TableError::Paused(PauseReason::Contested),
                "unavailable",
                "the table is paused (contested); it resumes on its own",
            ),
            (
                TableError::TooSlow,
                "too_slow",
                "the connection is not reading",
            ),
        ];
        for (e, code, message) in cases {
            let told = ClientError::from(e);
            assert_eq!((told.code.as_str(), told.message.as_str()), (code, message));
        }
        let refusal = Refusal::new(ErrorCode::IllegalAction, "you may not take 4");
        let told = ClientError::from(TableError::from(refusal));
        assert_eq!(told.code, ErrorCode::IllegalAction);
        assert_eq!(told.message, "you may not take 4");
    }
}
