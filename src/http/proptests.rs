//! Generators for the admin API's bodies and path segments, and the exact
//! answers for valid table bodies and grants. The properties every body and
//! segment must keep live in `checks`, which the `admin_body` fuzz target
//! asserts too.

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::admin::{freeze_body, grant_body};
use super::checks::{self, table_config, MAX_AMOUNT};
use super::moves::move_body;
use crate::games::holdem::rules::{Chips, TableConfig};

const TABLE_FIELDS: [&str; 6] = [
    "small_blind",
    "big_blind",
    "ante",
    "seats",
    "min_buy_in",
    "max_buy_in",
];

/// One field's value as JSON text: the right kind, the wrong kind, and the
/// edges of every number type.
fn field_value() -> BoxedStrategy<String> {
    prop_oneof![
        prop::sample::select(vec![
            "null",
            "false",
            "0",
            "1",
            "2",
            "6",
            "-1",
            "0.5",
            "2.0",
            "1e30",
            "255",
            "256",
            "9223372036854775807",
            "9223372036854775808",
            "18446744073709551615",
            "18446744073709551616",
            "\"\"",
            "\"40\"",
            "\"operator\"",
            "[]",
            "{}",
        ])
        .prop_map(String::from),
        (0u64..=1000).prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>()
            .prop_filter("JSON has no NaN or infinity", |f| f.is_finite())
            .prop_map(|f| f.to_string()),
        any::<String>().prop_map(|s| Value::String(s).to_string()),
    ]
    .boxed()
}

/// A body as an operator (or a script gone wrong) could write it.
fn any_body() -> impl Strategy<Value = Vec<u8>> {
    let names = prop::sample::select(vec![
        "small_blind",
        "big_blind",
        "ante",
        "seats",
        "min_buy_in",
        "max_buy_in",
        "chips",
        "reason",
        "to",
        "colour",
    ]);
    prop_oneof![
        4 => prop::collection::vec((names, field_value()), 0..8).prop_map(|fields| {
            let parts: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
            format!("{{{}}}", parts.join(",")).into_bytes()
        }),
        1 => field_value().prop_map(String::into_bytes),
        1 => prop::collection::vec(any::<u8>(), 0..64),
    ]
}

/// A table body the API accepts, with the config it stands for.
fn valid_table() -> impl Strategy<Value = (Value, TableConfig)> {
    (
        1u64..=1000,
        0u64..=1000,
        prop_oneof![Just(0u64), 1u64..=100],
        TableConfig::MIN_SEATS..=TableConfig::MAX_SEATS,
        0u64..=100,
        0u64..=1000,
    )
        .prop_map(|(sb, bb_extra, ante, seats, min_extra, max_extra)| {
            let bb = sb + bb_extra;
            let min = bb + min_extra;
            let max = min + max_extra;
            let body = json!({
                "small_blind": sb, "big_blind": bb, "ante": ante,
                "seats": seats, "min_buy_in": min, "max_buy_in": max,
            });
            let config = TableConfig {
                small_blind: Chips(sb),
                big_blind: Chips(bb),
                ante: Chips(ante),
                seats,
                min_buy_in: Chips(min),
                max_buy_in: Chips(max),
            };
            (body, config)
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Every body through every parser: accepted only within range,
    /// refused only with a 400 and a body code.
    #[test]
    fn any_body_is_accepted_within_range_or_refused_with_a_400(body in any_body()) {
        checks::check_body(&body);
    }

    /// A valid table body gives exactly its config; one field made wrong (a
    /// negative, fractional, too large or mistyped value, or a stranger)
    /// gets a 400 whose message names that field.
    #[test]
    fn one_bad_table_field_is_named_in_the_refusal(
        (body, config) in valid_table(),
        field in prop::sample::select(TABLE_FIELDS.to_vec()),
        bad in prop::sample::select(vec!["-1", "0.5", "9223372036854775808", "18446744073709551616", "1e30", "\"2\"", "[]", "true"]),
        stranger in "x_[a-z]{1,8}",
    ) {
        let text = body.to_string();
        prop_assert_eq!(table_config(text.as_bytes()).map_err(|e| e.to_string()), Ok(config));

        let mut obj: Map<String, Value> = body.as_object().cloned().expect("an object");
        obj.remove(field);
        let parts: Vec<String> = obj.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        let broken = format!("{{{},\"{field}\":{bad}}}", parts.join(","));
        let e = table_config(broken.as_bytes()).expect_err("a bad field is refused");
        prop_assert_eq!(e.status.as_u16(), 400);
        prop_assert!(matches!(e.code, "bad_field" | "bad_amount"), "{}: {}", broken, e);
        prop_assert!(e.message.contains(field), "{}: {} should name {}", broken, e, field);

        let mut with_stranger = body.clone();
        with_stranger[stranger.as_str()] = json!(1);
        let e = table_config(with_stranger.to_string().as_bytes()).expect_err("unknown field");
        prop_assert_eq!((e.status.as_u16(), e.code), (400, "bad_field"));
        prop_assert!(e.message.contains(&stranger), "{}", e);
    }

    /// Grants: a whole number from 1 to 2^63−1 is taken as it is; every
    /// other number is `bad_amount`.
    #[test]
    fn a_grant_takes_exactly_the_amounts_postgres_holds(n in any::<i128>()) {
        let body = format!("{{\"chips\":{n}}}");
        match grant_body(body.as_bytes()) {
            Ok(chips) => prop_assert_eq!(i128::from(chips.0), n),
            Err(e) => {
                prop_assert!(n < 1 || n > i128::from(MAX_AMOUNT), "{} refused: {}", n, e);
                prop_assert_eq!(e.code, "bad_amount", "{}", e);
            }
        }
    }

    /// Path segments: a player name or table id is taken only as it is
    /// written, within its alphabet and length.
    #[test]
    fn path_segments_are_taken_only_within_their_alphabet(raw in prop_oneof![
        "[A-Za-z0-9_.-]{0,40}",
        any::<String>(),
    ]) {
        checks::check_path_segment(&raw);
    }
}

#[test]
fn freeze_and_move_bodies_take_only_their_one_field() {
    assert!(freeze_body(b"").is_ok());
    assert!(freeze_body(b"{}").is_ok());
    assert!(freeze_body(br#"{"reason":"operator"}"#).is_ok());
    for bad in [
        &br#"{"reason":"lease_lost"}"#[..],
        br#"{"reason":1}"#,
        br#"{"reason":"operator","note":"x"}"#,
    ] {
        let e = freeze_body(bad).expect_err("refused");
        assert_eq!((e.status.as_u16(), e.code), (400, "bad_field"), "{e}");
    }
    assert_eq!(
        move_body(br#"{"to":"inst-b"}"#).ok().as_deref(),
        Some("inst-b")
    );
    for bad in [
        &br#"{}"#[..],
        br#"{"to":""}"#,
        br#"{"to":7}"#,
        br#"{"to":"b","why":1}"#,
    ] {
        let e = move_body(bad).expect_err("refused");
        assert_eq!((e.status.as_u16(), e.code), (400, "bad_field"), "{e}");
    }
    let e = move_body(b"to=inst-b").expect_err("refused");
    assert_eq!((e.status.as_u16(), e.code), (400, "bad_json"), "{e}");
}
