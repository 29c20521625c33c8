//! A WebSocket connection once its upgrade is answered: the socket leaves
//! the HTTP layer for the session, which reads and writes it itself. These
//! pin what that hand-over must keep: bytes the client sent right behind
//! its upgrade request, other routes' answers to a request that asks to
//! upgrade, the closing handshake, and frames that wait for a client that
//! reads late.

mod common;

use std::time::Duration;

use common::{mint_token, test_db, unique_env, Server, ServerConfig, WsClient};
use futures::{SinkExt as _, StreamExt as _};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;

const SECS: fn(u64) -> Duration = Duration::from_secs;

/// An HTTP/1.1 request asking to upgrade `path` to a WebSocket.
fn upgrade_request(path: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: pitboss\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    )
}

/// A client's text frame: final, masked as the protocol requires.
fn masked_text(text: &str) -> Vec<u8> {
    let payload = text.as_bytes();
    assert!(payload.len() < 126, "short frames only");
    let mask = [0x5a, 0x13, 0xc7, 0x81];
    let mut frame = vec![0x81, 0x80 | payload.len() as u8];
    frame.extend_from_slice(&mask);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    frame
}

/// Everything the server sends until it closes the connection.
async fn read_to_end(stream: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    tokio::time::timeout(SECS(10), stream.read_to_end(&mut out))
        .await
        .expect("the server closes the connection")
        .expect("read");
    out
}

/// Splits an HTTP response into its status line, head and body.
fn response(bytes: &[u8]) -> (String, String, Vec<u8>) {
    let end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no response head in {:?}", String::from_utf8_lossy(bytes)));
    let head = String::from_utf8_lossy(&bytes[..end]).to_string();
    let status = head.lines().next().unwrap_or_default().to_string();
    (status, head, bytes[end + 4..].to_vec())
}

#[tokio::test]
async fn a_frame_sent_right_behind_the_upgrade_request_is_answered() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(ServerConfig::new(&db, &env)).await;
    let mut stream = TcpStream::connect(server.addr).await.expect("connect");
    // One write: the HTTP layer reads the ping along with the request, and
    // must hand it to the session with the socket.
    let mut bytes = upgrade_request(&format!("/ws?token={}", mint_token("alice"))).into_bytes();
    bytes.extend(masked_text(r#"{"type":"ping"}"#));
    stream.write_all(&bytes).await.expect("write");

    let mut got = Vec::new();
    let pong = br#"{"type":"pong"}"#;
    let deadline = tokio::time::Instant::now() + SECS(10);
    let (status, frames) = loop {
        let mut chunk = [0u8; 1024];
        let n = tokio::time::timeout_at(deadline, stream.read(&mut chunk))
            .await
            .expect("a pong in time")
            .expect("read");
        assert!(n > 0, "closed early: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&chunk[..n]);
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let frames = &got[end + 4..];
            if frames.len() >= 2 + pong.len() {
                let status = String::from_utf8_lossy(&got[..end]).to_string();
                break (status, frames.to_vec());
            }
        }
    };
    assert!(status.starts_with("HTTP/1.1 101"), "{status}");
    // An unmasked final text frame holding the pong.
    assert_eq!(frames[0], 0x81, "{frames:?}");
    assert_eq!(usize::from(frames[1]), pong.len(), "{frames:?}");
    assert_eq!(&frames[2..2 + pong.len()], pong);
}

#[tokio::test]
async fn an_upgrade_request_gets_the_routes_answer_when_it_is_not_taken_and_the_connection_closes()
{
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(ServerConfig::new(&db, &env)).await;

    // A route that is not a WebSocket answers as it always does.
    let mut stream = TcpStream::connect(server.addr).await.expect("connect");
    stream
        .write_all(upgrade_request("/healthz").as_bytes())
        .await
        .expect("write");
    let (status, head, body) = response(&read_to_end(&mut stream).await);
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert!(
        head.to_ascii_lowercase().contains("connection: close"),
        "{head}"
    );
    let body: Value = serde_json::from_slice(&body).expect("JSON body");
    assert_eq!(body, json!({"status": "ok"}));

    // A refused upgrade gets the coded JSON error, like any refusal.
    for (path, code) in [
        ("/ws?token=forged".to_string(), "unauthorized"),
        (
            "/ws/relay?player=p&from=i&at=1&sig=x".to_string(),
            "unauthorized",
        ),
    ] {
        let mut stream = TcpStream::connect(server.addr).await.expect("connect");
        stream
            .write_all(upgrade_request(&path).as_bytes())
            .await
            .expect("write");
        let (status, _, body) = response(&read_to_end(&mut stream).await);
        assert!(status.starts_with("HTTP/1.1 401"), "{path}: {status}");
        let body: Value = serde_json::from_slice(&body).expect("JSON body");
        assert_eq!(body["error"]["code"], code, "{path}: {body}");
    }

    // Nothing of those connections stayed open as a session.
    let (_, metrics) = server.get("/metrics").await;
    assert!(
        metrics.lines().any(|l| l == "pitboss_ws_connections 0"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_client_close_is_answered_with_its_code_and_the_server_closes_the_socket() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(ServerConfig::new(&db, &env)).await;
    let (mut ws, _) = tokio_tungstenite::connect_async(server.ws_url(&mint_token("alice")))
        .await
        .expect("upgrade");
    ws.send(Message::Close(Some(CloseFrame {
        code: CloseCode::Away,
        reason: "bye".into(),
    })))
    .await
    .expect("close");
    let answer = tokio::time::timeout(SECS(5), ws.next())
        .await
        .expect("an answer in time");
    match answer {
        Some(Ok(Message::Close(Some(frame)))) => assert_eq!(frame.code, CloseCode::Away),
        other => panic!("expected the close echoed, got {other:?}"),
    }
    // Then the socket ends.
    let end = tokio::time::timeout(SECS(5), ws.next())
        .await
        .expect("the end in time");
    assert!(
        matches!(end, None | Some(Err(_))),
        "nothing follows a close: {end:?}"
    );
    let gone = common::eventually(SECS(5), Duration::from_millis(50), || async {
        let (_, metrics) = server.get("/metrics").await;
        metrics.lines().any(|l| l == "pitboss_ws_connections 0")
    })
    .await;
    assert!(gone, "the session ended with its socket");
}

#[tokio::test]
async fn frames_waiting_for_a_client_that_reads_late_all_arrive_whole_and_in_order() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(
        ServerConfig::new(&db, &env)
            .with_env("PITBOSS__WS__OUTBOUND_QUEUE_BYTES", "67108864")
            .with_env("PITBOSS__WS__RATE_PER_SEC", "1000000")
            .with_env("PITBOSS__WS__RATE_BURST", "1000000"),
    )
    .await;
    let table = server.create_table(common::table_config()).await["id"]
        .as_str()
        .expect("id")
        .to_string();

    // A small receive window and no reading for a while: what the joins
    // answer outgrows the kernel's buffers and waits in the session's
    // write queue.
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(2048).expect("SO_RCVBUF");
    let stream = socket.connect(server.addr).await.expect("connect");
    let (ws, _) = tokio_tungstenite::client_async(server.ws_url(&mint_token("alice")), stream)
        .await
        .expect("upgrade");
    let (mut tx, mut rx) = ws.split();
    const JOINS: usize = 12_000;
    let join = json!({"type": "join", "table": table}).to_string();
    for _ in 0..JOINS {
        tx.feed(Message::Text(join.clone())).await.expect("send");
    }
    tx.send(Message::Text(r#"{"type":"ping"}"#.into()))
        .await
        .expect("send");
    tokio::time::sleep(SECS(2)).await;

    let mut snapshots = 0usize;
    let mut bytes = 0usize;
    let deadline = tokio::time::Instant::now() + SECS(120);
    loop {
        let next = tokio::time::timeout_at(deadline, rx.next())
            .await
            .expect("every frame in time");
        let Some(Ok(Message::Text(text))) = next else {
            panic!("after {snapshots} snapshots: {next:?}");
        };
        bytes += text.len();
        let frame: Value = serde_json::from_str(&text).expect("a whole JSON frame");
        match frame["type"].as_str() {
            Some("snapshot") => snapshots += 1,
            // The ping was sent last, so it is answered last.
            Some("pong") => break,
            _ => panic!("unexpected frame {frame}"),
        }
    }
    assert_eq!(snapshots, JOINS, "one snapshot per join, then the pong");
    // More than the kernel's buffers hold on both ends together (the
    // server's send buffer grows to 4 MiB at most by default).
    assert!(bytes > 5 << 20, "only {bytes} bytes: raise JOINS");
    let _ = WsClient::connect(&server, &mint_token("bob"))
        .await
        .expect("the server still serves");
}
