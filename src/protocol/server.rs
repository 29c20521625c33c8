//! Frames the server sends. Each is a serde type, so every frame a client
//! can receive is spelled in one place; a table serializes a frame once and
//! shares the text with every session that may see it.

use std::sync::Arc;

use serde::Serialize;

use crate::games::GameKind;
use crate::types::{ErrorCode, Fence, FreezeReason, PauseReason, StateReason, TableId, TableState};

/// One game event, numbered per table: `{"type":"event","table","seq"}`
/// and the game's event (`kind` and its fields) at the top level. Any
/// game's events go in the same envelope.
#[derive(Debug, Serialize)]
pub struct EventFrame<'a, E> {
    #[serde(rename = "type")]
    frame: &'static str,
    table: &'a TableId,
    seq: u64,
    #[serde(flatten)]
    event: &'a E,
    /// On the event that announces a decision only.
    #[serde(flatten)]
    clock: Option<TurnClock>,
}

impl<'a, E: Serialize> EventFrame<'a, E> {
    pub fn new(table: &'a TableId, seq: u64, event: &'a E, clock: Option<TurnClock>) -> Self {
        EventFrame {
            frame: "event",
            table,
            seq,
            event,
            clock,
        }
    }

    /// The frame's text, shared between the sessions it goes to.
    pub fn to_shared(&self) -> Arc<str> {
        shared(self)
    }
}

/// The table as one player may see it: `{"type":"snapshot","table","seq",
/// "state"}`.
#[derive(Debug, Serialize)]
pub struct SnapshotFrame<'a, C, V> {
    #[serde(rename = "type")]
    frame: &'static str,
    table: &'a TableId,
    seq: u64,
    state: SnapshotState<'a, C, V>,
}

impl<'a, C: Serialize, V: Serialize> SnapshotFrame<'a, C, V> {
    pub fn new(table: &'a TableId, seq: u64, state: SnapshotState<'a, C, V>) -> Self {
        SnapshotFrame {
            frame: "snapshot",
            table,
            seq,
            state,
        }
    }

    pub fn to_shared(&self) -> Arc<str> {
        shared(self)
    }
}

/// Serializing these types cannot fail: every map key is a string.
fn shared(frame: &impl Serialize) -> Arc<str> {
    serde_json::to_string(frame)
        .unwrap_or_else(|_| {
            String::from(
                r#"{"type":"error","code":"internal","message":"a frame could not be written"}"#,
            )
        })
        .into()
}

/// Frames that are not a game's: notices, errors, pongs.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerFrame<'a> {
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

/// `snapshot.state`: the runtime's part, then the game's config and view.
#[derive(Debug, Serialize)]
pub struct SnapshotState<'a, C, V> {
    pub table: &'a TableId,
    pub state: TableState,
    pub fence: Fence,
    pub owner: &'a str,
    /// The game the table plays (`holdem`).
    pub game_kind: GameKind,
    pub config: &'a C,
    pub action_deadline_ms: Option<i64>,
    pub game: V,
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
    use crate::games::holdem::rules::{Chips, EventKind, PlayerId};
    use serde_json::{json, Value};

    fn parsed(frame: ServerFrame<'_>) -> Value {
        serde_json::from_str(&frame.to_string()).expect("valid JSON")
    }

    fn parsed_event(frame: EventFrame<'_, EventKind>) -> Value {
        serde_json::from_str(&frame.to_shared()).expect("valid JSON")
    }

    #[test]
    fn an_event_frame_carries_its_kind_and_fields_at_the_top_level() {
        let table = TableId::parse("t1").expect("id");
        let event = EventKind::Seated {
            seat: 2,
            player: PlayerId("alice".into()),
            stack: Chips(200),
        };
        let v = parsed_event(EventFrame::new(&table, 7, &event, None));
        assert_eq!(
            v,
            json!({"type":"event","table":"t1","seq":7,"kind":"seated","seat":2,"player":"alice","stack":200})
        );
        // The keys in the order clients have always read them.
        let text = EventFrame::new(&table, 7, &event, None).to_shared();
        assert!(
            text.starts_with(r#"{"type":"event","table":"t1","seq":7,"kind":"seated""#),
            "{text}"
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
        let clock = TurnClock {
            deadline_ms: 5,
            timeout_ms: 20_000,
        };
        let v = parsed_event(EventFrame::new(&table, 1, &event, Some(clock)));
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
