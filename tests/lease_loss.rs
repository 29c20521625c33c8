//! A hosted table whose lease is lost freezes loudly (I4); a lost renew for a
//! table already released is benign (I5); a Redis that lost its data never
//! hands out a fence Postgres has already seen.

mod common;
mod play;

use std::time::{Duration, Instant};

use common::{lease_key, test_db, unique_env, PrivateRedis, Server, ServerConfig};
use play::{metric, spawn_forever, wait_state, Player, Policy};
use serde_json::Value;

/// Two players at `server` playing check/call hands in the background.
async fn busy_table(server: &Server) -> (String, Vec<tokio::task::JoinHandle<Player>>) {
    let t = play::new_table(server).await;
    server.grant("alice", 1000).await;
    server.grant("bob", 1000).await;
    let alice = Player::sit(server, &t, "alice", 0, 100).await;
    let bob = Player::sit(server, &t, "bob", 1, 100).await;
    let tasks = vec![
        spawn_forever(alice, &t, Policy::CheckCall, Duration::from_secs(20)),
        spawn_forever(bob, &t, Policy::CheckCall, Duration::from_secs(20)),
    ];
    // Let a hand or two go by so the freeze lands on a live table.
    let pool_wait = Instant::now();
    while server.table(&t).await["hand_no"].as_u64().unwrap_or(0) < 1
        && pool_wait.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (t, tasks)
}

/// After the freeze: every client got the `frozen` frame with `reason`, and
/// no hand started after it.
async fn assert_clients_frozen(
    tasks: Vec<tokio::task::JoinHandle<Player>>,
    server: &Server,
    table: &str,
    reason: &str,
) {
    let hand_at_freeze = server.table(table).await["hand_no"].clone();
    for task in tasks {
        let p = task.await.expect("player task");
        let idx = p
            .client
            .seen
            .iter()
            .position(|v| v["type"] == "frozen")
            .unwrap_or_else(|| {
                panic!("{} got no frozen frame: {:?}", p.name, p.client.seen.last())
            });
        assert_eq!(
            p.client.seen[idx]["reason"], reason,
            "{}",
            p.client.seen[idx]
        );
        let late: Vec<&Value> = p.client.seen[idx..]
            .iter()
            .filter(|v| v["kind"] == "hand_started")
            .collect();
        assert!(
            late.is_empty(),
            "{} saw a hand start after the freeze: {late:?}",
            p.name
        );
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        server.table(table).await["hand_no"],
        hand_at_freeze,
        "no hand was written after the freeze"
    );
}

#[tokio::test]
async fn deleting_the_lease_key_freezes_the_table_and_tells_its_clients() {
    let db = test_db().await;
    let env = unique_env();
    let ttl_ms = 1500;
    let server = Server::start(
        ServerConfig::new(&db, &env)
            .with_ttl_ms(ttl_ms)
            .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "50"),
    )
    .await;
    let (t, mut alice, bob) = play::heads_up(&server, 100).await;
    let bob_task = spawn_forever(bob, &t, Policy::CheckCall, Duration::from_secs(15));

    let mut redis = common::redis_conn(&common::shared_redis_url()).await;
    let deleted: i64 = redis::cmd("DEL")
        .arg(lease_key(&env, &t))
        .query_async(&mut redis)
        .await
        .expect("DEL");
    assert_eq!(deleted, 1, "the lease key existed");
    let deleted_at = Instant::now();

    // Alice keeps playing until the frozen frame arrives.
    let frozen_seen = alice
        .play_until(&t, Policy::CheckCall, Duration::from_secs(10), |c| {
            c.seen.iter().any(|v| v["type"] == "frozen")
        })
        .await;
    assert!(
        frozen_seen,
        "alice got a frozen frame: {:?}",
        alice.client.seen.last()
    );
    let frozen_at = deleted_at.elapsed();
    let frame = alice
        .client
        .seen
        .iter()
        .find(|v| v["type"] == "frozen")
        .expect("frozen")
        .clone();
    assert_eq!(frame["reason"], "lease_lost", "{frame}");
    assert_eq!(frame["table"], t.as_str(), "{frame}");
    // Renew runs every TTL/3; allow one period plus scheduling slack.
    assert!(
        frozen_at < Duration::from_millis(ttl_ms / 3 + 1000),
        "froze {frozen_at:?} after the delete"
    );

    let view = wait_state(&server, &t, "frozen", Duration::from_secs(3))
        .await
        .expect("frozen in Postgres");
    assert_eq!(view["state_reason"], "lease_lost", "{view}");
    assert_eq!(view["hosted_here"], false, "{view}");

    // Nothing after the frozen frame: no hand started.
    let idx = alice
        .client
        .seen
        .iter()
        .position(|v| v["type"] == "frozen")
        .expect("frozen");
    let after_freeze: Vec<&Value> = alice.client.seen[idx..]
        .iter()
        .filter(|v| v["kind"] == "hand_started")
        .collect();
    assert!(after_freeze.is_empty(), "{after_freeze:?}");
    let hand_no = view["hand_no"].clone();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        server.table(&t).await["hand_no"],
        hand_no,
        "no hand was written after the freeze"
    );
    // A join now is refused as frozen, and the audit still balances.
    let mut late = common::WsClient::connect(&server, &common::mint_token("late"))
        .await
        .expect("connect");
    late.send(serde_json::json!({"type": "join", "table": t}))
        .await;
    let err = late
        .recv_type("error", Duration::from_secs(5))
        .await
        .expect("join refused");
    assert_eq!(err["code"], "table_frozen", "{err}");
    assert_eq!(server.audit().await["delta"], 0);
    let (_, text) = server.get("/metrics").await;
    assert_eq!(
        metric(&text, r#"pitboss_leases_lost_total{reason="gone"}"#),
        1.0,
        "{text}"
    );
    let bob = bob_task.await.expect("bob's task");
    assert!(
        bob.client.seen.iter().any(|v| v["type"] == "frozen"),
        "bob got the frozen frame too"
    );
}

#[tokio::test]
async fn after_redis_loses_its_data_the_next_fence_is_above_every_fence_postgres_has_seen() {
    let db = test_db().await;
    let env = unique_env();
    let redis = PrivateRedis::start().await;
    let cfg = ServerConfig::new(&db, &env)
        .with_redis(&redis.url())
        .with_ttl_ms(1500);
    let a = Server::start(cfg.clone()).await;
    let t = play::new_table(&a).await;
    drop(a);
    // Two same-id restarts bump the fence to 3.
    let a = Server::start(cfg.clone()).await;
    assert!(
        common::eventually(
            Duration::from_secs(3),
            Duration::from_millis(50),
            || async { a.table(&t).await["fence"] == 2 }
        )
        .await
    );
    drop(a);
    let a = Server::start(cfg).await;
    assert!(
        common::eventually(
            Duration::from_secs(3),
            Duration::from_millis(50),
            || async { a.table(&t).await["fence"] == 3 }
        )
        .await
    );

    let mut conn = common::redis_conn(&redis.url()).await;
    let _: () = redis::cmd("FLUSHALL")
        .query_async(&mut conn)
        .await
        .expect("FLUSHALL the private redis");
    let view = wait_state(&a, &t, "frozen", Duration::from_secs(5))
        .await
        .expect("the table froze: its lease is gone");
    assert_eq!(view["state_reason"], "lease_lost");
    assert_eq!(view["fence"], 3);

    let (status, recovered) = a
        .admin_post(&format!("/admin/tables/{t}/recover"), serde_json::json!({}))
        .await;
    assert_eq!(status, 200, "{recovered}");
    assert_eq!(recovered["state"], "open", "{recovered}");
    assert_eq!(recovered["hosted_here"], true, "{recovered}");
    let fence = recovered["fence"].as_u64().expect("fence");
    assert!(
        fence > 3,
        "the counter was lost but the fence still rose: {fence}"
    );
    let counter: String = redis::cmd("GET")
        .arg(common::fence_key(&env, &t))
        .query_async(&mut conn)
        .await
        .expect("counter");
    assert_eq!(counter, fence.to_string());
    let (status, again) = a
        .admin_post(&format!("/admin/tables/{t}/recover"), serde_json::json!({}))
        .await;
    assert_eq!(
        (status, again["error"]["code"].as_str()),
        (409, Some("not_frozen")),
        "{again}"
    );
}

#[tokio::test]
async fn tables_freeze_by_the_local_deadline_when_redis_stops() {
    let db = test_db().await;
    let env = unique_env();
    let mut redis = PrivateRedis::start().await;
    let ttl_ms = 1500;
    let server = Server::start(
        ServerConfig::new(&db, &env)
            .with_redis(&redis.url())
            .with_ttl_ms(ttl_ms)
            .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "50")
            .with_env("PITBOSS__REDIS__OP_TIMEOUT_MS", "300"),
    )
    .await;
    let (t, tasks) = busy_table(&server).await;
    redis.stop().await;
    let stopped_at = Instant::now();
    let view = wait_state(&server, &t, "frozen", Duration::from_millis(ttl_ms * 3))
        .await
        .expect("frozen");
    let took = stopped_at.elapsed();
    assert_eq!(view["state_reason"], "lease_lost", "{view}");
    // The local deadline (sent + TTL - margin) passes before the TTL does.
    assert!(
        took < Duration::from_millis(ttl_ms + 500),
        "froze {took:?} after Redis stopped"
    );
    assert_clients_frozen(tasks, &server, &t, "lease_lost").await;
    let (_, text) = server.get("/metrics").await;
    assert!(
        metric(&text, r#"pitboss_leases_lost_total{reason="deadline"}"#) >= 1.0,
        "{text}"
    );
    let (status, _) = server.get("/readyz").await;
    assert_eq!(status, 503, "not ready without Redis");
}

#[tokio::test]
async fn a_table_released_by_idle_eviction_does_not_freeze_and_is_hosted_again_on_the_next_join() {
    let db = test_db().await;
    let env = unique_env();
    let ttl_ms = 900;
    let server = Server::start(
        ServerConfig::new(&db, &env)
            .with_ttl_ms(ttl_ms)
            .with_env("PITBOSS__TABLE__IDLE_EVICT_MS", "200"),
    )
    .await;
    let t = play::new_table(&server).await;
    // A watcher (nobody seated) is told when the table is released.
    let mut watcher = common::WsClient::connect(&server, &common::mint_token("watcher"))
        .await
        .expect("connect");
    watcher
        .send(serde_json::json!({"type": "join", "table": t}))
        .await;
    let released = watcher
        .recv_type("released", Duration::from_secs(5))
        .await
        .unwrap_or_else(|| panic!("a released frame: {:?}", watcher.seen));
    assert_eq!(released["reason"], "idle", "{released}");
    let view = wait_state(&server, &t, "released", Duration::from_secs(5))
        .await
        .expect("evicted");
    assert_eq!(view["state_reason"], "idle", "{view}");
    // Several renew periods later: still released, never frozen, no loss.
    tokio::time::sleep(Duration::from_millis(ttl_ms * 2)).await;
    let view = server.table(&t).await;
    assert_eq!(view["state"], "released", "{view}");
    let (_, events) = server.admin_get(&format!("/admin/tables/{t}/events")).await;
    let states: Vec<&str> = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["to"].as_str())
        .collect();
    assert!(!states.contains(&"frozen"), "{events}");
    let (_, text) = server.get("/metrics").await;
    for reason in ["gone", "foreign", "deadline"] {
        let series = format!("pitboss_leases_lost_total{{reason=\"{reason}\"}}");
        assert!(text.contains(&series), "{series} exported: {text}");
        assert_eq!(
            metric(&text, &series),
            0.0,
            "no lease counted as lost: {text}"
        );
    }
    let mut redis = common::redis_conn(&common::shared_redis_url()).await;
    let exists: i64 = redis::cmd("EXISTS")
        .arg(lease_key(&env, &t))
        .query_async(&mut redis)
        .await
        .expect("EXISTS");
    assert_eq!(exists, 0, "the evicted table's lease was released");

    // The next join hosts it again, under a new fence.
    let mut c = common::WsClient::connect(&server, &common::mint_token("alice"))
        .await
        .expect("connect");
    c.send(serde_json::json!({"type": "join", "table": t}))
        .await;
    let snap = c
        .recv_type("snapshot", Duration::from_secs(5))
        .await
        .expect("snapshot");
    assert_eq!(snap["state"]["fence"], 2, "{snap}");
    let (_, events) = server.admin_get(&format!("/admin/tables/{t}/events")).await;
    let revived = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .any(|e| e["to"] == "open" && e["reason"] == "revived" && e["fence"] == 2);
    assert!(revived, "{events}");
}
