//! Generators for what clients send: frames of every shape, any text, and
//! well-formed frames with what they must parse to. The properties every
//! parsed or refused frame must keep live in `checks`, which the `ws_frame`
//! fuzz target asserts too; the exact parses and the truncations are
//! checked here.

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::*;
use crate::games::holdem::frames::{self as checks, MAX_AMOUNT};
use crate::games::holdem::rules::{Action, Chips, SeatNo};
use crate::games::holdem::{Holdem, HoldemCommand};
use crate::games::Game;
use crate::types::TableId;

/// One field's value as JSON text: the right kind, the wrong kind, and the
/// edges of every number type.
fn field_value() -> BoxedStrategy<String> {
    prop_oneof![
        prop::sample::select(vec![
            "null",
            "true",
            "0",
            "1",
            "-1",
            "1.5",
            "1e30",
            "-0",
            "255",
            "256",
            "9223372036854775807",
            "9223372036854775808",
            "18446744073709551615",
            "18446744073709551616",
            "\"\"",
            "\"0\"",
            "[]",
            "{}",
            "\"fold\"",
            "\"raise\"",
            "\"bet\"",
            "\"all_in\"",
        ])
        .prop_map(String::from),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>()
            .prop_filter("JSON has no NaN or infinity", |f| f.is_finite())
            .prop_map(|f| f.to_string()),
        "[A-Za-z0-9_-]{0,70}".prop_map(|s| format!("\"{s}\"")),
        any::<String>().prop_map(|s| Value::String(s).to_string()),
    ]
    .boxed()
}

/// A frame as a client could write it, right or wrong: a `type` (or none,
/// or not a string) and any of the fields frames use, plus strangers.
fn any_frame() -> impl Strategy<Value = String> {
    let kind = prop_oneof![
        prop::sample::select(vec!["join", "sit", "act", "leave", "ping", "teleport", ""])
            .prop_map(|k| format!("\"{k}\"")),
        field_value(),
    ];
    let names = prop::sample::select(vec![
        "table", "seat", "buy_in", "hand", "decision", "action", "amount", "since", "colour",
    ]);
    (
        prop::option::weighted(0.95, kind),
        prop::collection::vec((names, field_value()), 0..8),
    )
        .prop_map(|(kind, fields)| {
            let mut parts: Vec<String> =
                kind.map(|k| format!("\"type\":{k}")).into_iter().collect();
            parts.extend(fields.iter().map(|(k, v)| format!("\"{k}\":{v}")));
            format!("{{{}}}", parts.join(","))
        })
}

fn table_id() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_-]{1,64}"
}

fn amount() -> impl Strategy<Value = u64> {
    prop_oneof![1..=400u64, 1..=MAX_AMOUNT, Just(MAX_AMOUNT)]
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        Just(Action::Fold),
        Just(Action::Check),
        Just(Action::Call),
        Just(Action::AllIn),
        amount().prop_map(|a| Action::Bet(Chips(a))),
        amount().prop_map(|a| Action::Raise(Chips(a))),
    ]
}

/// A frame the protocol accepts, with what it must parse to.
/// What a parsed frame says: an act's game fields as hold'em reads them
/// (the frame then without its fields, which carry whatever rides along).
type Meaning = (ClientFrame, Option<HoldemCommand>);

fn meaning(parsed: Result<ClientFrame, ClientError>) -> Result<Meaning, ClientError> {
    match parsed? {
        ClientFrame::Act {
            table,
            decision,
            fields,
        } => {
            let command = Holdem::command(&fields).map_err(ClientError::from)?;
            let frame = ClientFrame::Act {
                table,
                decision,
                fields: Map::new(),
            };
            Ok((frame, Some(command)))
        }
        other => Ok((other, None)),
    }
}

fn well_formed() -> impl Strategy<Value = (Value, Meaning)> {
    let id = |s: &str| TableId::parse(s).unwrap_or_else(|| panic!("{s:?} is a table id"));
    prop_oneof![
        Just((json!({"type": "ping"}), (ClientFrame::Ping, None))),
        (table_id(), proptest::option::of(any::<u64>())).prop_map(move |(t, since)| {
            let mut v = json!({"type": "join", "table": t});
            if let Some(n) = since {
                v["since"] = json!(n);
            }
            (
                v,
                (
                    ClientFrame::Join {
                        table: id(&t),
                        since,
                    },
                    None,
                ),
            )
        }),
        (table_id(), any::<SeatNo>(), amount()).prop_map(move |(t, seat, buy_in)| (
            json!({"type": "sit", "table": t, "seat": seat, "buy_in": buy_in}),
            (
                ClientFrame::Sit {
                    table: id(&t),
                    seat,
                    buy_in: Chips(buy_in)
                },
                None
            )
        )),
        (table_id(), any::<u64>(), any::<u64>(), action()).prop_map(
            move |(t, hand, decision, action)| {
                let (name, amount) = match action {
                    Action::Fold => ("fold", None),
                    Action::Check => ("check", None),
                    Action::Call => ("call", None),
                    Action::AllIn => ("all_in", None),
                    Action::Bet(a) => ("bet", Some(a.0)),
                    Action::Raise(a) => ("raise", Some(a.0)),
                };
                let mut v = json!({
                    "type": "act", "table": t, "hand": hand, "decision": decision, "action": name
                });
                if let Some(a) = amount {
                    v["amount"] = json!(a);
                }
                let frame = ClientFrame::Act {
                    table: id(&t),
                    decision,
                    fields: Map::new(),
                };
                (v, (frame, Some(HoldemCommand::Act { hand, action })))
            }
        ),
        table_id().prop_map(move |t| (
            json!({"type": "leave", "table": t}),
            (ClientFrame::Leave { table: id(&t) }, None)
        )),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Frames of every shape: parsed into allowed values or refused with a
    /// frame code, and what parses is handled by the rules with client codes.
    #[test]
    fn any_frame_is_parsed_or_refused_with_a_frame_code(text in any_frame()) {
        checks::check_text(&text);
    }

    /// Any text at all (not JSON, half JSON, any Unicode) never panics and
    /// is answered with a frame code.
    #[test]
    fn any_text_is_answered_with_a_frame_code(text in any::<String>()) {
        checks::check_text(&text);
    }

    /// A frame the protocol accepts parses to exactly what it says, whatever
    /// unknown fields ride along.
    #[test]
    fn well_formed_frames_parse_to_what_they_say(
        (mut value, expected) in well_formed(),
        extra in prop::collection::btree_map("x_[a-z]{1,8}", field_value(), 0..3),
    ) {
        prop_assert_eq!(meaning(parse(&value.to_string())), Ok(expected.clone()));
        let obj: &mut Map<String, Value> = value.as_object_mut().expect("an object");
        for (k, v) in extra {
            obj.insert(k, serde_json::from_str(&v).expect("field values are JSON"));
        }
        let parsed = parse(&value.to_string());
        prop_assert_eq!(meaning(parsed.clone()), Ok(expected.clone()));
        checks::check_frame(&parsed.expect("parsed"));
    }

    /// Every frame cut short anywhere is `bad_json`, never a half-read frame.
    #[test]
    fn a_truncated_frame_is_bad_json((value, _) in well_formed(), cut in any::<prop::sample::Index>()) {
        let text = value.to_string();
        let at = cut.index(text.len());
        let truncated = &text[..at];
        prop_assert_eq!(parse(truncated).map_err(|e| e.code.as_str()), Err("bad_json"), "{}", truncated);
    }
}

#[test]
fn a_frame_nested_past_the_parsers_depth_limit_is_bad_json() {
    let deep = format!(
        r#"{{"type":"join","table":"t1","since":{}{}}}"#,
        "[".repeat(2000),
        "]".repeat(2000)
    );
    assert_eq!(parse(&deep).map_err(|e| e.code.as_str()), Err("bad_json"));
}
