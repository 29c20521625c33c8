//! Reading a frame's or a body's fields, with the codes and messages the
//! protocol has always answered: what a game's `config` and `command` use,
//! and what the protocol's own parsers use for the envelope.

use serde_json::{Map, Value};

use super::Refusal;
use crate::chips::Chips;
use crate::types::ErrorCode;

pub fn bad_field(message: impl Into<String>) -> Refusal {
    Refusal::new(ErrorCode::BadField, message)
}

pub fn bad_amount(message: impl Into<String>) -> Refusal {
    Refusal::new(ErrorCode::BadAmount, message)
}

/// Refuses a field that is not one of `known`, listing them.
pub fn only_fields(obj: &Map<String, Value>, known: &[&str]) -> Result<(), Refusal> {
    match obj.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(bad_field(format!(
            "unknown field {k:?}; expected {}",
            known.join(", ")
        ))),
        None => Ok(()),
    }
}

/// A required chip amount, 1 to 2^63−1 (see [`chips_field`]).
pub fn required_chips(obj: &Map<String, Value>, name: &str) -> Result<Chips, Refusal> {
    chips_field(obj, name)?.ok_or_else(|| bad_field(format!("{name} is required")))
}

/// A whole number ≥ 0, or `None` when absent or `null`.
pub fn u64_field(obj: &Map<String, Value>, name: &str) -> Result<Option<u64>, Refusal> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| bad_field(format!("{name} must be a whole number >= 0"))),
        Some(_) => Err(bad_field(format!("{name} must be a number"))),
    }
}

/// A chip amount, 1 to 2^63−1 (what Postgres holds), or `None` when absent
/// or `null`. Numbers of the wrong kind (negative, fractional, too large,
/// zero) are `bad_amount`; anything else is `bad_field`.
pub fn chips_field(obj: &Map<String, Value>, name: &str) -> Result<Option<Chips>, Refusal> {
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
