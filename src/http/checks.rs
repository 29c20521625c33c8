//! The properties the `admin_body` fuzz target and the admin property tests
//! both assert, kept in one place so that the two check exactly the same
//! thing on the inputs each of them grows.
//!
//! Every body goes through every admin body parser (`POST /admin/tables`,
//! `…/grant`, `…/freeze`, `…/move`) and every text through both path
//! segment parsers (`{player}`, `{id}`), as the handlers call them before
//! they touch any state. What is accepted is within what the rules and
//! Postgres hold (amounts 1 to 2^63−1, a config the rules accept, a path
//! segment exactly as written and within its alphabet); a body refusal is
//! 400 with `bad_json`, `bad_field` or `bad_amount` and a message of our
//! own, never the JSON parser's wording for a body that is JSON.

use serde_json::Value;

use super::admin::{freeze_body, grant_body, player_name, table_id, table_spec};
use super::moves::move_body;
use super::ApiError;
use crate::games::holdem::rules::TableConfig;
use crate::games::GameKind;
use crate::types::valid_player_name;

/// The largest amount the admin API takes: what Postgres holds.
pub const MAX_AMOUNT: u64 = i64::MAX as u64;

/// Runs `body` through every admin body parser and checks each answer.
///
/// # Panics
///
/// When a property does not hold, naming the answer.
pub fn check_body(body: &[u8]) {
    match table_config(body) {
        Ok(c) => {
            assert!(c.validate().is_ok(), "{c:?}");
            for a in [c.small_blind, c.big_blind, c.min_buy_in, c.max_buy_in] {
                assert!((1..=MAX_AMOUNT).contains(&a.0), "{c:?}");
            }
            assert!(c.ante.0 <= MAX_AMOUNT, "{c:?}");
        }
        Err(e) => check_refusal(&e, body),
    }
    match grant_body(body) {
        Ok(chips) => assert!((1..=MAX_AMOUNT).contains(&chips.0), "{chips:?}"),
        Err(e) => check_refusal(&e, body),
    }
    match freeze_body(body) {
        // An empty body is a freeze without a reason.
        Ok(()) if body.is_empty() => {}
        Ok(()) => {
            let v: Option<Value> = serde_json::from_slice(body).ok();
            assert!(
                v.as_ref()
                    .and_then(Value::as_object)
                    .is_some_and(|o| o.keys().all(|k| k == "reason")),
                "freeze accepted {v:?}"
            );
        }
        Err(e) => {
            assert!(!body.is_empty(), "an empty freeze body refused: {e}");
            check_refusal(&e, body);
        }
    }
    match move_body(body) {
        Ok(to) => assert!(!to.is_empty(), "a move to nowhere accepted"),
        Err(e) => check_refusal(&e, body),
    }
}

/// Runs `raw`, a percent-decoded path segment, through the player name and
/// table id parsers: each takes it only as it is written, within its
/// alphabet and length, and refuses it otherwise.
///
/// # Panics
///
/// When a property does not hold, naming the segment.
pub fn check_path_segment(raw: &str) {
    let name_ok = !raw.is_empty()
        && raw.len() <= 32
        && raw
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
    match player_name(raw) {
        Ok(name) => assert!(
            name_ok && name == raw && valid_player_name(name),
            "player {raw:?} taken as {name:?}"
        ),
        Err(e) => assert!(
            !name_ok && (e.status.as_u16(), e.code) == (400, "bad_field"),
            "player {raw:?} refused: {e}"
        ),
    }
    let id_ok = !raw.is_empty()
        && raw.len() <= 64
        && raw
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-".contains(c));
    match table_id(raw) {
        Ok(id) => assert!(id_ok && id.as_str() == raw, "table {raw:?} taken as {id:?}"),
        Err(e) => assert!(
            !id_ok && (e.status.as_u16(), e.code) == (404, "table_not_found"),
            "table {raw:?} refused: {e}"
        ),
    }
}

/// The message without the part that quotes what the client sent (an
/// unknown field's name may say anything).
fn without_quoted(message: &str) -> String {
    match (message.find('"'), message.rfind('"')) {
        (Some(a), Some(b)) if a < b => format!("{}{}", &message[..a], &message[b + 1..]),
        _ => message.to_string(),
    }
}

fn check_refusal(e: &ApiError, body: &[u8]) {
    assert_eq!(e.status.as_u16(), 400, "{e}");
    assert!(
        matches!(e.code, "bad_json" | "bad_field" | "bad_amount"),
        "{e}"
    );
    assert!(!e.message.is_empty(), "{e}");
    let is_object = matches!(serde_json::from_slice::<Value>(body), Ok(Value::Object(_)));
    if is_object {
        assert_ne!(e.code, "bad_json", "a JSON object refused as bad_json: {e}");
        let ours = without_quoted(&e.message);
        assert!(
            !ours.contains("invalid type") && !ours.contains("at line"),
            "the parser's own words: {e}"
        );
    } else {
        assert_eq!(e.code, "bad_json", "not an object, yet {e}");
    }
}

/// The hold'em config of a `POST /admin/tables` body, as a server that
/// hosts the games of this build reads it (see [`table_spec`]).
pub fn table_config(body: &[u8]) -> Result<TableConfig, ApiError> {
    let (kind, config) = table_spec(&crate::games::registry(), body)?;
    if kind != GameKind::HOLDEM {
        return Err(ApiError::bad_request(
            "bad_field",
            &format!("game {kind} is not hold'em"),
        ));
    }
    serde_json::from_value(config)
        .map_err(|e| ApiError::bad_request("bad_field", &format!("not a hold'em config: {e}")))
}
