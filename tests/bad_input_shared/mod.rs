//! What `tests/bad_input*.rs` share: raw HTTP requests, with any
//! `authorization` header and any bytes as the body, and the code of a
//! JSON error body.

use serde_json::Value;

use crate::common::Server;

/// A raw HTTP request; the status and the body as JSON (a non-JSON body as
/// a JSON string, so an assertion shows it).
pub async fn raw(
    server: &Server,
    method: reqwest::Method,
    path: &str,
    auth: Option<&str>,
    body: Option<Vec<u8>>,
) -> (u16, Value) {
    let mut req = reqwest::Client::new().request(method, format!("{}{}", server.http, path));
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    if let Some(b) = body {
        req = req.header("content-type", "application/json").body(b);
    }
    let resp = req.send().await.expect("send");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body");
    let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, v)
}

/// The `error.code` of a JSON error body; empty if it has none.
pub fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or_default()
}
