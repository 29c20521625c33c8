//! Operating pitboss: reconnects, connection limits, metrics, production
//! logs. Frozen-table disposition and recovery are in
//! `operations_frozen.rs`.

mod common;
mod play;

use std::time::{Duration, Instant};

use common::{mint_token, test_db, unique_env, Server, ServerConfig, WsClient};
use play::{spawn_forever, Policy};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

const SECS: fn(u64) -> Duration = Duration::from_secs;

#[tokio::test]
async fn a_reconnecting_client_gets_the_events_it_missed_or_a_snapshot() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(
        ServerConfig::new(&db, &env)
            .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "50")
            .with_env("PITBOSS__TABLE__HISTORY_EVENTS", "16")
            .with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "400"),
    )
    .await;
    let (t, mut alice, bob) = play::heads_up(&server, 100).await;
    let bob_task = spawn_forever(bob, &t, Policy::CheckCall, SECS(20));
    // Alice drops mid-hand; the action clock keeps running for her seat.
    alice
        .client
        .recv_event("turn", SECS(10))
        .await
        .expect("a turn");
    let last = alice.client.last_seq(&t).expect("a seq");
    alice.client.close().await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    let mut back = WsClient::connect(&server, &mint_token("alice"))
        .await
        .expect("reconnect");
    back.send(json!({"type": "join", "table": t, "since": last}))
        .await;
    let first = back.recv_json(SECS(5)).await.expect("a frame");
    assert_eq!(
        first["type"], "event",
        "missed events, not a snapshot: {first}"
    );
    assert_eq!(first["seq"].as_u64(), Some(last + 1), "{first}");
    // The replay is gapless among what alice may see, and never shows
    // bob's hole cards.
    let mut seqs = vec![first["seq"].as_u64().expect("seq")];
    while let Some(v) = back.recv_json(Duration::from_millis(300)).await {
        if let Some(s) = v["seq"].as_u64() {
            seqs.push(s);
        }
    }
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    assert!(
        !back
            .seen
            .iter()
            .any(|v| v["kind"] == "hole_cards" && v["seat"] != 0),
        "no foreign hole cards in the replay"
    );

    // A `since` that has fallen out of the 16 kept events gets a snapshot:
    // wait until the table is 20 events past it (the clock plays alice's
    // turns), then ask again from there.
    let mut watcher = WsClient::connect(&server, &mint_token("carol"))
        .await
        .expect("connect");
    watcher.send(json!({"type": "join", "table": t})).await;
    let far = watcher
        .recv_until(|v| v["seq"].as_u64() > Some(last + 20), SECS(20))
        .await;
    assert!(far.is_some(), "the table moved on 20 events past {last}");
    let mut old = WsClient::connect(&server, &mint_token("alice"))
        .await
        .expect("connect");
    old.send(json!({"type": "join", "table": t, "since": last}))
        .await;
    let snap = old.recv_json(SECS(5)).await.expect("a frame");
    assert_eq!(snap["type"], "snapshot", "{snap}");
    bob_task.abort();
}

#[tokio::test]
async fn two_absent_players_stood_up_together_mid_hand_get_what_postgres_recorded_and_nothing_freezes(
) {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(
        ServerConfig::new(&db, &env)
            .with_env("PITBOSS__TABLE__RECONNECT_WINDOW_MS", "300")
            .with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "20000")
            .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "50"),
    )
    .await;
    let (t, mut alice, mut bob) = play::heads_up(&server, 100).await;
    // Hand 1 is dealt; nobody acts. Both leave at once, so both windows
    // run out in the same pass: the first stand-up folds and ends the hand,
    // the second comes between hands with a stack the hand just changed.
    alice
        .client
        .recv_until(|v| v["kind"] == "turn", SECS(10))
        .await
        .expect("hand 1 dealt");
    alice.client.close().await;
    bob.client.close().await;

    let both_gone = common::eventually(SECS(10), Duration::from_millis(50), || async {
        server.table(&t).await["seats"]
            .as_array()
            .is_some_and(|s| s.is_empty())
    })
    .await;
    let view = server.table(&t).await;
    assert!(both_gone, "both stood up: {view}");
    assert_eq!(view["state"], "open", "{view}");

    let pool = db.pool().await;
    let results: Vec<Value> =
        sqlx::query_scalar("SELECT result FROM hands WHERE table_id = $1 ORDER BY hand_no")
            .bind(&t)
            .fetch_all(&pool)
            .await
            .expect("hands");
    assert_eq!(results.len(), 1, "hand 1 recorded once: {results:?}");
    for seat in results[0]["seats"].as_array().expect("seats") {
        let player = seat["player"].as_str().expect("player");
        let end = seat["end_stack"].as_u64().expect("end stack");
        let (_, wallet) = server.admin_get(&format!("/admin/players/{player}")).await;
        assert_eq!(
            wallet["balance"].as_u64(),
            Some(900 + end),
            "{player} is credited with the stack Postgres recorded"
        );
    }
    assert_eq!(server.audit().await["delta"], 0);
}

#[tokio::test]
async fn a_player_gone_past_the_reconnect_window_is_stood_up_and_paid_out() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(
        ServerConfig::new(&db, &env)
            .with_env("PITBOSS__TABLE__RECONNECT_WINDOW_MS", "800")
            .with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "300")
            .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "50"),
    )
    .await;
    let (t, mut alice, bob) = play::heads_up(&server, 100).await;
    let bob_task = spawn_forever(bob, &t, Policy::CheckCall, SECS(20));
    alice.client.close().await;
    let dropped = Instant::now();

    // Her seat is held for the window (the clock plays her turns)...
    tokio::time::sleep(Duration::from_millis(400)).await;
    let view = server.table(&t).await;
    assert!(
        view["seats"]
            .as_array()
            .expect("seats")
            .iter()
            .any(|s| s["player"] == "alice"),
        "held: {view}"
    );
    // ...then she is stood up and her stack goes back to her wallet.
    let gone = common::eventually(SECS(10), Duration::from_millis(50), || async {
        let view = server.table(&t).await;
        !view["seats"]
            .as_array()
            .expect("seats")
            .iter()
            .any(|s| s["player"] == "alice")
    })
    .await;
    assert!(gone, "alice was stood up");
    assert!(dropped.elapsed() >= Duration::from_millis(800));
    bob_task.abort();
    let audit = server.audit().await;
    assert_eq!(audit["delta"], 0, "{audit}");
    let (_, wallet) = server.admin_get("/admin/players/alice").await;
    let stacks: u64 = server.table(&t).await["seats"]
        .as_array()
        .expect("seats")
        .iter()
        .filter_map(|s| s["stack"].as_u64())
        .sum();
    let (_, bob_wallet) = server.admin_get("/admin/players/bob").await;
    assert_eq!(
        wallet["balance"].as_u64().unwrap_or(0)
            + bob_wallet["balance"].as_u64().unwrap_or(0)
            + stacks,
        2000,
        "alice's chips are back in her wallet"
    );
    assert!(wallet["balance"].as_u64() > Some(900), "{wallet}");
}

#[tokio::test]
async fn an_oversized_frame_closes_with_1009() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(
        ServerConfig::new(&db, &env).with_env("PITBOSS__WS__MAX_FRAME_BYTES", "1024"),
    )
    .await;
    let mut c = WsClient::connect(&server, &mint_token("alice"))
        .await
        .expect("connect");
    c.send(json!({"type": "ping"})).await;
    assert!(c.recv_type("pong", SECS(5)).await.is_some());
    let big = format!(r#"{{"type":"ping","pad":"{}"}}"#, "x".repeat(2048));
    let _ = c.try_send(Message::Text(big)).await;
    let close = c.expect_close(SECS(5)).await;
    assert_eq!(close.map(|(code, _)| code), Some(1009));
}

#[tokio::test]
async fn a_client_over_the_rate_limit_gets_rate_limited_errors_then_close_1008() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(
        ServerConfig::new(&db, &env)
            .with_env("PITBOSS__WS__RATE_PER_SEC", "5")
            .with_env("PITBOSS__WS__RATE_BURST", "5")
            .with_env("PITBOSS__WS__RATE_STRIKES", "3"),
    )
    .await;
    let mut c = WsClient::connect(&server, &mint_token("alice"))
        .await
        .expect("connect");
    for _ in 0..20 {
        if c.try_send(Message::Text(r#"{"type":"ping"}"#.into()))
            .await
            .is_err()
        {
            break;
        }
    }
    let close = c.expect_close(SECS(5)).await;
    assert_eq!(
        close,
        Some((1008, "rate_limited".to_string())),
        "{:?}",
        c.seen
    );
    let pongs = c.seen.iter().filter(|v| v["type"] == "pong").count();
    let limited = c
        .seen
        .iter()
        .filter(|v| v["type"] == "error" && v["code"] == "rate_limited")
        .count();
    assert_eq!(pongs, 5, "the burst is served: {:?}", c.seen);
    assert!(limited >= 3, "then rate_limited errors: {:?}", c.seen);

    // A client within the limit is never limited.
    let mut calm = WsClient::connect(&server, &mint_token("bob"))
        .await
        .expect("connect");
    for _ in 0..8 {
        calm.send(json!({"type": "ping"})).await;
        assert!(
            calm.recv_type("pong", SECS(5)).await.is_some(),
            "{:?}",
            calm.seen
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn a_client_that_stops_answering_pings_is_dropped_after_the_idle_timeout() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(
        ServerConfig::new(&db, &env)
            .with_env("PITBOSS__WS__PING_INTERVAL_MS", "100")
            .with_env("PITBOSS__WS__IDLE_TIMEOUT_MS", "400"),
    )
    .await;
    // This client reads nothing, so it never answers the server's pings.
    let mut c = WsClient::connect(&server, &mint_token("alice"))
        .await
        .expect("connect");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let (_, text) = server.get("/metrics").await;
    let open: f64 = text
        .lines()
        .find(|l| l.starts_with("pitboss_ws_connections "))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1.0);
    assert_eq!(open, 0.0, "the idle connection was dropped: {text}");
    assert!(c.expect_close(SECS(2)).await.is_some());

    // A client that reads (and so answers pings) stays.
    let mut live = WsClient::connect(&server, &mint_token("bob"))
        .await
        .expect("connect");
    let until = Instant::now() + Duration::from_millis(1200);
    while Instant::now() < until {
        let _ = live.recv_json(Duration::from_millis(50)).await;
    }
    assert!(live.closed.is_none(), "{:?}", live.closed);
    live.send(json!({"type": "ping"})).await;
    assert!(live.recv_type("pong", SECS(5)).await.is_some());
}

#[tokio::test]
async fn metrics_expose_the_runtime_in_prometheus_text() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(
        ServerConfig::new(&db, &env).with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "50"),
    )
    .await;
    let (t, alice, bob) = play::heads_up(&server, 100).await;
    play::play_hands(
        vec![(alice, Policy::CheckCall), (bob, Policy::CheckCall)],
        &t,
        2,
        SECS(30),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (status, text) = server.get("/metrics").await;
    assert_eq!(status, 200);
    for name in [
        "pitboss_leases_held 1",
        "pitboss_lease_acquires_total{result=\"acquired\"}",
        "pitboss_lease_renew_seconds_bucket",
        "pitboss_hands_completed_total",
        "pitboss_ws_connections",
        "pitboss_ws_frames_in_total",
        "pitboss_ws_frames_out_total",
        "pitboss_action_to_broadcast_seconds_bucket",
        "pitboss_seconds_since_last_renew",
        "pitboss_tables{state=\"open\"} 1",
    ] {
        assert!(text.contains(name), "missing {name} in:\n{text}");
    }
}

#[tokio::test]
async fn a_client_too_slow_to_read_is_dropped_instead_of_buffered_without_bound() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(
        ServerConfig::new(&db, &env)
            .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "0")
            .with_env("PITBOSS__WS__OUTBOUND_QUEUE_BYTES", "32768")
            .with_env("PITBOSS__WS__RATE_PER_SEC", "1000000")
            .with_env("PITBOSS__WS__RATE_BURST", "1000000")
            .with_env("PITBOSS__WS__IDLE_TIMEOUT_MS", "600000"),
    )
    .await;
    let (t, alice, bob) = play::heads_up(&server, 200).await;
    let tasks = [
        spawn_forever(alice, &t, Policy::CheckCall, SECS(60)),
        spawn_forever(bob, &t, Policy::CheckCall, SECS(60)),
    ];

    // A watcher with a tiny receive window that never reads: thousands of
    // joins (each answered with a snapshot) fill the socket buffers, then
    // the table's events pile up behind them.
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(2048).expect("SO_RCVBUF");
    let stream = socket.connect(server.addr).await.expect("connect");
    let url = server.ws_url(&mint_token("sloth"));
    let (mut sloth, _) = tokio_tungstenite::client_async(url, stream)
        .await
        .expect("upgrade");
    use futures::{SinkExt, StreamExt};
    let join = json!({"type": "join", "table": t}).to_string();
    for _ in 0..6000 {
        if tokio::time::timeout(SECS(2), sloth.send(Message::Text(join.clone())))
            .await
            .is_err()
        {
            break;
        }
    }

    let dropped = common::eventually(SECS(30), Duration::from_millis(200), || async {
        let (_, text) = server.get("/metrics").await;
        text.lines()
            .any(|l| l.starts_with("pitboss_ws_slow_clients_dropped_total") && !l.ends_with(" 0"))
    })
    .await;
    assert!(dropped, "the table stopped sending to the slow reader");
    // Once it reads again, the session closes it: what it would see next
    // has gaps.
    let mut close = None;
    let deadline = Instant::now() + SECS(30);
    while Instant::now() < deadline {
        match tokio::time::timeout(SECS(5), sloth.next()).await {
            Ok(Some(Ok(Message::Close(frame)))) => {
                close = frame.map(|f| (u16::from(f.code), f.reason.to_string()));
                break;
            }
            Ok(Some(Ok(_))) => continue,
            _ => break,
        }
    }
    assert_eq!(close, Some((1008, "too_slow".to_string())));
    // The players at the table were never affected.
    for task in tasks {
        task.abort();
    }
    let view = server.table(&t).await;
    assert_eq!(view["state"], "open", "{view}");
    assert_eq!(server.audit().await["delta"], 0);
}

#[tokio::test]
async fn production_logs_are_json_and_table_lines_carry_table_fence_and_hand() {
    let db = test_db().await;
    let env = unique_env();
    let server =
        Server::start(ServerConfig::new(&db, &env).with_env("PITBOSS_ENV", "production")).await;
    let t = play::new_table(&server).await;
    assert!(server.wait_for_log("table_hosted", SECS(5)).await);
    let lines = server.logs();
    let json_lines: Vec<Value> = lines
        .iter()
        .filter_map(|l| {
            l.find('{')
                .and_then(|i| serde_json::from_str::<Value>(&l[i..]).ok())
        })
        .collect();
    assert!(!json_lines.is_empty(), "{lines:?}");
    let hosted = json_lines
        .iter()
        .find(|v| v["event"] == "table_hosted")
        .unwrap_or_else(|| panic!("no table_hosted line: {lines:?}"));
    let span = &hosted["span"];
    assert_eq!(span["table_id"], t.as_str(), "{hosted}");
    assert!(
        span["fence"].is_u64() && span["hand_no"].is_u64(),
        "{hosted}"
    );
    assert_eq!(hosted["level"], "INFO");
}
