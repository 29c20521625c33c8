//! SIGTERM redeploys (I7): the owner drains — the hand in progress finishes
//! or is voided at the drain deadline — persists, releases every lease and
//! exits 0; a second instance hosts the table within about a second.

mod common;
mod play;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::{test_db, unique_env, Server, ServerConfig};
use play::{db_stacks, stacks_of, Player};
use serde_json::{json, Value};
use sqlx::Row;

/// Waits until `b` hosts the table; returns how long after `since` it did.
async fn hosted_by(b: &Server, table: &str, since: Instant, within: Duration) -> Option<Duration> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let v = b.table(table).await;
        if v["hosted_here"] == true && v["owner"] == b.cfg.instance_id.as_str() {
            return Some(since.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

struct Setup {
    db: common::TestDb,
    a: Server,
    b: Server,
    table: String,
    players: Vec<Player>,
    turn: Value,
}

/// A hosts a heads-up table with a hand in progress; B runs beside it.
async fn setup(action_timeout_ms: u64, drain_timeout_ms: u64) -> Setup {
    let db = test_db().await;
    let env = unique_env();
    let cfg = ServerConfig::new(&db, &env)
        .with_env(
            "PITBOSS__TABLE__ACTION_TIMEOUT_MS",
            &action_timeout_ms.to_string(),
        )
        .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "100")
        .with_env(
            "PITBOSS__SHUTDOWN__DRAIN_TIMEOUT_MS",
            &drain_timeout_ms.to_string(),
        );
    let a = Server::start(cfg.clone().with_instance("inst-a")).await;
    let table = play::new_table(&a).await;
    let b = Server::start(cfg.with_instance("inst-b")).await;
    a.grant("alice", 1000).await;
    a.grant("bob", 1000).await;
    let alice = Player::sit(&a, &table, "alice", 0, 100).await;
    let mut bob = Player::sit(&a, &table, "bob", 1, 100).await;
    let turn = bob
        .client
        .recv_event("turn", Duration::from_secs(10))
        .await
        .expect("a hand is in progress");
    Setup {
        db,
        a,
        b,
        table,
        players: vec![alice, bob],
        turn,
    }
}

#[tokio::test]
async fn sigterm_lets_the_hand_in_progress_finish_then_the_next_instance_hosts_the_table_within_a_second(
) {
    // Idle players: the action clock (600 ms) plays the hand out, well
    // inside the 10 s drain deadline.
    let Setup {
        db,
        a,
        b,
        table,
        mut players,
        turn,
    } = setup(600, 10_000).await;
    let hand = turn["hand"].as_u64().expect("hand");
    a.sigterm();

    // Readiness goes false at once; the hand carries on meanwhile.
    let (status, _) = a.get("/readyz").await;
    assert_eq!(status, 503, "readyz while draining");
    let status = a
        .wait_exit(Duration::from_secs(15))
        .await
        .expect("a exits after the drain");
    let exited = Instant::now();
    assert_eq!(status.code(), Some(0), "graceful exit code");
    let took = hosted_by(&b, &table, exited, Duration::from_secs(5)).await;
    let took = took.expect("B hosts the table");
    assert!(
        took < Duration::from_millis(1500),
        "B hosted the table {took:?} after A exited"
    );

    // The hand in progress completed on A: its result is in Postgres.
    for p in &mut players {
        let close = p.client.expect_close(Duration::from_secs(5)).await;
        assert_eq!(
            close,
            Some((1012, "server_shutdown".to_string())),
            "{}",
            p.name
        );
    }
    let ended = players[0]
        .client
        .seen
        .iter()
        .find(|v| v["kind"] == "hand_ended" && v["hand"] == hand)
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "hand {hand} finished during the drain: {:?}",
                players[0].client.seen
            )
        });
    assert!(
        !players[0]
            .client
            .seen
            .iter()
            .any(|v| v["kind"] == "hand_started" && v["hand"].as_u64() > Some(hand)),
        "no hand was dealt after SIGTERM"
    );
    // B deals on from there, so compare with the hand's own row.
    let pool = db.pool().await;
    let row = sqlx::query("SELECT fence, result FROM hands WHERE table_id = $1 AND hand_no = $2")
        .bind(&table)
        .bind(hand as i64)
        .fetch_one(&pool)
        .await
        .expect("the hand row");
    assert_eq!(
        row.get::<i64, _>("fence"),
        1,
        "written by A under its fence"
    );
    let result: Value = row.get("result");
    let written: HashMap<u64, u64> = result["seats"]
        .as_array()
        .expect("seats")
        .iter()
        .map(|s| {
            (
                s["seat"].as_u64().expect("seat"),
                s["end_stack"].as_u64().expect("end_stack"),
            )
        })
        .collect();
    assert_eq!(written, stacks_of(&ended), "{result}");
    assert_eq!(b.audit().await["delta"], 0);
    let view = b.table(&table).await;
    assert_eq!(view["fence"], 2, "{view}");
    assert_eq!(view["state"], "open", "{view}");
    assert!(
        a.logs_contain("drain_finished"),
        "A logged the end of its drain"
    );

    // A player reconnects to B with the last seq A sent: B numbers its
    // events from a later epoch, so the client gets a fresh snapshot, never
    // B's events misread as the continuation of A's.
    let last_on_a = players[0].client.last_seq(&table).expect("a seq from A");
    let mut again = common::WsClient::connect(&b, &common::mint_token("alice"))
        .await
        .expect("connect to B");
    again
        .send(json!({"type": "join", "table": table, "since": last_on_a}))
        .await;
    let first = again
        .recv_json(Duration::from_secs(5))
        .await
        .expect("an answer from B");
    assert_eq!(first["type"], "snapshot", "{first}");
    assert_eq!(first["state"]["owner"], "inst-b", "{first}");
    assert!(
        first["seq"].as_u64() > Some(last_on_a),
        "{first} after {last_on_a}"
    );
    let (_, events) = b.admin_get(&format!("/admin/tables/{table}/events")).await;
    let states: Vec<&str> = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["to"].as_str())
        .collect();
    assert!(states.contains(&"released"), "{events}");
    assert!(
        !states.contains(&"frozen"),
        "a drain never freezes: {events}"
    );
}

#[tokio::test]
async fn sigterm_voids_a_hand_that_outlasts_the_drain_deadline() {
    // A 60 s action clock keeps the hand open past the 500 ms drain deadline.
    let Setup {
        db,
        a,
        b,
        table,
        mut players,
        turn,
    } = setup(60_000, 500).await;
    let hand = turn["hand"].as_u64().expect("hand");
    let pool = db.pool().await;
    let before = db_stacks(&pool, &table).await;
    a.sigterm();
    let status = a.wait_exit(Duration::from_secs(10)).await.expect("a exits");
    assert_eq!(status.code(), Some(0));
    let exited = Instant::now();
    let took = hosted_by(&b, &table, exited, Duration::from_secs(5))
        .await
        .expect("B hosts the table");
    assert!(
        took < Duration::from_millis(1500),
        "B hosted the table {took:?} after A exited"
    );

    let voided = players[0]
        .client
        .recv_until(|v| v["kind"] == "hand_voided", Duration::from_secs(1))
        .await
        .or_else(|| {
            players[0]
                .client
                .seen
                .iter()
                .find(|v| v["kind"] == "hand_voided")
                .cloned()
        })
        .expect("the hand was voided");
    assert_eq!(voided["hand"].as_u64(), Some(hand));
    // Stacks are back at the last boundary (the buy-ins); no hand row.
    assert_eq!(stacks_of(&voided), before);
    assert_eq!(db_stacks(&pool, &table).await, before);
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM hands WHERE table_id = $1")
        .bind(&table)
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(rows, 0, "a voided hand is never half-applied");
    assert_eq!(b.audit().await["delta"], 0);
    // The voided number is burnt: the table remembers it.
    assert_eq!(b.table(&table).await["hand_no"].as_u64(), Some(hand));
    for p in &mut players {
        let close = p.client.expect_close(Duration::from_secs(5)).await;
        assert_eq!(
            close,
            Some((1012, "server_shutdown".to_string())),
            "{}",
            p.name
        );
    }
}

#[tokio::test]
async fn a_player_who_left_during_a_voided_hand_is_cashed_out_at_the_stack_from_before_it() {
    let db = test_db().await;
    let env = unique_env();
    let a = Server::start(
        ServerConfig::new(&db, &env)
            .with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "20000")
            .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "100")
            .with_env("PITBOSS__SHUTDOWN__DRAIN_TIMEOUT_MS", "300"),
    )
    .await;
    let table = play::new_table(&a).await;
    for p in ["alice", "bob", "carol"] {
        a.grant(p, 1000).await;
    }
    let mut alice = Player::sit(&a, &table, "alice", 0, 100).await;
    let _bob = Player::sit(&a, &table, "bob", 1, 100).await;
    let mut carol = Player::sit(&a, &table, "carol", 2, 100).await;
    alice
        .client
        .recv_event("turn", Duration::from_secs(10))
        .await
        .expect("a hand is in progress");
    // Carol leaves mid-hand: folded now, her seat vacated when the hand ends,
    // which here is the void at the drain deadline.
    carol
        .client
        .send(json!({"type": "leave", "table": table}))
        .await;
    alice
        .client
        .recv_until(
            |v| v["kind"] == "action" && v["seat"] == 2,
            Duration::from_secs(5),
        )
        .await
        .expect("carol folded");
    a.sigterm();
    let status = a.wait_exit(Duration::from_secs(10)).await.expect("a exits");
    assert_eq!(status.code(), Some(0));

    let pool = db.pool().await;
    let seats = db_stacks(&pool, &table).await;
    assert!(
        !seats.contains_key(&2),
        "carol's seat is vacated: {seats:?}"
    );
    let carol_wallet: i64 =
        sqlx::query_scalar("SELECT balance FROM accounts WHERE player = 'carol'")
            .fetch_one(&pool)
            .await
            .expect("carol's wallet");
    assert_eq!(carol_wallet, 1000, "her buy-in is back, as before the void");
    let audit: (String,) = sqlx::query_as(
        "SELECT ((SELECT SUM(balance) FROM accounts) + (SELECT COALESCE(SUM(stack), 0) FROM seats) \
         - (SELECT SUM(granted) FROM accounts))::TEXT",
    )
    .fetch_one(&pool)
    .await
    .expect("audit");
    assert_eq!(audit.0, "0");
}

#[tokio::test]
async fn a_second_signal_releases_every_lease_at_once() {
    let Setup {
        db: _db,
        a,
        b,
        table,
        ..
    } = setup(60_000, 60_000).await;
    a.sigterm();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(a.is_running(), "the first signal waits for the hand");
    a.sigint();
    let status = a
        .wait_exit(Duration::from_secs(5))
        .await
        .expect("a exits on the second signal");
    assert_eq!(status.code(), Some(0));
    let exited = Instant::now();
    let took = hosted_by(&b, &table, exited, Duration::from_secs(5))
        .await
        .expect("B hosts the table");
    assert!(
        took < Duration::from_millis(1500),
        "released at once: B hosted it {took:?} after A exited"
    );
    assert_eq!(b.audit().await["delta"], 0);
}

#[tokio::test]
async fn a_drained_table_is_hosted_elsewhere_while_another_still_finishes_its_hand() {
    // The hand in progress may run until the 8 s drain deadline (nobody
    // acts, and the action clock is 60 s).
    // `_db` keeps the database until the test ends.
    let Setup {
        db: _db,
        a,
        b,
        table: busy,
        mut players,
        ..
    } = setup(60_000, 8_000).await;
    let idle = play::new_table(&a).await;
    assert_eq!(a.table(&idle).await["owner"], "inst-a");
    let signalled = Instant::now();
    a.sigterm();
    // The idle table drains at once: its lease goes back then, not when the
    // busy table is done, and the next instance takes it meanwhile.
    let took = hosted_by(&b, &idle, signalled, Duration::from_secs(4))
        .await
        .expect("B hosts the drained table while A still drains the other");
    assert!(
        a.is_running(),
        "A exited before B hosted the drained table ({took:?} after the signal)"
    );
    assert_ne!(b.table(&busy).await["owner"], "inst-b");
    // The busy table follows once its hand is voided at the deadline.
    let status = a.wait_exit(Duration::from_secs(15)).await.expect("A exits");
    assert_eq!(status.code(), Some(0));
    hosted_by(&b, &busy, Instant::now(), Duration::from_secs(5))
        .await
        .expect("B hosts the busy table after A exits");
    assert!(
        players[0]
            .client
            .recv_until(|v| v["kind"] == "hand_voided", Duration::from_secs(1))
            .await
            .is_some()
            || players[0]
                .client
                .seen
                .iter()
                .any(|v| v["kind"] == "hand_voided"),
        "the busy table's hand was voided at the deadline"
    );
    assert_eq!(b.audit().await["delta"], 0);
}

/// Sends `frame`, whose write (`what`) then waits on the table's row held
/// by the test, and SIGTERMs `a`: A must still be up 300 ms later, waiting
/// for that write. The row is released on return.
async fn drain_while_waiting_on_the_row(
    db: &common::TestDb,
    a: &Server,
    table: &str,
    client: &mut common::WsClient,
    frame: Value,
    what: &str,
) {
    let lock = db.lock_table_row(table).await;
    client.send(frame).await;
    assert!(
        db.one_waits_for_a_lock().await,
        "the {what} never waited on the row lock"
    );
    a.sigterm();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(a.is_running(), "A stopped before the {what} had an outcome");
    lock.rollback().await.expect("release the row");
}

#[tokio::test]
async fn a_drain_waits_for_a_buy_in_in_flight_and_the_player_is_seated_where_the_table_goes() {
    // The heads-up table's hand is voided at the 1 s drain deadline.
    let Setup { db, a, b, .. } = setup(60_000, 1_000).await;
    let t = play::new_table(&a).await;
    a.grant("carol", 1000).await;
    let mut carol = common::WsClient::connect(&a, &common::mint_token("carol"))
        .await
        .expect("connect");
    carol.send(json!({"type": "join", "table": t})).await;
    carol
        .recv_type("snapshot", Duration::from_secs(10))
        .await
        .expect("carol joined");

    // Carol's buy-in waits on the table's row while A drains.
    let sit = json!({"type": "sit", "table": t, "seat": 3, "buy_in": 100});
    drain_while_waiting_on_the_row(&db, &a, &t, &mut carol, sit, "buy-in").await;
    let pool = db.pool().await;

    // The buy-in lands before the table is released: carol is seated (not
    // told the table stopped), and the seat goes with the table.
    let seated = carol
        .recv_until(
            |v| v["kind"] == "seated" || v["type"] == "error",
            Duration::from_secs(10),
        )
        .await
        .expect("carol's sit has an outcome");
    assert_eq!(seated["kind"], "seated", "{:?}", carol.seen);
    let status = a.wait_exit(Duration::from_secs(15)).await.expect("A exits");
    assert_eq!(status.code(), Some(0));
    hosted_by(&b, &t, Instant::now(), Duration::from_secs(5))
        .await
        .expect("B hosts carol's table");
    let seats = db_stacks(&pool, &t).await;
    assert_eq!(seats.get(&3), Some(&100), "{seats:?}");
    assert_eq!(b.audit().await["delta"], 0);
}

#[tokio::test]
async fn a_drain_waits_for_a_cash_out_in_flight_and_the_seat_is_empty_where_the_table_goes() {
    let Setup { db, a, b, .. } = setup(60_000, 1_000).await;
    let t = play::new_table(&a).await;
    a.grant("carol", 1000).await;
    // Alone at the table: no hand is dealt, so her leave cashes out at once.
    let mut carol = Player::sit(&a, &t, "carol", 3, 100).await;

    // Carol's cash-out waits on the table's row while A drains.
    let leave = json!({"type": "leave", "table": t});
    drain_while_waiting_on_the_row(&db, &a, &t, &mut carol.client, leave, "cash-out").await;
    let pool = db.pool().await;

    // The cash-out lands before the table is released: carol is told she
    // left, and her chips are in her wallet, not on the released table.
    let left = carol
        .client
        .recv_until(
            |v| v["kind"] == "left" || v["type"] == "error",
            Duration::from_secs(10),
        )
        .await
        .expect("carol's leave has an outcome");
    assert_eq!(left["kind"], "left", "{:?}", carol.client.seen);
    let status = a.wait_exit(Duration::from_secs(15)).await.expect("A exits");
    assert_eq!(status.code(), Some(0));
    assert!(db_stacks(&pool, &t).await.is_empty());
    let (status, wallet) = b.admin_get("/admin/players/carol").await;
    assert_eq!(status, 200, "{wallet}");
    assert_eq!(wallet["balance"], 1000, "{wallet}");
    assert_eq!(b.audit().await["delta"], 0);
}
