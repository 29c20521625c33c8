//! Soak: three instances, twelve tables of scripted players who follow
//! their table's owner, and a seeded mix of faults for about a minute:
//! SIGKILL, SIGSTOP and SIGTERM restarts, deleted lease keys, Redis
//! restarted empty, Redis hanging for a moment. At the end Postgres and the
//! logs must show: chips conserved, no hand applied twice, hand fences that
//! never decrease, no hand dealt by a process after a newer owner stamped
//! the table, no result told that Postgres did not record, no table frozen,
//! and stale owners that never wrote: their writes refused, or their copies
//! stopped on seeing the newer fence (counted, more than none).
//!
//! Run by `scripts/test.sh` after the suite (it is `#[ignore]`d there so it
//! never shares the two cores with other tests). The schedule is fixed by
//! default; `PITBOSS_SOAK_SEED` replays another (`random` draws one), and
//! `PITBOSS_SOAK_SECS` sets its length (default 60).

mod common;
mod play;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use sqlx::{PgPool, Row};

use common::{lease_key, mint_token, test_db, unique_env, PrivateRedis, Server, ServerConfig};
use play::choose;

const TTL_MS: u64 = 1500;
/// Every kind of fault within the minute, a stop past the takeover bound
/// among them (the schedule that first caught a woken owner recording a
/// freeze for a takeover that was then refused).
const DEFAULT_SEED: u64 = 17578144773076473364;
const INSTANCES: [&str; 3] = ["inst-a", "inst-b", "inst-c"];
const TABLES_PER_INSTANCE: usize = 4;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// The live process of each instance id, and every process that ever ran
/// (their logs are read at the end).
#[derive(Default)]
struct Fleet {
    live: Mutex<HashMap<String, Arc<Server>>>,
    all: Mutex<Vec<Arc<Server>>>,
}

impl Fleet {
    async fn start(&self, cfg: ServerConfig) -> Arc<Server> {
        let server = Arc::new(Server::start(cfg.clone()).await);
        self.live
            .lock()
            .unwrap()
            .insert(cfg.instance_id.clone(), server.clone());
        self.all.lock().unwrap().push(server.clone());
        server
    }

    fn get(&self, id: &str) -> Option<Arc<Server>> {
        self.live.lock().unwrap().get(id).cloned()
    }

    fn take(&self, id: &str) -> Option<Arc<Server>> {
        self.live.lock().unwrap().remove(id)
    }

    fn any(&self) -> Arc<Server> {
        self.live
            .lock()
            .unwrap()
            .values()
            .next()
            .cloned()
            .expect("a live instance")
    }
}

/// A `hand_ended` as told: table, hand, seat → stack.
type Ended = (String, u64, HashMap<u64, u64>);

/// One seat's hole cards and the board, as told during a hand.
type CardsTold = (Value, Vec<Value>);

/// What the players were told, for the checks at the end.
#[derive(Default)]
struct Told {
    ended: Mutex<Vec<Ended>>,
    frozen_frames: Mutex<u64>,
    reconnects: Mutex<u64>,
    /// Frames that broke the order on their connection: an event whose
    /// `seq` was not above every `seq` the connection had been told, or a
    /// snapshot below the last event.
    out_of_order: Mutex<Vec<String>>,
    /// The hands in progress as told, by table, hand and seat: that seat's
    /// hole cards and the board (I15: what a resumed hand must show).
    dealt: Mutex<HashMap<(String, u64, u64), CardsTold>>,
    /// Snapshots of a hand in progress that a player was told about on an
    /// earlier connection or hosting, and those that showed it otherwise.
    resumed: Mutex<u64>,
    changed: Mutex<Vec<String>>,
}

impl Told {
    /// Keeps the cards and board `seat` is told during a hand.
    fn note(&self, table: &str, seat: u64, v: &Value) {
        let Some(hand) = v["hand"].as_u64() else {
            return;
        };
        let mut dealt = self.dealt.lock().unwrap();
        let entry = dealt
            .entry((table.to_string(), hand, seat))
            .or_insert((Value::Null, Vec::new()));
        match v["kind"].as_str() {
            Some("hole_cards") if v["seat"].as_u64() == Some(seat) => entry.0 = v["cards"].clone(),
            Some("street") => entry.1 = v["board"].as_array().cloned().unwrap_or_default(),
            _ => {}
        }
    }

    /// A snapshot of a hand `seat` was told about shows its cards and the
    /// board as told (the board perhaps further on).
    fn check(&self, table: &str, seat: u64, game: &Value) {
        let Some(hand) = game["hand"].as_u64() else {
            return;
        };
        if game["hand_in_progress"] != true {
            return;
        }
        let dealt = self.dealt.lock().unwrap();
        let Some((cards, board)) = dealt.get(&(table.to_string(), hand, seat)) else {
            return;
        };
        *self.resumed.lock().unwrap() += 1;
        let shown = game["seats"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["seat"].as_u64() == Some(seat)))
            .map(|s| s["cards"].clone())
            .unwrap_or(Value::Null);
        let now = game["board"].as_array().cloned().unwrap_or_default();
        if (!cards.is_null() && shown != *cards) || !now.starts_with(board) {
            self.changed.lock().unwrap().push(format!(
                "{table} hand {hand} seat {seat}: told {cards} on {board:?}, shown {shown} on {now:?}"
            ));
        }
    }

    /// Checks `v`, a frame for the table, against the highest `seq` its
    /// connection was told before, and moves that on.
    fn order(&self, last: &mut Option<u64>, v: &Value) {
        let Some(seq) = v["seq"].as_u64() else {
            return;
        };
        let broken = match (v["type"].as_str(), *last) {
            (Some("event"), Some(l)) => seq <= l,
            (Some("snapshot"), Some(l)) => seq < l,
            _ => false,
        };
        if broken {
            self.out_of_order
                .lock()
                .unwrap()
                .push(format!("{} {seq} after {last:?}", v["type"]));
        }
        if matches!(v["type"].as_str(), Some("event" | "snapshot")) {
            *last = Some(last.map_or(seq, |l| l.max(seq)));
        }
    }
}

/// A scripted player that follows its table's owner: it asks Postgres who
/// owns the table, plays there, and on any end of that (close, `frozen`,
/// `released`, silence while the owner changed) finds the owner again.
async fn follow_and_play(
    fleet: Arc<Fleet>,
    pool: PgPool,
    table: String,
    name: String,
    seat: u64,
    told: Arc<Told>,
    stop: Arc<AtomicBool>,
) {
    let token = mint_token(&name);
    while !stop.load(Ordering::Relaxed) {
        let owner: Option<(Option<String>, String)> =
            sqlx::query("SELECT owner_instance, state FROM tables WHERE id = $1")
                .bind(&table)
                .fetch_optional(&pool)
                .await
                .ok()
                .flatten()
                .map(|r| (r.get("owner_instance"), r.get("state")));
        let Some(server) = owner.and_then(|(o, _)| o).and_then(|o| fleet.get(&o)) else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        *told.reconnects.lock().unwrap() += 1;
        play_at(&server, &pool, &table, seat, &token, &told, &stop).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Plays at `server` until the connection is no longer useful.
#[allow(clippy::too_many_arguments)]
async fn play_at(
    server: &Server,
    pool: &PgPool,
    table: &str,
    seat: u64,
    token: &str,
    told: &Told,
    stop: &AtomicBool,
) {
    let connect = common::WsClient::connect(server, token);
    let Ok(Ok(mut c)) = tokio::time::timeout(secs(2.0), connect).await else {
        return;
    };
    if c.try_send(text(json!({"type": "join", "table": table})))
        .await
        .is_err()
    {
        return;
    }
    let Some(first) = c
        .recv_until(
            |v| v["type"] == "snapshot" || v["type"] == "error",
            secs(3.0),
        )
        .await
    else {
        return;
    };
    if first["type"] == "error" {
        return;
    }
    let mut last_seq = None;
    told.order(&mut last_seq, &first);
    let game = &first["state"]["game"];
    told.check(table, seat, game);
    if game["you"].is_null() {
        let sit = json!({"type": "sit", "table": table, "seat": seat, "buy_in": 100});
        if c.try_send(text(sit)).await.is_err() {
            return;
        }
    } else if let Some(frame) = pending_turn(table, game) {
        let _ = c.try_send(text(frame)).await;
    }
    let mut quiet_since = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let Some(v) = c.recv_json(Duration::from_millis(250)).await else {
            if c.closed.is_some() {
                return;
            }
            // Silence: if the owner changed meanwhile, go and find it.
            if quiet_since.elapsed() > secs(2.0) {
                quiet_since = Instant::now();
                let owner: Option<String> =
                    sqlx::query_scalar("SELECT owner_instance FROM tables WHERE id = $1")
                        .bind(table)
                        .fetch_one(pool)
                        .await
                        .ok()
                        .flatten();
                if owner.as_deref() != Some(server.cfg.instance_id.as_str()) {
                    return;
                }
            }
            continue;
        };
        quiet_since = Instant::now();
        if v["table"] == table {
            told.order(&mut last_seq, &v);
        }
        match v["type"].as_str() {
            Some("frozen") => {
                *told.frozen_frames.lock().unwrap() += 1;
                return;
            }
            Some("released") => return,
            Some("snapshot") => {
                told.check(table, seat, &v["state"]["game"]);
                if let Some(frame) = pending_turn(table, &v["state"]["game"]) {
                    let _ = c.try_send(text(frame)).await;
                }
            }
            _ => {}
        }
        if matches!(v["kind"].as_str(), Some("hole_cards" | "street")) && v["table"] == table {
            told.note(table, seat, &v);
        }
        if v["kind"] == "hand_ended" && v["table"] == table {
            told.ended.lock().unwrap().push((
                table.to_string(),
                v["hand"].as_u64().expect("hand"),
                play::stacks_of(&v),
            ));
        }
        if v["kind"] == "turn" && v["seat"].as_u64() == Some(seat) && v["table"] == table {
            if let Some(frame) = choose(play::Policy::CheckCall, table, &v) {
                if c.try_send(text(frame)).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// The act for a decision a snapshot shows waiting for the viewer.
fn pending_turn(table: &str, game: &Value) -> Option<Value> {
    if game["decision"].is_null() || game["you"] != game["to_act"] {
        return None;
    }
    let turn = json!({"hand": game["hand"], "decision": game["decision"], "legal": game["legal"]});
    choose(play::Policy::CheckCall, table, &turn)
}

fn text(v: Value) -> tokio_tungstenite::tungstenite::Message {
    tokio_tungstenite::tungstenite::Message::Text(v.to_string())
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    Kill,
    Stop,
    Term,
    DeleteLease,
    RedisRestart,
    RedisHang,
}

fn pick(rng: &mut StdRng) -> Fault {
    match rng.gen_range(0..12) {
        0 | 1 => Fault::Kill,
        2 | 3 => Fault::Stop,
        4 | 5 => Fault::Term,
        6..=8 => Fault::DeleteLease,
        9 => Fault::RedisRestart,
        _ => Fault::RedisHang,
    }
}

/// One `hand_dealt` log line: when, which table, under which fence.
struct Dealt {
    at: DateTime<Utc>,
    instance: String,
    table: String,
    hand: u64,
    fence: i64,
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let start = line.find(&format!(" {key}="))? + key.len() + 2;
    let rest = &line[start..];
    let end = rest.find(' ').unwrap_or(rest.len());
    Some(rest[..end].trim_matches('"'))
}

fn dealt_lines(server: &Server) -> Vec<Dealt> {
    server
        .logs()
        .iter()
        .filter(|l| l.contains("event=\"hand_dealt\""))
        .filter_map(|l| {
            let at = l.split_whitespace().next()?.parse().ok()?;
            Some(Dealt {
                at,
                instance: server.cfg.instance_id.clone(),
                table: field(l, "table_id")?.to_string(),
                hand: field(l, "hand")?.parse().ok()?,
                fence: field(l, "dealt_fence")?.parse().ok()?,
            })
        })
        .collect()
}

#[tokio::test]
#[ignore = "soak: run on its own by scripts/test.sh after the suite"]
async fn three_instances_under_a_seeded_mix_of_faults_keep_every_promise() {
    // A fixed schedule by default, so a run is repeatable (its timing is
    // not); `PITBOSS_SOAK_SEED=random` draws a new one, a number replays it.
    let seed: u64 = match std::env::var("PITBOSS_SOAK_SEED").ok().as_deref() {
        Some("random") => rand::thread_rng().gen(),
        Some(s) => s.parse().expect("PITBOSS_SOAK_SEED: a number or `random`"),
        None => DEFAULT_SEED,
    };
    let soak_secs: f64 = std::env::var("PITBOSS_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60.0);
    println!("soak: seed {seed} (PITBOSS_SOAK_SEED={seed} replays it), {soak_secs} s");
    let mut rng = StdRng::seed_from_u64(seed);

    let db = test_db().await;
    let pool = db.pool().await;
    let env = unique_env();
    let mut redis = PrivateRedis::start().await;
    let cfg = |id: &str| {
        ServerConfig::new(&db, &env)
            .with_instance(id)
            .with_redis(&redis.url())
            .with_ttl_ms(TTL_MS)
            .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "100")
            .with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "2000")
            .with_env("PITBOSS__REDIS__OP_TIMEOUT_MS", "300")
            .with_env("PITBOSS__SHUTDOWN__DRAIN_TIMEOUT_MS", "2000")
            .with_env("PITBOSS__WS__RATE_PER_SEC", "500")
            .with_env("PITBOSS__WS__RATE_BURST", "1000")
    };
    let configs: HashMap<&str, ServerConfig> = INSTANCES.iter().map(|id| (*id, cfg(id))).collect();
    let fleet = Arc::new(Fleet::default());
    for id in INSTANCES {
        fleet.start(configs[id].clone()).await;
    }

    // Twelve tables, four created (and first hosted) on each instance, two
    // players each.
    let told = Arc::new(Told::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut tables = Vec::new();
    let mut players = Vec::new();
    for id in INSTANCES {
        let server = fleet.get(id).expect("live");
        for _ in 0..TABLES_PER_INSTANCE {
            let t = play::new_table(&server).await;
            for seat in 0..2u64 {
                let name = format!("p{}_{seat}", tables.len());
                server.grant(&name, 100_000).await;
                players.push(tokio::spawn(follow_and_play(
                    fleet.clone(),
                    pool.clone(),
                    t.clone(),
                    name,
                    seat,
                    told.clone(),
                    stop.clone(),
                )));
            }
            tables.push(t);
        }
    }
    tokio::time::sleep(secs(3.0)).await;

    // The faults, one after another. The first is always a stop past the
    // takeover bound, so a stale owner wakes up at least once.
    let started = Instant::now();
    let mut applied: BTreeMap<String, u32> = BTreeMap::new();
    let mut first = true;
    while started.elapsed() < secs(soak_secs) {
        let fault = if first { Fault::Stop } else { pick(&mut rng) };
        let id = INSTANCES[rng.gen_range(0..INSTANCES.len())];
        let ttl = TTL_MS as f64 / 1000.0;
        match fault {
            Fault::Kill => {
                let server = fleet.take(id).expect("live");
                server.sigkill();
                server.wait_exit(secs(5.0)).await.expect("killed");
                tokio::time::sleep(secs(rng.gen_range(0.2..1.5))).await;
                fleet.start(configs[id].clone()).await;
            }
            Fault::Stop => {
                let server = fleet.get(id).expect("live");
                let pause = if first {
                    2.5 * ttl
                } else {
                    rng.gen_range(0.5..3.0) * ttl
                };
                server.sigstop();
                tokio::time::sleep(secs(pause)).await;
                server.sigcont();
            }
            Fault::Term => {
                let server = fleet.take(id).expect("live");
                server.sigterm();
                server
                    .wait_exit(secs(20.0))
                    .await
                    .expect("drained and exited");
                fleet.start(configs[id].clone()).await;
            }
            Fault::DeleteLease => {
                let t = &tables[rng.gen_range(0..tables.len())];
                let mut conn = common::redis_conn(&redis.url()).await;
                let _: Result<i64, _> = redis::cmd("DEL")
                    .arg(lease_key(&env, t))
                    .query_async(&mut conn)
                    .await;
            }
            Fault::RedisRestart => {
                redis.kill().await;
                redis.start_again().await;
            }
            Fault::RedisHang => {
                redis.pause();
                tokio::time::sleep(secs(rng.gen_range(0.2..1.2) * ttl)).await;
                redis.resume();
            }
        }
        let label = match fault {
            Fault::DeleteLease | Fault::RedisRestart | Fault::RedisHang => format!("{fault:?}"),
            _ => format!("{fault:?}({id})"),
        };
        println!("soak: {:>6.1}s {label}", started.elapsed().as_secs_f64());
        *applied.entry(format!("{fault:?}")).or_default() += 1;
        first = false;
        tokio::time::sleep(secs(rng.gen_range(1.5..3.5))).await;
    }

    // Let every table settle with all instances live, then stop playing.
    tokio::time::sleep(secs(2.0 * TTL_MS as f64 / 1000.0 + 2.0)).await;
    stop.store(true, Ordering::Relaxed);
    for p in players {
        p.await.expect("player task");
    }
    let server = fleet.any();
    let audit = server.audit().await;

    // Figures, printed before any assertion so a failure still shows them.
    let hands: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM hands")
        .fetch_one(&pool)
        .await
        .expect("hands");
    let all: Vec<Arc<Server>> = fleet.all.lock().unwrap().clone();
    let count = |needle: &str| -> usize {
        all.iter()
            .map(|s| s.logs().iter().filter(|l| l.contains(needle)).count())
            .sum()
    };
    let stale = count("event=\"stale_owner_boundary_write\"");
    let voided = count("event=\"hand_voided\"");
    let resumed = *told.resumed.lock().unwrap();
    let superseded = count("event=\"table_superseded\"");
    println!(
        "soak: faults {applied:?}; {hands} hands recorded; {} results told; {stale} stale writes refused; {superseded} stale copies stopped by the fence check; \
         {} re-asserts, {} refused; {} pauses; {} frozen frames (stale copies); {} (re)connections; \
         {voided} hands voided; {resumed} snapshots of a hand in progress already told; audit {audit}",
        told.ended.lock().unwrap().len(),
        count("event=\"lease_reasserted\"") / 2,
        count("event=\"reassert_refused\""),
        count("event=\"table_paused\""),
        told.frozen_frames.lock().unwrap(),
        told.reconnects.lock().unwrap(),
    );

    assert_eq!(audit["delta"], 0, "chips conserved: {audit}");
    // I15: no fault of the soak is an operator's freeze or a broken
    // constraint, so no owner change may void a hand, and every hand seen
    // again shows the cards and board told before.
    assert_eq!(voided, 0, "no hand voided by an owner change");
    let changed = told.changed.lock().unwrap().clone();
    assert!(changed.is_empty(), "resumed hands as told: {changed:#?}");
    let out_of_order = told.out_of_order.lock().unwrap().clone();
    assert!(
        out_of_order.is_empty(),
        "seq strictly increases on every connection: {out_of_order:?}"
    );
    let states: Vec<(String, String)> = sqlx::query("SELECT id, state FROM tables ORDER BY id")
        .fetch_all(&pool)
        .await
        .expect("tables")
        .iter()
        .map(|r| (r.get("id"), r.get("state")))
        .collect();
    assert!(
        states.iter().all(|(_, s)| s != "frozen"),
        "no table frozen: {states:?}"
    );

    // No hand applied twice: one row per (table, hand) by its primary key,
    // and every ledger row of a hand carries that hand's fence and nets 0.
    let mismatched: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM ledger l JOIN hands h ON h.table_id = l.table_id AND h.hand_no = l.hand_no \
         WHERE l.kind = 'hand' AND l.fence <> h.fence",
    )
    .fetch_one(&pool)
    .await
    .expect("ledger");
    assert_eq!(mismatched, 0, "ledger rows of a hand carry its fence");
    let unbalanced: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM (SELECT table_id, hand_no FROM ledger WHERE kind = 'hand' \
         GROUP BY table_id, hand_no HAVING SUM(stack_delta) <> 0) x",
    )
    .fetch_one(&pool)
    .await
    .expect("ledger");
    assert_eq!(unbalanced, 0, "every hand nets to 0");

    // Hand fences never decrease along a table's hands.
    let rows = sqlx::query("SELECT table_id, hand_no, fence FROM hands ORDER BY table_id, hand_no")
        .fetch_all(&pool)
        .await
        .expect("hands");
    let mut last: HashMap<String, i64> = HashMap::new();
    for r in &rows {
        let (t, h, f): (String, i64, i64) = (r.get("table_id"), r.get("hand_no"), r.get("fence"));
        let prev = last.insert(t.clone(), f).unwrap_or(0);
        assert!(f >= prev, "table {t} hand {h}: fence {f} after {prev}");
    }

    // Every result told is a hand Postgres recorded, with the same stacks.
    let recorded: HashMap<(String, i64), Value> =
        sqlx::query("SELECT table_id, hand_no, result FROM hands")
            .fetch_all(&pool)
            .await
            .expect("hands")
            .iter()
            .map(|r| ((r.get("table_id"), r.get("hand_no")), r.get("result")))
            .collect();
    let mut not_recorded = Vec::new();
    for (t, hand, stacks) in told.ended.lock().unwrap().iter() {
        match recorded.get(&(t.clone(), *hand as i64)) {
            Some(result) => {
                let rec: HashMap<u64, u64> = result["seats"]
                    .as_array()
                    .expect("seats")
                    .iter()
                    .map(|s| {
                        (
                            s["seat"].as_u64().unwrap(),
                            s["end_stack"].as_u64().unwrap(),
                        )
                    })
                    .collect();
                if &rec != stacks {
                    not_recorded.push(format!(
                        "{t} hand {hand}: told {stacks:?}, recorded {rec:?}"
                    ));
                }
            }
            None => not_recorded.push(format!("{t} hand {hand}: told, never recorded")),
        }
    }
    assert!(
        not_recorded.is_empty(),
        "results told but not recorded: {not_recorded:#?}"
    );

    // No hand dealt by a process after a newer owner stamped the table.
    let stamps: Vec<(String, i64, DateTime<Utc>)> =
        sqlx::query("SELECT table_id, fence, at FROM table_events WHERE fence IS NOT NULL")
            .fetch_all(&pool)
            .await
            .expect("events")
            .iter()
            .map(|r| (r.get("table_id"), r.get("fence"), r.get("at")))
            .collect();
    let dealt: Vec<Dealt> = all.iter().flat_map(|s| dealt_lines(s)).collect();
    assert!(
        dealt.len() as i64 >= hands,
        "every recorded hand was logged when dealt: {} lines for {hands} hands",
        dealt.len()
    );
    let mut late = Vec::new();
    for d in dealt {
        if let Some((_, f, at)) = stamps
            .iter()
            .find(|(t, f, at)| *t == d.table && *f > d.fence && *at < d.at)
        {
            late.push(format!(
                "{} dealt hand {} of {} under fence {} at {}, after fence {f} was stamped at {at}",
                d.instance, d.hand, d.table, d.fence, d.at
            ));
        }
    }
    assert!(
        late.is_empty(),
        "hands dealt after a newer owner's stamp: {late:#?}"
    );
    // A stale owner never writes: its writes are refused, or the fence
    // check sees the newer owner's fence first and stops its copy.
    assert!(
        stale + superseded > 0,
        "a stale owner woke up and was stopped: its writes refused or its copy superseded"
    );
    drop(redis);
}
