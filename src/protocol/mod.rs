//! The WebSocket protocol, independent of the transport: the frames clients
//! send ([`client`]), the frames the server sends ([`server`]), and the coded
//! error every refused frame or command gets. Tables produce these frames;
//! the WebSocket session only carries them.

pub mod client;
pub mod server;

#[cfg(test)]
mod proptests;

pub use client::{parse, ClientFrame};
pub use server::{EventFrame, ServerFrame, SnapshotFrame, SnapshotState, TurnClock};

pub use crate::types::ErrorCode;
use crate::types::TableId;

/// A rejected frame or command, as the client sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientError {
    pub code: ErrorCode,
    pub message: String,
    pub owner: Option<String>,
    /// The table's subscription on this connection ended with this error
    /// (the search for a new owner gave up): a `join` brings it back.
    pub subscription_ended: bool,
}

impl ClientError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ClientError {
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

impl From<crate::games::Refusal> for ClientError {
    fn from(e: crate::games::Refusal) -> ClientError {
        ClientError::new(e.code, e.message)
    }
}
