//! A stale owner can never write (I2): an owner paused with SIGSTOP past its
//! TTL wakes up after another instance took the table; it sees the newer
//! fence (or has its writes refused as StaleOwnerBoundaryWrite), stops only
//! its own copy (whose clients follow the table to the new owner, never told
//! a freeze Postgres did not record), and the new owner's table is
//! untouched.

mod common;
mod play;

use std::time::{Duration, Instant};

use common::{test_db, unique_env, Server, ServerConfig};
use play::metric;
use serde_json::json;

#[tokio::test]
async fn a_paused_owner_wakes_up_stale_its_write_is_refused_and_the_new_owner_is_unaffected() {
    let db = test_db().await;
    let env = unique_env();
    let ttl_ms = 1500;
    let cfg = ServerConfig::new(&db, &env)
        .with_ttl_ms(ttl_ms)
        // A long action clock keeps A's hand open across the pause.
        .with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "60000")
        .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "50");
    let a = Server::start(cfg.clone().with_instance("inst-a")).await;
    let (t, mut alice, _bob) = play::heads_up(&a, 100).await;
    alice
        .client
        .recv_event("turn", Duration::from_secs(10))
        .await
        .expect("a hand is in progress on A");
    let b = Server::start(cfg.with_instance("inst-b")).await;

    a.sigstop();
    let paused = Instant::now();
    let taken = common::eventually(
        Duration::from_millis(ttl_ms * 4),
        Duration::from_millis(50),
        || async {
            let v = b.table(&t).await;
            v["hosted_here"] == true && v["owner"] == "inst-b"
        },
    )
    .await;
    assert!(
        taken,
        "B took the table while A was paused: {}",
        b.table(&t).await
    );
    assert!(
        paused.elapsed() >= Duration::from_millis(ttl_ms * 2 / 3),
        "B waited for A's lease to lapse"
    );
    let new_fence = b.table(&t).await["fence"].as_u64().expect("fence");
    assert_eq!(new_fence, 2);

    a.sigcont();
    assert!(
        a.wait_for_log("table_superseded", Duration::from_secs(10))
            .await,
        "A saw B's newer fence in Postgres and stopped its copy"
    );
    // Whichever came first, the fence check or a write of A's: a write is
    // refused and counted, and the fence check attempts none at all.
    let (_, text) = a.get("/metrics").await;
    assert!(
        metric(&text, "pitboss_stale_boundary_writes_total")
            + metric(&text, "pitboss_leases_lost_total{reason=\"foreign\"}")
            >= 1.0,
        "counted: {text}"
    );
    // A's clients are not told a freeze: they follow the table to B, on
    // the connection they have, and see B's hosting.
    let snap = alice
        .client
        .recv_until(
            |v| v["type"] == "snapshot" && v["state"]["fence"] == 2,
            Duration::from_secs(5),
        )
        .await
        .unwrap_or_else(|| panic!("A's clients follow the table to B: {:?}", alice.client.seen));
    assert_eq!(snap["state"]["owner"], "inst-b", "{snap}");
    assert!(alice.client.closed.is_none());
    assert!(
        !alice.client.seen.iter().any(|v| v["type"] == "frozen"),
        "{:?}",
        alice.client.seen
    );

    // Postgres still belongs to B: open, B's fence, no freeze recorded, and
    // no hand written under A's fence.
    let view = b.table(&t).await;
    assert_eq!(
        (
            view["state"].as_str(),
            view["owner"].as_str(),
            view["fence"].as_u64()
        ),
        (Some("open"), Some("inst-b"), Some(2)),
        "{view}"
    );
    let (_, events) = b.admin_get(&format!("/admin/tables/{t}/events")).await;
    assert!(
        !events["events"]
            .as_array()
            .expect("events")
            .iter()
            .any(|e| e["to"] == "frozen"),
        "the stale owner's freeze never reached Postgres: {events}"
    );
    let pool = db.pool().await;
    let stale_hands: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM hands WHERE table_id = $1 AND fence = 1")
            .bind(&t)
            .fetch_one(&pool)
            .await
            .expect("count");
    assert_eq!(stale_hands, 0);

    // B keeps hosting and serving the table.
    tokio::time::sleep(Duration::from_millis(ttl_ms)).await;
    let mut c = common::WsClient::connect(&b, &common::mint_token("alice"))
        .await
        .expect("connect to B");
    c.send(json!({"type": "join", "table": t})).await;
    let snap = c
        .recv_type("snapshot", Duration::from_secs(5))
        .await
        .expect("B serves the table");
    assert_eq!(snap["state"]["state"], "open", "{snap}");
    assert_eq!(snap["state"]["fence"], 2, "{snap}");
    assert_eq!(b.table(&t).await["hosted_here"], true);
    assert_eq!(b.audit().await["delta"], 0);
}

#[tokio::test]
async fn a_command_whose_journal_write_is_refused_is_never_told_and_the_copy_stops() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(
        ServerConfig::new(&db, &env)
            .with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "60000")
            .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "50"),
    )
    .await;
    let (t, mut actor, mut other, turn) = play::heads_up_first_turn(&server, 100).await;
    let hand = turn["hand"].as_u64().expect("hand");

    // A newer owner stamps the table behind this one's back (as after a
    // lost lease): this owner's next journal write will be refused.
    let pool = db.pool().await;
    db.stamp_behind_owner(&t).await;

    // The player to act folds: the fold is journalled under the old fence
    // first, which Postgres refuses, so nothing it produced is told (I15).
    actor
        .client
        .send(json!({"type": "act", "table": t, "hand": hand, "decision": turn["decision"], "action": "fold"}))
        .await;
    for p in [&mut actor, &mut other] {
        // The copy stops; nobody else hosts the table, so the client
        // follows it to a new hosting here, under a higher fence.
        let snap = p
            .client
            .recv_type("snapshot", Duration::from_secs(5))
            .await
            .unwrap_or_else(|| panic!("{} sees the table again: {:?}", p.name, p.client.seen));
        assert!(snap["state"]["fence"].as_u64() > Some(2), "{snap}");
        let fold = |v: &serde_json::Value| v["kind"] == "action" && v["action"] == "fold";
        assert!(
            !p.client.seen.iter().any(fold),
            "{} was told a fold Postgres never recorded: {:?}",
            p.name,
            p.client.seen
        );
        for kind in ["showdown", "pot_awarded", "hand_ended"] {
            assert!(
                !p.client.seen.iter().any(|v| v["kind"] == kind),
                "{} was told {kind} of a hand Postgres never recorded: {:?}",
                p.name,
                p.client.seen
            );
        }
    }
    let (_, text) = server.get("/metrics").await;
    assert!(
        metric(&text, "pitboss_journal_stale_refused_total") >= 1.0,
        "the refusal is counted: {text}"
    );
    let (hands, journalled): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM hands WHERE table_id = $1), \
                (SELECT COUNT(*) FROM journal WHERE table_id = $1 AND kind = 'act')",
    )
    .bind(&t)
    .fetch_one(&pool)
    .await
    .expect("count");
    assert_eq!((hands, journalled), (0, 0));
}

#[tokio::test]
async fn a_copy_superseded_while_its_row_is_locked_is_never_told_frozen_and_its_players_follow_the_table(
) {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(
        ServerConfig::new(&db, &env)
            .with_ttl_ms(1500)
            .with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "60000")
            .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "50"),
    )
    .await;
    let (t, mut alice, mut bob) = play::heads_up(&server, 100).await;
    alice
        .client
        .recv_event("turn", Duration::from_secs(10))
        .await
        .expect("a hand is in progress");
    let fence = server.table(&t).await["fence"].as_u64().expect("fence");

    // A newer owner stamps the table, then something holds its row locked
    // for longer than the lock budget (2 s): any state write this copy
    // tries meanwhile fails on the lock, not on the fence.
    let pool = db.pool().await;
    db.stamp_behind_owner(&t).await;
    let lock = db.lock_table_row(&t).await;
    // The fence check (every TTL/3) sees the newer fence meanwhile.
    tokio::time::sleep(Duration::from_millis(3000)).await;
    lock.commit().await.expect("release the row");

    // Nothing was recorded as frozen, so nobody is told so: the players
    // follow the table to its next hosting (here, under a higher fence).
    for p in [&mut alice, &mut bob] {
        let snap = p
            .client
            .recv_type("snapshot", Duration::from_secs(15))
            .await
            .unwrap_or_else(|| panic!("{} sees the table again: {:?}", p.name, p.client.seen));
        assert!(snap["state"]["fence"].as_u64() > Some(fence + 1), "{snap}");
        assert!(
            !p.client.seen.iter().any(|v| v["type"] == "frozen"),
            "{} was told frozen, which Postgres never recorded: {:?}",
            p.name,
            p.client.seen
        );
    }
    let (state, frozen_events): (String, i64) = sqlx::query_as(
        "SELECT state, (SELECT COUNT(*) FROM table_events WHERE table_id = $1 AND to_state = 'frozen') \
         FROM tables WHERE id = $1",
    )
    .bind(&t)
    .fetch_one(&pool)
    .await
    .expect("state");
    assert_eq!((state.as_str(), frozen_events), ("open", 0));
}
