//! `POST /admin/players/{player}/token`: player tokens for clients that
//! hold only the admin token (the load generator, scripted players).

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{test_db, unique_env, Server, ServerConfig, WsClient};
use serde_json::{json, Value};

const TOKEN_LIFETIME_SECS: i64 = 30 * 24 * 3600;

fn unix_now() -> i64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970");
    i64::try_from(since_epoch.as_secs()).expect("seconds fit in i64")
}

#[tokio::test]
async fn a_token_minted_by_the_admin_api_plays_as_that_player_for_thirty_days() {
    let mut db = test_db().await;
    let env = unique_env();
    let server = Server::start(ServerConfig::new(&db, &env)).await;

    let before = unix_now();
    let (status, body) = server
        .admin_post("/admin/players/alice/token", json!({}))
        .await;
    let after = unix_now();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["player"], "alice", "{body}");
    let token = body["token"].as_str().expect("a token string").to_string();
    let expires_at = body["expires_at"].as_i64().expect("expires_at in seconds");
    assert!(
        (before + TOKEN_LIFETIME_SECS..=after + TOKEN_LIFETIME_SECS).contains(&expires_at),
        "expires_at {expires_at} is not 30 days after {before}..={after}"
    );

    // The WebSocket takes it, and the seat it buys is alice's.
    let table = server.create_table(common::table_config()).await["id"]
        .as_str()
        .expect("table id")
        .to_string();
    server.grant("alice", 500).await;
    let mut alice = WsClient::connect(&server, &token)
        .await
        .expect("the minted token is accepted");
    alice.send(json!({"type": "join", "table": table})).await;
    alice
        .recv_type("snapshot", Duration::from_secs(10))
        .await
        .expect("a snapshot after join");
    alice
        .send(json!({"type": "sit", "table": table, "seat": 0, "buy_in": 100}))
        .await;
    let seated = alice
        .recv_event("seated", Duration::from_secs(10))
        .await
        .unwrap_or_else(|| panic!("no seated event; frames: {:?}", alice.seen));
    assert_eq!(seated["player"], "alice", "{seated}");
    alice.close().await;

    drop(server);
    db.drop_db().await;
}

#[tokio::test]
async fn minting_a_token_needs_the_admin_token_and_a_valid_player_name() {
    let mut db = test_db().await;
    let env = unique_env();
    let server = Server::start(ServerConfig::new(&db, &env)).await;
    let path = "/admin/players/alice/token";

    for bearer in [None, Some("not-the-admin-token")] {
        let (status, text) = server
            .request(reqwest::Method::POST, path, bearer, None)
            .await;
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        assert_eq!(status, 401, "bearer {bearer:?}: {body}");
        assert_eq!(body["error"]["code"], "unauthorized", "{body}");
        assert!(body.get("token").is_none(), "{body}");
    }

    let too_long = "x".repeat(33);
    for name in ["bad!name", "a%20b", too_long.as_str()] {
        let (status, body) = server
            .admin_post(&format!("/admin/players/{name}/token"), json!({}))
            .await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (400, Some("bad_field")),
            "{name}: {body}"
        );
    }

    drop(server);
    db.drop_db().await;
}
