//! An operator's freeze (`POST /admin/tables/{id}/freeze`) works on any
//! instance: it is recorded at once, and the owner stops its copy, at once
//! when it is the instance asked, else within one renew period; nothing the
//! owner writes afterwards lands.

mod common;
mod play;

use std::time::Duration;

use common::{test_db, unique_env, Server, ServerConfig};
use play::{spawn_forever, Policy};
use serde_json::json;

const SECS: fn(u64) -> Duration = Duration::from_secs;

async fn hands_written(db: &common::TestDb, table: &str) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM hands WHERE table_id = $1")
        .bind(table)
        .fetch_one(&db.pool().await)
        .await
        .expect("count hands")
}

#[tokio::test]
async fn an_operator_freeze_on_another_instance_stops_the_owner_within_a_renew_period() {
    let db = test_db().await;
    let env = unique_env();
    let ttl_ms = 1500;
    let cfg = ServerConfig::new(&db, &env)
        .with_ttl_ms(ttl_ms)
        .with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "300")
        .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "50");
    let a = Server::start(cfg.clone().with_instance("inst-a")).await;
    let b = Server::start(cfg.with_instance("inst-b")).await;
    let (t, mut alice, bob) = play::heads_up(&a, 100).await;
    let bob_task = spawn_forever(bob, &t, Policy::CheckCall, SECS(30));
    alice
        .client
        .recv_event("hand_ended", SECS(10))
        .await
        .expect("hands are being played on A");

    let (status, view) = b
        .admin_post(
            &format!("/admin/tables/{t}/freeze"),
            json!({"reason": "operator"}),
        )
        .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(
        (view["state"].as_str(), view["state_reason"].as_str()),
        (Some("frozen"), Some("operator")),
        "{view}"
    );
    let written = hands_written(&db, &t).await;

    let frozen = alice
        .client
        .recv_type("frozen", Duration::from_millis(ttl_ms * 2))
        .await
        .unwrap_or_else(|| panic!("A's players are told: {:?}", alice.client.seen));
    assert_eq!(frozen["reason"], "operator");
    bob_task.abort();
    tokio::time::sleep(Duration::from_millis(ttl_ms)).await;
    assert_eq!(
        hands_written(&db, &t).await,
        written,
        "no hand landed after the freeze"
    );
    let view = a.table(&t).await;
    assert_eq!(view["hosted_here"], false, "{view}");
    assert_eq!(
        (view["state"].as_str(), view["state_reason"].as_str()),
        (Some("frozen"), Some("operator")),
        "{view}"
    );
    assert_eq!(a.audit().await["delta"], 0);
}

#[tokio::test]
async fn an_operator_freeze_on_the_owner_stops_the_table_at_once_and_bad_requests_change_nothing() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(
        ServerConfig::new(&db, &env).with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "60000"),
    )
    .await;
    let (t, mut alice, _bob) = play::heads_up(&server, 100).await;
    alice
        .client
        .recv_event("turn", SECS(10))
        .await
        .expect("a hand is in progress");

    for (path, body, status, code) in [
        (
            format!("/admin/tables/{t}/freeze"),
            json!({"reason": "melted"}),
            400,
            "bad_field",
        ),
        (
            format!("/admin/tables/{t}/freeze"),
            json!({"why": "x"}),
            400,
            "bad_field",
        ),
        (
            "/admin/tables/tbl_nope/freeze".to_string(),
            json!({}),
            404,
            "table_not_found",
        ),
    ] {
        let (got, v) = server.admin_post(&path, body).await;
        assert_eq!(
            (got, v["error"]["code"].as_str()),
            (status, Some(code)),
            "{v}"
        );
    }
    assert_eq!(server.table(&t).await["state"], "open");

    let (status, view) = server
        .admin_post(&format!("/admin/tables/{t}/freeze"), json!({}))
        .await;
    assert_eq!(status, 200, "{view}");
    let frozen = alice
        .client
        .recv_type("frozen", SECS(2))
        .await
        .unwrap_or_else(|| panic!("told at once: {:?}", alice.client.seen));
    assert_eq!(frozen["reason"], "operator");
    // The hand in progress never happened: stacks stay at the last boundary.
    let seats = server.table(&t).await["seats"].clone();
    assert_eq!(seats[0]["stack"], 100, "{seats}");
    assert_eq!(seats[1]["stack"], 100, "{seats}");
    // Freezing a frozen table again is harmless.
    let (status, again) = server
        .admin_post(
            &format!("/admin/tables/{t}/freeze"),
            json!({"reason": "operator"}),
        )
        .await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["fence"], view["fence"], "no second fence bump");
}

/// Reads everything `client` is sent for `within`, or until its connection
/// closes.
async fn read_for(client: &mut common::WsClient, within: Duration) {
    let deadline = std::time::Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() || client.recv_json(left).await.is_none() {
            return;
        }
    }
}

/// A watcher of `table` on `server` (joined, not seated).
async fn watcher(server: &Server, table: &str, name: &str) -> common::WsClient {
    let mut client = common::WsClient::connect(server, &common::mint_token(name))
        .await
        .expect("watcher connects");
    client.send(json!({"type": "join", "table": table})).await;
    client
        .recv_type("snapshot", SECS(10))
        .await
        .unwrap_or_else(|| panic!("{name} got no snapshot: {:?}", client.seen));
    client
}

/// An operator's freeze sent to the instance that does not own the table,
/// during play. Two tables of A's: at one the player to act folds right
/// after the freeze, so the hand's write is refused first; at the other
/// nobody acts, so A's fence check notices. Either way every client of the
/// table (its players and a watcher, connected to A directly or relayed
/// through B) is told `frozen` with reason `operator` exactly once, within
/// one renew period, and no `error` frame at all; Postgres holds both tables
/// frozen by the operator at their last boundary.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_freeze_through_the_non_owner_tells_every_client_frozen_once_direct_and_relayed(
) {
    let db = test_db().await;
    let env = unique_env();
    let ttl_ms = 4500;
    let renew = Duration::from_millis(ttl_ms / 3);
    let cfg = ServerConfig::new(&db, &env)
        .with_ttl_ms(ttl_ms)
        .with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "60000")
        .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "50");
    let a = Server::start(cfg.clone().with_instance("owner-a")).await;
    let b = Server::start(cfg.with_instance("other-b")).await;
    for p in ["alice", "bob", "carol", "dave"] {
        a.grant(p, 1000).await;
    }
    // Table 1: alice at A, bob relayed through B. Table 2: carol at A, dave
    // relayed through B. Each table has a watcher at each instance.
    let t1 = play::new_table(&a).await;
    let mut alice = play::Player::sit(&a, &t1, "alice", 0, 100).await;
    let mut bob = play::Player::sit(&b, &t1, "bob", 1, 100).await;
    let t2 = play::new_table(&a).await;
    let mut carol = play::Player::sit(&a, &t2, "carol", 0, 100).await;
    let mut dave = play::Player::sit(&b, &t2, "dave", 1, 100).await;
    for t in [&t1, &t2] {
        assert_eq!(a.table(t).await["owner"], "owner-a", "A hosts {t}");
    }
    let mut watchers = [
        (t1.clone(), "w1a", watcher(&a, &t1, "w1a").await),
        (t1.clone(), "w1b", watcher(&b, &t1, "w1b").await),
        (t2.clone(), "w2a", watcher(&a, &t2, "w2a").await),
        (t2.clone(), "w2b", watcher(&b, &t2, "w2b").await),
    ];

    // Both tables mid-hand, a turn pending.
    let turn1 = alice
        .client
        .recv_event("turn", SECS(10))
        .await
        .expect("table 1 deals");
    carol
        .client
        .recv_event("turn", SECS(10))
        .await
        .expect("table 2 deals");
    let stacks_before = (
        play::db_stacks(&db.pool().await, &t1).await,
        play::db_stacks(&db.pool().await, &t2).await,
    );

    for t in [&t1, &t2] {
        let (status, view) = b
            .admin_post(
                &format!("/admin/tables/{t}/freeze"),
                json!({"reason": "operator"}),
            )
            .await;
        assert_eq!(status, 200, "{view}");
    }
    let frozen_at = std::time::Instant::now();
    // At table 1 the player to act folds: the hand ends and its write meets
    // the operator's fence.
    let fold = json!({
        "type": "act", "table": t1, "hand": turn1["hand"],
        "decision": turn1["decision"], "action": "fold",
    });
    if turn1["seat"] == 0 {
        alice.client.send(fold).await;
    } else {
        bob.client.send(fold).await;
    }

    let mut clients: Vec<(String, String, &mut common::WsClient)> = vec![
        (t1.clone(), "alice".into(), &mut alice.client),
        (t1.clone(), "bob".into(), &mut bob.client),
        (t2.clone(), "carol".into(), &mut carol.client),
        (t2.clone(), "dave".into(), &mut dave.client),
    ];
    for (t, name, c) in watchers.iter_mut() {
        clients.push((t.clone(), name.to_string(), c));
    }
    for (t, name, client) in clients {
        let before = client.seen.len();
        let frozen = client
            .recv_type("frozen", renew + Duration::from_millis(1000))
            .await
            .unwrap_or_else(|| {
                panic!(
                    "{name} was not told frozen within a renew period: {:?}",
                    &client.seen[before..]
                )
            });
        let took = frozen_at.elapsed();
        assert_eq!(
            (frozen["table"].as_str(), frozen["reason"].as_str()),
            (Some(t.as_str()), Some("operator")),
            "{name}: {frozen}"
        );
        // Whatever else comes in a while: no second frozen, no error.
        read_for(client, Duration::from_millis(300)).await;
        let after = &client.seen[before..];
        assert_eq!(
            after.iter().filter(|v| v["type"] == "frozen").count(),
            1,
            "{name} told frozen once: {after:?}"
        );
        let errors: Vec<&serde_json::Value> = client
            .seen
            .iter()
            .filter(|v| v["type"] == "error")
            .collect();
        assert!(errors.is_empty(), "{name} was sent errors: {errors:?}");
        assert!(client.closed.is_none(), "{name} keeps its connection");
        eprintln!("{name} at {t}: frozen after {} ms", took.as_millis());
    }

    for t in [&t1, &t2] {
        let (state, reason): (String, Option<String>) =
            sqlx::query_as("SELECT state, state_reason FROM tables WHERE id = $1")
                .bind(t.as_str())
                .fetch_one(&db.pool().await)
                .await
                .expect("table row");
        assert_eq!(
            (state.as_str(), reason.as_deref()),
            ("frozen", Some("operator")),
            "{t}"
        );
        let view = a.table(t).await;
        assert_eq!(view["hosted_here"], false, "A's copy stopped: {view}");
    }
    // The hands in progress never happened.
    assert_eq!(
        (
            play::db_stacks(&db.pool().await, &t1).await,
            play::db_stacks(&db.pool().await, &t2).await,
        ),
        stacks_before
    );
    assert_eq!(a.audit().await["delta"], 0);
}
