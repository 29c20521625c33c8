//! The WebSocket protocol, independent of the transport: the frames clients
//! send ([`client`]), the frames the server sends ([`server`]), and the coded
//! error every refused frame or command gets. Tables produce these frames;
//! the WebSocket session only carries them.

#[doc(hidden)]
pub mod checks;
pub mod client;
pub mod server;

#[cfg(test)]
mod proptests;

pub use client::{parse, ClientFrame};
pub use server::{ServerFrame, SnapshotState, TurnClock};

use crate::game::RuleError;
use crate::types::TableId;

/// The error codes clients can rely on (see `docs/protocol.md`).
pub const STABLE_CODES: &[&str] = &[
    "bad_json",
    "unknown_type",
    "bad_field",
    "bad_amount",
    "table_not_found",
    "owned_elsewhere",
    "not_joined",
    "not_seated",
    "already_seated",
    "seat_taken",
    "not_your_turn",
    "illegal_action",
    "insufficient_funds",
    "stale_hand",
    "stale_decision",
    "table_frozen",
    "draining",
    "unavailable",
    "rate_limited",
    "too_slow",
];

/// A rejected frame or command, as the client sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientError {
    pub code: &'static str,
    pub message: String,
    pub owner: Option<String>,
    /// The table's subscription on this connection ended with this error
    /// (the search for a new owner gave up): a `join` brings it back.
    pub subscription_ended: bool,
}

impl ClientError {
    pub fn new(code: &'static str, message: impl Into<String>) -> ClientError {
        ClientError {
            code,
            message: message.into(),
            owner: None,
            subscription_ended: false,
        }
    }

    /// The same error, telling the client its subscription has ended.
    pub fn ending_subscription(mut self) -> ClientError {
        self.subscription_ended = true;
        self
    }

    pub fn to_frame(&self, table: Option<&TableId>) -> String {
        ServerFrame::Error {
            code: self.code,
            message: &self.message,
            table,
            owner: self.owner.as_deref(),
            subscription_ended: self.subscription_ended,
        }
        .to_string()
    }
}

impl From<RuleError> for ClientError {
    fn from(e: RuleError) -> ClientError {
        ClientError::new(e.code(), e.to_string())
    }
}
