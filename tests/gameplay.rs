//! Clients with tokens join, sit and play hold'em hands over WebSocket
//! against the real binary; Postgres must agree with what they were told.
//! Every bad input, and a late act for a decision already closed, gets its
//! error code and changes nothing. Buy-ins and cash-outs that wait on
//! Postgres are in `gameplay_postgres_waits.rs`.

mod common;
mod gameplay_shared;
mod play;

use std::time::Duration;

use common::{mint_token, test_db, unique_env, Server, ServerConfig, WsClient};
use gameplay_shared::{expect_error, joined};
use play::{db_stacks, play_hands, stacks_of, Player, Policy};
use serde_json::{json, Value};

const SECS: fn(u64) -> Duration = Duration::from_secs;

fn last_hand_ended(seen: &[Value]) -> Option<&Value> {
    seen.iter().rev().find(|v| v["kind"] == "hand_ended")
}

/// Every hole card a client saw before a showdown was its own.
fn assert_no_foreign_hole_cards(p: &Player) {
    for v in &p.client.seen {
        if v["kind"] == "hole_cards" {
            assert_eq!(v["seat"].as_u64(), Some(p.seat), "{} saw {v}", p.name);
        }
        if v["type"] == "snapshot" {
            for seat in v["state"]["game"]["seats"].as_array().into_iter().flatten() {
                if seat["seat"].as_u64() != Some(p.seat) {
                    let cards = &seat["cards"];
                    assert!(
                        cards.is_null() || cards.as_array().is_some_and(|c| c.is_empty()),
                        "{} saw another seat's cards in a snapshot: {seat}",
                        p.name
                    );
                }
            }
        }
    }
}

#[tokio::test]
async fn players_play_hands_to_showdown_and_fold_out_and_postgres_agrees() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(
        ServerConfig::new(&db, &env).with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "50"),
    )
    .await;
    let table = server.create_table(common::table_config()).await;
    let t = table["id"].as_str().expect("id").to_string();
    for p in ["alice", "bob", "carol"] {
        server.grant(p, 1000).await;
    }
    let alice = Player::sit(&server, &t, "alice", 0, 100).await;
    let bob = Player::sit(&server, &t, "bob", 2, 150).await;
    let carol = Player::sit(&server, &t, "carol", 4, 200).await;

    // Three hands where everyone checks or calls: each reaches showdown.
    let players = play_hands(
        vec![
            (alice, Policy::CheckCall),
            (bob, Policy::CheckCall),
            (carol, Policy::CheckCall),
        ],
        &t,
        3,
        SECS(60),
    )
    .await;
    for p in &players {
        assert!(
            p.hands_ended().len() >= 3,
            "{} saw {:?}",
            p.name,
            p.hands_ended()
        );
    }
    let showdowns = players[0]
        .client
        .seen
        .iter()
        .filter(|v| v["kind"] == "showdown")
        .count();
    assert!(
        showdowns >= 3,
        "check-call hands reach showdown: {showdowns}"
    );

    // Then hands where one player shoves and the others fold: no showdown.
    let mut it = players.into_iter();
    let (a, b, c) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
    let before = a.client.seen.len();
    let players = play_hands(
        vec![
            (a, Policy::AllIn),
            (b, Policy::CheckFold),
            (c, Policy::CheckFold),
        ],
        &t,
        2,
        SECS(60),
    )
    .await;
    let tail = &players[0].client.seen[before..];
    let folded_out: Vec<u64> = tail
        .iter()
        .filter(|v| v["kind"] == "hand_ended")
        .filter_map(|v| v["hand"].as_u64())
        .filter(|h| {
            !tail
                .iter()
                .any(|v| v["kind"] == "showdown" && v["hand"] == *h)
        })
        .collect();
    assert!(
        !folded_out.is_empty(),
        "at least one hand ended by folds: {tail:?}"
    );

    for p in &players {
        assert_no_foreign_hole_cards(p);
    }

    // Postgres holds the stacks of the last hand every client saw end (a
    // newer hand may be in progress; it has not reached its boundary).
    let pool = db.pool().await;
    let ended = last_hand_ended(&players[0].client.seen)
        .expect("a hand ended")
        .clone();
    let last_hand = ended["hand"].as_u64().expect("hand");
    let ok = common::eventually(SECS(5), Duration::from_millis(50), || {
        let pool = pool.clone();
        let t = t.clone();
        let ended = ended.clone();
        async move {
            let hand_no: i64 = sqlx::query_scalar("SELECT hand_no FROM tables WHERE id = $1")
                .bind(&t)
                .fetch_one(&pool)
                .await
                .expect("hand_no");
            hand_no as u64 == last_hand && db_stacks(&pool, &t).await == stacks_of(&ended)
        }
    })
    .await;
    assert!(
        ok,
        "seats in Postgres match hand {last_hand}: {:?} vs {ended}",
        db_stacks(&pool, &t).await
    );
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM hands WHERE table_id = $1")
        .bind(&t)
        .fetch_one(&pool)
        .await
        .expect("count hands");
    assert_eq!(rows as u64, last_hand, "one hand row per dealt hand");
    let audit = server.audit().await;
    assert_eq!(audit["delta"], 0, "{audit}");
    assert_eq!(audit["granted"], 3000, "{audit}");

    // Leaving returns the stack to the wallet: wallet = grant - buy-in + stack.
    let mut players = players;
    let a = &mut players[0];
    a.client.send(json!({"type": "leave", "table": t})).await;
    let left = a
        .client
        .recv_until(|v| v["kind"] == "left" && v["player"] == "alice", SECS(30))
        .await
        .expect("alice left");
    let stack = left["stack"].as_u64().expect("stack");
    // `left` is told only once Postgres has recorded the cash-out.
    let (status, wallet) = server.admin_get("/admin/players/alice").await;
    assert_eq!(status, 200, "{wallet}");
    assert_eq!(
        wallet["balance"].as_u64(),
        Some(1000 - 100 + stack),
        "alice's wallet after {left}"
    );
    let audit = server.audit().await;
    assert_eq!(audit["delta"], 0, "{audit}");
}

#[tokio::test]
async fn every_bad_input_gets_its_error_code_and_changes_nothing() {
    let db = test_db().await;
    let env = unique_env();
    // A long action clock and next-hand delay keep the table still while
    // the bad frames arrive.
    let server = Server::start(
        ServerConfig::new(&db, &env)
            .with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "60000")
            .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "200"),
    )
    .await;
    let t = play::new_table(&server).await;
    server.grant("alice", 1000).await;
    server.grant("bob", 1000).await;
    server.grant("poor", 30).await;
    server.grant("dave", 1000).await;

    // No token or a forged one: refused before the upgrade.
    let no_token = WsClient::connect_url(&format!("ws://{}/ws", server.addr)).await;
    assert_eq!(
        no_token.err().as_ref().and_then(common::refused_status),
        Some(401)
    );
    let forged = WsClient::connect(&server, "eyJzdWIiOiJhbGljZSJ9.AAAA").await;
    assert_eq!(
        forged.err().as_ref().and_then(common::refused_status),
        Some(401)
    );

    let mut alice = Player::sit(&server, &t, "alice", 0, 100).await;
    let mut bob = Player::sit(&server, &t, "bob", 1, 100).await;
    let audit_before = server.audit().await;

    let c = &mut alice.client;
    c.send_text("{not json").await;
    assert_eq!(
        c.recv_type("error", SECS(5)).await.expect("error")["code"],
        "bad_json"
    );
    expect_error(c, json!({"type": "teleport"}), "unknown_type").await;
    expect_error(c, json!({"type": "join"}), "bad_field").await;
    expect_error(
        c,
        json!({"type": "sit", "table": t, "seat": "zero", "buy_in": 100}),
        "bad_field",
    )
    .await;
    expect_error(
        c,
        json!({"type": "join", "table": "tbl_doesnotexist"}),
        "table_not_found",
    )
    .await;
    expect_error(
        c,
        json!({"type": "sit", "table": t, "seat": 3, "buy_in": -5}),
        "bad_amount",
    )
    .await;

    // Wait for the first hand so the action errors are about a live hand.
    let turn = c.recv_event("turn", SECS(10)).await.expect("a turn");
    let hand = turn["hand"].as_u64().expect("hand");
    let d = turn["decision"].as_u64().expect("decision");
    let to_act = turn["seat"].as_u64().expect("seat");
    let (actor, waiter) = if to_act == 0 {
        (&mut alice, &mut bob)
    } else {
        (&mut bob, &mut alice)
    };
    expect_error(
        &mut waiter.client,
        json!({"type": "act", "table": t, "hand": hand, "decision": d, "action": "call"}),
        "not_your_turn",
    )
    .await;
    expect_error(
        &mut actor.client,
        json!({"type": "act", "table": t, "hand": hand + 7, "decision": d, "action": "call"}),
        "stale_hand",
    )
    .await;
    expect_error(
        &mut actor.client,
        json!({"type": "act", "table": t, "hand": hand, "decision": d, "action": "check"}),
        "illegal_action",
    )
    .await;
    expect_error(
        &mut actor.client,
        json!({"type": "act", "table": t, "hand": hand, "action": "call"}),
        "bad_field",
    )
    .await;
    expect_error(
        &mut actor.client,
        json!({"type": "act", "table": t, "hand": hand, "decision": d + 1, "action": "call"}),
        "stale_decision",
    )
    .await;
    expect_error(
        &mut actor.client,
        json!({"type": "act", "table": t, "hand": hand, "decision": d, "action": "raise", "amount": 3}),
        "bad_amount",
    )
    .await;
    expect_error(
        &mut actor.client,
        json!({"type": "act", "table": t, "hand": hand, "decision": d, "action": "raise", "amount": 5000}),
        "insufficient_funds",
    )
    .await;
    expect_error(
        &mut actor.client,
        json!({"type": "act", "table": t, "hand": hand, "decision": d, "action": "bet"}),
        "bad_amount",
    )
    .await;
    expect_error(
        &mut actor.client,
        json!({"type": "sit", "table": t, "seat": 3, "buy_in": 100}),
        "already_seated",
    )
    .await;

    // Another player: a taken seat, a buy-in beyond the wallet, one outside
    // the table's range, acting without a seat.
    let mut dave = joined(&server, &t, "dave").await;
    expect_error(
        &mut dave,
        json!({"type": "sit", "table": t, "seat": 0, "buy_in": 100}),
        "seat_taken",
    )
    .await;
    expect_error(
        &mut dave,
        json!({"type": "sit", "table": t, "seat": 9, "buy_in": 100}),
        "bad_field",
    )
    .await;
    expect_error(
        &mut dave,
        json!({"type": "sit", "table": t, "seat": 3, "buy_in": 500}),
        "buy_in_out_of_range",
    )
    .await;
    expect_error(
        &mut dave,
        json!({"type": "sit", "table": t, "seat": 3, "buy_in": 10}),
        "buy_in_out_of_range",
    )
    .await;
    expect_error(
        &mut dave,
        json!({"type": "act", "table": t, "hand": hand, "decision": d, "action": "fold"}),
        "not_seated",
    )
    .await;
    let mut poor = WsClient::connect(&server, &mint_token("poor"))
        .await
        .expect("poor connects");
    poor.send(json!({"type": "join", "table": t})).await;
    poor.recv_type("snapshot", SECS(5)).await.expect("snapshot");
    expect_error(
        &mut poor,
        json!({"type": "sit", "table": t, "seat": 3, "buy_in": 40}),
        "insufficient_funds",
    )
    .await;

    // Nothing changed: same wallets, stacks and grants; poor still has 30.
    assert_eq!(server.audit().await, audit_before);
    let (_, poor_wallet) = server.admin_get("/admin/players/poor").await;
    assert_eq!(poor_wallet["balance"], 30);
    let (_, view) = server.admin_get(&format!("/admin/tables/{t}")).await;
    assert_eq!(view["seats"].as_array().map(Vec::len), Some(2), "{view}");

    // Admin API: bad bodies and a missing token are refused too.
    let (status, body) = server
        .admin_post("/admin/players/alice/grant", json!({"chips": -1}))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("bad_amount"))
    );
    let (status, body) = server.admin_post("/admin/tables", json!({"small_blind": 5, "big_blind": 2, "seats": 6, "min_buy_in": 40, "max_buy_in": 200})).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("bad_field"))
    );
    let (status, _) = server.get("/admin/audit").await;
    assert_eq!(status, 401);
    assert_eq!(server.audit().await, audit_before);
}

#[tokio::test]
async fn a_late_act_for_an_old_decision_gets_stale_decision_and_changes_nothing() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(
        ServerConfig::new(&db, &env)
            .with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "60000")
            .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "50"),
    )
    .await;
    let (t, mut first_p, mut second_p, first) = play::heads_up_first_turn(&server, 100).await;
    let (hand, d) = (
        first["hand"].clone(),
        first["decision"].as_u64().expect("decision"),
    );
    // The first to act calls; the turn passes with a new decision.
    first_p
        .client
        .send(json!({"type": "act", "table": t, "hand": hand, "decision": d, "action": "call"}))
        .await;
    let second = second_p
        .client
        .recv_until(
            |v| v["kind"] == "turn" && v["decision"].as_u64() > Some(d),
            SECS(5),
        )
        .await
        .expect("the second decision");
    // The same call again, late: it answers a decision that is closed.
    expect_error(
        &mut first_p.client,
        json!({"type": "act", "table": t, "hand": hand, "decision": d, "action": "call"}),
        "stale_decision",
    )
    .await;
    let actions = |c: &WsClient| c.seen.iter().filter(|v| v["kind"] == "action").count();
    let before = actions(&second_p.client);
    // The open decision is untouched: its seat acts on it as if nothing came.
    second_p
        .client
        .send(json!({
            "type": "act", "table": t, "hand": hand, "decision": second["decision"], "action": "check"
        }))
        .await;
    let street = second_p
        .client
        .recv_event("street", SECS(5))
        .await
        .expect("the flop follows the check");
    assert_eq!(street["street"], "flop");
    assert_eq!(
        actions(&second_p.client),
        before + 1,
        "{:?}",
        second_p.client.seen
    );
}
