//! What `tests/gameplay*.rs` share: the check that a refused frame gets its
//! error code and leaves the connection usable, and a client joined to a
//! table.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{mint_token, Server, WsClient};

/// Sends `frame`; the `error` it gets must carry `code`, and the connection
/// must still answer a ping.
pub async fn expect_error(c: &mut WsClient, frame: Value, code: &str) {
    c.send(frame.clone()).await;
    let err = c
        .recv_type("error", Duration::from_secs(5))
        .await
        .unwrap_or_else(|| panic!("no error for {frame}: {:?}", c.seen));
    assert_eq!(err["code"], code, "{frame} -> {err}");
    // The connection stays usable after every rejected frame.
    c.send(json!({"type": "ping"})).await;
    assert!(
        c.recv_type("pong", Duration::from_secs(5)).await.is_some(),
        "no pong after {frame}"
    );
}

/// Connects `name`, joins `table` and waits for the snapshot.
pub async fn joined(server: &Server, table: &str, name: &str) -> WsClient {
    let mut c = WsClient::connect(server, &mint_token(name))
        .await
        .expect("connect");
    c.send(json!({"type": "join", "table": table})).await;
    c.recv_type("snapshot", Duration::from_secs(10))
        .await
        .unwrap_or_else(|| panic!("{name} got no snapshot: {:?}", c.seen));
    c
}
