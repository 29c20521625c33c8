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
//! (`slots.rs`), with one request per table through the crate's cluster
//! client for whatever a node refuses or cannot answer.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, ErrorKind, Pipeline, RedisFuture, Script, Value};

mod instance;
mod slots;

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
/// Requests a cluster round keeps in flight at once. The cluster client's
/// cost per request grows with the number queued in it: 100,000 renews
/// sent all at once took 15–20 s, 256 at a time 0.5 s (`pitboss-bench
/// leases --cluster 3`).
const CLUSTER_IN_FLIGHT: usize = 256;
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

/// One Redis server (reconnecting with backoff), a Redis Cluster (the
/// crate's cluster client: it routes each command to its slot's node,
/// follows MOVED and ASK, and refreshes the topology after a failover), or
/// the master a set of Sentinels names (asked again after a failure).
#[derive(Clone)]
pub enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
    Sentinel(SentinelConn),
}

/// The master of a Sentinel-monitored group: the crate's Sentinel client
/// finds it (asking the Sentinels, checking its role); a connection error
/// or a `READONLY` answer (the master was demoted by a failover) drops the
/// connection, and the next command finds the master again.
#[derive(Clone)]
pub struct SentinelConn {
    client: Arc<tokio::sync::Mutex<redis::sentinel::SentinelClient>>,
    current: Arc<Mutex<Option<redis::aio::MultiplexedConnection>>>,
    op_timeout: Duration,
}

impl SentinelConn {
    async fn master(&self) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
        if let Some(c) = self.cached() {
            return Ok(c);
        }
        let mut client = self.client.lock().await;
        // Someone else may have found it while this one waited.
        if let Some(c) = self.cached() {
            return Ok(c);
        }
        let master = client.async_get_client().await?;
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(self.op_timeout)
            .set_response_timeout(self.op_timeout);
        let conn = master
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        if let Ok(mut current) = self.current.lock() {
            *current = Some(conn.clone());
        }
        Ok(conn)
    }

    fn cached(&self) -> Option<redis::aio::MultiplexedConnection> {
        self.current.lock().ok().and_then(|c| c.clone())
    }

    /// After a failure that may mean a failover: find the master again.
    fn check(&self, e: &redis::RedisError) {
        if e.is_io_error()
            || e.is_connection_dropped()
            || e.is_connection_refusal()
            || e.is_timeout()
            || e.kind() == ErrorKind::ReadOnly
        {
            if let Ok(mut current) = self.current.lock() {
                *current = None;
            }
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
            Conn::Sentinel(s) => Box::pin(async move {
                let mut c = s.master().await?;
                let reply = c.req_packed_command(cmd).await;
                if let Err(e) = &reply {
                    s.check(e);
                }
                reply
            }),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(cmd, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(cmd, offset, count),
            Conn::Sentinel(s) => Box::pin(async move {
                let mut c = s.master().await?;
                let reply = c.req_packed_commands(cmd, offset, count).await;
                if let Err(e) = &reply {
                    s.check(e);
                }
                reply
            }),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
            Conn::Sentinel(_) => 0,
        }
    }
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
    /// Connects to `target`, proving that Redis answers: a single server
    /// is first reached with a plain connection (which reports a refusal or
    /// a bad password as such, where the reconnecting manager would only
    /// time out); a cluster client, which connects lazily, is pinged.
    pub async fn open(
        target: &Target,
        env: &str,
        owner: &str,
        ttl: Duration,
        op_timeout: Duration,
    ) -> Result<LeaseClient, LeaseError> {
        match target {
            Target::Single(client) => {
                client.get_multiplexed_async_connection().await?;
                LeaseClient::connect_with(client.clone(), env, owner, ttl, op_timeout).await
            }
            Target::Cluster { nodes, ca } => {
                let lease =
                    LeaseClient::connect_cluster(nodes, ca.clone(), env, owner, ttl, op_timeout)
                        .await?;
                lease.ping().await?;
                Ok(lease)
            }
            Target::Sentinel { sentinels, master } => {
                LeaseClient::connect_sentinel(sentinels, master, env, owner, ttl, op_timeout).await
            }
        }
    }

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
        Ok(LeaseClient::over(
            Conn::Single(conn),
            env,
            owner,
            ttl,
            op_timeout,
        ))
    }

    /// Connects to a Redis Cluster through `nodes` (seed URLs; the rest of
    /// the cluster is discovered), with a private CA for `rediss://` nodes.
    pub async fn connect_cluster(
        nodes: &[String],
        ca_pem: Option<Vec<u8>>,
        env: &str,
        owner: &str,
        ttl: Duration,
        op_timeout: Duration,
    ) -> Result<LeaseClient, LeaseError> {
        let mut builder = redis::cluster::ClusterClientBuilder::new(nodes.to_vec())
            .connection_timeout(op_timeout)
            .response_timeout(op_timeout)
            .retries(2)
            .min_retry_wait(10)
            .max_retry_wait(RECONNECT_DELAY_MAX_MS);
        if let Some(root) = ca_pem {
            builder = builder.certs(redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(root),
            });
        }
        let client = builder.build()?;
        let conn =
            tokio::time::timeout(op_timeout.saturating_mul(2), client.get_async_connection())
                .await
                .map_err(|_| LeaseError::Timeout(op_timeout))??;
        Ok(LeaseClient::over(
            Conn::Cluster(conn),
            env,
            owner,
            ttl,
            op_timeout,
        ))
    }

    /// Connects to the master that the Sentinels at `sentinels` name for
    /// `service`, through the crate's Sentinel client.
    pub async fn connect_sentinel(
        sentinels: &[String],
        service: &str,
        env: &str,
        owner: &str,
        ttl: Duration,
        op_timeout: Duration,
    ) -> Result<LeaseClient, LeaseError> {
        let client = redis::sentinel::SentinelClient::build(
            sentinels.to_vec(),
            service.to_string(),
            None,
            redis::sentinel::SentinelServerType::Master,
        )?;
        let conn = SentinelConn {
            client: Arc::new(tokio::sync::Mutex::new(client)),
            current: Arc::new(Mutex::new(None)),
            op_timeout,
        };
        tokio::time::timeout(op_timeout.saturating_mul(2), conn.master())
            .await
            .map_err(|_| LeaseError::Timeout(op_timeout))??;
        Ok(LeaseClient::over(
            Conn::Sentinel(conn),
            env,
            owner,
            ttl,
            op_timeout,
        ))
    }

    fn over(
        conn: Conn,
        env: &str,
        owner: &str,
        ttl: Duration,
        op_timeout: Duration,
    ) -> LeaseClient {
        LeaseClient {
            conn,
            env: env.to_string(),
            owner: owner.to_string(),
            ttl,
            op_timeout,
            slots: Arc::new(Mutex::new(None)),
        }
    }

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

    async fn run<T: redis::FromRedisValue>(
        &self,
        cmd: impl FnOnce(Conn) -> futures::future::BoxFuture<'static, redis::RedisResult<T>>,
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

    /// Sends one command per table, added by `add`, in one round trip and
    /// answers each table's reply in order. To a single server: one
    /// pipeline, all or nothing. On a cluster: one pipeline per node (see
    /// `per_node`), and a node that fails fails only its own tables. `add`
    /// adds table `i`'s command, given its lease key (which names its slot). Script calls go by SHA; a
    /// server that lost its script cache gets the script and the round
    /// again.
    async fn per_table<T: redis::FromRedisValue + Send + 'static>(
        &self,
        script: Option<&'static Script>,
        keys: Vec<String>,
        add: impl Fn(&mut Pipeline, usize, &str),
    ) -> Result<Vec<Result<T, LeaseError>>, LeaseError> {
        let n = keys.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        if !self.is_cluster() {
            let mut pipe = redis::pipe();
            for (i, key) in keys.iter().enumerate() {
                add(&mut pipe, i, key);
            }
            let all: Vec<T> = match script {
                Some(script) => self.run_scripts(script, pipe).await?,
                None => {
                    self.run(move |mut c| Box::pin(async move { pipe.query_async(&mut c).await }))
                        .await?
                }
            };
            if all.len() != n {
                return Err(LeaseError::Protocol(format!(
                    "{} replies for {n} tables",
                    all.len()
                )));
            }
            return Ok(all.into_iter().map(Ok).collect());
        }
        let mut replies = self.per_node(&keys, &add).await;
        let lost_scripts = replies.iter().any(
            |r| matches!(r, Err(LeaseError::Redis(e)) if e.kind() == ErrorKind::NoScriptError),
        );
        if let (Some(script), true) = (script, lost_scripts) {
            // SCRIPT LOAD goes to every node of the cluster.
            self.run(move |mut c| Box::pin(async move { script.load_async(&mut c).await }))
                .await?;
            replies = self.per_node(&keys, &add).await;
        }
        Ok(replies)
    }

    /// On a cluster: one pipeline per node, all nodes at once, each holding
    /// the commands of the tables whose keys that node serves (by the slot
    /// map); replies in table order. A command the node refuses (`MOVED`,
    /// `ASK`, `NOSCRIPT`, …) and every command of a node that cannot be
    /// reached go again as one request per table through the cluster
    /// client, which follows redirects, and the slot map is read again
    /// next time.
    async fn per_node<T: redis::FromRedisValue + Send + 'static>(
        &self,
        keys: &[String],
        add: &impl Fn(&mut Pipeline, usize, &str),
    ) -> Vec<Result<T, LeaseError>> {
        let n = keys.len();
        let mut out: Vec<Option<Result<T, LeaseError>>> = (0..n).map(|_| None).collect();
        let mut again: Vec<usize> = Vec::new();
        match (&self.conn, self.slot_map().await) {
            (Conn::Cluster(conn), Some(map)) => {
                let mut groups: HashMap<slots::Node, Vec<usize>> = HashMap::new();
                for (i, key) in keys.iter().enumerate() {
                    match map.node_of(slots::key_slot(key)) {
                        Some(node) => groups.entry(node.clone()).or_default().push(i),
                        None => again.push(i),
                    }
                }
                let op_timeout = self.op_timeout;
                let calls = groups.into_iter().map(|(node, tables)| {
                    let mut pipe = redis::pipe();
                    for &i in &tables {
                        add(&mut pipe, i, &keys[i]);
                    }
                    let mut conn = conn.clone();
                    async move {
                        let route = SingleNodeRoutingInfo::ByAddress {
                            host: node.host,
                            port: node.port,
                        };
                        let sent = conn.route_pipeline(&pipe, 0, tables.len(), route);
                        (tables, tokio::time::timeout(op_timeout, sent).await)
                    }
                });
                for (tables, reply) in futures::future::join_all(calls).await {
                    match reply {
                        Ok(Ok(values)) if values.len() == tables.len() => {
                            for (i, v) in tables.into_iter().zip(values) {
                                match v {
                                    Value::ServerError(_) => again.push(i),
                                    v => {
                                        out[i] = Some(T::from_redis_value(&v).map_err(|e| {
                                            LeaseError::Protocol(format!("a reply: {e}"))
                                        }))
                                    }
                                }
                            }
                        }
                        _ => again.extend(tables),
                    }
                }
            }
            _ => again.extend(0..n),
        }
        if !again.is_empty() {
            self.forget_slot_map();
            again.sort_unstable();
            let pipes: Vec<Pipeline> = again
                .iter()
                .map(|&i| {
                    let mut p = redis::pipe();
                    add(&mut p, i, &keys[i]);
                    p
                })
                .collect();
            for (i, reply) in again.into_iter().zip(self.cluster_round(&pipes).await) {
                out[i] = Some(reply);
            }
        }
        out.into_iter()
            .map(|r| r.unwrap_or_else(|| Err(LeaseError::Protocol("no reply".into()))))
            .collect()
    }

    /// The cluster's slot map, read once and kept until a batch finds it
    /// stale; `None` when it cannot be read now (each table then goes on
    /// its own).
    async fn slot_map(&self) -> Option<Arc<slots::SlotMap>> {
        if let Some(map) = lock(&self.slots).clone() {
            return Some(map);
        }
        let Conn::Cluster(conn) = &self.conn else {
            return None;
        };
        let mut conn = conn.clone();
        let ask = redis::cmd("CLUSTER").arg("SLOTS").clone();
        let reply = tokio::time::timeout(
            self.op_timeout,
            conn.route_command(&ask, RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random)),
        )
        .await
        .ok()?
        .ok()?;
        let map = Arc::new(slots::SlotMap::parse(&reply)?);
        *lock(&self.slots) = Some(map.clone());
        Some(map)
    }

    fn forget_slot_map(&self) {
        *lock(&self.slots) = None;
    }

    /// One single-command pipeline per table, at most `CLUSTER_IN_FLIGHT`
    /// at a time, replies in the order of `pipes`.
    async fn cluster_round<T: redis::FromRedisValue + Send + 'static>(
        &self,
        pipes: &[Pipeline],
    ) -> Vec<Result<T, LeaseError>> {
        let op_timeout = self.op_timeout;
        let calls = pipes.iter().map(|p| {
            let mut conn = self.conn.clone();
            let p = p.clone();
            async move {
                let reply: Vec<T> = tokio::time::timeout(op_timeout, p.query_async(&mut conn))
                    .await
                    .map_err(|_| LeaseError::Timeout(op_timeout))??;
                reply
                    .into_iter()
                    .next()
                    .ok_or_else(|| LeaseError::Protocol("an empty reply".into()))
            }
        });
        futures::stream::iter(calls)
            .buffered(CLUSTER_IN_FLIGHT)
            .collect()
            .await
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

/// A lease's local deadline: the instant after which this process may no
/// longer act on the lease because it cannot prove it still holds it.
/// Shared between the manager (which extends it on each confirmed renew) and
/// the table (which checks it before dealing each hand).
#[derive(Debug)]
pub struct LeaseClock {
    /// `None` once revoked.
    deadline: Mutex<Option<Instant>>,
    /// Revoked because Postgres holds a newer owner's fence: the copy stops
    /// without a state write rather than freezing.
    superseded: std::sync::atomic::AtomicBool,
}

impl LeaseClock {
    /// `sent` is when the acquire or renew that was confirmed was *sent*:
    /// Redis started its TTL no earlier than that, so the lease cannot have
    /// expired before `sent + ttl`; the margin absorbs clock-rate drift
    /// between this process and Redis.
    pub fn new(sent: Instant, ttl: Duration) -> Arc<LeaseClock> {
        Arc::new(LeaseClock {
            deadline: Mutex::new(Some(sent + (ttl - safety_margin(ttl)))),
            superseded: std::sync::atomic::AtomicBool::new(false),
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

    /// Revokes the lease because a newer owner has stamped the table.
    pub fn supersede(&self) {
        self.superseded
            .store(true, std::sync::atomic::Ordering::Release);
        self.revoke();
    }

    /// Whether the revocation was [`LeaseClock::supersede`]'s.
    pub fn is_superseded(&self) -> bool {
        self.superseded.load(std::sync::atomic::Ordering::Acquire)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        lock(&self.deadline)
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
        assert!(
            !clock.is_superseded(),
            "a plain revocation is not a newer owner's"
        );
    }

    #[test]
    fn a_superseded_clock_is_revoked_at_once_and_says_why() {
        let ttl = Duration::from_secs(10);
        let clock = LeaseClock::new(Instant::now(), ttl);
        assert!(!clock.is_superseded());
        clock.supersede();
        assert!(clock.is_revoked() && clock.is_superseded());
        clock.confirm(Instant::now(), ttl);
        assert!(!clock.is_valid(Instant::now()));
    }
}
