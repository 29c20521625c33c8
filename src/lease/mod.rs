//! Per-table ownership leases in Redis.
//!
//! `lease:table:<env>:{<id>}` holds `owner|fence` with a PX TTL and
//! `fence:table:<env>:{<id>}` is a counter that never expires. The braces
//! are literal: they are the Redis Cluster hash tag, so a table's two keys
//! share a slot and one script may touch both. Every operation is one Lua
//! script per table, touching that table's keys only (one slot), and the
//! batched ones (renew, release) go out as one pipeline: one round trip.
//! This client speaks to one Redis node.

use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;
use redis::{ErrorKind, Pipeline, Script, Value};

mod instance;

pub use instance::{Claim, ClaimError, InstanceRecord, Registration};

use crate::types::{Fence, TableId};

/// Called by SHA (EVALSHA); a server that does not know a script yet (a
/// fresh or restarted Redis) is sent its text once and asked again.
static ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("acquire.lua")));
static RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("renew.lua")));
static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("release.lua")));

/// A Redis client for `url`: `rediss://` speaks TLS (rustls), verified
/// against `ca_pem` when given (a private CA), else the system's trust
/// store.
pub fn client(url: &str, ca_pem: Option<Vec<u8>>) -> Result<redis::Client, LeaseError> {
    match ca_pem {
        None => Ok(redis::Client::open(url)?),
        Some(root) => Ok(redis::Client::build_with_tls(
            url,
            redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(root),
            },
        )?),
    }
}

/// The longest pause between two attempts of one reconnect, in ms.
const RECONNECT_DELAY_MAX_MS: u64 = 100;

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
}

impl RenewOutcome {
    pub fn label(self) -> &'static str {
        match self {
            RenewOutcome::Renewed => "renewed",
            RenewOutcome::Gone => "gone",
            RenewOutcome::Foreign => "foreign",
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
    conn: ConnectionManager,
    env: String,
    owner: String,
    ttl: Duration,
    op_timeout: Duration,
}

impl LeaseClient {
    pub async fn connect(
        url: &str,
        env: &str,
        owner: &str,
        ttl: Duration,
        op_timeout: Duration,
    ) -> Result<LeaseClient, LeaseError> {
        let client = redis::Client::open(url)?;
        LeaseClient::connect_with(client, env, owner, ttl, op_timeout).await
    }

    /// Like [`LeaseClient::connect`], with a client already built (TLS with
    /// a private CA: see [`client`]).
    pub async fn connect_with(
        client: redis::Client,
        env: &str,
        owner: &str,
        ttl: Duration,
        op_timeout: Duration,
    ) -> Result<LeaseClient, LeaseError> {
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(op_timeout)
            .set_response_timeout(op_timeout)
            .set_number_of_retries(1)
            // A reconnect waits at most this long between its attempts (the
            // crate's default backoff starts at a second and grows), so a
            // Redis that comes back is used again within a renew period.
            .set_max_delay(RECONNECT_DELAY_MAX_MS);
        let conn = tokio::time::timeout(
            op_timeout,
            ConnectionManager::new_with_config(client, config),
        )
        .await
        .map_err(|_| LeaseError::Timeout(op_timeout))??;
        Ok(LeaseClient {
            conn,
            env: env.to_string(),
            owner: owner.to_string(),
            ttl,
            op_timeout,
        })
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

    fn value(&self, fence: Fence) -> String {
        format!("{}|{}", self.owner, fence.0)
    }

    fn ttl_ms(&self) -> u64 {
        u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX)
    }

    async fn run<T: redis::FromRedisValue>(
        &self,
        cmd: impl FnOnce(
            ConnectionManager,
        ) -> futures::future::BoxFuture<'static, redis::RedisResult<T>>,
    ) -> Result<T, LeaseError> {
        tokio::time::timeout(self.op_timeout, cmd(self.conn.clone()))
            .await
            .map_err(|_| LeaseError::Timeout(self.op_timeout))?
            .map_err(LeaseError::from)
    }

    /// Sends a pipeline of calls to `script` by SHA. A server that has lost
    /// its script cache answers NOSCRIPT: the script is loaded and the whole
    /// pipeline sent again, which is safe because renew and release are
    /// idempotent compare-and-set operations.
    async fn run_scripts<T: redis::FromRedisValue + Send + 'static>(
        &self,
        script: &'static Script,
        pipe: Pipeline,
    ) -> Result<T, LeaseError> {
        let first = pipe.clone();
        match self
            .run(move |mut c| Box::pin(async move { first.query_async(&mut c).await }))
            .await
        {
            Err(LeaseError::Redis(e)) if e.kind() == ErrorKind::NoScriptError => {
                self.run(move |mut c| {
                    Box::pin(async move {
                        script.load_async(&mut c).await?;
                        pipe.query_async(&mut c).await
                    })
                })
                .await
            }
            other => other,
        }
    }

    /// Calls one script by SHA (loading it if the server lacks it), within
    /// the operation timeout.
    async fn invoke<T: redis::FromRedisValue + Send + 'static>(
        &self,
        script: &'static Script,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<T, LeaseError> {
        self.run(move |mut c| {
            Box::pin(async move {
                let mut call = script.prepare_invoke();
                for k in keys {
                    call.key(k);
                }
                for a in args {
                    call.arg(a);
                }
                call.invoke_async(&mut c).await
            })
        })
        .await
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

    /// Renews every given lease in one round trip.
    pub async fn renew_all(&self, leases: &[HeldLease]) -> Result<Vec<RenewOutcome>, LeaseError> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for l in leases {
            pipe.invoke_script(
                RENEW
                    .key(self.lease_key(&l.table))
                    .arg(self.value(l.fence))
                    .arg(self.ttl_ms()),
            );
        }
        let replies: Vec<i64> = self.run_scripts(&RENEW, pipe).await?;
        if replies.len() != leases.len() {
            return Err(LeaseError::Protocol(format!(
                "{} replies for {} leases",
                replies.len(),
                leases.len()
            )));
        }
        replies
            .into_iter()
            .map(|r| match r {
                1 => Ok(RenewOutcome::Renewed),
                0 => Ok(RenewOutcome::Gone),
                2 => Ok(RenewOutcome::Foreign),
                other => Err(LeaseError::Protocol(format!("renew returned {other}"))),
            })
            .collect()
    }

    /// Compare-and-deletes every given lease in one round trip; returns how
    /// many were still ours.
    pub async fn release_all(&self, leases: &[HeldLease]) -> Result<usize, LeaseError> {
        if leases.is_empty() {
            return Ok(0);
        }
        let mut pipe = redis::pipe();
        for l in leases {
            pipe.invoke_script(
                RELEASE
                    .key(self.lease_key(&l.table))
                    .arg(self.value(l.fence)),
            );
        }
        let replies: Vec<i64> = self.run_scripts(&RELEASE, pipe).await?;
        Ok(replies.into_iter().filter(|r| *r == 1).count())
    }

    /// Which of these tables this owner could take now: no lease at all,
    /// or one held under this owner id (a restart re-takes its own tables).
    /// One round trip.
    pub async fn claimable(&self, tables: &[TableId]) -> Result<Vec<bool>, LeaseError> {
        if tables.is_empty() {
            return Ok(Vec::new());
        }
        // A pipeline of GETs rather than one MGET: the keys of different
        // tables may live on different Redis Cluster slots.
        let mut pipe = redis::pipe();
        for t in tables {
            pipe.cmd("GET").arg(self.lease_key(t));
        }
        let values: Vec<Option<String>> = self
            .run(move |mut c| Box::pin(async move { pipe.query_async(&mut c).await }))
            .await?;
        let mine = format!("{}|", self.owner);
        Ok(values
            .into_iter()
            .map(|v| v.is_none_or(|v| v.starts_with(&mine)))
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

/// A lease's local deadline: the instant after which this process may no
/// longer act on the lease because it cannot prove it still holds it.
/// Shared between the manager (which extends it on each confirmed renew) and
/// the table (which checks it before dealing each hand).
#[derive(Debug)]
pub struct LeaseClock {
    /// `None` once revoked.
    deadline: Mutex<Option<Instant>>,
}

impl LeaseClock {
    /// `sent` is when the acquire or renew that was confirmed was *sent*:
    /// Redis started its TTL no earlier than that, so the lease cannot have
    /// expired before `sent + ttl`; the margin absorbs clock-rate drift
    /// between this process and Redis.
    pub fn new(sent: Instant, ttl: Duration) -> Arc<LeaseClock> {
        Arc::new(LeaseClock {
            deadline: Mutex::new(Some(sent + (ttl - safety_margin(ttl)))),
        })
    }

    /// Extends the deadline to what a renew sent at `sent` proves; a late
    /// answer to an older renew never shortens it, and a revoked clock
    /// stays revoked.
    pub fn confirm(&self, sent: Instant, ttl: Duration) {
        let proven = sent + (ttl - safety_margin(ttl));
        let mut deadline = self.lock();
        if let Some(d) = deadline.as_mut() {
            *d = (*d).max(proven);
        }
    }

    pub fn is_valid(&self, now: Instant) -> bool {
        self.lock().is_some_and(|d| now < d)
    }

    pub fn remaining(&self, now: Instant) -> Duration {
        self.lock()
            .map_or(Duration::ZERO, |d| d.saturating_duration_since(now))
    }

    /// Whether the lease was given up for good (lost, or released), as
    /// opposed to merely unproven for now.
    pub fn is_revoked(&self) -> bool {
        self.lock().is_none()
    }

    /// Makes the lease unusable at once (it was lost or released).
    pub fn revoke(&self) {
        *self.lock() = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        // The guarded value is a plain instant: a panic elsewhere cannot
        // leave it half-written, so a poisoned lock is still usable.
        self.deadline.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub fn safety_margin(ttl: Duration) -> Duration {
    ttl / 5
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_clock_expires_before_the_ttl_runs_out() {
        let ttl = Duration::from_millis(1000);
        let sent = Instant::now();
        let clock = LeaseClock::new(sent, ttl);
        assert!(clock.is_valid(sent + Duration::from_millis(700)));
        assert!(!clock.is_valid(sent + Duration::from_millis(850)));
    }

    #[test]
    fn a_late_confirmation_of_an_older_send_never_shortens_the_deadline() {
        let ttl = Duration::from_millis(1000);
        let sent = Instant::now();
        let clock = LeaseClock::new(sent + Duration::from_millis(500), ttl);
        clock.confirm(sent, ttl);
        assert!(clock.is_valid(sent + Duration::from_millis(1200)));
    }

    #[test]
    fn the_deadline_counts_from_the_send_even_when_it_is_long_past() {
        // The first clock of a process may be built long after its acquire
        // was sent (a slow load): the deadline still counts from the send.
        let ttl = Duration::from_millis(1000);
        let sent = Instant::now();
        std::thread::sleep(Duration::from_millis(50));
        let clock = LeaseClock::new(sent, ttl);
        assert!(!clock.is_valid(sent + Duration::from_millis(810)));
        assert_eq!(
            clock.remaining(sent + Duration::from_millis(300)),
            Duration::from_millis(500)
        );
    }

    #[test]
    fn a_revoked_clock_is_not_revived_by_a_late_confirmation() {
        let ttl = Duration::from_millis(1000);
        let clock = LeaseClock::new(Instant::now(), ttl);
        clock.revoke();
        clock.confirm(Instant::now(), ttl);
        assert!(!clock.is_valid(Instant::now()));
    }

    #[test]
    fn revoked_clock_is_invalid_at_once() {
        let clock = LeaseClock::new(Instant::now(), Duration::from_secs(10));
        clock.revoke();
        assert!(!clock.is_valid(Instant::now()));
    }
}
