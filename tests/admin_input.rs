//! Bad admin bodies get a clear, coded error and change nothing: amounts
//! out of range (2^63 and beyond 64 bits), wrong types, unknown fields and
//! bodies that are not JSON.

mod common;

use common::{test_db, unique_env, Server, ServerConfig, ADMIN_TOKEN};
use serde_json::Value;

/// POSTs a raw body (numbers a JSON library could not hold included).
async fn post_raw(server: &Server, path: &str, body: &str) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(format!("{}{}", server.http, path))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("send");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body");
    let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
    (status, v)
}

fn code_and_message(v: &Value) -> (&str, &str) {
    (
        v["error"]["code"].as_str().unwrap_or_default(),
        v["error"]["message"].as_str().unwrap_or_default(),
    )
}

#[tokio::test]
async fn bad_table_bodies_get_a_coded_error_naming_the_field_and_create_nothing() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(ServerConfig::new(&db, &env)).await;
    let with = |field: &str, value: &str| {
        let mut fields = vec![
            ("small_blind", "1"),
            ("big_blind", "2"),
            ("ante", "0"),
            ("seats", "6"),
            ("min_buy_in", "40"),
            ("max_buy_in", "200"),
        ];
        match fields.iter_mut().find(|(k, _)| *k == field) {
            Some(f) => f.1 = value,
            None => fields.push((field, value)),
        }
        let body: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        format!("{{{}}}", body.join(","))
    };
    let cases = [
        (
            with("max_buy_in", "9223372036854775808"),
            "bad_amount",
            "max_buy_in",
        ),
        (
            with("max_buy_in", "18446744073709551616"),
            "bad_amount",
            "max_buy_in",
        ),
        (with("max_buy_in", "1e30"), "bad_amount", "max_buy_in"),
        (with("big_blind", "-2"), "bad_amount", "big_blind"),
        (with("small_blind", "0.5"), "bad_amount", "small_blind"),
        (with("ante", "-1"), "bad_amount", "ante"),
        (with("min_buy_in", "\"40\""), "bad_field", "min_buy_in"),
        (with("seats", "11"), "bad_field", "seats"),
        (with("seats", "\"six\""), "bad_field", "seats"),
        (with("colour", "1"), "bad_field", "colour"),
        (
            "{\"small_blind\":1}".to_string(),
            "bad_field",
            "is required",
        ),
        ("not json".to_string(), "bad_json", "JSON"),
        ("[1,2]".to_string(), "bad_json", "object"),
    ];
    for (body, code, names) in cases {
        let (status, v) = post_raw(&server, "/admin/tables", &body).await;
        let (got, message) = code_and_message(&v);
        assert_eq!((status, got), (400, code), "{body} → {v}");
        assert!(
            message.contains(names),
            "{body}: message {message:?} should name {names}"
        );
        if code != "bad_json" {
            assert!(
                !message.contains("invalid type") && !message.contains("at line"),
                "{body}: raw parser message {message:?}"
            );
        }
    }
    let (_, tables) = server.admin_get("/admin/tables").await;
    assert_eq!(
        tables["tables"],
        serde_json::json!([]),
        "a table was created"
    );
}

#[tokio::test]
async fn bad_grants_get_a_coded_error_and_leave_the_balance_alone() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(ServerConfig::new(&db, &env)).await;
    server.grant("alice", 100).await;
    let cases = [
        (
            "{\"chips\":9223372036854775808}",
            "bad_amount",
            "9223372036854775807",
        ),
        (
            "{\"chips\":18446744073709551616}",
            "bad_amount",
            "9223372036854775807",
        ),
        ("{\"chips\":0}", "bad_amount", "chips"),
        ("{\"chips\":-5}", "bad_amount", "chips"),
        ("{\"chips\":\"100\"}", "bad_field", "must be a number"),
        ("{}", "bad_field", "chips is required"),
        ("{\"chips\":1,\"note\":\"x\"}", "bad_field", "note"),
        ("chips=100", "bad_json", "JSON"),
    ];
    for (body, code, says) in cases {
        let (status, v) = post_raw(&server, "/admin/players/alice/grant", body).await;
        let (got, message) = code_and_message(&v);
        assert_eq!((status, got), (400, code), "{body} → {v}");
        assert!(
            message.contains(says),
            "{body}: message {message:?} should say {says:?}"
        );
    }
    let (_, player) = server.admin_get("/admin/players/alice").await;
    assert_eq!(player["balance"], 100);
    let (_, audit) = server.admin_get("/admin/audit").await;
    assert_eq!(audit["delta"], 0);
}
