//! Per-table ownership leases in Redis.
//!
//! `lease:table:<env>:{<id>}` holds `owner|fence` with a PX TTL and
//! `fence:table:<env>:{<id>}` is a counter that never expires. The braces
//! are literal: they are the Redis Cluster hash tag, so a table's two keys
//! share a slot and one script may touch both. Every operation is a Lua
//! script called by hash, touching one table's keys only (one slot) — but
//! for the renew on a single server, where one call renews a chunk of
//! leases. The batched ones (renew, release, the scan's lookups) go out in
//! one round trip: one pipeline to a single server; on a Redis Cluster, one
//! pipeline per node, grouped by a slot map of the client's own
//! (`slots.rs`, `rounds.rs`), with one request per table through the crate's cluster
//! client for whatever a node refuses or cannot answer.

use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use redis::{Pipeline, Script, Value};

mod clock;
mod conn;
mod instance;
mod rounds;
mod slots;

pub use clock::{safety_margin, LeaseClock};
pub use conn::{client, Conn, SentinelConn};
pub use instance::{Claim, ClaimError, InstanceRecord, Registration};

use crate::types::{Fence, TableId};

/// Called by SHA (EVALSHA); a server that does not know a script yet (a
/// fresh or restarted Redis) is sent its text once and asked again.
static ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("acquire.lua")));
static RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("renew.lua")));
static RENEW_MANY: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("renew_many.lua")));

/// Leases one `renew_many.lua` call renews on a single server: one script
/// call per chunk rather than per lease, while no call holds the server for
/// long (a call blocks every other client while it runs).
const RENEW_CHUNK: usize = 500;
static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("release.lua")));

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("table is owned by {owner} for another {ttl_ms} ms")]
    OwnedElsewhere { owner: String, ttl_ms: i64 },
    #[error("redis did not answer within {0:?}")]
    Timeout(Duration),
    #[error("redis error: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("unexpected reply from lease script: {0}")]
    Protocol(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenewOutcome {
    Renewed,
    /// The key expired or was deleted.
    Gone,
    /// Someone else's value (another owner, or a later acquire of this id).
    Foreign,
    /// The table's Redis node did not answer (one node of a cluster down):
    /// neither confirmed nor lost; the local deadline decides.
    Unanswered,
}

impl RenewOutcome {
    /// What `renew.lua` and `renew_many.lua` answer for one lease.
    fn from_reply(reply: i64) -> Result<RenewOutcome, LeaseError> {
        match reply {
            1 => Ok(RenewOutcome::Renewed),
            0 => Ok(RenewOutcome::Gone),
            2 => Ok(RenewOutcome::Foreign),
            other => Err(LeaseError::Protocol(format!("renew returned {other}"))),
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            RenewOutcome::Renewed => "renewed",
            RenewOutcome::Gone => "gone",
            RenewOutcome::Foreign => "foreign",
            RenewOutcome::Unanswered => "unanswered",
        }
    }
}

/// One held lease, as the heartbeat renews it.
#[derive(Debug, Clone)]
pub struct HeldLease {
    pub table: TableId,
    pub fence: Fence,
}

#[derive(Clone)]
pub struct LeaseClient {
    conn: Conn,
    env: String,
    owner: String,
    ttl: Duration,
    op_timeout: Duration,
    /// On a cluster, which node serves which slots (see `per_node`).
    /// Shared by the client's clones.
    slots: Arc<Mutex<Option<Arc<slots::SlotMap>>>>,
}

/// Where the leases live.
#[derive(Clone)]
pub enum Target {
    /// One server (`redis.url`; a TLS client from [`client`]).
    Single(redis::Client),
    /// A Redis Cluster through seed nodes, with a private CA for
    /// `rediss://` nodes.
    Cluster {
        nodes: Vec<String>,
        ca: Option<Vec<u8>>,
    },
    /// The master that Sentinels name under `master`.
    Sentinel {
        sentinels: Vec<String>,
        master: String,
    },
}

impl LeaseClient {
    /// Whether this client talks to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.conn, Conn::Cluster(_))
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    pub fn lease_key(&self, table: &TableId) -> String {
        format!("lease:table:{}:{{{}}}", self.env, table)
    }

    pub fn fence_key(&self, table: &TableId) -> String {
        format!("fence:table:{}:{{{}}}", self.env, table)
    }

    fn keys_of(&self, leases: &[HeldLease]) -> Vec<String> {
        leases.iter().map(|l| self.lease_key(&l.table)).collect()
    }

    fn value(&self, fence: Fence) -> String {
        format!("{}|{}", self.owner, fence.0)
    }

    fn ttl_ms(&self) -> u64 {
        u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX)
    }

    /// Takes the lease if it is free or already ours, with a fence above both
    /// the Redis counter and `floor` (the highest token Postgres has seen).
    pub async fn acquire(&self, table: &TableId, floor: Fence) -> Result<Fence, LeaseError> {
        let reply: Vec<Value> = self
            .invoke(
                &ACQUIRE,
                vec![self.lease_key(table), self.fence_key(table)],
                vec![
                    self.owner.clone(),
                    self.ttl_ms().to_string(),
                    floor.0.to_string(),
                ],
            )
            .await?;
        match reply.as_slice() {
            [flag, fence] if int(flag) == Some(1) => text(fence)
                .and_then(|s| s.parse::<u64>().ok())
                .map(Fence)
                .ok_or_else(|| LeaseError::Protocol(format!("{reply:?}"))),
            [flag, owner, ttl] if int(flag) == Some(0) => Err(LeaseError::OwnedElsewhere {
                owner: text(owner).unwrap_or_default(),
                ttl_ms: int(ttl).unwrap_or(-1),
            }),
            _ => Err(LeaseError::Protocol(format!("{reply:?}"))),
        }
    }

    /// Renews every given lease in one round trip. A table whose node could
    /// not answer (a cluster node down) is `Unanswered`: its lease is
    /// neither confirmed nor given up, so its local deadline decides.
    pub async fn renew_all(&self, leases: &[HeldLease]) -> Result<Vec<RenewOutcome>, LeaseError> {
        if !self.is_cluster() {
            return self.renew_on_one_server(leases).await;
        }
        let replies: Vec<Result<i64, LeaseError>> = self
            .per_table(Some(&RENEW), self.keys_of(leases), |pipe, i, key| {
                evalsha(&RENEW, pipe, key)
                    .arg(self.value(leases[i].fence))
                    .arg(self.ttl_ms());
            })
            .await?;
        answered(replies)?
            .into_iter()
            .map(|r| match r {
                Ok(reply) => RenewOutcome::from_reply(reply),
                Err(_) => Ok(RenewOutcome::Unanswered),
            })
            .collect()
    }

    /// The renew on one server (plain or Sentinel): one pipeline of
    /// `renew_many.lua` calls, each renewing a chunk of leases, so a lease
    /// costs its key and value and not a script call of its own.
    async fn renew_on_one_server(
        &self,
        leases: &[HeldLease],
    ) -> Result<Vec<RenewOutcome>, LeaseError> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let chunks: Vec<&[HeldLease]> = leases.chunks(RENEW_CHUNK).collect();
        let mut pipe = redis::pipe();
        for chunk in &chunks {
            let call = pipe
                .cmd("EVALSHA")
                .arg(RENEW_MANY.get_hash())
                .arg(chunk.len());
            for l in *chunk {
                call.arg(self.lease_key(&l.table));
            }
            call.arg(self.ttl_ms());
            for l in *chunk {
                call.arg(self.value(l.fence));
            }
        }
        let replies: Vec<Vec<i64>> = self.run_scripts(&RENEW_MANY, pipe).await?;
        let replies: Vec<i64> = replies.into_iter().flatten().collect();
        if replies.len() != leases.len() {
            return Err(LeaseError::Protocol(format!(
                "{} replies for {} leases",
                replies.len(),
                leases.len()
            )));
        }
        replies.into_iter().map(RenewOutcome::from_reply).collect()
    }

    /// Compare-and-deletes every given lease in one round trip; returns how
    /// many were still ours. One that cannot be reached expires with its
    /// TTL.
    pub async fn release_all(&self, leases: &[HeldLease]) -> Result<usize, LeaseError> {
        let replies: Vec<Result<i64, LeaseError>> = self
            .per_table(Some(&RELEASE), self.keys_of(leases), |pipe, i, key| {
                evalsha(&RELEASE, pipe, key).arg(self.value(leases[i].fence));
            })
            .await?;
        Ok(answered(replies)?
            .into_iter()
            .filter(|r| matches!(r, Ok(1)))
            .count())
    }

    /// Which of these tables this owner could take now: no lease at all,
    /// or one held under this owner id (a restart re-takes its own tables).
    /// One round trip; a table whose node cannot answer is not claimable
    /// now.
    pub async fn claimable(&self, tables: &[TableId]) -> Result<Vec<bool>, LeaseError> {
        // GETs rather than one MGET: the keys of different tables may live
        // on different Redis Cluster slots.
        let values: Vec<Result<Option<String>, LeaseError>> = self
            .per_table(
                None,
                tables.iter().map(|t| self.lease_key(t)).collect(),
                |pipe, _, key| {
                    pipe.cmd("GET").arg(key);
                },
            )
            .await?;
        let mine = format!("{}|", self.owner);
        Ok(values
            .into_iter()
            .map(|v| match v {
                Ok(v) => v.is_none_or(|v| v.starts_with(&mine)),
                Err(_) => false,
            })
            .collect())
    }

    /// Current holder of a table's lease, if any: `(owner, fence)`.
    pub async fn holder(&self, table: &TableId) -> Result<Option<(String, Fence)>, LeaseError> {
        let key = self.lease_key(table);
        let v: Option<String> = self
            .run(move |mut c| {
                Box::pin(async move { redis::cmd("GET").arg(key).query_async(&mut c).await })
            })
            .await?;
        Ok(v.and_then(|v| {
            let (owner, fence) = v.split_once('|')?;
            Some((owner.to_string(), Fence(fence.parse().ok()?)))
        }))
    }

    pub async fn ping(&self) -> Result<(), LeaseError> {
        let _: String = self
            .run(|mut c| Box::pin(async move { redis::cmd("PING").query_async(&mut c).await }))
            .await?;
        Ok(())
    }
}

/// Per-table replies, unless none came: then the batch failed as a whole,
/// with the first table's error.
fn answered<T>(
    replies: Vec<Result<T, LeaseError>>,
) -> Result<Vec<Result<T, LeaseError>>, LeaseError> {
    if replies.iter().any(Result::is_ok) || replies.is_empty() {
        return Ok(replies);
    }
    match replies.into_iter().next() {
        Some(Err(e)) => Err(e),
        _ => Err(LeaseError::Protocol("no reply".into())),
    }
}

/// Adds `EVALSHA <script's hash> 1 <key>` to `pipe`, for the caller to add
/// the arguments. The crate's pipelined script call sends the whole script
/// (`EVAL`) every time; by hash, each lease costs its key and arguments
/// only, and a server without the script answers NOSCRIPT (see
/// `per_table`).
fn evalsha<'p>(script: &Script, pipe: &'p mut Pipeline, key: &str) -> &'p mut Pipeline {
    pipe.cmd("EVALSHA").arg(script.get_hash()).arg(1).arg(key)
}

/// A poisoned lock still guards a usable value here: a slot map or a
/// deadline is replaced whole, never left half-written by a panic.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        Value::SimpleString(s) => s.parse().ok(),
        _ => None,
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    }
}
