//! How a lease client's commands go out: within the operation timeout,
//! scripts by hash (loaded again where a server lost them), and one round
//! trip per batch: one pipeline to a single server, one pipeline per node
//! on a Redis Cluster.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{ErrorKind, Pipeline, Script, Value};

use super::{lock, slots, Conn, LeaseClient, LeaseError};

/// Requests a cluster round keeps in flight at once. The cluster client's
/// cost per request grows with the number queued in it: 100,000 renews
/// sent all at once took 15–20 s, 256 at a time 0.5 s (`pitboss-bench
/// leases --cluster 3`).
const CLUSTER_IN_FLIGHT: usize = 256;

impl LeaseClient {
    pub(super) async fn run<T: redis::FromRedisValue>(
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
    pub(super) async fn run_scripts<T: redis::FromRedisValue + Send + 'static>(
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
    pub(super) async fn invoke<T: redis::FromRedisValue + Send + 'static>(
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

    /// Sends one command per table, added by `add`, in one round trip and
    /// answers each table's reply in order. To a single server: one
    /// pipeline, all or nothing. On a cluster: one pipeline per node (see
    /// `per_node`), and a node that fails fails only its own tables. `add`
    /// adds table `i`'s command, given its lease key (which names its slot). Script calls go by SHA; a
    /// server that lost its script cache gets the script and the round
    /// again.
    pub(super) async fn per_table<T: redis::FromRedisValue + Send + 'static>(
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
}
