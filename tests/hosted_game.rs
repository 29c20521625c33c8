//! The runtime hosts a game it knows nothing of: Nim, a game of the tests'
//! own (`tests/support/nim.rs`), served by a binary that adds it to the
//! registry beside hold'em (`tests/support/test_server.rs`). Two real
//! instances: a player at the owner (`/ws`) and one at the other instance,
//! relayed to the owner (`/ws/relay`), join, sit with chips from their
//! wallets, act, let the action clock answer for them, reach a boundary
//! whose settlement Postgres records before anyone is told, and follow the
//! table when its owner drains to the other instance, where play goes on.
//! Nothing in any of it is hold'em's.

mod common;

use std::time::Duration;

use common::{mint_token, test_db, unique_env, Server, ServerConfig, WsClient};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(15);

/// The next event of `kind` for `table` that `pred` accepts.
async fn event(c: &mut WsClient, kind: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let found = c
        .recv_until(
            |v| v["type"] == "event" && v["kind"] == kind && pred(v),
            WAIT,
        )
        .await;
    found.unwrap_or_else(|| panic!("no {kind} event; last frames: {:?}", last(c)))
}

fn last(c: &WsClient) -> Vec<&Value> {
    c.seen.iter().rev().take(6).collect()
}

/// The `turn` for `seat`; its decision number.
async fn turn(c: &mut WsClient, seat: u64) -> u64 {
    let t = event(c, "turn", |v| v["seat"] == seat).await;
    assert!(
        t["deadline_ms"].as_i64().is_some(),
        "the clock rides on the turn: {t}"
    );
    t["decision"].as_u64().expect("decision")
}

fn take(table: &str, decision: u64, stones: u64) -> Value {
    json!({"type": "act", "table": table, "decision": decision, "take": stones})
}

async fn join(c: &mut WsClient, table: &str) -> Value {
    c.send(json!({"type": "join", "table": table})).await;
    let snapshot = c.recv_type("snapshot", WAIT).await;
    let snapshot = snapshot.unwrap_or_else(|| panic!("no snapshot: {:?}", last(c)));
    assert_eq!(snapshot["state"]["game_kind"], "nim", "{snapshot}");
    snapshot
}

/// The boundaries Postgres holds for `table`: `(number, result, fence)`.
async fn boundaries(db: &common::TestDb, table: &str) -> Vec<(i64, Value, i64)> {
    sqlx::query_as(
        "SELECT number, result, fence FROM boundaries WHERE table_id = $1 ORDER BY number",
    )
    .bind(table)
    .fetch_all(&db.pool().await)
    .await
    .expect("read boundaries")
}

/// The journal Postgres holds for `table`, in order: `(number, fence, seq,
/// kind, seat, command, length of the seed)`.
type JournalRow = (
    i64,
    i64,
    i32,
    String,
    Option<i16>,
    Option<Value>,
    Option<i32>,
);

async fn journal(db: &common::TestDb, table: &str) -> Vec<JournalRow> {
    sqlx::query_as(
        "SELECT number, fence, seq, kind, seat, command, length(seed) FROM journal \
         WHERE table_id = $1 ORDER BY number, fence, seq",
    )
    .bind(table)
    .fetch_all(&db.pool().await)
    .await
    .expect("read the journal")
}

/// `(seat, player, stack)` as a table view lists its seats.
fn seats(view: &Value) -> Vec<(u64, String, u64)> {
    let seats = view["seats"].as_array().expect("seats");
    seats
        .iter()
        .map(|s| {
            (
                s["seat"].as_u64().expect("seat"),
                s["player"].as_str().expect("player").to_string(),
                s["stack"].as_u64().expect("stack"),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_game_the_runtime_does_not_know_is_played_direct_and_relayed_and_drains_to_another_instance(
) {
    let db = test_db().await;
    let env = unique_env();
    let cfg = ServerConfig::new(&db, &env)
        .with_test_games()
        .with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "1000")
        .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "5000");
    let a = Server::start(cfg.clone().with_instance("nim-a")).await;
    let b = Server::start(cfg.with_instance("nim-b")).await;

    // Created through the admin API like any table; refused like any
    // game's bad config.
    let (status, refused) = b
        .admin_post(
            "/admin/tables",
            json!({"game": "nim", "pile": 0, "stake": 5}),
        )
        .await;
    assert_eq!(
        (status, &refused["error"]["code"]),
        (400, &json!("bad_field")),
        "{refused}"
    );
    let view = b
        .create_table(json!({"game": "nim", "pile": 5, "stake": 5}))
        .await;
    assert_eq!(view["game_kind"], "nim", "{view}");
    assert_eq!(view["config"], json!({"pile": 5, "stake": 5}));
    let t = view["id"].as_str().expect("id").to_string();
    a.grant("alice", 100).await;
    a.grant("bob", 100).await;

    // alice plays at the owner; bob at the other instance, relayed.
    let mut alice = WsClient::connect(&b, &mint_token("alice"))
        .await
        .expect("alice");
    let mut bob = WsClient::connect(&a, &mint_token("bob"))
        .await
        .expect("bob");
    for c in [&mut alice, &mut bob] {
        let snapshot = join(c, &t).await;
        assert_eq!(snapshot["state"]["owner"], "nim-b", "{snapshot}");
    }
    alice
        .send(json!({"type": "sit", "table": t, "seat": 0, "buy_in": 20}))
        .await;
    bob.send(json!({"type": "sit", "table": t, "seat": 1, "buy_in": 20}))
        .await;
    for c in [&mut alice, &mut bob] {
        event(c, "seated", |v| v["seat"] == 1).await;
    }
    assert_eq!(a.audit().await["delta"], 0);

    // Game 1: alice first. A take out of turn and an illegal take are
    // refused with the protocol's codes and change nothing.
    let d = turn(&mut alice, 0).await;
    bob.send(take(&t, d, 1)).await;
    let e = bob.recv_type("error", WAIT).await.expect("refused");
    assert_eq!(e["code"], "not_your_turn", "{e}");
    alice.send(take(&t, d, 4)).await;
    let e = alice.recv_type("error", WAIT).await.expect("refused");
    assert_eq!(e["code"], "illegal_action", "{e}");
    alice.send(take(&t, d, 1)).await;
    event(&mut alice, "took", |v| v["seat"] == 0 && v["left"] == 4).await;
    // bob lets his clock run out: it takes one stone for him.
    let d = turn(&mut alice, 0).await;
    let clocked = event(&mut bob, "took", |v| v["seat"] == 1).await;
    assert_eq!(
        (&clocked["stones"], &clocked["left"]),
        (&json!(1), &json!(3))
    );
    alice.send(take(&t, d, 3)).await;
    // The result is told once Postgres holds it, to both.
    for c in [&mut alice, &mut bob] {
        let won = event(c, "won", |_| true).await;
        assert_eq!(
            (&won["game"], &won["seat"]),
            (&json!(1), &json!(0)),
            "{won}"
        );
    }
    let recorded = boundaries(&db, &t).await;
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!((recorded[0].0, &recorded[0].1), (1, &json!({"winner": 0})));
    let fence_b = recorded[0].2;
    // Every command the game applied was committed before it was told, in
    // the order it was applied; the refused ones left nothing. The deal's
    // seed stays in Postgres.
    let act = |take: u64| Some(json!({"take": take}));
    assert_eq!(
        journal(&db, &t).await,
        vec![
            (
                1,
                fence_b,
                0,
                "start".into(),
                None,
                Some(json!({"seats": [[0, "alice", 20], [1, "bob", 20]]})),
                Some(32)
            ),
            (1, fence_b, 1, "act".into(), Some(0), act(1), None),
            (1, fence_b, 2, "timeout".into(), Some(1), None, None),
            (1, fence_b, 3, "act".into(), Some(0), act(3), None),
        ]
    );
    assert_eq!(
        seats(&a.table(&t).await),
        vec![(0, "alice".into(), 25), (1, "bob".into(), 15)]
    );
    assert_eq!(a.audit().await["delta"], 0);

    // The owner drains between games (the next one is 5 s away); the table
    // goes to the other instance. bob's relayed connection follows it
    // there; alice, whose instance is gone, joins again at the other one.
    b.sigterm();
    assert!(b.wait_exit(WAIT).await.is_some(), "the owner exited");
    let moved = bob
        .recv_until(
            |v| v["type"] == "snapshot" && v["state"]["owner"] == "nim-a",
            WAIT,
        )
        .await;
    let moved = moved.unwrap_or_else(|| panic!("bob did not follow: {:?}", last(&bob)));
    assert_eq!(
        moved["state"]["game"]["seats"],
        json!([[0, "alice", 25], [1, "bob", 15]])
    );
    let mut alice = WsClient::connect(&a, &mint_token("alice"))
        .await
        .expect("alice again");
    let snapshot = join(&mut alice, &t).await;
    assert_eq!(snapshot["state"]["owner"], "nim-a", "{snapshot}");

    // Game 2 at the new owner: the loser (bob) moves first, and the
    // result is recorded under the new owner's fence.
    let d = turn(&mut bob, 1).await;
    bob.send(take(&t, d, 2)).await;
    let d = turn(&mut alice, 0).await;
    alice.send(take(&t, d, 3)).await;
    for c in [&mut alice, &mut bob] {
        let won = event(c, "won", |v| v["game"] == 2).await;
        assert_eq!(won["seat"], 0, "{won}");
    }
    let recorded = boundaries(&db, &t).await;
    assert_eq!(recorded.len(), 2, "{recorded:?}");
    assert!(
        recorded[1].2 > fence_b,
        "recorded under the new fence: {recorded:?}"
    );
    // Game 1's commands went with its successor's boundary; game 2's are
    // kept, under the new owner's fence.
    let fence_a = recorded[1].2;
    let kept = journal(&db, &t).await;
    assert!(
        kept.iter().all(|row| (row.0, row.1) == (2, fence_a)),
        "{kept:?}"
    );
    assert_eq!(kept.len(), 3, "start and two takes: {kept:?}");
    assert_eq!(
        seats(&a.table(&t).await),
        vec![(0, "alice".into(), 30), (1, "bob".into(), 10)]
    );
    assert_eq!(a.audit().await["delta"], 0);
}
