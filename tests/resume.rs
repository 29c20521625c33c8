//! Durable decisions (I15), black-box: a hand played to the flop with a
//! `turn` pending survives every kind of owner change (the owner
//! SIGKILLed, the owner SIGTERMed, a move, Redis restarted empty, a
//! freeze recovered). In each, the players' next snapshot shows the same
//! hand: its number, the board, their own hole cards, stacks, pot and the
//! pending decision with its deadline; nobody is told `hand_voided`; the
//! hand then plays out, is recorded once, and the chips add up.

mod common;
mod play;

use std::time::{Duration, Instant};

use common::{
    mint_token, test_db, unique_env, PrivateRedis, Server, ServerConfig, TestDb, WsClient,
};
use play::{choose, Policy};
use serde_json::{json, Value};
use sqlx::Row;

/// Long enough that no clock runs out while the test looks.
const CLOCK_MS: u64 = 60_000;

/// Two instances of one environment, A hosting a heads-up table.
struct Room {
    db: TestDb,
    a: Server,
    b: Option<Server>,
    table: String,
    players: Vec<Seat>,
}

/// A player, connected to A, with what it was told.
struct Seat {
    name: &'static str,
    seat: u64,
    client: WsClient,
}

fn config(db: &TestDb, env: &str, redis: Option<&PrivateRedis>) -> ServerConfig {
    let cfg = ServerConfig::new(db, env)
        .with_ttl_ms(1000)
        .with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", &CLOCK_MS.to_string())
        .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "100");
    match redis {
        Some(r) => cfg.with_redis(&r.url()),
        None => cfg,
    }
}

async fn room(redis: Option<&PrivateRedis>, second: bool) -> Room {
    room_of(redis, second, &["alice", "bob"]).await
}

async fn room_of(redis: Option<&PrivateRedis>, second: bool, names: &[&'static str]) -> Room {
    let db = test_db().await;
    let env = unique_env();
    let cfg = config(&db, &env, redis);
    let a = Server::start(cfg.clone().with_instance("inst-a")).await;
    let b = match second {
        true => Some(Server::start(cfg.with_instance("inst-b")).await),
        false => None,
    };
    let table = play::new_table(&a).await;
    let mut players = Vec::new();
    for (seat, name) in (0u64..).zip(names.iter().copied()) {
        a.grant(name, 1000).await;
        let p = play::Player::sit(&a, &table, name, seat, 100).await;
        players.push(Seat {
            name,
            seat,
            client: p.client,
        });
    }
    Room {
        db,
        a,
        b,
        table,
        players,
    }
}

/// What one player sees of the table, from a fresh join: its snapshot's
/// game view and the action clock's deadline.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    owner: String,
    fence: u64,
    deadline_ms: Option<i64>,
    game: Value,
}

fn seen_of(snapshot: &Value) -> Seen {
    let s = &snapshot["state"];
    Seen {
        owner: s["owner"].as_str().unwrap_or_default().to_string(),
        fence: s["fence"].as_u64().unwrap_or(0),
        deadline_ms: s["action_deadline_ms"].as_i64(),
        game: s["game"].clone(),
    }
}

/// `name` joins the table on `server` on a connection of its own and
/// reads the snapshot, retrying while nobody hosts the table yet (or only
/// an owner at `below` or older does).
async fn look(server: &Server, table: &str, name: &str, below: u64) -> (WsClient, Seen) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut c = WsClient::connect(server, &mint_token(name))
            .await
            .expect("connect");
        c.send(json!({"type": "join", "table": table})).await;
        if let Some(v) = c.recv_type("snapshot", Duration::from_secs(5)).await {
            let seen = seen_of(&v);
            if seen.fence > below {
                return (c, seen);
            }
        }
        assert!(
            Instant::now() < deadline,
            "{name} saw no hosting above fence {below} on {}: {:?}",
            server.cfg.instance_id,
            c.seen
        );
        c.close().await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Plays the hand to the flop (each player checks or calls), then the
/// first to act on the flop checks: returns the `turn` then pending.
async fn to_the_flop(room: &mut Room) -> Value {
    let table = room.table.clone();
    let deadline = Instant::now() + Duration::from_secs(20);
    // Per player: whether its stream has shown the flop, and how many
    // actions since.
    let mut flop = vec![false; room.players.len()];
    let mut acted = vec![0u32; room.players.len()];
    while Instant::now() < deadline {
        for (i, p) in room.players.iter_mut().enumerate() {
            let Some(v) = p.client.recv_json(Duration::from_millis(50)).await else {
                continue;
            };
            assert_ne!(v["kind"], "hand_voided", "{v}");
            if v["kind"] == "street" && v["street"] == "flop" {
                flop[i] = true;
            }
            if v["kind"] == "action" && flop[i] {
                acted[i] += 1;
            }
            if v["kind"] != "turn" || v["seat"].as_u64() != Some(p.seat) {
                continue;
            }
            if flop[i] && acted[i] >= 1 {
                return v;
            }
            let frame = choose(Policy::CheckCall, &table, &v).expect("an act");
            p.client.send(frame).await;
        }
    }
    panic!("the hand never reached a turn on the flop");
}

/// Every player's view, from a fresh join on `server` above `below`.
async fn views(room: &Room, server: &Server, below: u64) -> Vec<Seen> {
    let mut out = Vec::new();
    for p in &room.players {
        let (mut c, seen) = look(server, &room.table, p.name, below).await;
        c.close().await;
        out.push(seen);
    }
    out
}

/// What must be the same after an owner change: the game as each player
/// sees it (hand, board, own cards, stacks, pot, who acts at which
/// decision) and, where `same_clock`, the pending decision's deadline.
fn assert_same_hand(before: &[Seen], after: &[Seen], same_clock: bool) {
    for (b, a) in before.iter().zip(after) {
        assert_eq!(a.game, b.game, "the hand as the player sees it");
        assert_eq!(a.game["hand_in_progress"], true, "{}", a.game);
        assert_eq!(a.game["street"], "flop", "{}", a.game);
        assert_eq!(a.game["board"].as_array().map(Vec::len), Some(3));
        if same_clock {
            assert_eq!(a.deadline_ms, b.deadline_ms, "the clock's deadline");
        } else {
            assert!(a.deadline_ms >= b.deadline_ms, "{a:?} after {b:?}");
        }
        assert!(a.fence > b.fence, "a new hosting: {a:?} after {b:?}");
    }
    // The pending decision is the one each side sees.
    let to_act = before[0].game["to_act"].as_u64().expect("someone to act");
    let actor = after
        .iter()
        .find(|a| a.game["you"].as_u64() == Some(to_act))
        .expect("the player to act");
    assert!(
        actor.game["decision"].as_u64().is_some(),
        "{:?}",
        actor.game
    );
    assert!(!actor.game["legal"].as_array().expect("legal").is_empty());
}

/// The players play the resumed hand out on `server` (check or call) and
/// see it end; returns its `hand_ended`.
async fn play_out(room: &Room, server: &Server, hand: u64, below: u64) -> Value {
    let mut clients = Vec::new();
    for p in &room.players {
        let (c, _) = look(server, &room.table, p.name, below).await;
        clients.push((p.seat, c));
    }
    // Whoever is to act now was told so in the snapshot: ask again by
    // acting on the view's decision.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut pending = true;
    while Instant::now() < deadline {
        if pending {
            pending = false;
            for (seat, c) in &mut clients {
                let snap = c
                    .seen
                    .iter()
                    .find(|v| v["type"] == "snapshot")
                    .cloned()
                    .expect("snapshot");
                let g = &snap["state"]["game"];
                if g["to_act"].as_u64() == Some(*seat) {
                    let turn = json!({"hand": g["hand"], "decision": g["decision"],
                                      "legal": g["legal"]});
                    let frame = choose(Policy::CheckCall, &room.table, &turn).expect("act");
                    c.send(frame).await;
                }
            }
        }
        for (seat, c) in &mut clients {
            let Some(v) = c.recv_json(Duration::from_millis(50)).await else {
                continue;
            };
            assert_ne!(v["kind"], "hand_voided", "{v}");
            if v["kind"] == "hand_ended" && v["hand"] == hand {
                return v;
            }
            if v["kind"] == "turn" && v["seat"].as_u64() == Some(*seat) && v["hand"] == hand {
                let frame = choose(Policy::CheckCall, &room.table, &v).expect("act");
                c.send(frame).await;
            }
        }
    }
    panic!("hand {hand} never ended on {}", server.cfg.instance_id);
}

/// The hand is recorded once, by the owner at `fence`, and the chips add
/// up; nobody on A's connections was told the hand was void.
async fn assert_recorded_once(room: &Room, server: &Server, hand: u64, fence: u64) {
    let pool = room.db.pool().await;
    let rows = sqlx::query("SELECT fence FROM hands WHERE table_id = $1 AND hand_no = $2")
        .bind(&room.table)
        .bind(i64::try_from(hand).expect("hand"))
        .fetch_all(&pool)
        .await
        .expect("hand rows");
    assert_eq!(rows.len(), 1, "hand {hand} recorded once");
    assert_eq!(
        rows[0].get::<i64, _>("fence"),
        i64::try_from(fence).unwrap()
    );
    assert_eq!(server.audit().await["delta"], 0);
    for p in &room.players {
        assert!(
            !p.client.seen.iter().any(|v| v["kind"] == "hand_voided"),
            "{} was told a void: {:?}",
            p.name,
            p.client.seen
        );
    }
}

/// The whole check around one owner change: to the flop, everyone's view,
/// the change, everyone's view on `heir`, the hand played out there.
async fn survives(
    mut room: Room,
    change: impl AsyncFnOnce(&mut Room),
    heir: fn(&Room) -> &Server,
    same_clock: bool,
) -> Room {
    let turn = to_the_flop(&mut room).await;
    let hand = turn["hand"].as_u64().expect("hand");
    let before = views(&room, &room.a, 0).await;
    assert_eq!(before[0].game["hand"], hand);
    let fence = before[0].fence;
    change(&mut room).await;
    let after = views(&room, heir(&room), fence).await;
    assert_same_hand(&before, &after, same_clock);
    let ended = play_out(&room, heir(&room), hand, fence).await;
    assert_eq!(ended["hand"], hand);
    assert_recorded_once(&room, heir(&room), hand, after[0].fence).await;
    room
}

/// Recovers a frozen table through `server`, once its owner has let the
/// lease go (it stops its copy first: until then the answer is 409).
async fn recover(server: &Server, table: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, view) = server
            .admin_post(&format!("/admin/tables/{table}/recover"), json!({}))
            .await;
        if status == 200 {
            return view;
        }
        assert_eq!(status, 409, "{view}");
        assert!(Instant::now() < deadline, "never recovered: {view}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn a(room: &Room) -> &Server {
    &room.a
}

fn b(room: &Room) -> &Server {
    room.b.as_ref().expect("B")
}

#[tokio::test]
async fn the_owner_sigkilled_mid_hand_the_heir_resumes_the_same_hand_at_the_same_decision() {
    let room = room(None, true).await;
    survives(
        room,
        async |r: &mut Room| {
            r.a.sigkill();
            r.a.wait_exit(Duration::from_secs(5)).await.expect("A died");
        },
        b,
        true,
    )
    .await;
}

#[tokio::test]
async fn the_owner_sigtermed_mid_hand_exits_at_once_and_the_heir_resumes_the_hand() {
    let room = room(None, true).await;
    let room = survives(
        room,
        async |r: &mut Room| {
            let signalled = Instant::now();
            r.a.sigterm();
            let status =
                r.a.wait_exit(Duration::from_secs(10))
                    .await
                    .expect("A exits");
            assert_eq!(status.code(), Some(0));
            // No waiting for the hand: about the time of one commit and
            // one release, however long the clock.
            let took = signalled.elapsed();
            assert!(
                took < Duration::from_millis(2500),
                "A took {took:?} to exit"
            );
            for p in &mut r.players {
                let close = p.client.expect_close(Duration::from_secs(5)).await;
                assert_eq!(close, Some((1012, "server_shutdown".to_string())));
            }
        },
        b,
        true,
    )
    .await;
    assert!(room.a.logs_contain("table_drain_mid_hand"));
}

#[tokio::test]
async fn a_move_mid_hand_resumes_the_hand_on_the_target_and_relayed_players_play_on() {
    let room = room(None, true).await;
    let room = survives(
        room,
        async |r: &mut Room| {
            let (status, view) =
                r.a.admin_post(
                    &format!("/admin/tables/{}/move", r.table),
                    json!({"to": "inst-b"}),
                )
                .await;
            assert_eq!(status, 200, "{view}");
            assert_eq!(view["owner"], "inst-b", "{view}");
        },
        b,
        true,
    )
    .await;
    // The players who stayed connected to A are relayed to B: their next
    // snapshot is B's hosting of the same hand.
    for mut p in room.players {
        let snap = p
            .client
            .recv_until(
                |v| v["type"] == "snapshot" && v["state"]["owner"] == "inst-b",
                Duration::from_secs(5),
            )
            .await
            .or_else(|| {
                p.client
                    .seen
                    .iter()
                    .find(|v| v["type"] == "snapshot" && v["state"]["owner"] == "inst-b")
                    .cloned()
            })
            .unwrap_or_else(|| panic!("{} was not moved to B: {:?}", p.name, p.client.seen));
        assert!(snap["state"]["game"]["hand"].as_u64().is_some());
    }
}

#[tokio::test]
async fn redis_restarted_empty_mid_hand_the_owner_reasserts_and_the_hand_goes_on() {
    let mut redis = PrivateRedis::start().await;
    let room = room(Some(&redis), false).await;
    let redis_ref = &mut redis;
    survives(
        room,
        async move |r: &mut Room| {
            redis_ref.kill().await;
            for p in &mut r.players {
                p.client
                    .recv_until(|v| v["type"] == "paused", Duration::from_secs(10))
                    .await
                    .unwrap_or_else(|| panic!("{} was told no pause", p.name));
            }
            redis_ref.start_again().await;
            for p in &mut r.players {
                p.client
                    .recv_until(|v| v["type"] == "resumed", Duration::from_secs(15))
                    .await
                    .unwrap_or_else(|| panic!("{} was told no resume", p.name));
            }
        },
        a,
        // A pause gives the decision a full clock again: nobody could act
        // while it lasted.
        false,
    )
    .await;
}

#[tokio::test]
async fn a_frozen_table_recovered_mid_hand_resumes_the_hand_instead_of_voiding_it() {
    let room = room(None, true).await;
    let pool = room.db.pool().await;
    survives(
        room,
        async move |r: &mut Room| {
            // The next act's journal write fails for good: the table
            // freezes (store_error) and the act is never told.
            sqlx::query(
                "ALTER TABLE journal ADD CONSTRAINT test_refuses_acts \
                 CHECK (kind <> 'act') NOT VALID",
            )
            .execute(&pool)
            .await
            .expect("add the check");
            let to_act = r.players.iter_mut().find(|p| {
                p.client
                    .seen
                    .iter()
                    .rev()
                    .find(|v| v["kind"] == "turn")
                    .is_some_and(|t| t["seat"].as_u64() == Some(p.seat))
            });
            let p = to_act.expect("a player to act");
            let turn = p
                .client
                .seen
                .iter()
                .rev()
                .find(|v| v["kind"] == "turn")
                .cloned()
                .expect("turn");
            let frame = choose(Policy::CheckCall, &r.table, &turn).expect("act");
            p.client.send(frame).await;
            let frozen = p
                .client
                .recv_until(|v| v["type"] == "frozen", Duration::from_secs(10))
                .await
                .unwrap_or_else(|| panic!("no freeze: {:?}", p.client.seen));
            assert_eq!(frozen["reason"], "store_error", "{frozen}");
            assert!(
                !p.client
                    .seen
                    .iter()
                    .any(|v| v["kind"] == "action" && v["decision"] == turn["decision"]),
                "the refused act was never told"
            );
            sqlx::query("ALTER TABLE journal DROP CONSTRAINT test_refuses_acts")
                .execute(&pool)
                .await
                .expect("drop the check");
            let view = recover(b(r), &r.table).await;
            assert_eq!(view["owner"], "inst-b", "{view}");
        },
        b,
        true,
    )
    .await;
}

#[tokio::test]
async fn an_operator_freeze_still_voids_the_hand_and_a_recovery_deals_a_new_one() {
    let mut room = room(None, true).await;
    let turn = to_the_flop(&mut room).await;
    let hand = turn["hand"].as_u64().expect("hand");
    let pool = room.db.pool().await;
    let stacks = play::db_stacks(&pool, &room.table).await;
    let (status, view) = b(&room)
        .admin_post(
            &format!("/admin/tables/{}/freeze", room.table),
            json!({"reason": "operator"}),
        )
        .await;
    assert_eq!(status, 200, "{view}");
    let voided = room.players[0]
        .client
        .recv_until(|v| v["kind"] == "hand_voided", Duration::from_secs(10))
        .await
        .expect("the players are told the hand is void");
    assert_eq!(voided["hand"], hand);
    assert_eq!(voided["reason"], "operator", "{voided}");
    assert_eq!(play::stacks_of(&voided), stacks, "stacks of the boundary");
    let journal: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM journal WHERE table_id = $1")
        .bind(&room.table)
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(journal, 0, "the voided hand's journal is gone");
    room.players[0]
        .client
        .recv_until(|v| v["type"] == "frozen", Duration::from_secs(10))
        .await
        .expect("then told the table froze");
    recover(b(&room), &room.table).await;
    // The burnt number is never dealt again.
    let (_, seen) = look(b(&room), &room.table, "alice", 0).await;
    let next = seen.game["hand"].as_u64().expect("hand");
    assert!(
        next > hand || !seen.game["hand_in_progress"].as_bool().unwrap_or(false),
        "{seen:?}"
    );
    assert_eq!(b(&room).table(&room.table).await["hand_no"], hand);
    assert_eq!(b(&room).audit().await["delta"], 0);
}

#[tokio::test]
async fn a_player_who_left_during_the_hand_is_still_folded_where_it_resumes_and_cashed_out_at_its_end(
) {
    let mut room = room_of(None, true, &["alice", "bob", "carol"]).await;
    let turn = to_the_flop(&mut room).await;
    let hand = turn["hand"].as_u64().expect("hand");
    // Someone who is not to act leaves: folded now (journalled), the seat
    // vacated by the hand's end.
    let to_act = turn["seat"].as_u64().expect("seat");
    let leaver = room
        .players
        .iter_mut()
        .find(|p| p.seat != to_act)
        .expect("a player not to act");
    let (name, seat) = (leaver.name, leaver.seat);
    leaver
        .client
        .send(json!({"type": "leave", "table": room.table}))
        .await;
    leaver
        .client
        .recv_until(
            |v| v["kind"] == "action" && v["seat"] == seat,
            Duration::from_secs(5),
        )
        .await
        .unwrap_or_else(|| panic!("{name} folded: {:?}", leaver.client.seen));
    room.players.retain(|p| p.seat != seat);
    let before = views(&room, &room.a, 0).await;
    let fence = before[0].fence;
    room.a.sigkill();
    room.a
        .wait_exit(Duration::from_secs(5))
        .await
        .expect("A died");
    let after = views(&room, b(&room), fence).await;
    for (b4, a) in before.iter().zip(&after) {
        assert_eq!(a.game, b4.game, "the hand as the player sees it");
        let gone = a.game["seats"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["seat"] == seat))
            .cloned()
            .expect("the leaver's seat is held until the hand ends");
        assert_eq!(gone["folded"], true, "{gone}");
    }
    play_out(&room, b(&room), hand, fence).await;
    assert_recorded_once(&room, b(&room), hand, after[0].fence).await;
    let pool = room.db.pool().await;
    let result: Value =
        sqlx::query_scalar("SELECT result FROM hands WHERE table_id = $1 AND hand_no = $2")
            .bind(&room.table)
            .bind(i64::try_from(hand).expect("hand"))
            .fetch_one(&pool)
            .await
            .expect("the hand row");
    let end = result["seats"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["seat"] == seat))
        .and_then(|s| s["end_stack"].as_i64())
        .expect("the leaver's end stack");
    let seats = play::db_stacks(&pool, &room.table).await;
    assert!(
        !seats.contains_key(&seat),
        "{name}'s seat is empty: {seats:?}"
    );
    let wallet: i64 = sqlx::query_scalar("SELECT balance FROM accounts WHERE player = $1")
        .bind(name)
        .fetch_one(&pool)
        .await
        .expect("wallet");
    assert_eq!(
        wallet,
        900 + end,
        "{name} got her stack back at the hand's end"
    );
}

/// The events in `seen` numbered after `since`.
fn events_after(seen: &[Value], since: u64) -> Vec<Value> {
    seen.iter()
        .filter(|v| v["type"] == "event" && v["seq"].as_u64().is_some_and(|s| s > since))
        .cloned()
        .collect()
}

/// `name` joins on `server` with `since` and reads for a while.
async fn rejoin(server: &Server, table: &str, name: &str, since: u64) -> Vec<Value> {
    let mut c = WsClient::connect(server, &mint_token(name))
        .await
        .expect("connect");
    c.send(json!({"type": "join", "table": table, "since": since}))
        .await;
    while c.recv_json(Duration::from_millis(500)).await.is_some() {}
    c.close().await;
    c.seen
}

#[tokio::test]
async fn a_since_from_the_sigkilled_owner_is_answered_on_the_heir_with_the_events_missed() {
    let mut room = room(None, true).await;
    let turn = to_the_flop(&mut room).await;
    let hand = turn["hand"].as_u64().expect("hand");
    // Everything A sent reaches the players' lists.
    for p in &mut room.players {
        while p
            .client
            .recv_json(Duration::from_millis(300))
            .await
            .is_some()
        {}
    }
    let fence = views(&room, &room.a, 0).await[0].fence;
    room.a.sigkill();
    room.a
        .wait_exit(Duration::from_secs(5))
        .await
        .expect("A died");
    // B hosts the table (a fresh join's snapshot shows its hosting).
    views(&room, b(&room), fence).await;
    for p in &room.players {
        let seen = &p.client.seen;
        let deal = seen
            .iter()
            .find(|v| v["kind"] == "hand_started" && v["hand"] == hand)
            .unwrap_or_else(|| panic!("{} saw no deal: {seen:?}", p.name));
        let flop = seen
            .iter()
            .find(|v| v["kind"] == "street" && v["street"] == "flop")
            .expect("the flop");
        let last = seen
            .iter()
            .rev()
            .find_map(|v| v["seq"].as_u64())
            .expect("a seq");
        for since in [
            deal["seq"].as_u64().unwrap() - 1,
            flop["seq"].as_u64().unwrap() - 1,
            last,
        ] {
            let want = events_after(seen, since);
            let mut got = rejoin(b(&room), &room.table, p.name, since).await;
            // Then B's own first event: the open decision told again, as A
            // announced it (deadline and all), numbered from B's epoch.
            let retold = got.pop().expect("the decision told again");
            let open = seen
                .iter()
                .rev()
                .find(|v| v["kind"] == "turn")
                .expect("a turn from A");
            for field in ["kind", "hand", "seat", "decision", "legal", "deadline_ms"] {
                assert_eq!(retold[field], open[field], "{field}: {retold}");
            }
            assert!(retold["seq"].as_u64() > Some(last), "{retold}");
            assert_eq!(
                got, want,
                "{} since {since}: the events it missed, as A told them",
                p.name
            );
        }
        // A `since` past what A's journal shows (an event the journal
        // does not keep may lie there) gets a snapshot.
        let got = rejoin(b(&room), &room.table, p.name, last + 1).await;
        assert_eq!(
            got.first().map(|v| v["type"].clone()),
            Some(json!("snapshot")),
            "{got:?}"
        );
    }
    let ended = play_out(&room, b(&room), hand, fence).await;
    assert_eq!(ended["hand"], hand);
}
