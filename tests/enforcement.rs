//! I8: enforcement is unconditional. No configuration and no failure mode
//! hosts a table without holding its lease.

mod common;
mod play;

use std::time::Duration;

use common::{mint_token, test_db, unique_env, PrivateRedis, Server, ServerConfig, WsClient};
use play::wait_state;
use serde_json::json;

#[tokio::test]
async fn a_table_is_never_hosted_while_its_lease_cannot_be_taken() {
    let db = test_db().await;
    let env = unique_env();
    let mut redis = PrivateRedis::start().await;
    let server = Server::start(
        ServerConfig::new(&db, &env)
            .with_redis(&redis.url())
            .with_env("PITBOSS__TABLE__IDLE_EVICT_MS", "200")
            .with_env("PITBOSS__REDIS__OP_TIMEOUT_MS", "300"),
    )
    .await;
    let t = play::new_table(&server).await;
    wait_state(&server, &t, "released", Duration::from_secs(5))
        .await
        .expect("idle eviction released the table");

    // Without Redis a join cannot take the lease, so nothing is hosted.
    redis.stop().await;
    let mut c = WsClient::connect(&server, &mint_token("alice"))
        .await
        .expect("connect");
    c.send(json!({"type": "join", "table": t})).await;
    let answer = c
        .recv_until(
            |v| v["type"] == "error" || v["type"] == "snapshot",
            Duration::from_secs(10),
        )
        .await
        .expect("an answer to join");
    assert_eq!(answer["type"], "error", "{answer}");
    assert_eq!(answer["code"], "unavailable", "{answer}");
    let view = server.table(&t).await;
    assert_eq!(view["hosted_here"], false, "{view}");
    assert_eq!(view["state"], "released", "{view}");
    assert_eq!(view["fence"], 1, "no fence was stamped: {view}");

    // Creating a table cannot host it either: it is refused, not hosted.
    let (status, body) = server
        .admin_post("/admin/tables", common::table_config())
        .await;
    assert_eq!(status, 503, "{body}");

    // With Redis back (the client reconnects within moments), the same
    // join hosts it under a new lease.
    redis.start_again().await;
    let mut snap = None;
    for _ in 0..20 {
        c.send(json!({"type": "join", "table": t})).await;
        let answer = c
            .recv_until(
                |v| v["type"] == "error" || v["type"] == "snapshot",
                Duration::from_secs(5),
            )
            .await;
        if let Some(v) = answer.filter(|v| v["type"] == "snapshot") {
            snap = Some(v);
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let snap = snap.unwrap_or_else(|| panic!("hosted once the lease can be taken: {:?}", c.seen));
    assert_eq!(snap["state"]["fence"], 2, "{snap}");
}

#[tokio::test]
async fn the_server_refuses_to_start_without_redis() {
    let db = test_db().await;
    let env = unique_env();
    let mut redis = PrivateRedis::start().await;
    let url = redis.url();
    redis.stop().await;
    let started = Server::try_start(
        ServerConfig::new(&db, &env)
            .with_redis(&url)
            .with_env("PITBOSS__REDIS__OP_TIMEOUT_MS", "300"),
    )
    .await;
    let failure = match started {
        Ok(_) => panic!("pitboss served without Redis"),
        Err(f) => f,
    };
    assert!(
        failure.status.is_some_and(|s| !s.success()),
        "it exits non-zero: {failure}"
    );
    assert!(
        failure.logs.iter().any(|l| l.contains("Redis")),
        "it says why: {failure}"
    );
}
