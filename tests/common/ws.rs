//! WebSocket clients of a test server, as a browser or bot would connect.

use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub use tokio_tungstenite::tungstenite::Error as WsError;

use super::server::Server;

impl Server {
    /// `ws://<addr>/ws?token=<token>`
    pub fn ws_url(&self, token: &str) -> String {
        format!("ws://{}/ws?token={}", self.addr, percent_encode(token))
    }
}

fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

type Ws = WebSocketStream<MaybeTlsStream<tokio::net::TcpStream>>;

/// A player's WebSocket connection. Every JSON frame received is kept in
/// `seen`, in order, for assertions after the fact.
pub struct WsClient {
    ws: Ws,
    pub seen: Vec<Value>,
    /// `(code, reason)` once the server closed; 1005 for a close frame
    /// without a code, 1006 for a connection that ended without one.
    pub closed: Option<(u16, String)>,
}

impl WsClient {
    /// Connects to `ws://addr/ws?token=...`. A refused upgrade comes back as
    /// `WsError::Http(response)` with the status (401 for a bad token).
    pub async fn connect(server: &Server, token: &str) -> Result<WsClient, WsError> {
        WsClient::connect_url(&server.ws_url(token)).await
    }

    /// Connects to any URL, e.g. `/ws` with no token at all.
    pub async fn connect_url(url: &str) -> Result<WsClient, WsError> {
        let (ws, _response) = tokio_tungstenite::connect_async(url).await?;
        Ok(WsClient {
            ws,
            seen: Vec::new(),
            closed: None,
        })
    }

    /// Sends a JSON text frame; panics if the connection is gone.
    pub async fn send(&mut self, frame: Value) {
        let text = frame.to_string();
        self.try_send(Message::Text(text))
            .await
            .unwrap_or_else(|e| panic!("send {frame}: {e}"));
    }

    /// Sends raw text (for malformed-frame tests); panics if the connection
    /// is gone.
    pub async fn send_text(&mut self, text: &str) {
        self.try_send(Message::Text(text.to_string()))
            .await
            .unwrap_or_else(|e| panic!("send {text:?}: {e}"));
    }

    pub async fn try_send(&mut self, msg: Message) -> Result<(), WsError> {
        self.ws.send(msg).await
    }

    /// The next JSON frame, or `None` on timeout or once the connection is
    /// closed (see `closed`). Ping/pong and binary frames are skipped.
    pub async fn recv_json(&mut self, timeout: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.closed.is_some() {
                return None;
            }
            let next = match tokio::time::timeout_at(deadline, self.ws.next()).await {
                Err(_) => return None,
                Ok(next) => next,
            };
            match next {
                None => {
                    self.closed = Some((1006, "connection ended".into()));
                    return None;
                }
                Some(Err(e)) => {
                    self.closed = Some((1006, e.to_string()));
                    return None;
                }
                Some(Ok(Message::Text(text))) => {
                    let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
                        panic!("server sent a non-JSON text frame ({e}): {text}")
                    });
                    self.seen.push(value.clone());
                    return Some(value);
                }
                Some(Ok(Message::Close(frame))) => {
                    self.closed = Some(close_info(frame));
                    return None;
                }
                Some(Ok(_)) => continue,
            }
        }
    }

    /// Receives until a frame satisfies `pred` and returns it; `None` on
    /// timeout or close. Everything received lands in `seen`.
    pub async fn recv_until(
        &mut self,
        pred: impl Fn(&Value) -> bool,
        timeout: Duration,
    ) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            let v = self.recv_json(left).await?;
            if pred(&v) {
                return Some(v);
            }
        }
    }

    /// The next frame with `"type": ty`.
    pub async fn recv_type(&mut self, ty: &str, timeout: Duration) -> Option<Value> {
        self.recv_until(|v| v["type"] == ty, timeout).await
    }

    /// The next `event` frame of `kind`.
    pub async fn recv_event(&mut self, kind: &str, timeout: Duration) -> Option<Value> {
        self.recv_until(|v| v["type"] == "event" && v["kind"] == kind, timeout)
            .await
    }

    /// Waits for the server to close; `(code, reason)`, or `None` on timeout.
    /// Frames received meanwhile land in `seen`.
    pub async fn expect_close(&mut self, timeout: Duration) -> Option<(u16, String)> {
        let deadline = Instant::now() + timeout;
        while self.closed.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            if self.recv_json(left).await.is_none() && self.closed.is_none() {
                return None;
            }
        }
        self.closed.clone()
    }

    /// Highest `seq` seen so far on `table` (for a reconnect with `since`).
    pub fn last_seq(&self, table: &str) -> Option<u64> {
        self.seen
            .iter()
            .filter(|v| v["table"] == table)
            .filter_map(|v| v["seq"].as_u64())
            .max()
    }

    /// A client-side close; best-effort.
    pub async fn close(&mut self) {
        let _ = self
            .ws
            .close(Some(CloseFrame {
                code: CloseCode::Normal,
                reason: "bye".into(),
            }))
            .await;
    }
}

/// The HTTP status of a refused WebSocket upgrade (e.g. 401 for a bad
/// token), `None` for any other connection error.
pub fn refused_status(err: &WsError) -> Option<u16> {
    match err {
        WsError::Http(resp) => Some(resp.status().as_u16()),
        _ => None,
    }
}

fn close_info(frame: Option<CloseFrame<'_>>) -> (u16, String) {
    match frame {
        Some(f) => (u16::from(f.code), f.reason.to_string()),
        None => (1005, String::new()),
    }
}
