//! The faults: what each kind does, the seeded schedule that draws them,
//! and the record of every one applied.
//!
//! The schedule is a function of the seed alone: the sequence of kinds,
//! their targets (an instance slot, a table by its creation order) and
//! their parameters, and the gaps between them. How the system answers,
//! and so the exact timing, is not. Faults overlap, within limits that
//! keep the run meaningful: one process fault at a time (so at least all
//! but one instance are running), one Redis-server fault, one proxy fault
//! and one Postgres fault at a time; table faults (moves, deleted lease
//! keys) at any moment. A fault whose lane is busy waits for it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::json;
use tokio::sync::Mutex as AsyncMutex;

use crate::fleet::{lock, Fleet};
use crate::monitor::Seen;
use crate::postgres::ChaosDb;
use crate::redis_server::{delete_key, PrivateRedis};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    KillRestart,
    KillRestartNewId,
    StopPastTtl,
    TermRestart,
    Move,
    LeaseDelete,
    RedisRestart,
    RedisPause,
    RedisLatency,
    RedisCut,
    PgExhaust,
    RowLock,
}

impl Kind {
    pub const ALL: [Kind; 12] = [
        Kind::KillRestart,
        Kind::KillRestartNewId,
        Kind::StopPastTtl,
        Kind::TermRestart,
        Kind::Move,
        Kind::LeaseDelete,
        Kind::RedisRestart,
        Kind::RedisPause,
        Kind::RedisLatency,
        Kind::RedisCut,
        Kind::PgExhaust,
        Kind::RowLock,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::KillRestart => "sigkill_restart",
            Kind::KillRestartNewId => "sigkill_restart_new_id",
            Kind::StopPastTtl => "sigstop_past_ttl",
            Kind::TermRestart => "sigterm_restart",
            Kind::Move => "move",
            Kind::LeaseDelete => "lease_key_deleted",
            Kind::RedisRestart => "redis_restart_empty",
            Kind::RedisPause => "redis_paused",
            Kind::RedisLatency => "redis_latency",
            Kind::RedisCut => "redis_cut",
            Kind::PgExhaust => "pg_connections_exhausted",
            Kind::RowLock => "pg_row_lock_held",
        }
    }

    /// How often it is drawn, relative to the others.
    fn weight(self) -> u32 {
        match self {
            Kind::KillRestart => 6,
            Kind::KillRestartNewId => 3,
            Kind::StopPastTtl => 6,
            Kind::TermRestart => 5,
            Kind::Move => 12,
            Kind::LeaseDelete => 14,
            Kind::RedisRestart => 3,
            Kind::RedisPause => 5,
            Kind::RedisLatency => 8,
            Kind::RedisCut => 8,
            Kind::PgExhaust => 5,
            Kind::RowLock => 10,
        }
    }

    fn lane(self) -> Lane {
        match self {
            Kind::KillRestart | Kind::KillRestartNewId | Kind::StopPastTtl | Kind::TermRestart => {
                Lane::Process
            }
            Kind::RedisRestart | Kind::RedisPause => Lane::Redis,
            Kind::RedisLatency | Kind::RedisCut => Lane::Proxy,
            Kind::PgExhaust | Kind::RowLock => Lane::Postgres,
            Kind::Move | Kind::LeaseDelete => Lane::Free,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lane {
    Process,
    Redis,
    Proxy,
    Postgres,
    Free,
}

/// One fault as the schedule drew it.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub kind: Kind,
    /// An instance slot (its target, or the instance a move is asked of).
    pub slot: usize,
    /// A table, by its index in creation order.
    pub table: usize,
    /// A second choice: a move's target among the other instances.
    pub other: usize,
    /// Its length, or the latency it adds (seconds).
    pub secs: f64,
    /// Wait before the next fault starts (seconds).
    pub gap: f64,
}

/// Draws the schedule. The first fault is a stop well past the TTL, so a
/// stale owner wakes up at least once; the next ones go through every kind
/// once, in a seeded order; then kinds are drawn by weight.
pub struct Schedule {
    rng: StdRng,
    ttl: f64,
    gap: f64,
    instances: usize,
    tables: usize,
    opening: Vec<Kind>,
    drawn: usize,
}

impl Schedule {
    pub fn new(seed: u64, ttl: Duration, gap: Duration, instances: usize, tables: usize) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut opening = Kind::ALL.to_vec();
        opening.shuffle(&mut rng);
        Schedule {
            rng,
            ttl: ttl.as_secs_f64(),
            gap: gap.as_secs_f64(),
            instances,
            tables,
            opening,
            drawn: 0,
        }
    }

    fn weighted(&mut self) -> Kind {
        let total: u32 = Kind::ALL.iter().map(|k| k.weight()).sum();
        let mut x = self.rng.gen_range(0..total);
        for k in Kind::ALL {
            if x < k.weight() {
                return k;
            }
            x -= k.weight();
        }
        Kind::LeaseDelete
    }

    pub fn next_fault(&mut self) -> Planned {
        let n = self.drawn;
        self.drawn += 1;
        let kind = if n == 0 {
            Kind::StopPastTtl
        } else if let Some(k) = self.opening.get(n - 1) {
            *k
        } else {
            self.weighted()
        };
        let ttl = self.ttl;
        let secs = match kind {
            Kind::StopPastTtl if n == 0 => 2.5 * ttl,
            Kind::StopPastTtl => self.rng.gen_range(1.2..3.0) * ttl,
            Kind::KillRestart | Kind::KillRestartNewId => self.rng.gen_range(0.2..1.5),
            Kind::RedisPause => self.rng.gen_range(0.3..1.5) * ttl,
            // One-way latency: from harmless to past the Redis op budget.
            Kind::RedisLatency => self.rng.gen_range(0.02..0.25) * ttl,
            Kind::RedisCut => self.rng.gen_range(0.2..2.0) * ttl,
            Kind::PgExhaust => self.rng.gen_range(1.0..4.0),
            Kind::RowLock => self.rng.gen_range(0.5..4.0),
            Kind::TermRestart | Kind::Move | Kind::LeaseDelete | Kind::RedisRestart => 0.0,
        };
        Planned {
            kind,
            slot: self.rng.gen_range(0..self.instances),
            table: self.rng.gen_range(0..self.tables),
            other: self.rng.gen_range(0..self.instances.max(2) - 1),
            secs,
            gap: self.rng.gen_range(0.5..1.5) * self.gap,
        }
    }
}

pub fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// One fault as it was applied.
#[derive(Debug, Clone)]
pub struct Record {
    pub kind: Kind,
    pub target: String,
    /// Wall-clock ms when it began and when its cause was lifted (the
    /// process continued or started again, Redis answering, the proxy
    /// healed, the connections or the lock released).
    pub start_ms: i64,
    pub lifted_ms: i64,
    /// Tables it could reach: the target instance's as last seen, every
    /// table for a Redis-wide or database-wide fault, or its table.
    pub affected: Vec<String>,
    /// What was done, or why it could not be.
    pub outcome: Result<String, String>,
}

pub struct Faults {
    pub process_lane: Arc<AsyncMutex<()>>,
    redis_lane: Arc<AsyncMutex<()>>,
    proxy_lane: Arc<AsyncMutex<()>>,
    pg_lane: Arc<AsyncMutex<()>>,
    pub records: Mutex<Vec<Record>>,
    fleet: Arc<Fleet>,
    redis: Arc<AsyncMutex<PrivateRedis>>,
    redis_url: String,
    db: Arc<ChaosDb>,
    seen: Arc<Seen>,
    tables: Vec<String>,
    environment: String,
    admin_token: String,
    http: reqwest::Client,
}

pub struct FaultsConfig {
    pub fleet: Arc<Fleet>,
    pub redis: Arc<AsyncMutex<PrivateRedis>>,
    pub redis_url: String,
    pub db: Arc<ChaosDb>,
    pub seen: Arc<Seen>,
    pub tables: Vec<String>,
    pub environment: String,
    pub admin_token: String,
}

impl Faults {
    pub fn new(cfg: FaultsConfig) -> anyhow::Result<Faults> {
        Ok(Faults {
            process_lane: Arc::default(),
            redis_lane: Arc::default(),
            proxy_lane: Arc::default(),
            pg_lane: Arc::default(),
            records: Mutex::new(Vec::new()),
            fleet: cfg.fleet,
            redis: cfg.redis,
            redis_url: cfg.redis_url,
            db: cfg.db,
            seen: cfg.seen,
            tables: cfg.tables,
            environment: cfg.environment,
            admin_token: cfg.admin_token,
            // A move answers once the target hosts the table, after the
            // owner finished its hand (the drain timeout at most).
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(15))
                .build()?,
        })
    }

    /// `faults N` for the progress line.
    pub fn progress(&self) -> String {
        let records = lock(&self.records);
        let ok = records.iter().filter(|r| r.outcome.is_ok()).count();
        format!("faults {ok}")
    }

    /// Applies faults from `schedule` for `duration`, then waits for the
    /// ones in progress to end.
    pub async fn run(self: Arc<Self>, mut schedule: Schedule, duration: Duration) {
        let started = Instant::now();
        let mut running = tokio::task::JoinSet::new();
        while started.elapsed() < duration {
            let planned = schedule.next_fault();
            let lane = match planned.kind.lane() {
                Lane::Process => Some(self.process_lane.clone()),
                Lane::Redis => Some(self.redis_lane.clone()),
                Lane::Proxy => Some(self.proxy_lane.clone()),
                Lane::Postgres => Some(self.pg_lane.clone()),
                Lane::Free => None,
            };
            let guard = match lane {
                Some(l) => Some(l.lock_owned().await),
                None => None,
            };
            if started.elapsed() >= duration {
                break;
            }
            let me = self.clone();
            let gap = planned.gap;
            running.spawn(async move {
                let record = me.apply(&planned).await;
                drop(guard);
                match &record.outcome {
                    Ok(what) => println!(
                        "chaos: fault {:<24} {:<10} {what}",
                        record.kind.name(),
                        record.target
                    ),
                    Err(why) => println!(
                        "chaos: fault {:<24} {:<10} not applied: {why}",
                        record.kind.name(),
                        record.target
                    ),
                }
                lock(&me.records).push(record);
            });
            tokio::time::sleep(Duration::from_secs_f64(gap)).await;
        }
        while running.join_next().await.is_some() {}
    }

    fn all_tables(&self) -> Vec<String> {
        self.tables.clone()
    }

    async fn apply(&self, p: &Planned) -> Record {
        let start_ms = wall_ms();
        let slot = &self.fleet.slots[p.slot % self.fleet.slots.len()];
        let table = self.tables[p.table % self.tables.len()].clone();
        let secs = Duration::from_secs_f64(p.secs);
        let slot_tables = || self.seen.tables_of(&slot.id());
        let (target, affected, outcome): (String, Vec<String>, anyhow::Result<String>) =
            match p.kind {
                Kind::KillRestart | Kind::KillRestartNewId => {
                    let affected = slot_tables();
                    let new_id = p.kind == Kind::KillRestartNewId;
                    let r = self.fleet.kill_and_restart(slot, secs, new_id).await;
                    (
                        slot.id(),
                        affected,
                        r.map(|w| format!("{w}, down {:.1}s", p.secs)),
                    )
                }
                Kind::StopPastTtl => {
                    let affected = slot_tables();
                    let r = self.fleet.stop_and_continue(slot, secs).await;
                    (
                        slot.id(),
                        affected,
                        r.map(|_| format!("stopped {:.1}s", p.secs)),
                    )
                }
                Kind::TermRestart => {
                    let affected = slot_tables();
                    let r = self.fleet.term_and_restart(slot).await;
                    (slot.id(), affected, r.map(|w| format!("drained {w}")))
                }
                Kind::Move => {
                    let (target, r) = self.move_table(&table, p).await;
                    (target, vec![table], r)
                }
                Kind::LeaseDelete => {
                    let key = format!("lease:table:{}:{{{table}}}", self.environment);
                    let r = delete_key(&self.redis_url, &key).await.map(|deleted| {
                        if deleted {
                            format!("DEL {key}")
                        } else {
                            format!("DEL {key} (no key: not held at that moment)")
                        }
                    });
                    (table.clone(), vec![table], r)
                }
                Kind::RedisRestart => {
                    let r = self.redis.lock().await.start_again().await;
                    (
                        "redis".into(),
                        self.all_tables(),
                        r.map(|()| "killed, started empty".into()),
                    )
                }
                Kind::RedisPause => {
                    let r = self.redis_pause(secs).await;
                    (
                        "redis".into(),
                        self.all_tables(),
                        r.map(|()| format!("paused {:.1}s", p.secs)),
                    )
                }
                Kind::RedisLatency => {
                    let affected = slot_tables();
                    let hold = Duration::from_secs_f64(2.0 + (p.table % 5) as f64);
                    slot.proxy.set_latency(secs);
                    tokio::time::sleep(hold).await;
                    slot.proxy.heal();
                    let what = format!(
                        "+{:.0} ms each way for {:.0}s",
                        p.secs * 1000.0,
                        hold.as_secs_f64()
                    );
                    (slot.id(), affected, Ok(what))
                }
                Kind::RedisCut => {
                    let affected = slot_tables();
                    slot.proxy.cut(secs);
                    tokio::time::sleep(secs).await;
                    slot.proxy.heal();
                    (slot.id(), affected, Ok(format!("cut {:.1}s", p.secs)))
                }
                Kind::PgExhaust => {
                    let victim = slot.id();
                    let r = self.db.exhaust(&victim, secs).await;
                    (
                        victim,
                        self.all_tables(),
                        r.map(|w| format!("{w}, held {:.1}s", p.secs)),
                    )
                }
                Kind::RowLock => {
                    let r = self.db.hold_row_lock(&table, secs).await;
                    let what = format!("FOR UPDATE held {:.1}s", p.secs);
                    (table.clone(), vec![table], r.map(|()| what))
                }
            };
        Record {
            kind: p.kind,
            target,
            start_ms,
            lifted_ms: wall_ms(),
            affected,
            outcome: outcome.map_err(|e| format!("{e:#}")),
        }
    }

    async fn redis_pause(&self, pause: Duration) -> anyhow::Result<()> {
        self.redis.lock().await.pause()?;
        tokio::time::sleep(pause).await;
        self.redis.lock().await.resume()
    }

    /// Asks instance `p.slot` to move `table` to another live instance.
    async fn move_table(&self, table: &str, p: &Planned) -> (String, anyhow::Result<String>) {
        let owner = self.seen.owner_of(table);
        let live: Vec<_> = self
            .fleet
            .slots
            .iter()
            .map(|s| s.view())
            .filter(|v| v.up && !v.stopped)
            .collect();
        let candidates: Vec<&str> = live
            .iter()
            .map(|v| v.id.as_str())
            .filter(|id| Some(*id) != owner.as_deref())
            .collect();
        let Some(to) = candidates.get(p.other % candidates.len().max(1)) else {
            return (
                table.to_string(),
                Err(anyhow::anyhow!("no live instance to move it to")),
            );
        };
        let Some(via) = self
            .fleet
            .slots
            .iter()
            .cycle()
            .skip(p.slot)
            .take(self.fleet.slots.len())
            .find(|s| {
                let v = s.view();
                v.up && !v.stopped
            })
        else {
            return (
                table.to_string(),
                Err(anyhow::anyhow!("no live instance to ask")),
            );
        };
        let url = format!("{}/admin/tables/{table}/move", via.http());
        let sent = self
            .http
            .post(&url)
            .bearer_auth(&self.admin_token)
            .json(&json!({ "to": to }))
            .send()
            .await;
        let target = table.to_string();
        let from = owner.unwrap_or_else(|| "?".into());
        match sent {
            Err(e) => (target, Err(anyhow::anyhow!("POST move: {e}"))),
            Ok(resp) => {
                let status = resp.status();
                let body = resp.text().await.unwrap_or_default();
                if status.is_success() {
                    (target, Ok(format!("{from} -> {to}")))
                } else {
                    let code = serde_json::from_str::<serde_json::Value>(&body)
                        .ok()
                        .and_then(|v| v["error"]["code"].as_str().map(String::from))
                        .unwrap_or(body);
                    (
                        target,
                        Err(anyhow::anyhow!("{from} -> {to} refused: {status} {code}")),
                    )
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(seed: u64) -> Schedule {
        Schedule::new(
            seed,
            Duration::from_millis(1500),
            Duration::from_secs(1),
            3,
            100,
        )
    }

    #[test]
    fn a_seed_replays_the_same_schedule() {
        let (mut a, mut b) = (schedule(42), schedule(42));
        for _ in 0..200 {
            assert_eq!(a.next_fault(), b.next_fault());
        }
        let mut c = schedule(43);
        let differs = (0..50).any(|_| a.next_fault() != c.next_fault());
        assert!(differs, "another seed, another schedule");
    }

    #[test]
    fn the_schedule_opens_with_a_stop_past_the_ttl_then_every_kind_once() {
        let mut s = schedule(7);
        let first = s.next_fault();
        assert_eq!(first.kind, Kind::StopPastTtl);
        assert!(first.secs > 1.5 * 2.0, "{first:?}");
        let mut kinds: Vec<Kind> = (0..Kind::ALL.len()).map(|_| s.next_fault().kind).collect();
        kinds.sort();
        assert_eq!(kinds, Kind::ALL.to_vec());
        for _ in 0..500 {
            let f = s.next_fault();
            assert!(f.slot < 3 && f.table < 100 && f.other < 2, "{f:?}");
            assert!((0.5..1.5).contains(&f.gap), "{f:?}");
            if f.kind == Kind::StopPastTtl {
                assert!(f.secs > 1.5, "a stop lasts past the TTL: {f:?}");
            }
        }
    }
}
