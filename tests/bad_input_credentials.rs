//! Credentials that do not verify, the rows of the "Bad input" tables in
//! docs/RELIABILITY.md that no other test proves: player tokens that are
//! expired, forged or malformed and relay query strings that are not a
//! credential are refused with 401 before the upgrade, and admin bearer
//! tokens that are not exactly the admin token get 401 and change nothing.
//! Bad frames and bad admin bodies are in `bad_input.rs`.

mod bad_input_shared;
mod common;
mod play;

use std::time::Duration;

use bad_input_shared::{code, raw};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use common::{mint_token, test_db, unique_env, Server, ServerConfig, WsClient, ADMIN_TOKEN};
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

const SECS: fn(u64) -> Duration = Duration::from_secs;

/// `GET path` with no credentials: the status and the body.
async fn get_unauthenticated(server: &Server, path: &str) -> (u16, Value) {
    raw(server, reqwest::Method::GET, path, None, None).await
}

fn sign(secret: &str, bytes: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("hmac key");
    mac.update(bytes);
    URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
}

/// A player token with any payload, signed with `secret`.
fn token(secret: &str, payload: &str) -> String {
    format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(payload),
        sign(secret, payload.as_bytes())
    )
}

fn unix_now() -> i64 {
    chrono::Utc::now().timestamp()
}

#[tokio::test]
async fn player_tokens_that_are_expired_forged_or_malformed_are_refused_before_the_upgrade() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(ServerConfig::new(&db, &env)).await;
    let now = unix_now();
    let valid = mint_token("alice");
    let (payload, sig) = valid.split_once('.').expect("a token has two parts");
    let flipped_sig = {
        let mut bytes = URL_SAFE_NO_PAD.decode(sig).expect("base64url");
        bytes[0] ^= 1;
        URL_SAFE_NO_PAD.encode(bytes)
    };
    let secret = common::AUTH_SECRET;
    let cases = [
        ("no token", String::new()),
        ("empty", "token=".to_string()),
        ("no dot", "token=abc".to_string()),
        ("given twice", format!("token={valid}&token={valid}")),
        ("not base64", "token=%21%21.%21%21".to_string()),
        ("truncated", format!("token={}", &valid[..valid.len() - 5])),
        (
            "signature flipped",
            format!("token={payload}.{flipped_sig}"),
        ),
        (
            "another player's payload with alice's signature",
            format!(
                "token={}.{sig}",
                URL_SAFE_NO_PAD.encode(format!(r#"{{"sub":"mallory","exp":{}}}"#, now + 3600))
            ),
        ),
        (
            "expired",
            format!(
                "token={}",
                token(secret, &format!(r#"{{"sub":"alice","exp":{}}}"#, now - 1))
            ),
        ),
        (
            "signed with another secret",
            format!(
                "token={}",
                token(
                    "guessed",
                    &format!(r#"{{"sub":"alice","exp":{}}}"#, now + 3600)
                )
            ),
        ),
        (
            "a signed name that is not a player name",
            format!(
                "token={}",
                token(
                    secret,
                    &format!(r#"{{"sub":"bad name!","exp":{}}}"#, now + 3600)
                )
            ),
        ),
        (
            "a signed name too long",
            format!(
                "token={}",
                token(
                    secret,
                    &format!(r#"{{"sub":"{}","exp":{}}}"#, "a".repeat(33), now + 3600)
                )
            ),
        ),
        (
            "a signed payload that is not the claims",
            format!("token={}", token(secret, r#"{"sub":7,"exp":"never"}"#)),
        ),
        (
            "a signed expiry beyond 64 bits",
            format!(
                "token={}",
                token(secret, r#"{"sub":"alice","exp":18446744073709551616}"#)
            ),
        ),
    ];
    for (why, query) in &cases {
        let (status, body) = get_unauthenticated(&server, &format!("/ws?{query}")).await;
        assert_eq!(
            (status, code(&body)),
            (401, "unauthorized"),
            "{why}: {body}"
        );
        // The WebSocket handshake itself is refused the same way.
        let url = format!("ws://{}/ws?{query}", server.addr);
        let err = WsClient::connect_url(&url).await.err();
        assert_eq!(
            err.as_ref().and_then(common::refused_status),
            Some(401),
            "{why}"
        );
    }
    // The genuine token still works, so the refusals were about the tokens.
    let mut alice = WsClient::connect(&server, &valid)
        .await
        .expect("the genuine token connects");
    alice.send(json!({"type": "ping"})).await;
    assert!(alice.recv_type("pong", SECS(5)).await.is_some());
}

#[tokio::test]
async fn relay_query_strings_that_are_not_a_credential_are_refused_before_the_upgrade() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(ServerConfig::new(&db, &env)).await;
    let now = chrono::Utc::now().timestamp_millis();
    let me = &server.cfg.instance_id;
    let signed = |player: &str, at: i64| {
        sign(
            common::AUTH_SECRET,
            format!("pitboss-relay-v1\nrelay-x\n{me}\n{player}\n{at}").as_bytes(),
        )
    };
    let good_sig = signed("alice", now);
    let bad_name_sig = signed("bad name", now);
    for (why, query) in [
        ("nothing", String::new()),
        (
            "no signature",
            format!("player=alice&from=relay-x&at={now}"),
        ),
        (
            "an empty signature",
            format!("player=alice&from=relay-x&at={now}&sig="),
        ),
        (
            "a signature that is not base64",
            format!("player=alice&from=relay-x&at={now}&sig=%21%21"),
        ),
        (
            "another sender",
            format!("player=alice&from=relay-y&at={now}&sig={good_sig}"),
        ),
        (
            "another time",
            format!("player=alice&from=relay-x&at={}&sig={good_sig}", now + 1),
        ),
        (
            "a signed name that is not a player name",
            format!("player=bad%20name&from=relay-x&at={now}&sig={bad_name_sig}"),
        ),
    ] {
        let (status, body) = get_unauthenticated(&server, &format!("/ws/relay?{query}")).await;
        assert_eq!(
            (status, code(&body)),
            (401, "unauthorized"),
            "{why}: {body}"
        );
    }
    // Parameters that do not parse make a credential that cannot verify:
    // refused the same way, not as a bad request.
    for at in [
        "soon".to_string(),
        "1e3".to_string(),
        "99999999999999999999".to_string(),
        format!("{now}&at={now}"),
    ] {
        let query = format!("player=alice&from=relay-x&at={at}&sig={good_sig}");
        let (status, body) = get_unauthenticated(&server, &format!("/ws/relay?{query}")).await;
        assert_eq!(
            (status, code(&body)),
            (401, "unauthorized"),
            "at={at}: {body}"
        );
    }
    // Each of the eleven refusals above was counted as a refused relay.
    let (_, m) = server.get("/metrics").await;
    assert_eq!(play::metric(&m, "pitboss_relays_refused_total "), 11.0);
}

#[tokio::test]
async fn admin_bearer_tokens_that_are_not_exactly_the_admin_token_get_401_and_change_nothing() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(ServerConfig::new(&db, &env)).await;
    server.grant("alice", 100).await;
    let long = format!("Bearer {}", "x".repeat(4096));
    for auth in [
        format!("bearer {ADMIN_TOKEN}"),
        format!("BEARER {ADMIN_TOKEN}"),
        format!("Bearer  {ADMIN_TOKEN}"),
        format!("Bearer {ADMIN_TOKEN}x"),
        format!("Bearer {}", &ADMIN_TOKEN[..ADMIN_TOKEN.len() - 1]),
        format!(
            "Basic {}",
            URL_SAFE_NO_PAD.encode(format!("admin:{ADMIN_TOKEN}"))
        ),
        ADMIN_TOKEN.to_string(),
        "Bearer ".to_string(),
        long,
    ] {
        let (status, body) = raw(
            &server,
            reqwest::Method::POST,
            "/admin/players/alice/grant",
            Some(&auth),
            Some(br#"{"chips":1000}"#.to_vec()),
        )
        .await;
        assert_eq!(
            (status, code(&body)),
            (401, "unauthorized"),
            "{auth:.40}: {body}"
        );
    }
    let (_, alice) = server.admin_get("/admin/players/alice").await;
    assert_eq!(alice["balance"], 100, "{alice}");
}
