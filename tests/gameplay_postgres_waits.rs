//! Buy-ins and cash-outs that wait on Postgres never hold up the table: the
//! hand in progress goes on meanwhile, the waiting player's seat (and, for
//! a buy-in, name) stays reserved until Postgres has answered, no hand is
//! dealt to a seat whose cash-out is in flight, and a hand that ends while
//! a buy-in holds the only pool connection records both.

mod common;
mod gameplay_shared;
mod play;

use std::time::Duration;

use common::{test_db, unique_env, Server, ServerConfig, WsClient};
use gameplay_shared::{expect_error, joined};
use play::{db_stacks, Player};
use serde_json::{json, Value};

const SECS: fn(u64) -> Duration = Duration::from_secs;

/// Lock and statement budgets longer than a test waits, so a buy-in can
/// wait on a row lock for as long as the test holds it, and a clock that
/// never acts for a player meanwhile.
fn patient(cfg: ServerConfig) -> ServerConfig {
    cfg.with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "60000")
        .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "50")
        .with_env("PITBOSS__DATABASE__LOCK_TIMEOUT_MS", "20000")
        .with_env("PITBOSS__DATABASE__STATEMENT_TIMEOUT_MS", "25000")
}

/// Carol sits at seat 4 while the test holds the table's row: her buy-in
/// waits on the lock until the returned transaction ends.
async fn sit_behind_the_row_lock(
    db: &common::TestDb,
    table: &str,
    carol: &mut WsClient,
) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let lock = db.lock_table_row(table).await;
    carol
        .send(json!({"type": "sit", "table": table, "seat": 4, "buy_in": 100}))
        .await;
    assert!(
        db.one_waits_for_a_lock().await,
        "carol's buy-in never waited on the row lock"
    );
    lock
}

/// `to_act` answers the hand's first turn with `action`; the other player
/// must be told it within 5 s, while a write of `behind` still waits on the
/// table's row.
async fn act_is_answered_meanwhile(
    t: &str,
    to_act: &mut Player,
    other: &mut Player,
    first: &Value,
    action: &str,
    behind: &str,
) {
    to_act
        .client
        .send(json!({
            "type": "act", "table": t, "hand": first["hand"],
            "decision": first["decision"], "action": action
        }))
        .await;
    let told = other
        .client
        .recv_until(
            |v| {
                v["kind"] == "action"
                    && v["hand"] == first["hand"]
                    && v["seat"] == first["seat"]
                    && v["action"] == action
            },
            SECS(5),
        )
        .await;
    assert!(
        told.is_some(),
        "the act waited behind the {behind}: {:?}",
        other.client.seen
    );
}

#[tokio::test]
async fn a_buy_in_waiting_on_postgres_never_holds_up_the_hand_in_progress() {
    let db = test_db().await;
    let env = unique_env();
    // A lock budget longer than this test waits for the act, so a table that
    // made its act wait behind the buy-in could not answer in time.
    let server = Server::start(patient(ServerConfig::new(&db, &env))).await;
    let (t, mut to_act, mut other, first) = play::heads_up_first_turn(&server, 100).await;
    server.grant("carol", 1000).await;
    server.grant("dave", 1000).await;
    let mut carol = joined(&server, &t, "carol").await;
    let mut carol_again = joined(&server, &t, "carol").await;
    let mut dave = joined(&server, &t, "dave").await;

    // Carol's buy-in waits on the table's row, held elsewhere.
    let lock = sit_behind_the_row_lock(&db, &t, &mut carol).await;
    let pool = db.pool().await;

    // Her seat and her name are reserved while it waits.
    expect_error(
        &mut dave,
        json!({"type": "sit", "table": t, "seat": 4, "buy_in": 100}),
        "seat_taken",
    )
    .await;
    expect_error(
        &mut carol_again,
        json!({"type": "sit", "table": t, "seat": 5, "buy_in": 100}),
        "already_seated",
    )
    .await;

    // The hand goes on meanwhile: an act is answered at once.
    act_is_answered_meanwhile(&t, &mut to_act, &mut other, &first, "call", "buy-in").await;
    assert!(
        !carol.seen.iter().any(|v| v["kind"] == "seated"),
        "carol was seated before Postgres recorded her buy-in: {:?}",
        carol.seen
    );

    // Once the row is free, the buy-in lands and she is seated.
    lock.rollback().await.expect("release the row");
    let seated = carol
        .recv_until(
            |v| v["kind"] == "seated" && v["player"] == "carol",
            SECS(10),
        )
        .await;
    assert!(seated.is_some(), "carol was not seated: {:?}", carol.seen);
    let seats = db_stacks(&pool, &t).await;
    assert_eq!(seats.get(&4), Some(&100), "{seats:?}");
    let audit = server.audit().await;
    assert_eq!(audit["delta"], 0, "{audit}");
}

#[tokio::test]
async fn a_cash_out_waiting_on_postgres_never_holds_up_the_hand_in_progress() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(patient(ServerConfig::new(&db, &env))).await;
    let (t, mut to_act, mut other, first) = play::heads_up_first_turn(&server, 100).await;
    server.grant("carol", 1000).await;
    server.grant("dave", 1000).await;
    let pool = db.pool().await;

    // Carol sits during the hand, so she is not dealt into it.
    let Player {
        client: mut carol, ..
    } = Player::sit(&server, &t, "carol", 4, 100).await;
    let mut dave = joined(&server, &t, "dave").await;

    // Her cash-out waits on the table's row, held elsewhere.
    let lock = db.lock_table_row(&t).await;
    carol.send(json!({"type": "leave", "table": t})).await;
    assert!(
        db.one_waits_for_a_lock().await,
        "carol's cash-out never waited on the row lock"
    );

    // Her seat stays hers until the cash-out is recorded.
    expect_error(
        &mut dave,
        json!({"type": "sit", "table": t, "seat": 4, "buy_in": 100}),
        "seat_taken",
    )
    .await;

    // The hand goes on meanwhile: the fold that ends it is told at once
    // (its result waits for Postgres, like any hand's).
    act_is_answered_meanwhile(&t, &mut to_act, &mut other, &first, "fold", "cash-out").await;
    assert!(
        !carol.seen.iter().any(|v| v["kind"] == "left"),
        "carol was told she left before Postgres recorded it: {:?}",
        carol.seen
    );

    // Once the row is free the cash-out lands: she is told, and her chips
    // are in her wallet.
    lock.rollback().await.expect("release the row");
    let left = carol
        .recv_until(|v| v["kind"] == "left" && v["player"] == "carol", SECS(10))
        .await;
    assert!(left.is_some(), "carol never left: {:?}", carol.seen);
    let (status, wallet) = server.admin_get("/admin/players/carol").await;
    assert_eq!(status, 200, "{wallet}");
    assert_eq!(wallet["balance"], 1000, "{wallet}");
    assert!(!db_stacks(&pool, &t).await.contains_key(&4));
    let audit = server.audit().await;
    assert_eq!(audit["delta"], 0, "{audit}");
}

#[tokio::test]
async fn no_hand_is_dealt_to_a_seat_whose_cash_out_is_in_flight() {
    let db = test_db().await;
    let env = unique_env();
    // A second between hands: the next deal comes due while the cash-out
    // below still waits.
    let server = Server::start(
        patient(ServerConfig::new(&db, &env))
            .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "1000"),
    )
    .await;
    let (t, mut to_act, mut other, first) = play::heads_up_first_turn(&server, 100).await;
    server.grant("carol", 1000).await;
    let Player {
        client: mut carol, ..
    } = Player::sit(&server, &t, "carol", 4, 100).await;

    // The hand ends and is recorded; the next is a second away.
    to_act
        .client
        .send(json!({
            "type": "act", "table": t, "hand": first["hand"],
            "decision": first["decision"], "action": "fold"
        }))
        .await;
    other
        .client
        .recv_event("hand_ended", SECS(10))
        .await
        .unwrap_or_else(|| panic!("the hand never ended: {:?}", other.client.seen));

    // Carol leaves between hands; her cash-out waits on her wallet's row,
    // held elsewhere (the hand's write needed none of it).
    let pool = db.pool().await;
    let mut wallet = pool.begin().await.expect("begin");
    sqlx::query("SELECT player FROM accounts WHERE player = $1 FOR UPDATE")
        .bind("carol")
        .execute(&mut *wallet)
        .await
        .expect("lock carol's wallet");
    carol.send(json!({"type": "leave", "table": t})).await;
    assert!(
        db.one_waits_for_a_lock().await,
        "carol's cash-out never waited on her wallet"
    );

    // The deal that comes due meanwhile waits: her seat is still occupied,
    // and its chips may already be on their way to her wallet.
    let next_hand =
        |v: &Value| v["kind"] == "hand_started" && v["hand"].as_u64() > first["hand"].as_u64();
    let early = other.client.recv_until(next_hand, SECS(2)).await;
    assert!(
        early.is_none(),
        "a hand was dealt while a seat's cash-out was in flight: {early:?}"
    );

    // Once her cash-out lands the hand is dealt, without her seat.
    wallet.rollback().await.expect("release the wallet");
    let left = carol
        .recv_until(|v| v["kind"] == "left" && v["player"] == "carol", SECS(10))
        .await;
    assert!(left.is_some(), "carol never left: {:?}", carol.seen);
    let next = other
        .client
        .recv_until(next_hand, SECS(10))
        .await
        .unwrap_or_else(|| panic!("no next hand: {:?}", other.client.seen));
    let dealt: Vec<u64> = next["seats"]
        .as_array()
        .expect("seats")
        .iter()
        .filter_map(|s| s["seat"].as_u64())
        .collect();
    assert_eq!(dealt.len(), 2, "{next}");
    assert!(!dealt.contains(&4), "a vacated seat was dealt in: {next}");
    assert_eq!(server.audit().await["delta"], 0);
}

#[tokio::test]
async fn a_hand_that_ends_while_a_buy_in_holds_the_only_pool_connection_records_both() {
    let db = test_db().await;
    let env = unique_env();
    // One pool connection: the buy-in holds it while it waits on the row,
    // and the hand's boundary write waits for it.
    let server = Server::start(
        patient(ServerConfig::new(&db, &env))
            .with_env("PITBOSS__DATABASE__MAX_CONNECTIONS", "1")
            .with_env("PITBOSS__DATABASE__ACQUIRE_TIMEOUT_MS", "1000"),
    )
    .await;
    let (t, mut to_act, _other, first) = play::heads_up_first_turn(&server, 100).await;
    server.grant("carol", 1000).await;
    let mut carol = joined(&server, &t, "carol").await;

    let lock = sit_behind_the_row_lock(&db, &t, &mut carol).await;
    let pool = db.pool().await;

    // The hand ends: its boundary write needs the connection the buy-in
    // holds, and holds the table still until it has one.
    to_act
        .client
        .send(json!({
            "type": "act", "table": t, "hand": first["hand"],
            "decision": first["decision"], "action": "fold"
        }))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    lock.rollback().await.expect("release the row");

    // The buy-in finishes and hands its connection back, so the hand's
    // result is recorded and told.
    let ended = to_act.client.recv_event("hand_ended", SECS(15)).await;
    assert!(
        ended.is_some(),
        "the hand's result never came: {:?}",
        to_act.client.seen
    );
    let seated = carol
        .recv_until(
            |v| v["kind"] == "seated" && v["player"] == "carol",
            SECS(15),
        )
        .await;
    assert!(seated.is_some(), "carol was not seated: {:?}", carol.seen);
    let seats = db_stacks(&pool, &t).await;
    assert_eq!(seats.get(&4), Some(&100), "{seats:?}");
    assert_eq!(server.audit().await["delta"], 0);
}
