//! Any instance serves any table (I13): a client connected to one instance
//! plays at tables hosted by others through a relay to the owner, keeps its
//! connection when the owner drains or dies, and sees the new hosting as a
//! fresh snapshot. Relay connections between instances are authenticated;
//! a forged one is refused.

mod common;
mod play;

use std::time::{Duration, Instant};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use common::{refused_status, test_db, unique_env, Server, ServerConfig, WsClient, AUTH_SECRET};
use hmac::{Hmac, Mac};
use play::{choose, metric, Player, Policy};
use serde_json::{json, Value};
use sha2::Sha256;

/// Three instances of one environment, sharing Postgres and Redis.
async fn three(extra: &[(&str, &str)]) -> (common::TestDb, Server, Server, Server) {
    let db = test_db().await;
    let env = unique_env();
    let mut cfg = ServerConfig::new(&db, &env)
        .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "50")
        .with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "5000");
    for (k, v) in extra {
        cfg = cfg.with_env(k, v);
    }
    let a = Server::start(cfg.clone().with_instance("relay-a")).await;
    let b = Server::start(cfg.clone().with_instance("relay-b")).await;
    let c = Server::start(cfg.with_instance("relay-c")).await;
    (db, a, b, c)
}

/// Plays `p`'s turns (check or call) until it has seen `hands` more
/// `hand_ended`; returns the round trips from sending each act to seeing
/// the `action` event that answers it.
async fn play_timed(
    mut p: Player,
    table: String,
    hands: usize,
    timeout: Duration,
) -> (Player, Vec<Duration>) {
    let target = p.hands_ended().len() + hands;
    let deadline = Instant::now() + timeout;
    let mut sent: Option<Instant> = None;
    let mut trips = Vec::new();
    while Instant::now() < deadline && p.hands_ended().len() < target {
        let Some(v) = p.client.recv_json(Duration::from_millis(200)).await else {
            if p.client.closed.is_some() {
                break;
            }
            continue;
        };
        if v["table"] != table.as_str() || v["seat"].as_u64() != Some(p.seat) {
            continue;
        }
        if v["kind"] == "turn" {
            if let Some(frame) = choose(Policy::CheckCall, &table, &v) {
                sent = Some(Instant::now());
                p.client.send(frame).await;
            }
        } else if v["kind"] == "action" {
            if let Some(at) = sent.take() {
                trips.push(at.elapsed());
            }
        }
    }
    (p, trips)
}

/// Median and 99th percentile, in milliseconds.
fn percentiles(mut trips: Vec<Duration>) -> (f64, f64) {
    assert!(!trips.is_empty(), "no round trips measured");
    trips.sort();
    let at = |q: f64| {
        let i = ((trips.len() as f64 - 1.0) * q).round() as usize;
        trips[i].as_secs_f64() * 1000.0
    };
    (at(0.5), at(0.99))
}

/// No hole card of another seat ever reached `p`.
fn saw_only_own_hole_cards(p: &Player) {
    let holes: Vec<&Value> = p
        .client
        .seen
        .iter()
        .filter(|v| v["kind"] == "hole_cards")
        .collect();
    assert!(!holes.is_empty(), "{} was dealt no cards", p.name);
    for h in holes {
        assert_eq!(h["seat"].as_u64(), Some(p.seat), "{} saw {h}", p.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_of_one_instance_plays_at_tables_hosted_by_two_others() {
    let (_db, a, b, c) = three(&[]).await;
    let tb = play::new_table(&b).await;
    let tc = play::new_table(&c).await;
    for p in ["alice", "bob", "carol", "dave"] {
        a.grant(p, 1000).await;
    }
    // alice plays at B's table through A; bob sits there directly.
    let alice = Player::sit(&a, &tb, "alice", 0, 200).await;
    let bob = Player::sit(&b, &tb, "bob", 1, 200).await;
    // carol and dave both play at C's table through A.
    let carol = Player::sit(&a, &tc, "carol", 0, 200).await;
    let dave = Player::sit(&a, &tc, "dave", 1, 200).await;

    // The tables stay where they were: A relays, it does not take them.
    let vb = a.table(&tb).await;
    assert_eq!(vb["owner"], "relay-b", "{vb}");
    let vc = a.table(&tc).await;
    assert_eq!(vc["owner"], "relay-c", "{vc}");
    let (_, m) = a.get("/metrics").await;
    assert_eq!(
        metric(&m, "pitboss_relays_open "),
        3.0,
        "A relays three seats"
    );

    let hands = 12;
    let timeout = Duration::from_secs(60);
    let runs = [
        tokio::spawn(play_timed(alice, tb.clone(), hands, timeout)),
        tokio::spawn(play_timed(bob, tb.clone(), hands, timeout)),
        tokio::spawn(play_timed(carol, tc.clone(), hands, timeout)),
        tokio::spawn(play_timed(dave, tc.clone(), hands, timeout)),
    ];
    let mut done = Vec::new();
    for r in runs {
        done.push(r.await.expect("player task"));
    }
    for (p, _) in &done {
        assert!(
            p.hands_ended().len() >= hands,
            "{} finished {} hands: {:?}",
            p.name,
            p.hands_ended().len(),
            p.client.seen.last()
        );
        assert!(p.client.closed.is_none(), "{} was disconnected", p.name);
        saw_only_own_hole_cards(p);
    }
    // Both sides of a relayed table saw the same hands end the same way.
    let ends = |p: &Player| -> Vec<Value> {
        p.client
            .seen
            .iter()
            .filter(|v| v["kind"] == "hand_ended")
            .map(|v| json!([v["hand"], v["stacks"]]))
            .collect()
    };
    assert_eq!(ends(&done[0].0), ends(&done[1].0));
    assert_eq!(ends(&done[2].0), ends(&done[3].0));

    let (rel_med, rel_p99) = percentiles(done[0].1.clone());
    let (dir_med, dir_p99) = percentiles(done[1].1.clone());
    println!(
        "act -> action round trip at B's table: relayed through A: median {rel_med:.2} ms, p99 {rel_p99:.2} ms ({} acts); direct to B: median {dir_med:.2} ms, p99 {dir_p99:.2} ms ({} acts)",
        done[0].1.len(),
        done[1].1.len()
    );
    let audit = a.audit().await;
    assert_eq!(audit["delta"], 0, "{audit}");
    // Postgres names B and C as the owners throughout.
    assert_eq!(a.table(&tb).await["owner"], "relay-b");
    assert_eq!(a.table(&tc).await["owner"], "relay-c");
}

/// A relay credential for `player` from `from` to `to`, signed with `secret`
/// as `docs/protocol.md` describes it.
fn relay_url(
    server: &Server,
    secret: &str,
    from: &str,
    to: &str,
    player: &str,
    at_ms: i64,
) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("hmac key");
    mac.update(format!("pitboss-relay-v1\n{from}\n{to}\n{player}\n{at_ms}").as_bytes());
    let sig = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
    format!(
        "ws://{}/ws/relay?player={player}&from={from}&at={at_ms}&sig={sig}",
        server.addr
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forged_relay_connections_are_refused() {
    let (_db, a, b, _c) = three(&[]).await;
    let t = play::new_table(&b).await;
    let now = chrono::Utc::now().timestamp_millis();
    let refused = |url: String| async move {
        let err = WsClient::connect_url(&url)
            .await
            .err()
            .unwrap_or_else(|| panic!("{url} was accepted"));
        refused_status(&err)
    };
    // No credential at all.
    assert_eq!(
        refused(format!("ws://{}/ws/relay?player=mallory", b.addr)).await,
        Some(401)
    );
    for (why, secret, to, at_ms) in [
        (
            "signed with a secret that is not the environment's",
            "guessed",
            "relay-b",
            now,
        ),
        (
            "a genuine credential addressed to another instance",
            AUTH_SECRET,
            "relay-c",
            now,
        ),
        (
            "a genuine credential from long ago",
            AUTH_SECRET,
            "relay-b",
            now - 120_000,
        ),
    ] {
        let url = relay_url(&b, secret, "relay-a", to, "mallory", at_ms);
        assert_eq!(refused(url).await, Some(401), "{why}");
    }
    // A genuine credential whose player was swapped.
    let genuine = relay_url(&b, AUTH_SECRET, "relay-a", "relay-b", "alice", now);
    let swapped = genuine.replace("player=alice", "player=mallory");
    assert_eq!(refused(swapped).await, Some(401));
    let (_, m) = b.get("/metrics").await;
    assert_eq!(metric(&m, "pitboss_relays_refused_total "), 5.0);

    // The genuine one is accepted and plays as alice: it sees the table.
    let mut up = WsClient::connect_url(&genuine)
        .await
        .expect("genuine relay");
    up.send(json!({"type": "join", "table": t})).await;
    let snap = up
        .recv_type("snapshot", Duration::from_secs(5))
        .await
        .expect("snapshot through the relay endpoint");
    assert_eq!(snap["state"]["owner"], "relay-b", "{snap}");
    // A relay connection never relays further: a table hosted elsewhere is
    // answered with its owner, for the relaying instance to go there.
    let elsewhere = play::new_table(&a).await;
    up.send(json!({"type": "join", "table": elsewhere})).await;
    let err = up
        .recv_type("error", Duration::from_secs(5))
        .await
        .expect("answer");
    assert_eq!(err["code"], "owned_elsewhere", "{err}");
    assert_eq!(err["owner"], "relay-a", "{err}");
}

/// Waits until `server` shows `table` hosted again: open, above `fence`,
/// owned by another instance than `gone`. Returns how long it took.
async fn hosted_again(
    server: &Server,
    table: &str,
    fence: u64,
    gone: &str,
    within: Duration,
) -> Option<Duration> {
    let started = Instant::now();
    loop {
        let v = server.table(table).await;
        if v["state"] == "open" && v["fence"].as_u64() > Some(fence) && v["owner"] != gone {
            return Some(started.elapsed());
        }
        if started.elapsed() >= within {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// B hosts a heads-up table both of whose players are connected to A, with
/// a hand in progress. Returns the players and the table.
async fn relayed_heads_up(a: &Server, b: &Server) -> (String, Player, Player) {
    let t = play::new_table(b).await;
    a.grant("alice", 1000).await;
    a.grant("bob", 1000).await;
    let alice = Player::sit(a, &t, "alice", 0, 200).await;
    let bob = Player::sit(a, &t, "bob", 1, 200).await;
    let mut players = play::play_hands(
        vec![(alice, Policy::CheckCall), (bob, Policy::CheckCall)],
        &t,
        1,
        Duration::from_secs(20),
    )
    .await;
    let bob = players.pop().expect("bob");
    let mut alice = players.pop().expect("alice");
    assert_eq!(
        alice.hands_ended().len(),
        1,
        "{:?}",
        alice.client.seen.last()
    );
    // The next hand starts: alice's turn or bob's; nobody answers it yet.
    alice
        .client
        .recv_event("turn", Duration::from_secs(5))
        .await
        .expect("a hand in progress");
    (t, alice, bob)
}

/// Both players play on at the new hosting after an owner change, to the
/// end of two more hands, and nothing was lost.
async fn play_on(a: &Server, t: &str, alice: Player, bob: Player) {
    let players = play::play_hands(
        vec![(alice, Policy::CheckCall), (bob, Policy::CheckCall)],
        t,
        2,
        Duration::from_secs(30),
    )
    .await;
    for p in &players {
        assert!(p.client.closed.is_none(), "{} was disconnected", p.name);
        saw_only_own_hole_cards(p);
        // Across the change, caught up from the journal or from a
        // snapshot: no event twice, none out of order.
        let seqs: Vec<u64> = p
            .client
            .seen
            .iter()
            .filter(|v| v["table"] == t && v["type"] == "event")
            .filter_map(|v| v["seq"].as_u64())
            .collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "{} was sent events out of order or twice: {seqs:?}",
            p.name
        );
    }
    assert!(
        players.iter().all(|p| p.hands_ended().len() >= 3),
        "played on: {:?}",
        players.iter().map(|p| p.hands_ended()).collect::<Vec<_>>()
    );
    let audit = a.audit().await;
    assert_eq!(audit["delta"], 0, "{audit}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn relayed_clients_keep_their_connection_when_the_owner_drains() {
    let (_db, a, b, _c) = three(&[]).await;
    let (t, alice, bob) = relayed_heads_up(&a, &b).await;
    let fence = a.table(&t).await["fence"].as_u64().expect("fence");

    b.sigterm();
    let status = b.wait_exit(Duration::from_secs(15)).await.expect("B exits");
    assert!(status.success(), "B drained and exited 0: {status}");
    let took = hosted_again(&a, &t, fence, "relay-b", Duration::from_millis(1500))
        .await
        .expect("the table hosted again within 1.5 s of B's exit");
    println!("hosted again {took:?} after B's exit");
    // The relays follow it there, each resuming after the last `seq` it
    // passed on (caught up from the journal, or a snapshot) on the same
    // connection.
    assert!(alice.client.closed.is_none() && bob.client.closed.is_none());
    play_on(&a, &t, alice, bob).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn relayed_clients_follow_the_table_when_its_owner_is_killed() {
    let ttl_ms = 1500;
    let (_db, a, b, _c) = three(&[]).await;
    let (t, alice, bob) = relayed_heads_up(&a, &b).await;
    let fence = a.table(&t).await["fence"].as_u64().expect("fence");

    b.sigkill();
    let within = Duration::from_millis(ttl_ms + ttl_ms / 3 + 1000);
    let took = hosted_again(&a, &t, fence, "relay-b", within)
        .await
        .expect("the table hosted again within TTL + TTL/3 + 1 s");
    println!("hosted again {took:?} after B was killed");
    assert!(alice.client.closed.is_none());
    play_on(&a, &t, alice, bob).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_relayed_client_is_told_when_the_search_for_a_new_owner_gives_up_and_a_join_brings_the_table_back(
) {
    // The search lasts drain timeout + 3 × TTL + 5 s: 9.6 s here.
    let (db, a, b, _c) = three(&[("PITBOSS__SHUTDOWN__DRAIN_TIMEOUT_MS", "100")]).await;
    let (t, mut alice, _bob) = relayed_heads_up(&a, &b).await;

    // Nobody can stamp the table while its row is locked: after B dies,
    // every attempt to host it fails on the lock budget.
    let lock = db.lock_table_row(&t).await;
    b.sigkill();
    let ended = alice
        .client
        .recv_until(
            |v| v["type"] == "error" && v["table"] == t.as_str() && v["subscription_ended"] == true,
            Duration::from_secs(25),
        )
        .await
        .unwrap_or_else(|| panic!("alice is told the search gave up: {:?}", alice.client.seen));
    assert_eq!(ended["code"], "unavailable", "{ended}");
    // Errors while the search goes on do not end the subscription.
    assert!(
        !alice.client.seen.iter().any(|v| v["type"] == "error"
            && v["code"] == "unavailable"
            && v["subscription_ended"].is_null()
            && v["message"]
                .as_str()
                .is_some_and(|m| m.contains("cannot be reached"))),
        "{:?}",
        alice.client.seen
    );
    // The subscription is over: frames for the table are not relayed.
    alice
        .client
        .send(json!({"type": "leave", "table": t}))
        .await;
    let refused = alice
        .client
        .recv_type("error", Duration::from_secs(5))
        .await
        .expect("an answer to the leave");
    assert_eq!(refused["code"], "not_joined", "{refused}");

    // Once the table can be hosted again, a join brings it back, seats kept.
    lock.rollback().await.expect("release the row");
    alice.client.send(json!({"type": "join", "table": t})).await;
    let snap = alice
        .client
        .recv_type("snapshot", Duration::from_secs(10))
        .await
        .unwrap_or_else(|| panic!("the join brings the table back: {:?}", alice.client.seen));
    assert_ne!(snap["state"]["owner"], "relay-b", "{snap}");
    assert_eq!(snap["state"]["game"]["you"], 0, "{snap}");
}
