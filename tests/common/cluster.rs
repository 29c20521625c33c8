//! A Redis Cluster of the test's own: three masters (no replicas) started
//! as `redis-server --cluster-enabled yes` on free ports and joined with
//! `redis-cli --cluster create`. A node can be killed and started again on
//! its port: it rejoins with its slots (from its `nodes-<port>.conf`) and no
//! keys.

use std::process::{Command, Stdio};
use std::time::Duration;

use super::redis::{redis_conn, PrivateRedis};
use super::wait::eventually;

/// Arguments of every node. Without full coverage the cluster keeps
/// serving the slots of the nodes that are up while one is down.
const NODE_ARGS: &[&str] = &[
    "--cluster-enabled",
    "yes",
    "--cluster-config-file",
    "pitboss-test-nodes-{port}.conf",
    "--cluster-node-timeout",
    "2000",
    "--cluster-require-full-coverage",
    "no",
];

pub struct RedisCluster {
    pub nodes: Vec<PrivateRedis>,
}

impl RedisCluster {
    /// Starts `n` masters and joins them into one cluster; waits until
    /// every node says `cluster_state:ok`.
    pub async fn start(n: usize) -> RedisCluster {
        let mut nodes = Vec::with_capacity(n);
        for _ in 0..n {
            nodes.push(PrivateRedis::start_with(NODE_ARGS).await);
        }
        let addrs: Vec<String> = nodes
            .iter()
            .map(|r| format!("127.0.0.1:{}", r.port))
            .collect();
        let out = tokio::task::spawn_blocking(move || {
            Command::new("redis-cli")
                .arg("--cluster")
                .arg("create")
                .args(&addrs)
                .args(["--cluster-replicas", "0", "--cluster-yes"])
                .stdin(Stdio::null())
                .output()
        })
        .await
        .expect("join")
        .expect("run redis-cli --cluster create (run scripts/services.sh?)");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster = RedisCluster { nodes };
        cluster.wait_ok().await;
        cluster
    }

    /// `redis://127.0.0.1:<port>,…`: the value of `redis.cluster_nodes`.
    pub fn nodes_csv(&self) -> String {
        self.nodes
            .iter()
            .map(PrivateRedis::url)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Waits until every running node reports `cluster_state:ok`.
    pub async fn wait_ok(&self) {
        for node in &self.nodes {
            let url = node.url();
            let ok = eventually(Duration::from_secs(30), Duration::from_millis(100), || {
                let url = url.clone();
                async move {
                    let mut c = redis_conn(&url).await;
                    let info: String = redis::cmd("CLUSTER")
                        .arg("INFO")
                        .query_async(&mut c)
                        .await
                        .unwrap_or_default();
                    info.contains("cluster_state:ok")
                }
            })
            .await;
            assert!(ok, "cluster node {url} never reported cluster_state:ok");
        }
    }

    /// The hash slot of `key`.
    pub async fn slot_of(&self, key: &str) -> i64 {
        let mut c = redis_conn(&self.nodes[0].url()).await;
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query_async(&mut c)
            .await
            .expect("CLUSTER KEYSLOT")
    }

    /// The index of the node that serves `key`'s slot.
    pub async fn node_of(&self, key: &str) -> usize {
        let slot = self.slot_of(key).await;
        let mut c = redis_conn(&self.nodes[0].url()).await;
        let slots: Vec<redis::Value> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query_async(&mut c)
            .await
            .expect("CLUSTER SLOTS");
        for range in slots {
            let redis::Value::Array(parts) = range else {
                continue;
            };
            let int = |v: &redis::Value| match v {
                redis::Value::Int(i) => Some(*i),
                _ => None,
            };
            let (Some(lo), Some(hi)) = (parts.first().and_then(int), parts.get(1).and_then(int))
            else {
                continue;
            };
            if !(lo..=hi).contains(&slot) {
                continue;
            }
            let Some(redis::Value::Array(master)) = parts.get(2) else {
                continue;
            };
            let port = master.get(1).and_then(int).expect("master port");
            return self
                .nodes
                .iter()
                .position(|n| i64::from(n.port) == port)
                .expect("a node of this cluster");
        }
        panic!("no node serves slot {slot} of {key}");
    }

    /// How many keys matching `pattern` node `i` holds.
    pub async fn keys_on(&self, i: usize, pattern: &str) -> usize {
        let mut c = redis_conn(&self.nodes[i].url()).await;
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(pattern)
            .query_async(&mut c)
            .await
            .expect("KEYS");
        keys.len()
    }
}
