//! What clients may send, parsed into typed commands: every frame is
//! checked here, before it reaches a table.

use serde_json::{Map, Value};

use super::ClientError;
use crate::chips::{Chips, SeatNo};
use crate::games::fields;
use crate::types::{ErrorCode, TableId};

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
    /// An answer to the open decision: the runtime's envelope (`table`,
    /// `decision`) and the frame's other fields, which the table's game
    /// parses into its command.
    Act {
        table: TableId,
        decision: u64,
        fields: Map<String, Value>,
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

pub(crate) fn bad_field(message: impl Into<String>) -> ClientError {
    fields::bad_field(message).into()
}

fn table_field(obj: &Map<String, Value>) -> Result<TableId, ClientError> {
    match obj.get("table") {
        Some(Value::String(s)) => TableId::parse(s)
            .ok_or_else(|| ClientError::new(ErrorCode::TableNotFound, format!("no table {s:?}"))),
        Some(_) => Err(bad_field("table must be a string")),
        None => Err(bad_field("table is required")),
    }
}

fn u64_field(obj: &Map<String, Value>, name: &str) -> Result<Option<u64>, ClientError> {
    Ok(fields::u64_field(obj, name)?)
}

/// Chip amounts get `bad_amount` rather than `bad_field` when they are
/// numbers of the wrong kind (negative, fractional, too large, zero). The
/// admin API and every game parse amounts with the same rules.
fn chips_field(obj: &Map<String, Value>, name: &str) -> Result<Option<Chips>, ClientError> {
    Ok(fields::chips_field(obj, name)?)
}

pub fn parse(text: &str) -> Result<ClientFrame, ClientError> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| ClientError::new(ErrorCode::BadJson, format!("not valid JSON: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(ClientError::new(
            ErrorCode::BadJson,
            "a frame must be a JSON object",
        ));
    };
    if matches!(obj.get("type"), Some(Value::String(s)) if s == "act") {
        return act(obj);
    }
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
            // 0 is the game's to judge (a chess table without a stake takes
            // it; hold'em refuses it as it always did).
            let buy_in = match obj.get("buy_in") {
                Some(Value::Number(n)) if n.as_u64() == Some(0) => Chips(0),
                _ => chips_field(&obj, "buy_in")?.ok_or_else(|| bad_field("buy_in is required"))?,
            };
            Ok(ClientFrame::Sit {
                table,
                seat,
                buy_in,
            })
        }
        "leave" => Ok(ClientFrame::Leave {
            table: table_field(&obj)?,
        }),
        other => Err(ClientError::new(
            ErrorCode::UnknownType,
            format!("unknown frame type {other:?}"),
        )),
    }
}

/// An `act`: the envelope checked here, the rest for the table's game.
fn act(mut obj: Map<String, Value>) -> Result<ClientFrame, ClientError> {
    let table = table_field(&obj)?;
    let decision = u64_field(&obj, "decision")?.ok_or_else(|| {
        bad_field("decision is required: the number of the turn this action answers")
    })?;
    for envelope in ["type", "table", "decision"] {
        obj.remove(envelope);
    }
    Ok(ClientFrame::Act {
        table,
        decision,
        fields: obj,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::games::holdem::rules::Action;
    use crate::games::holdem::{Holdem, HoldemCommand};
    use crate::games::Game;

    /// The code a frame is refused with, by the envelope or, for an `act`,
    /// by hold'em's reading of its fields.
    fn code(text: &str) -> &'static str {
        let parsed = parse(text).and_then(|frame| match frame {
            ClientFrame::Act { fields, .. } => Holdem::command(&fields)
                .map(|_| ())
                .map_err(ClientError::from),
            _ => Ok(()),
        });
        parsed.err().map_or("ok", |e| e.code.as_str())
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
            code(r#"{"type":"act","table":"t1","hand":1,"decision":1,"action":"dance"}"#),
            "bad_field"
        );
    }

    #[test]
    fn an_act_without_its_decision_is_bad_field() {
        assert_eq!(
            code(r#"{"type":"act","table":"t1","hand":1,"action":"fold"}"#),
            "bad_field"
        );
        assert_eq!(
            code(r#"{"type":"act","table":"t1","hand":1,"decision":-1,"action":"fold"}"#),
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
                r#"{{"type":"act","table":"t1","hand":1,"decision":1,"action":"raise","amount":{amount}}}"#
            );
            assert_eq!(code(&frame), "bad_amount", "amount {amount}");
        }
        assert_eq!(
            code(r#"{"type":"act","table":"t1","hand":1,"decision":1,"action":"bet"}"#),
            "bad_amount"
        );
        assert_eq!(
            code(r#"{"type":"sit","table":"t1","seat":0,"buy_in":-1}"#),
            "bad_amount"
        );
    }

    #[test]
    fn well_formed_frames_parse() {
        let act = parse(
            r#"{"type":"act","table":"t1","hand":3,"decision":2,"action":"raise","amount":8}"#,
        );
        let Ok(ClientFrame::Act {
            table,
            decision,
            fields,
        }) = act
        else {
            panic!("not an act: {act:?}");
        };
        assert_eq!((table.as_str(), decision), ("t1", 2));
        assert_eq!(
            Holdem::command(&fields),
            Ok(HoldemCommand::Act {
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
