//! A Sentinel-watched Redis of the test's own: a master, a replica of it,
//! and one Sentinel (quorum 1) that promotes the replica a second after the
//! master stops answering.

use std::time::Duration;

use super::process::{guarded_command, Output, Process};
use super::redis::{free_port, redis_conn, PrivateRedis};
use super::wait::eventually;

/// The name the Sentinel monitors the master under.
pub const SENTINEL_MASTER: &str = "pitboss";

pub struct RedisSentinel {
    pub master: PrivateRedis,
    pub replica: PrivateRedis,
    pub sentinel_port: u16,
    _sentinel: Process,
    output: Output,
}

impl RedisSentinel {
    pub async fn start() -> RedisSentinel {
        let master = PrivateRedis::start().await;
        let port = master.port.to_string();
        let replica = PrivateRedis::start_with(&["--replicaof", "127.0.0.1", &port]).await;
        let replica_url = replica.url();
        let linked = eventually(Duration::from_secs(20), Duration::from_millis(100), || {
            let url = replica_url.clone();
            async move {
                let mut c = redis_conn(&url).await;
                let info: String = redis::cmd("INFO")
                    .arg("replication")
                    .query_async(&mut c)
                    .await
                    .unwrap_or_default();
                info.contains("master_link_status:up")
            }
        })
        .await;
        assert!(linked, "the replica never linked to its master");

        let sentinel_port = free_port();
        let conf = std::env::temp_dir().join(format!("pitboss-test-sentinel-{sentinel_port}.conf"));
        std::fs::write(
            &conf,
            format!(
                "port {sentinel_port}\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\n\
                 sentinel monitor {SENTINEL_MASTER} 127.0.0.1 {port} 1\n\
                 sentinel down-after-milliseconds {SENTINEL_MASTER} 1000\n\
                 sentinel failover-timeout {SENTINEL_MASTER} 3000\n\
                 sentinel parallel-syncs {SENTINEL_MASTER} 1\n"
            ),
        )
        .expect("write the sentinel's config");
        let output = Output::default();
        let mut cmd = guarded_command("redis-server");
        cmd.arg(&conf).arg("--sentinel");
        let (sentinel, _readers) =
            Process::spawn(&mut cmd, &output, None).expect("spawn redis-server --sentinel");
        let s = RedisSentinel {
            master,
            replica,
            sentinel_port,
            _sentinel: sentinel,
            output,
        };
        // Ready once it has found the replica it would promote.
        let url = s.sentinel_url();
        let ready = eventually(Duration::from_secs(20), Duration::from_millis(100), || {
            let url = url.clone();
            async move {
                let Ok(client) = redis::Client::open(url.as_str()) else {
                    return false;
                };
                let Ok(mut c) = client.get_multiplexed_async_connection().await else {
                    return false;
                };
                let replicas: Vec<redis::Value> = redis::cmd("SENTINEL")
                    .arg("REPLICAS")
                    .arg(SENTINEL_MASTER)
                    .query_async(&mut c)
                    .await
                    .unwrap_or_default();
                !replicas.is_empty()
            }
        })
        .await;
        assert!(
            ready,
            "the sentinel never saw the replica: {:?}",
            s.output.lines()
        );
        s
    }

    pub fn sentinel_url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.sentinel_port)
    }

    /// The port of the master the Sentinel names now.
    pub async fn master_port(&self) -> u16 {
        let mut c = redis_conn(&self.sentinel_url()).await;
        let addr: Vec<String> = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(SENTINEL_MASTER)
            .query_async(&mut c)
            .await
            .expect("SENTINEL GET-MASTER-ADDR-BY-NAME");
        addr.get(1)
            .and_then(|p| p.parse().ok())
            .expect("a master port")
    }
}
