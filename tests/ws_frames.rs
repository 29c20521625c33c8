//! WebSocket framing the protocol does not spell out: fragmented messages
//! are put back together (within the frame-size limit), and every inbound
//! message, binary and ping frames included, spends from the rate limit,
//! whose strikes are forgiven once a client has been calm.

mod common;

use std::time::Duration;

use common::{mint_token, test_db, unique_env, Server, ServerConfig, WsClient};
use serde_json::Value;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::Message;

const SECS: fn(u64) -> Duration = Duration::from_secs;

fn fragment(data: &[u8], opcode: Data, last: bool) -> Message {
    Message::Frame(Frame::message(data.to_vec(), OpCode::Data(opcode), last))
}

/// Sends `text` as a message in `parts` fragments.
async fn send_fragmented(c: &mut WsClient, text: &str, parts: usize) {
    let bytes = text.as_bytes();
    let size = bytes.len().div_ceil(parts);
    let chunks: Vec<&[u8]> = bytes.chunks(size).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        let opcode = if i == 0 { Data::Text } else { Data::Continue };
        c.try_send(fragment(chunk, opcode, i + 1 == chunks.len()))
            .await
            .expect("send fragment");
    }
}

#[tokio::test]
async fn a_fragmented_message_is_put_back_together_and_answered() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(ServerConfig::new(&db, &env)).await;
    let table = server.create_table(common::table_config()).await["id"]
        .as_str()
        .expect("id")
        .to_string();
    let mut c = WsClient::connect(&server, &mint_token("alice"))
        .await
        .expect("connect");
    send_fragmented(
        &mut c,
        &format!(r#"{{"type":"join","table":"{table}"}}"#),
        3,
    )
    .await;
    let snapshot = c.recv_type("snapshot", SECS(5)).await;
    assert!(snapshot.is_some(), "no snapshot: {:?}", c.seen);
    send_fragmented(&mut c, r#"{"type":"ping"}"#, 2).await;
    assert!(c.recv_type("pong", SECS(5)).await.is_some(), "{:?}", c.seen);
}

#[tokio::test]
async fn a_fragmented_message_over_the_size_limit_closes_with_1009() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(
        ServerConfig::new(&db, &env).with_env("PITBOSS__WS__MAX_FRAME_BYTES", "1024"),
    )
    .await;
    let mut c = WsClient::connect(&server, &mint_token("alice"))
        .await
        .expect("connect");
    // Each fragment is under the limit; the message is not.
    let text = format!(r#"{{"type":"ping","pad":"{}"}}"#, "x".repeat(3000));
    send_fragmented(&mut c, &text, 4).await;
    let close = c.expect_close(SECS(5)).await;
    assert_eq!(close.map(|(code, _)| code), Some(1009), "{:?}", c.seen);
}

#[tokio::test]
async fn binary_and_ping_frames_spend_from_the_rate_limit() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(
        ServerConfig::new(&db, &env)
            .with_env("PITBOSS__WS__RATE_PER_SEC", "5")
            .with_env("PITBOSS__WS__RATE_BURST", "5")
            .with_env("PITBOSS__WS__RATE_STRIKES", "3"),
    )
    .await;
    for flood in [Message::Ping(vec![1]), Message::Binary(vec![1, 2, 3])] {
        let mut c = WsClient::connect(&server, &mint_token("alice"))
            .await
            .expect("connect");
        for _ in 0..20 {
            if c.try_send(flood.clone()).await.is_err() {
                break;
            }
        }
        let close = c.expect_close(SECS(5)).await;
        assert_eq!(
            close,
            Some((1008, "rate_limited".to_string())),
            "{flood:?}: {:?}",
            c.seen
        );
    }
}

#[tokio::test]
async fn rate_limit_strikes_are_forgiven_after_a_calm_spell() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(
        ServerConfig::new(&db, &env)
            .with_env("PITBOSS__WS__RATE_PER_SEC", "20")
            .with_env("PITBOSS__WS__RATE_BURST", "3")
            .with_env("PITBOSS__WS__RATE_STRIKES", "2"),
    )
    .await;
    let mut c = WsClient::connect(&server, &mint_token("alice"))
        .await
        .expect("connect");
    // Six short bursts, each one frame over the burst (one strike each),
    // each followed by a pause long enough to refill the whole burst.
    for round in 0..6 {
        for _ in 0..4 {
            c.send_text(r#"{"type":"ping"}"#).await;
        }
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(
            c.closed.is_none(),
            "closed after round {round}: {:?}",
            c.closed
        );
    }
    let limited = |seen: &[Value]| {
        seen.iter()
            .filter(|v| v["type"] == "error" && v["code"] == "rate_limited")
            .count()
    };
    c.send_text(r#"{"type":"ping"}"#).await;
    let mut pongs = 0;
    while let Some(v) = c.recv_json(Duration::from_millis(500)).await {
        pongs += usize::from(v["type"] == "pong");
    }
    assert!(
        c.closed.is_none(),
        "closed: {:?} after {:?}",
        c.closed,
        c.seen
    );
    assert!(pongs > 0, "the connection still answers: {:?}", c.seen);
    assert!(
        limited(&c.seen) >= 3,
        "each burst went over the limit: {:?}",
        c.seen
    );
}

#[tokio::test]
async fn a_continuation_of_nothing_closes_with_1002() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(ServerConfig::new(&db, &env)).await;
    let mut c = WsClient::connect(&server, &mint_token("alice"))
        .await
        .expect("connect");
    c.try_send(fragment(br#"{"type":"ping"}"#, Data::Continue, true))
        .await
        .expect("send");
    let close = c.expect_close(SECS(5)).await;
    assert_eq!(
        close,
        Some((1002, "bad_fragments".to_string())),
        "{:?}",
        c.seen
    );
}
