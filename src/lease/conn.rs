//! The connection behind a lease client: one server, a Redis Cluster, or
//! the master a set of Sentinels names, and how each is opened.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, ErrorKind, Pipeline, RedisFuture, Value};

use super::{LeaseClient, LeaseError, Target};

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
}
