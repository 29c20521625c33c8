//! The admin API's inputs, as the handlers read them before touching any
//! state: the JSON bodies of `POST /admin/tables`, `…/grant`, `…/freeze`
//! and `…/move`, and the `{player}` and `{id}` path segments. Every input
//! goes through every parser.
//!
//! Properties: no panic; a refusal is 400 with `bad_json`, `bad_field` or
//! `bad_amount` and a message of our own (never the JSON parser's wording
//! for a body that is JSON); what is accepted is within what the rules and
//! Postgres hold (amounts 1 to 2^63−1, a config the rules accept).

#![no_main]

use libfuzzer_sys::fuzz_target;
use pitboss::http::admin::{freeze_body, grant_body, player_name, table_config, table_id};
use pitboss::http::moves::move_body;
use pitboss::http::ApiError;
use pitboss::types::valid_player_name;
use serde_json::Value;

const MAX_AMOUNT: u64 = i64::MAX as u64;

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
    assert!(!e.message.is_empty());
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

fuzz_target!(|data: &[u8]| {
    match table_config(data) {
        Ok(c) => {
            assert!(c.validate().is_ok(), "{c:?}");
            for a in [c.small_blind, c.big_blind, c.min_buy_in, c.max_buy_in] {
                assert!((1..=MAX_AMOUNT).contains(&a.0), "{c:?}");
            }
            assert!(c.ante.0 <= MAX_AMOUNT, "{c:?}");
        }
        Err(e) => check_refusal(&e, data),
    }
    match grant_body(data) {
        Ok(chips) => assert!((1..=MAX_AMOUNT).contains(&chips.0)),
        Err(e) => check_refusal(&e, data),
    }
    match freeze_body(data) {
        Ok(()) => {
            if !data.is_empty() {
                let v: Value = serde_json::from_slice(data).expect("accepted bodies are JSON");
                let obj = v.as_object().expect("accepted bodies are objects");
                assert!(obj.keys().all(|k| k == "reason"), "{obj:?}");
            }
        }
        Err(e) => {
            assert!(!data.is_empty());
            check_refusal(&e, data)
        }
    }
    match move_body(data) {
        Ok(to) => assert!(!to.is_empty()),
        Err(e) => check_refusal(&e, data),
    }
    // Path segments arrive percent-decoded, as text.
    if let Ok(text) = std::str::from_utf8(data) {
        match player_name(text) {
            Ok(name) => assert!(valid_player_name(name) && name.len() <= 32),
            Err(e) => assert_eq!((e.status.as_u16(), e.code), (400, "bad_field")),
        }
        match table_id(text) {
            Ok(id) => assert_eq!(id.as_str(), text),
            Err(e) => assert_eq!((e.status.as_u16(), e.code), (404, "table_not_found")),
        }
    }
});
