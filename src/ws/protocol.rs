//! WebSocket frames: what clients may send, parsed into typed commands, and
//! the error shape every rejected frame gets back.

use std::sync::Arc;

use actix::prelude::*;
use serde_json::{json, Map, Value};

use crate::game::{Action, Chips, RuleError, SeatNo};
use crate::types::TableId;

#[derive(Debug, Clone, PartialEq)]
pub enum ClientFrame {
    Join {
        table: TableId,
        since: Option<u64>,
    },
    Sit {
        table: TableId,
        seat: SeatNo,
        buy_in: Chips,
    },
    Act {
        table: TableId,
        hand: u64,
        action: Action,
    },
    Leave {
        table: TableId,
    },
    Ping,
}

impl ClientFrame {
    pub fn table(&self) -> Option<&TableId> {
        match self {
            ClientFrame::Join { table, .. }
            | ClientFrame::Sit { table, .. }
            | ClientFrame::Act { table, .. }
            | ClientFrame::Leave { table } => Some(table),
            ClientFrame::Ping => None,
        }
    }
}

/// A rejected frame or command, as the client sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientError {
    pub code: &'static str,
    pub message: String,
    pub owner: Option<String>,
}

impl ClientError {
    pub fn new(code: &'static str, message: impl Into<String>) -> ClientError {
        ClientError {
            code,
            message: message.into(),
            owner: None,
        }
    }

    pub fn to_frame(&self, table: Option<&TableId>) -> String {
        let mut v = json!({"type": "error", "code": self.code, "message": self.message});
        if let Some(t) = table {
            v["table"] = json!(t);
        }
        if let Some(o) = &self.owner {
            v["owner"] = json!(o);
        }
        v.to_string()
    }
}

impl From<RuleError> for ClientError {
    fn from(e: RuleError) -> ClientError {
        ClientError::new(e.code(), e.to_string())
    }
}

/// How far one session lags behind what its tables sent it. A session's
/// actor only runs while its socket drains, so a client that stops reading
/// stalls it: the tables account for what they queue and stop sending once
/// the backlog passes the cap, instead of filling the mailbox without bound.
#[derive(Debug, Default)]
pub struct Backlog {
    queued_bytes: std::sync::atomic::AtomicU64,
    too_slow: std::sync::atomic::AtomicBool,
}

impl Backlog {
    /// Counts a frame about to be queued; false (and marked too slow) when
    /// the session already lags more than `cap` bytes.
    pub fn admit(&self, len: usize, cap: u64) -> bool {
        use std::sync::atomic::Ordering;
        if self.queued_bytes.load(Ordering::Relaxed) > cap {
            self.too_slow.store(true, Ordering::Relaxed);
            return false;
        }
        self.queued_bytes.fetch_add(len as u64, Ordering::Relaxed);
        true
    }

    pub fn delivered(&self, len: usize) {
        use std::sync::atomic::Ordering;
        let _ = self
            .queued_bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |q| {
                Some(q.saturating_sub(len as u64))
            });
    }

    pub fn is_too_slow(&self) -> bool {
        self.too_slow.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// What a table or the server pushes to one session.
#[derive(Message, Clone, Debug)]
#[rtype(result = "()")]
pub enum Outbound {
    /// A ready JSON text frame.
    Frame(Arc<str>),
    /// The table dropped this session's subscription (frozen, evicted).
    Unsubscribed(TableId),
    /// The table finished draining; the session closes once it has no
    /// table left.
    Released(TableId),
}

fn bad_field(message: impl Into<String>) -> ClientError {
    ClientError::new("bad_field", message)
}

fn bad_amount(message: impl Into<String>) -> ClientError {
    ClientError::new("bad_amount", message)
}

fn table_field(obj: &Map<String, Value>) -> Result<TableId, ClientError> {
    match obj.get("table") {
        Some(Value::String(s)) => TableId::parse(s)
            .ok_or_else(|| ClientError::new("table_not_found", format!("no table {s:?}"))),
        Some(_) => Err(bad_field("table must be a string")),
        None => Err(bad_field("table is required")),
    }
}

fn u64_field(obj: &Map<String, Value>, name: &str) -> Result<Option<u64>, ClientError> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| bad_field(format!("{name} must be a whole number >= 0"))),
        Some(_) => Err(bad_field(format!("{name} must be a number"))),
    }
}

/// Chip amounts get `bad_amount` rather than `bad_field` when they are
/// numbers of the wrong kind (negative, fractional, too large, zero).
fn chips_field(obj: &Map<String, Value>, name: &str) -> Result<Option<Chips>, ClientError> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(0) => Err(bad_amount(format!("{name} must be above 0"))),
            Some(v) if v <= i64::MAX as u64 => Ok(Some(Chips(v))),
            _ => Err(bad_amount(format!(
                "{name} must be a whole number of chips from 1 to {}",
                i64::MAX
            ))),
        },
        Some(_) => Err(bad_field(format!("{name} must be a number"))),
    }
}

pub fn parse(text: &str) -> Result<ClientFrame, ClientError> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| ClientError::new("bad_json", format!("not valid JSON: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(ClientError::new(
            "bad_json",
            "a frame must be a JSON object",
        ));
    };
    let kind = match obj.get("type") {
        Some(Value::String(s)) => s.as_str(),
        Some(_) => return Err(bad_field("type must be a string")),
        None => return Err(bad_field("type is required")),
    };
    match kind {
        "ping" => Ok(ClientFrame::Ping),
        "join" => Ok(ClientFrame::Join {
            table: table_field(&obj)?,
            since: u64_field(&obj, "since")?,
        }),
        "sit" => {
            let table = table_field(&obj)?;
            let seat = u64_field(&obj, "seat")?.ok_or_else(|| bad_field("seat is required"))?;
            let seat = SeatNo::try_from(seat).map_err(|_| bad_field("seat is out of range"))?;
            let buy_in =
                chips_field(&obj, "buy_in")?.ok_or_else(|| bad_field("buy_in is required"))?;
            Ok(ClientFrame::Sit {
                table,
                seat,
                buy_in,
            })
        }
        "act" => {
            let table = table_field(&obj)?;
            let hand = u64_field(&obj, "hand")?.ok_or_else(|| bad_field("hand is required"))?;
            let name = match obj.get("action") {
                Some(Value::String(s)) => s.as_str(),
                Some(_) => return Err(bad_field("action must be a string")),
                None => return Err(bad_field("action is required")),
            };
            let amount = || {
                chips_field(&obj, "amount")?
                    .ok_or_else(|| bad_amount("amount is required for bet and raise"))
            };
            let action = match name {
                "fold" => Action::Fold,
                "check" => Action::Check,
                "call" => Action::Call,
                "all_in" => Action::AllIn,
                "bet" => Action::Bet(amount()?),
                "raise" => Action::Raise(amount()?),
                other => return Err(bad_field(format!("unknown action {other:?}"))),
            };
            Ok(ClientFrame::Act {
                table,
                hand,
                action,
            })
        }
        "leave" => Ok(ClientFrame::Leave {
            table: table_field(&obj)?,
        }),
        other => Err(ClientError::new(
            "unknown_type",
            format!("unknown frame type {other:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(text: &str) -> &'static str {
        parse(text).err().map(|e| e.code).unwrap_or("ok")
    }

    #[test]
    fn malformed_json_is_bad_json() {
        assert_eq!(code("{nope"), "bad_json");
        assert_eq!(code("[1,2]"), "bad_json");
    }

    #[test]
    fn unknown_type_is_reported_as_such() {
        assert_eq!(code(r#"{"type":"teleport"}"#), "unknown_type");
    }

    #[test]
    fn missing_or_mistyped_fields_are_bad_field() {
        assert_eq!(code(r#"{"table":"t1"}"#), "bad_field");
        assert_eq!(code(r#"{"type":"join"}"#), "bad_field");
        assert_eq!(
            code(r#"{"type":"sit","table":"t1","seat":"zero","buy_in":100}"#),
            "bad_field"
        );
        assert_eq!(
            code(r#"{"type":"sit","table":"t1","seat":300,"buy_in":100}"#),
            "bad_field"
        );
        assert_eq!(
            code(r#"{"type":"act","table":"t1","hand":1,"action":"dance"}"#),
            "bad_field"
        );
    }

    #[test]
    fn bad_chip_amounts_are_bad_amount() {
        for amount in [
            "-5",
            "1.5",
            "0",
            "18446744073709551616",
            "9223372036854775808",
        ] {
            let frame = format!(
                r#"{{"type":"act","table":"t1","hand":1,"action":"raise","amount":{amount}}}"#
            );
            assert_eq!(code(&frame), "bad_amount", "amount {amount}");
        }
        assert_eq!(
            code(r#"{"type":"act","table":"t1","hand":1,"action":"bet"}"#),
            "bad_amount"
        );
        assert_eq!(
            code(r#"{"type":"sit","table":"t1","seat":0,"buy_in":-1}"#),
            "bad_amount"
        );
    }

    #[test]
    fn well_formed_frames_parse() {
        assert_eq!(
            parse(r#"{"type":"act","table":"t1","hand":3,"action":"raise","amount":8}"#),
            Ok(ClientFrame::Act {
                table: TableId::parse("t1").expect("id"),
                hand: 3,
                action: Action::Raise(Chips(8))
            })
        );
        assert_eq!(
            parse(r#"{"type":"join","table":"t1","since":7}"#),
            Ok(ClientFrame::Join {
                table: TableId::parse("t1").expect("id"),
                since: Some(7)
            })
        );
        assert_eq!(parse(r#"{"type":"ping"}"#), Ok(ClientFrame::Ping));
    }
}
