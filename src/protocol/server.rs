//! Frames the server sends. Each is a serde type, so every frame a client
//! can receive is spelled in one place; a table serializes a frame once and
//! shares the text with every session that may see it.

use std::sync::Arc;

use serde::Serialize;

use crate::game::{EventKind, GameView, TableConfig};
use crate::games::GameKind;
use crate::types::{ErrorCode, Fence, FreezeReason, PauseReason, StateReason, TableId, TableState};

/// A frame is built, serialized and dropped at once, never stored or
/// moved around, so the snapshot's size costs nothing in the other
/// variants.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerFrame<'a> {
    /// The table as one player may see it.
    Snapshot {
        table: &'a TableId,
        seq: u64,
        state: SnapshotState<'a>,
    },
    /// One game event, numbered per table.
    Event {
        table: &'a TableId,
        seq: u64,
        #[serde(flatten)]
        event: &'a EventKind,
        /// On `turn` events only.
        #[serde(flatten)]
        clock: Option<TurnClock>,
    },
    /// The table froze; the subscription ends.
    Frozen {
        table: &'a TableId,
        reason: FreezeReason,
    },
    /// The table stopped dealing for a while; its hand and seats are kept.
    Paused {
        table: &'a TableId,
        reason: PauseReason,
    },
    /// The table deals again; a snapshot follows.
    Resumed {
        table: &'a TableId,
    },
    /// The table was released (nobody sat at it); a join hosts it again.
    Released {
        table: &'a TableId,
        reason: StateReason,
    },
    Error {
        code: ErrorCode,
        message: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        table: Option<&'a TableId>,
        #[serde(skip_serializing_if = "Option::is_none")]
        owner: Option<&'a str>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        subscription_ended: bool,
    },
    Pong,
}

/// `snapshot.state`.
#[derive(Debug, Serialize)]
pub struct SnapshotState<'a> {
    pub table: &'a TableId,
    pub state: TableState,
    pub fence: Fence,
    pub owner: &'a str,
    /// The game the table plays (`holdem`).
    pub game_kind: GameKind,
    pub config: &'a TableConfig,
    pub action_deadline_ms: Option<i64>,
    pub game: GameView,
}

/// The action clock of a `turn`: when it runs out (Unix millis) and how long
/// it was.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct TurnClock {
    pub deadline_ms: i64,
    pub timeout_ms: u64,
}

impl ServerFrame<'_> {
    /// The frame's text, shared between the sessions it goes to.
    pub fn to_shared(&self) -> Arc<str> {
        self.to_string().into()
    }
}

impl std::fmt::Display for ServerFrame<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Serializing these types cannot fail: every map key is a string.
        match serde_json::to_string(self) {
            Ok(text) => f.write_str(&text),
            Err(_) => Err(std::fmt::Error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::game::{Chips, PlayerId};
    use serde_json::{json, Value};

    fn parsed(frame: ServerFrame<'_>) -> Value {
        serde_json::from_str(&frame.to_string()).expect("valid JSON")
    }

    #[test]
    fn an_event_frame_carries_its_kind_and_fields_at_the_top_level() {
        let table = TableId::parse("t1").expect("id");
        let event = EventKind::Seated {
            seat: 2,
            player: PlayerId("alice".into()),
            stack: Chips(200),
        };
        let v = parsed(ServerFrame::Event {
            table: &table,
            seq: 7,
            event: &event,
            clock: None,
        });
        assert_eq!(
            v,
            json!({"type":"event","table":"t1","seq":7,"kind":"seated","seat":2,"player":"alice","stack":200})
        );
    }

    #[test]
    fn a_turn_frame_carries_its_clock() {
        let table = TableId::parse("t1").expect("id");
        let event = EventKind::Seated {
            seat: 0,
            player: PlayerId("bob".into()),
            stack: Chips(1),
        };
        let v = parsed(ServerFrame::Event {
            table: &table,
            seq: 1,
            event: &event,
            clock: Some(TurnClock {
                deadline_ms: 5,
                timeout_ms: 20_000,
            }),
        });
        assert_eq!(v["deadline_ms"], 5);
        assert_eq!(v["timeout_ms"], 20_000);
    }

    #[test]
    fn notices_and_errors_have_their_contract_shape() {
        let table = TableId::parse("t1").expect("id");
        assert_eq!(
            parsed(ServerFrame::Frozen {
                table: &table,
                reason: FreezeReason::LeaseLost
            }),
            json!({"type":"frozen","table":"t1","reason":"lease_lost"})
        );
        assert_eq!(
            parsed(ServerFrame::Released {
                table: &table,
                reason: StateReason::Idle
            }),
            json!({"type":"released","table":"t1","reason":"idle"})
        );
        assert_eq!(
            parsed(ServerFrame::Error {
                code: ErrorCode::BadJson,
                message: "no",
                table: None,
                owner: None,
                subscription_ended: false,
            }),
            json!({"type":"error","code":"bad_json","message":"no"})
        );
        assert_eq!(
            parsed(ServerFrame::Error {
                code: ErrorCode::Unavailable,
                message: "gone",
                table: Some(&table),
                owner: None,
                subscription_ended: true,
            }),
            json!({"type":"error","code":"unavailable","message":"gone","table":"t1","subscription_ended":true})
        );
        assert_eq!(parsed(ServerFrame::Pong), json!({"type":"pong"}));
    }
}
