//! `seq` strictly increases per table on a connection (the contract's
//! promise that lets a client resume with `since`): every event a
//! connection is told has a `seq` above every one it was told before, and
//! a snapshot is never older than an event already told. Checked on every
//! connection of a table in play (players and watchers, direct and
//! relayed) through a client's own second join, a resume with `since`
//! sent while events are still on their way to it, a pause and re-assert,
//! and owner changes both ways.
//!
//! The paths this pins: a session already subscribed that joins again
//! with `since` (the client's, or the server's own search for a new owner
//! crossing the client's join) had the events after `since` sent a second
//! time, after the ones already on their way; and a relay replaced on the
//! same connection resumed from the client's `since` rather than from what
//! the relay before it had already passed on.

mod common;
mod play;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{
    lease_key, mint_token, test_db, unique_env, PrivateRedis, Server, ServerConfig, WsClient,
};
use play::{Player, Policy};
use serde_json::{json, Value};

const SECS: fn(u64) -> Duration = Duration::from_secs;

/// The frames of `seen` for `table` that broke the order of their
/// connection.
fn out_of_order(seen: &[Value], table: &str) -> Vec<String> {
    let mut last: Option<u64> = None;
    let mut broken = Vec::new();
    for v in seen.iter().filter(|v| v["table"] == table) {
        let Some(seq) = v["seq"].as_u64() else {
            continue;
        };
        let kind = v["type"].as_str().unwrap_or("");
        let bad = match (kind, last) {
            ("event", Some(l)) => seq <= l,
            ("snapshot", Some(l)) => seq < l,
            _ => false,
        };
        if bad {
            broken.push(format!("{kind} {} seq {seq} after {last:?}", v["kind"]));
        }
        if matches!(kind, "event" | "snapshot") {
            last = Some(last.map_or(seq, |l| l.max(seq)));
        }
    }
    broken
}

/// A watcher of `table`: connects to `server` and joins.
async fn watcher(server: &Server, table: &str, name: &str) -> WsClient {
    let mut c = WsClient::connect(server, &mint_token(name))
        .await
        .unwrap_or_else(|e| panic!("{name} could not connect: {e}"));
    c.send(json!({"type": "join", "table": table})).await;
    c.recv_type("snapshot", SECS(10))
        .await
        .unwrap_or_else(|| panic!("{name} got no snapshot: {:?}", c.seen));
    c
}

/// Events of `table` seen by `c` so far.
fn events(c: &WsClient, table: &str) -> usize {
    c.seen
        .iter()
        .filter(|v| v["type"] == "event" && v["table"] == table)
        .count()
}

/// Reads until `c` has seen `more` further events of `table`.
async fn read_events(c: &mut WsClient, table: &str, more: usize, within: Duration) {
    let want = events(c, table) + more;
    let deadline = Instant::now() + within;
    while events(c, table) < want && Instant::now() < deadline {
        c.recv_json(Duration::from_millis(200)).await;
    }
    assert!(
        events(c, table) >= want,
        "play went on: {} events, wanted {want}: {:?}",
        events(c, table),
        c.seen.iter().rev().take(5).collect::<Vec<_>>()
    );
}

/// What a client that lags may do: stop reading while play goes on, then
/// resume with the last `seq` it has read (the events after it are still
/// on their way), then join again twice in a row, once for a snapshot and
/// once to resume. Then read on, and play must have gone on.
async fn lag_and_join_again(c: &mut WsClient, table: &str) {
    let last = c.last_seq(table).expect("a seq seen");
    tokio::time::sleep(Duration::from_millis(400)).await;
    c.send(json!({"type": "join", "table": table, "since": last}))
        .await;
    read_events(c, table, 3, SECS(10)).await;
    let last = c.last_seq(table).expect("a seq seen");
    tokio::time::sleep(Duration::from_millis(400)).await;
    c.send(json!({"type": "join", "table": table})).await;
    c.send(json!({"type": "join", "table": table, "since": last}))
        .await;
    read_events(c, table, 3, SECS(10)).await;
}

/// Reads whatever came meanwhile, for a while.
/// The hostings `seen` shows of `table`, in order: each numbers its frames
/// from its own epoch (`seq >> 32`, its fence when it began), so a client
/// that followed a table through owner changes saw one epoch per hosting
/// (a snapshot of it, or its events after a catch-up from the journal).
fn hostings(seen: &[Value], table: &str) -> Vec<u64> {
    let mut epochs: Vec<u64> = seen
        .iter()
        .filter(|v| v["table"] == table)
        .filter_map(|v| v["seq"].as_u64())
        .map(|seq| seq >> 32)
        .collect();
    epochs.dedup();
    epochs
}

/// Reads until `c` has seen a frame of the hosting of `table` whose epoch
/// is `epoch`.
async fn read_hosting(c: &mut WsClient, table: &str, epoch: u64, within: Duration) {
    let deadline = Instant::now() + within;
    while hostings(&c.seen, table).last() != Some(&epoch) && Instant::now() < deadline {
        c.recv_json(Duration::from_millis(200)).await;
    }
    assert_eq!(
        hostings(&c.seen, table).last(),
        Some(&epoch),
        "a frame of the last hosting"
    );
}

async fn drain(c: &mut WsClient, for_: Duration) {
    let deadline = Instant::now() + for_;
    while Instant::now() < deadline && c.closed.is_none() {
        c.recv_json(Duration::from_millis(100)).await;
    }
}

async fn owner(server: &Server, table: &str) -> Value {
    server.table(table).await["owner"].clone()
}

async fn move_to(from: &Server, other: &Server, table: &str, to: &str) {
    let (status, view) = from
        .admin_post(&format!("/admin/tables/{table}/move"), json!({"to": to}))
        .await;
    if status != 200 {
        // What each instance did with the table, for the failure's cause.
        for (name, s) in [("asked", from), ("other", other)] {
            let lines: Vec<_> = s.logs().into_iter().filter(|l| l.contains(table)).collect();
            eprintln!("--- {name}'s log of {table}:\n{}", lines.join("\n"));
        }
    }
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["owner"], to, "{view}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn seq_strictly_increases_on_every_connection_through_rejoins_pauses_reasserts_and_owner_changes(
) {
    let db = test_db().await;
    let env = unique_env();
    let redis_server = PrivateRedis::start().await;
    let cfg = ServerConfig::new(&db, &env)
        .with_redis(&redis_server.url())
        .with_ttl_ms(1500)
        .with_env("PITBOSS__REDIS__OP_TIMEOUT_MS", "300")
        .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "50")
        .with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "5000")
        .with_env("PITBOSS__WS__RATE_PER_SEC", "500")
        .with_env("PITBOSS__WS__RATE_BURST", "1000");
    let a = Server::start(cfg.clone().with_instance("order-a")).await;
    let b = Server::start(cfg.with_instance("order-b")).await;
    let t = play::new_table(&a).await;
    a.grant("alice", 100_000).await;
    a.grant("bob", 100_000).await;
    // alice plays on A, the owner; bob through B's relay.
    let alice = Player::sit(&a, &t, "alice", 0, 200).await;
    let bob = Player::sit(&b, &t, "bob", 1, 200).await;
    let stop = Arc::new(AtomicBool::new(false));
    let players: Vec<_> = [alice, bob]
        .into_iter()
        .map(|mut p| {
            let (t, stop) = (t.clone(), stop.clone());
            tokio::spawn(async move {
                p.play_until(&t, Policy::CheckCall, SECS(120), |_| {
                    stop.load(Ordering::Relaxed)
                })
                .await;
                p
            })
        })
        .collect();

    // A watcher on each instance: on A direct, on B relayed (and the other
    // way round once the table has moved to B).
    let mut on_a = watcher(&a, &t, "watch_a").await;
    let mut on_b = watcher(&b, &t, "watch_b").await;
    read_events(&mut on_a, &t, 5, SECS(10)).await;
    read_events(&mut on_b, &t, 5, SECS(10)).await;

    // 1. Joins again on the same connection, direct and relayed.
    lag_and_join_again(&mut on_a, &t).await;
    lag_and_join_again(&mut on_b, &t).await;

    // 2. Re-asserts: the lease key vanishes under the owner; then Redis
    // stops answering past the lease's deadline (the table pauses) and
    // answers again.
    let mut redis = common::redis_conn(&redis_server.url()).await;
    let reasserted = |fence: u64| {
        let a = &a;
        let t = &t;
        async move {
            common::eventually_value(SECS(10), || async {
                let v = a.table(t).await;
                (v["fence"].as_u64() > Some(fence) && v["owner"] == "order-a").then_some(v)
            })
            .await
            .is_some()
        }
    };
    let fence = a.table(&t).await["fence"].as_u64().expect("fence");
    let _: i64 = redis::cmd("DEL")
        .arg(lease_key(&env, &t))
        .query_async(&mut redis)
        .await
        .expect("DEL");
    assert!(reasserted(fence).await, "re-asserted on A");
    lag_and_join_again(&mut on_a, &t).await;
    lag_and_join_again(&mut on_b, &t).await;
    let fence = a.table(&t).await["fence"].as_u64().expect("fence");
    redis_server.pause();
    tokio::time::sleep(SECS(3)).await;
    redis_server.resume();
    assert!(reasserted(fence).await, "re-asserted on A after the pause");
    read_events(&mut on_a, &t, 3, SECS(15)).await;
    read_events(&mut on_b, &t, 3, SECS(15)).await;
    lag_and_join_again(&mut on_a, &t).await;
    lag_and_join_again(&mut on_b, &t).await;

    // 3. An owner change: A to B, and the watchers swap roles.
    move_to(&a, &b, &t, "order-b").await;
    read_events(&mut on_a, &t, 3, SECS(15)).await;
    read_events(&mut on_b, &t, 3, SECS(15)).await;
    lag_and_join_again(&mut on_a, &t).await;
    lag_and_join_again(&mut on_b, &t).await;

    // 4. And back.
    move_to(&b, &a, &t, "order-a").await;
    // The hosting moved back numbers its frames from its fence's epoch.
    let last_hosting = a.table(&t).await["fence"].as_u64().expect("fence");
    read_events(&mut on_a, &t, 3, SECS(15)).await;
    read_events(&mut on_b, &t, 3, SECS(15)).await;
    lag_and_join_again(&mut on_a, &t).await;
    lag_and_join_again(&mut on_b, &t).await;
    assert_eq!(owner(&a, &t).await, "order-a");
    // Play goes on under the hosting moved back to A, and the players,
    // who read as they play, get its frames too before they stop.
    read_hosting(&mut on_a, &t, last_hosting, SECS(15)).await;
    read_hosting(&mut on_b, &t, last_hosting, SECS(15)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    stop.store(true, Ordering::Relaxed);
    drain(&mut on_a, Duration::from_millis(300)).await;
    drain(&mut on_b, Duration::from_millis(300)).await;
    let mut connections = vec![("watch_a", on_a), ("watch_b", on_b)];
    for p in players {
        let p = p.await.expect("player task");
        connections.push((if p.seat == 0 { "alice" } else { "bob" }, p.client));
    }
    for (name, c) in &connections {
        assert!(c.closed.is_none(), "{name}'s connection stayed open");
        let broken = out_of_order(&c.seen, &t);
        assert!(broken.is_empty(), "{name}: frames out of order: {broken:?}");
        // It was told through every phase: the pause, and both moves.
        let told = |ty: &str| c.seen.iter().any(|v| v["type"] == ty && v["table"] == t);
        assert!(told("paused") && told("resumed"), "{name} saw the pause");
        // It followed the table through both moves to its last hosting (a
        // hosting that told nothing new while it lasted leaves no frame on
        // a connection caught up from the journal, so B's may be missing).
        let seen = hostings(&c.seen, &t);
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]) && seen.last() == Some(&last_hosting),
            "{name} followed both moves to the hosting under fence {last_hosting}: {seen:?}; last: {:?}",
            c.seen.iter().rev().take(4).collect::<Vec<_>>()
        );
    }
}
