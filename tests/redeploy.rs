//! SIGTERM redeploys (I7, I15): the owner drains at once (the hand in
//! progress is in the journal and goes with the table; only the writes in
//! flight are waited for), releases every lease and exits 0; a second
//! instance hosts the table within about a second and resumes the hand.

mod common;
mod play;

use std::time::{Duration, Instant};

use common::{test_db, unique_env, Server, ServerConfig};
use play::{db_stacks, Player};
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
async fn sigterm_releases_a_table_mid_hand_at_once_and_the_next_instance_hosts_it_within_a_second()
{
    // A 60 s action clock and idle players: the hand would outlast any
    // drain that waited for it.
    let Setup {
        db,
        a,
        b,
        table,
        mut players,
        turn,
    } = setup(60_000, 10_000).await;
    let hand = turn["hand"].as_u64().expect("hand");
    let signalled = Instant::now();
    a.sigterm();
    let status = a
        .wait_exit(Duration::from_secs(15))
        .await
        .expect("a exits after the drain");
    let exited = Instant::now();
    assert_eq!(status.code(), Some(0), "graceful exit code");
    let drained = exited - signalled;
    assert!(
        drained < Duration::from_millis(1500),
        "A took {drained:?} to drain a table mid-hand"
    );
    let took = hosted_by(&b, &table, exited, Duration::from_secs(5)).await;
    let took = took.expect("B hosts the table");
    assert!(
        took < Duration::from_millis(1500),
        "B hosted the table {took:?} after A exited"
    );

    for p in &mut players {
        let close = p.client.expect_close(Duration::from_secs(5)).await;
        assert_eq!(
            close,
            Some((1012, "server_shutdown".to_string())),
            "{}",
            p.name
        );
        // Nothing ended, voided or dealt on A after the signal: the hand
        // went with the table.
        let on_a = |v: &Value| match v["kind"].as_str() {
            Some("hand_ended" | "hand_voided") => v["hand"].as_u64() >= Some(hand),
            Some("hand_started") => v["hand"].as_u64() > Some(hand),
            _ => false,
        };
        assert!(!p.client.seen.iter().any(on_a), "{:?}", p.client.seen);
    }
    let pool = db.pool().await;
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM hands WHERE table_id = $1")
        .bind(&table)
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(rows, 0, "the hand is still in progress, on B");
    let view = b.table(&table).await;
    assert_eq!(view["fence"], 2, "{view}");
    assert_eq!(view["state"], "open", "{view}");
    assert_eq!(b.audit().await["delta"], 0);
    assert!(
        a.logs_contain("drain_finished"),
        "A logged the end of its drain"
    );

    // A player reconnects to B with a seq A sent: B rebuilt what A told
    // of the hand from the journal, so it sends the events missed after
    // it (as A numbered them), and a fresh join gets a snapshot of the
    // same hand numbered from B's later epoch.
    let seen = &players[0].client.seen;
    let from_a: Vec<&Value> = seen
        .iter()
        .filter(|v| v["type"] == "event" && v["table"] == table.as_str())
        .collect();
    let last_on_a = from_a
        .last()
        .and_then(|v| v["seq"].as_u64())
        .expect("a seq from A");
    let since = from_a[from_a.len() - 3]["seq"].as_u64().expect("seq");
    let mut again = common::WsClient::connect(&b, &common::mint_token("alice"))
        .await
        .expect("connect to B");
    again
        .send(json!({"type": "join", "table": table, "since": since}))
        .await;
    while again.recv_json(Duration::from_millis(500)).await.is_some() {}
    let missed: Vec<Value> = from_a[from_a.len() - 2..]
        .iter()
        .map(|v| (*v).clone())
        .collect();
    assert_eq!(
        again.seen[..again.seen.len().min(2)],
        missed[..],
        "the two events after {since}, as A told them"
    );
    // Then B's own: the open decision told again (an act sent while the
    // owner changed was never applied), its deadline the one A announced,
    // numbered from B's epoch.
    let retold = &again.seen[2..];
    assert_eq!(retold.len(), 1, "{retold:?}");
    let (turn, again_turn) = (&missed[1], &retold[0]);
    assert_eq!(turn["kind"], "turn", "{turn}");
    for field in ["kind", "hand", "seat", "decision", "legal", "deadline_ms"] {
        assert_eq!(again_turn[field], turn[field], "{field}: {again_turn}");
    }
    assert!(
        again_turn["seq"].as_u64().map(|s| s >> 32) > turn["seq"].as_u64().map(|s| s >> 32),
        "{again_turn} is B's"
    );
    let mut fresh = common::WsClient::connect(&b, &common::mint_token("alice"))
        .await
        .expect("connect to B");
    fresh.send(json!({"type": "join", "table": table})).await;
    let first = fresh
        .recv_json(Duration::from_secs(5))
        .await
        .expect("an answer from B");
    assert_eq!(first["type"], "snapshot", "{first}");
    assert_eq!(first["state"]["owner"], "inst-b", "{first}");
    assert_eq!(first["state"]["game"]["hand"], hand, "{first}");
    assert_eq!(first["state"]["game"]["hand_in_progress"], true, "{first}");
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

/// The hands B recorded at `table`, with the seats each result names.
async fn recorded_on_b(pool: &sqlx::PgPool, table: &str) -> Vec<(u64, Vec<u64>)> {
    let rows = sqlx::query(
        "SELECT hand_no, result FROM hands WHERE table_id = $1 AND fence = 2 ORDER BY hand_no",
    )
    .bind(table)
    .fetch_all(pool)
    .await
    .expect("hands");
    rows.iter()
        .map(|r| {
            let result: Value = r.get("result");
            let seats = result["seats"]
                .as_array()
                .map(|s| s.iter().filter_map(|s| s["seat"].as_u64()).collect())
                .unwrap_or_default();
            (
                u64::try_from(r.get::<i64, _>("hand_no")).unwrap_or(0),
                seats,
            )
        })
        .collect()
}

#[tokio::test]
async fn a_player_who_sat_down_during_the_hand_keeps_the_seat_where_the_hand_resumes() {
    // A short clock plays the hands out on B with nobody acting.
    let Setup {
        db,
        a,
        b,
        table,
        turn,
        ..
    } = setup(1_500, 10_000).await;
    let hand = turn["hand"].as_u64().expect("hand");
    a.grant("carol", 1000).await;
    // Carol sits down during the hand: her buy-in is recorded, and she is
    // dealt in from the next hand, wherever that is dealt.
    let _carol = Player::sit(&a, &table, "carol", 2, 100).await;
    a.sigterm();
    let status = a.wait_exit(Duration::from_secs(10)).await.expect("a exits");
    assert_eq!(status.code(), Some(0));
    hosted_by(&b, &table, Instant::now(), Duration::from_secs(5))
        .await
        .expect("B hosts the table");

    // B ends the resumed hand (by the clock) and deals the next with carol.
    let pool = db.pool().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut hands = recorded_on_b(&pool, &table).await;
    while hands.len() < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        hands = recorded_on_b(&pool, &table).await;
    }
    let dealt = hands.len() >= 2;
    assert!(dealt, "B recorded the resumed hand and the next: {hands:?}");
    assert_eq!(hands[0].0, hand, "the resumed hand: {hands:?}");
    assert_eq!(
        hands[0].1,
        vec![0, 1],
        "carol sat out the resumed hand: {hands:?}"
    );
    assert!(hands[1].1.contains(&2), "carol is dealt in next: {hands:?}");
    assert_eq!(b.audit().await["delta"], 0);
}

#[tokio::test]
async fn a_second_signal_releases_every_lease_while_a_write_still_waits() {
    let Setup {
        db, a, b, table, ..
    } = setup(60_000, 60_000).await;
    a.grant("carol", 1000).await;
    let mut carol = common::WsClient::connect(&a, &common::mint_token("carol"))
        .await
        .expect("connect");
    carol.send(json!({"type": "join", "table": table})).await;
    carol
        .recv_type("snapshot", Duration::from_secs(10))
        .await
        .expect("carol joined");
    // Carol's buy-in waits on the table's row: the first signal waits for
    // it (up to the 60 s drain timeout), the second does not.
    let lock = db.lock_table_row(&table).await;
    carol
        .send(json!({"type": "sit", "table": table, "seat": 3, "buy_in": 100}))
        .await;
    assert!(db.one_waits_for_a_lock().await, "the buy-in never waited");
    a.sigterm();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(a.is_running(), "the first signal waits for the write");
    a.sigint();
    let status = a
        .wait_exit(Duration::from_secs(5))
        .await
        .expect("a exits on the second signal");
    assert_eq!(status.code(), Some(0));
    let exited = Instant::now();
    lock.rollback().await.expect("release the row");
    let took = hosted_by(&b, &table, exited, Duration::from_secs(5))
        .await
        .expect("B hosts the table");
    assert!(
        took < Duration::from_millis(1500),
        "released at once: B hosted it {took:?} after A exited"
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
