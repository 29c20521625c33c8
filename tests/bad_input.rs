//! Bad frames and bad admin requests, the rows of the "Bad input" tables
//! in docs/RELIABILITY.md that no other test proves: each gets its coded
//! answer (an `error` frame, or an HTTP status with the JSON error body),
//! and afterwards wallets, stacks, seats and tables are as they were.
//! Credentials that do not verify are in `bad_input_credentials.rs`.

mod bad_input_shared;
mod common;
mod play;

use std::time::Duration;

use bad_input_shared::{code, raw};
use common::{mint_token, test_db, unique_env, Server, ServerConfig, WsClient, ADMIN_TOKEN};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::Message;

const SECS: fn(u64) -> Duration = Duration::from_secs;

/// A server whose tables stand still while bad input arrives: a long action
/// clock, so a turn waits for the frames the test sends, and a rate limit
/// that lets a test send them in one go.
async fn still_server(db: &common::TestDb, env: &str) -> Server {
    Server::start(
        ServerConfig::new(db, env)
            .with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "60000")
            .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "200")
            .with_env("PITBOSS__WS__RATE_PER_SEC", "1000")
            .with_env("PITBOSS__WS__RATE_BURST", "1000"),
    )
    .await
}

/// Sends raw `text`; the `error` it gets must carry `code`, and the
/// connection must still answer a ping.
async fn refused(c: &mut WsClient, text: &str, code: &str) {
    c.send_text(text).await;
    let err = c
        .recv_type("error", SECS(5))
        .await
        .unwrap_or_else(|| panic!("no error for {text}: {:?}", c.seen));
    assert_eq!(err["code"], code, "{text} -> {err}");
    c.send(json!({"type": "ping"})).await;
    assert!(
        c.recv_type("pong", SECS(5)).await.is_some(),
        "no pong after {text}: {:?}",
        c.closed
    );
}

/// What the money and the seats look like: the audit, the table's seats
/// and the wallets of `players`.
async fn books(server: &Server, table: &str, players: &[&str]) -> Value {
    let mut wallets = Vec::new();
    for p in players {
        let (status, w) = server.admin_get(&format!("/admin/players/{p}")).await;
        assert_eq!(status, 200, "{w}");
        wallets.push(w);
    }
    json!({
        "audit": server.audit().await,
        "seats": server.table(table).await["seats"],
        "wallets": wallets,
    })
}

#[tokio::test]
async fn malformed_frames_get_a_frame_code_keep_the_connection_and_change_nothing() {
    let db = test_db().await;
    let env = unique_env();
    let server = still_server(&db, &env).await;
    let (t, mut alice, _bob) = play::heads_up(&server, 100).await;
    alice
        .client
        .recv_event("turn", SECS(10))
        .await
        .expect("a hand is dealt");
    let before = books(&server, &t, &["alice", "bob"]).await;

    let deep = format!(
        r#"{{"type":"join","table":"{t}","since":{}{}}}"#,
        "[".repeat(1000),
        "]".repeat(1000)
    );
    let long_id = "t".repeat(65);
    let cases: Vec<(String, &str)> = vec![
        // Truncated, not JSON, or JSON that is not an object.
        (
            format!(r#"{{"type":"sit","table":"{t}","seat":2,"buy_in":1"#),
            "bad_json",
        ),
        (r#"{"type":"ping""#.into(), "bad_json"),
        ("".into(), "bad_json"),
        ("[1,2]".into(), "bad_json"),
        (r#""join""#.into(), "bad_json"),
        ("null".into(), "bad_json"),
        // Nested deeper than the parser goes, within the size limit.
        (deep, "bad_json"),
        // Numbers JSON cannot hold as a number at all.
        (
            format!(r#"{{"type":"join","table":"{t}","since":1e400}}"#),
            "bad_json",
        ),
        // Wrong types and missing fields.
        (r#"{"type":7}"#.into(), "bad_field"),
        ("{}".into(), "bad_field"),
        (r#"{"type":"JOIN","table":"x"}"#.into(), "unknown_type"),
        (r#"{"type":"join","table":7}"#.into(), "bad_field"),
        (
            format!(r#"{{"type":"join","table":"{t}","since":"4"}}"#),
            "bad_field",
        ),
        (
            format!(r#"{{"type":"sit","table":"{t}","seat":256,"buy_in":100}}"#),
            "bad_field",
        ),
        (
            format!(r#"{{"type":"sit","table":"{t}","seat":-1,"buy_in":100}}"#),
            "bad_field",
        ),
        (
            format!(r#"{{"type":"sit","table":"{t}","seat":2}}"#),
            "bad_field",
        ),
        (
            format!(r#"{{"type":"act","table":"{t}","hand":1,"decision":1,"action":["fold"]}}"#),
            "bad_field",
        ),
        // Huge or negative counters.
        (
            format!(
                r#"{{"type":"act","table":"{t}","hand":18446744073709551616,"decision":1,"action":"fold"}}"#
            ),
            "bad_field",
        ),
        (
            format!(r#"{{"type":"act","table":"{t}","hand":1,"decision":-1,"action":"fold"}}"#),
            "bad_field",
        ),
        // Amounts: negative, zero, fractional, beyond 2^63−1 and 2^64.
        (
            format!(r#"{{"type":"sit","table":"{t}","seat":2,"buy_in":-100}}"#),
            "bad_amount",
        ),
        (
            format!(r#"{{"type":"sit","table":"{t}","seat":2,"buy_in":0}}"#),
            "bad_amount",
        ),
        (
            format!(r#"{{"type":"sit","table":"{t}","seat":2,"buy_in":100.5}}"#),
            "bad_amount",
        ),
        (
            format!(r#"{{"type":"sit","table":"{t}","seat":2,"buy_in":9223372036854775808}}"#),
            "bad_amount",
        ),
        (
            format!(
                r#"{{"type":"act","table":"{t}","hand":1,"decision":1,"action":"raise","amount":18446744073709551616}}"#
            ),
            "bad_amount",
        ),
        (
            format!(
                r#"{{"type":"act","table":"{t}","hand":1,"decision":1,"action":"bet","amount":1e30}}"#
            ),
            "bad_amount",
        ),
        // Table ids that could never exist.
        (
            format!(r#"{{"type":"join","table":"{long_id}"}}"#),
            "table_not_found",
        ),
        (
            r#"{"type":"join","table":"../tbl"}"#.into(),
            "table_not_found",
        ),
        (
            r#"{"type":"join","table":"tbl x"}"#.into(),
            "table_not_found",
        ),
        (r#"{"type":"join","table":""}"#.into(), "table_not_found"),
    ];
    for (text, want) in &cases {
        refused(&mut alice.client, text, want).await;
    }
    // The hand goes on untouched: the turn is still open, nothing moved.
    assert_eq!(books(&server, &t, &["alice", "bob"]).await, before);
    assert!(
        !alice.client.seen.iter().any(|v| v["kind"] == "action"
            && v["action"] != "small_blind"
            && v["action"] != "big_blind"),
        "an action happened: {:?}",
        alice.client.seen
    );
}

#[tokio::test]
async fn frames_aimed_at_another_players_seat_or_an_unjoined_table_change_nothing() {
    let db = test_db().await;
    let env = unique_env();
    let server = still_server(&db, &env).await;
    let (t, mut actor, mut waiter, turn) = play::heads_up_first_turn(&server, 100).await;
    server.grant("carol", 1000).await;
    server.grant("dave", 1000).await;
    let (hand, decision, to_act) = (
        turn["hand"].clone(),
        turn["decision"].clone(),
        turn["seat"].clone(),
    );
    let before = books(&server, &t, &["alice", "bob", "carol", "dave"]).await;

    // The waiting player names the actor's seat: the seat comes from the
    // token, so it is still not their turn.
    refused(
        &mut waiter.client,
        &json!({"type": "act", "table": t, "seat": to_act, "hand": hand, "decision": decision, "action": "fold"}).to_string(),
        "not_your_turn",
    )
    .await;
    // A watcher acting, leaving or sitting on a taken seat.
    let mut carol = WsClient::connect(&server, &mint_token("carol"))
        .await
        .expect("carol connects");
    carol.send(json!({"type": "join", "table": t})).await;
    carol
        .recv_type("snapshot", SECS(5))
        .await
        .expect("snapshot");
    for (frame, want) in [
        (
            json!({"type": "act", "table": t, "seat": to_act, "hand": hand, "decision": decision, "action": "fold"}),
            "not_seated",
        ),
        (
            json!({"type": "leave", "table": t, "seat": to_act}),
            "not_seated",
        ),
        (
            json!({"type": "sit", "table": t, "seat": to_act, "buy_in": 100}),
            "seat_taken",
        ),
    ] {
        refused(&mut carol, &frame.to_string(), want).await;
    }
    // A player who never joined the table.
    let mut dave = WsClient::connect(&server, &mint_token("dave"))
        .await
        .expect("dave connects");
    for frame in [
        json!({"type": "sit", "table": t, "seat": 3, "buy_in": 100}),
        json!({"type": "act", "table": t, "hand": hand, "decision": decision, "action": "fold"}),
        json!({"type": "leave", "table": t}),
    ] {
        refused(&mut dave, &frame.to_string(), "not_joined").await;
    }
    assert_eq!(
        books(&server, &t, &["alice", "bob", "carol", "dave"]).await,
        before
    );

    // The turn is still the actor's, under the same decision.
    actor
        .client
        .send(json!({"type": "act", "table": t, "hand": hand, "decision": decision, "action": "call"}))
        .await;
    let action = actor
        .client
        .recv_until(|v| v["kind"] == "action" && v["action"] == "call", SECS(5))
        .await
        .unwrap_or_else(|| panic!("the actor's call: {:?}", actor.client.seen));
    assert_eq!(action["seat"], to_act, "{action}");
}

#[tokio::test]
async fn binary_frames_are_bad_json_and_text_that_is_not_utf8_closes_with_1007() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(ServerConfig::new(&db, &env)).await;
    let mut c = WsClient::connect(&server, &mint_token("alice"))
        .await
        .expect("connect");
    c.try_send(Message::Binary(br#"{"type":"ping"}"#.to_vec()))
        .await
        .expect("send");
    let err = c.recv_type("error", SECS(5)).await.expect("an error");
    assert_eq!(err["code"], "bad_json", "{err}");
    c.send(json!({"type": "ping"})).await;
    assert!(c.recv_type("pong", SECS(5)).await.is_some());

    // One text frame that is not UTF-8 closes the connection with 1007,
    // and the next connection is served as usual.
    let frame = Frame::message(vec![b'{', 0xff, 0xfe, b'}'], OpCode::Data(Data::Text), true);
    c.try_send(Message::Frame(frame)).await.expect("send");
    assert_eq!(
        c.expect_close(SECS(5)).await,
        Some((1007, "bad_utf8".to_string())),
        "{:?}",
        c.seen
    );
    let mut again = WsClient::connect(&server, &mint_token("alice"))
        .await
        .expect("connect again");
    again.send(json!({"type": "ping"})).await;
    assert!(again.recv_type("pong", SECS(5)).await.is_some());

    // The same bytes in fragments close it the same way.
    for (bytes, opcode, last) in [
        (&b"{\xff"[..], Data::Text, false),
        (&b"\xfe}"[..], Data::Continue, true),
    ] {
        let frame = Frame::message(bytes.to_vec(), OpCode::Data(opcode), last);
        again.try_send(Message::Frame(frame)).await.expect("send");
    }
    let close = again.expect_close(SECS(5)).await;
    assert_eq!(
        close,
        Some((1007, "bad_utf8".to_string())),
        "{:?}",
        again.seen
    );
}

#[tokio::test]
async fn refused_admin_bodies_and_paths_change_nothing() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(ServerConfig::new(&db, &env)).await;
    let t = play::new_table(&server).await;
    server.grant("alice", 100).await;
    let before = books(&server, &t, &["alice"]).await;
    let bearer = format!("Bearer {ADMIN_TOKEN}");
    let post = |path: String, body: &[u8]| {
        let (server, bearer, body) = (&server, bearer.clone(), body.to_vec());
        async move {
            raw(
                server,
                reqwest::Method::POST,
                &path,
                Some(&bearer),
                Some(body),
            )
            .await
        }
    };
    let overflow = br#"{"small_blind":1,"big_blind":2,"ante":0,"seats":6,"min_buy_in":40,"max_buy_in":9223372036854775807}"#;
    let cases: Vec<(String, &[u8], u16, &str)> = vec![
        // A config whose full table would not fit in 64 bits of chips.
        ("/admin/tables".into(), overflow, 400, "bad_field"),
        ("/admin/tables".into(), b"", 400, "bad_json"),
        (
            "/admin/tables".into(),
            br#"{"small_blind":1"#,
            400,
            "bad_json",
        ),
        // Freeze: only an "operator" reason, and nothing else.
        (
            format!("/admin/tables/{t}/freeze"),
            br#"{"reason":"lease_lost"}"#,
            400,
            "bad_field",
        ),
        (
            format!("/admin/tables/{t}/freeze"),
            br#"{"reason":"operator","force":true}"#,
            400,
            "bad_field",
        ),
        (
            format!("/admin/tables/{t}/freeze"),
            b"operator",
            400,
            "bad_json",
        ),
        // Move: `to` must name a live instance.
        (format!("/admin/tables/{t}/move"), b"{}", 400, "bad_field"),
        (
            format!("/admin/tables/{t}/move"),
            br#"{"to":""}"#,
            400,
            "bad_field",
        ),
        (
            format!("/admin/tables/{t}/move"),
            br#"{"to":7}"#,
            400,
            "bad_field",
        ),
        (
            format!("/admin/tables/{t}/move"),
            br#"{"to":"inst-a","now":true}"#,
            400,
            "bad_field",
        ),
        (
            format!("/admin/tables/{t}/move"),
            br#"{"to":"inst-nowhere"}"#,
            409,
            "not_live",
        ),
        // Paths: names and ids that could never exist.
        (
            "/admin/players/bad%20name/grant".into(),
            br#"{"chips":5}"#,
            400,
            "bad_field",
        ),
        (
            format!("/admin/players/{}/grant", "a".repeat(33)),
            br#"{"chips":5}"#,
            400,
            "bad_field",
        ),
        (
            "/admin/tables/tbl%2F..%2Fx/freeze".into(),
            b"",
            404,
            "table_not_found",
        ),
        (
            format!("/admin/tables/{}/freeze", "t".repeat(65)),
            b"",
            404,
            "table_not_found",
        ),
        (
            "/admin/tables/tbl_0000000000000000/freeze".into(),
            b"",
            404,
            "table_not_found",
        ),
        (
            "/admin/tables/tbl_0000000000000000/dispose".into(),
            b"",
            404,
            "table_not_found",
        ),
    ];
    for (path, body, status, want) in cases {
        let (got, answer) = post(path.clone(), body).await;
        assert_eq!(
            (got, code(&answer)),
            (status, want),
            "{path} {} -> {answer}",
            String::from_utf8_lossy(body)
        );
    }
    for path in ["/admin/players/bad%20name", "/admin/tables/t%20x"] {
        let (status, answer) = raw(&server, reqwest::Method::GET, path, Some(&bearer), None).await;
        assert!(
            matches!(
                (status, code(&answer)),
                (400, "bad_field") | (404, "table_not_found")
            ),
            "{path}: {status} {answer}"
        );
    }
    // A body far over any real request is refused, not read into memory.
    let huge = format!(r#"{{"chips":1,"pad":"{}"}}"#, "x".repeat(1 << 20)).into_bytes();
    let (status, answer) = post("/admin/players/alice/grant".into(), &huge).await;
    assert_eq!((status, code(&answer)), (413, "too_large"), "{answer}");

    assert_eq!(books(&server, &t, &["alice"]).await, before);
    let view = server.table(&t).await;
    assert_eq!(view["state"], "open", "{view}");
    let (_, tables) = server.admin_get("/admin/tables").await;
    assert_eq!(
        tables["tables"].as_array().map(Vec::len),
        Some(1),
        "{tables}"
    );
}
