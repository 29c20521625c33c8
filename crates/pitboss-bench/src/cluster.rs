//! `pitboss-bench leases --cluster N`: the renew on a Redis Cluster of the
//! run's own (N masters, no replicas), beside two baselines measured in the
//! same run on the same nodes:
//!
//! - the floor: one pipeline of `PEXPIRE` per node, for the keys whose
//!   slots that node serves, all nodes at once (what a renew that could
//!   group keys per node and skip the compare would cost);
//! - one `PEXPIRE` per lease through the same cluster client pitboss
//!   uses, as many in flight as pitboss's per-table path keeps (the shape
//!   of that path, without Lua).

use std::collections::HashMap;
use std::net::TcpListener;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use futures::future::try_join_all;
use futures::StreamExt;
use pitboss::lease::LeaseClient;
use pitboss::types::TableId;
use serde_json::json;

use crate::{median, ms};

/// Requests in flight at once, as pitboss's per-table cluster path keeps.
const IN_FLIGHT: usize = 256;

/// Masters of the run's own, killed (and their directory removed) on drop.
pub(crate) struct OwnCluster {
    children: Vec<tokio::process::Child>,
    ports: Vec<u16>,
    dir: std::path::PathBuf,
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.start_kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl OwnCluster {
    pub(crate) async fn start(n: usize) -> anyhow::Result<OwnCluster> {
        if n < 3 {
            bail!("a Redis Cluster needs at least 3 masters");
        }
        let dir =
            std::env::temp_dir().join(format!("pitboss-bench-cluster-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let mut own = OwnCluster {
            children: Vec::new(),
            ports: Vec::new(),
            dir,
        };
        for _ in 0..n {
            let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let child = tokio::process::Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
                .args(["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"])
                .arg("--cluster-config-file")
                .arg(format!("nodes-{port}.conf"))
                .arg("--dir")
                .arg(&own.dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .context("start redis-server (scripts/services.sh installs it)")?;
            own.children.push(child);
            own.ports.push(port);
        }
        for url in own.urls() {
            wait_for(&url, "PING", |_| true).await?;
        }
        let out = tokio::process::Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(own.ports.iter().map(|p| format!("127.0.0.1:{p}")))
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .await
            .context("run redis-cli --cluster create")?;
        if !out.status.success() {
            bail!(
                "redis-cli --cluster create failed: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        for url in own.urls() {
            wait_for(&url, "CLUSTER INFO", |s| s.contains("cluster_state:ok")).await?;
        }
        Ok(own)
    }

    pub(crate) fn urls(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect()
    }
}

/// Waits until `cmd` on the node at `url` answers something `ok` accepts.
async fn wait_for(url: &str, cmd: &str, ok: impl Fn(&str) -> bool) -> anyhow::Result<()> {
    let client = redis::Client::open(url)?;
    for _ in 0..200 {
        if let Ok(mut c) = client.get_multiplexed_async_connection().await {
            let mut words = cmd.split(' ');
            let mut command = redis::cmd(words.next().unwrap_or("PING"));
            for w in words {
                command.arg(w);
            }
            let answer: redis::RedisResult<String> = command.query_async(&mut c).await;
            if answer.is_ok_and(|a| ok(&a)) {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("{url} did not answer {cmd} as expected")
}

/// Which node serves each key: the key's slot (asked of the cluster) and
/// the node holding that slot's range.
async fn node_of_each(urls: &[String], keys: &[String]) -> anyhow::Result<Vec<usize>> {
    let mut c = redis::Client::open(urls[0].as_str())?
        .get_multiplexed_async_connection()
        .await?;
    let mut pipe = redis::pipe();
    for k in keys {
        pipe.cmd("CLUSTER").arg("KEYSLOT").arg(k);
    }
    let slots: Vec<i64> = pipe.query_async(&mut c).await?;
    // [[start, end, [host, port, id], ...], ...]
    let ranges: Vec<(i64, i64, Vec<redis::Value>)> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(&mut c)
        .await?;
    let mut owner = Vec::new();
    for (start, end, master) in ranges {
        let port: i64 = match master.get(1) {
            Some(redis::Value::Int(p)) => *p,
            other => bail!("CLUSTER SLOTS gave no port: {other:?}"),
        };
        let node = urls
            .iter()
            .position(|u| u.ends_with(&format!(":{port}")))
            .with_context(|| format!("no node on port {port}"))?;
        owner.push((start, end, node));
    }
    slots
        .into_iter()
        .map(|s| {
            owner
                .iter()
                .find(|(a, b, _)| (*a..=*b).contains(&s))
                .map(|&(_, _, n)| n)
                .with_context(|| format!("slot {s} is served by no node"))
        })
        .collect()
}

/// Renews `n` leases on the cluster `runs` times each way; prints the
/// figures and returns them as JSON.
pub(crate) async fn renew(
    cluster: &OwnCluster,
    n: usize,
    runs: usize,
) -> anyhow::Result<serde_json::Value> {
    let urls = cluster.urls();
    let env = format!("bench{}", std::process::id());
    let ttl = Duration::from_secs(60);
    let ttl_ms = ttl.as_millis() as u64;
    let op_timeout = Duration::from_secs(30);
    let lease = LeaseClient::connect_cluster(&urls, None, &env, "bench", ttl, op_timeout).await?;
    let cc = redis::cluster::ClusterClientBuilder::new(urls.clone())
        .response_timeout(op_timeout)
        .build()?
        .get_async_connection()
        .await?;
    let mut direct = Vec::new();
    for u in &urls {
        direct.push(
            redis::Client::open(u.as_str())?
                .get_multiplexed_async_connection()
                .await?,
        );
    }

    let tables: Vec<TableId> = (0..n)
        .map(|i| TableId::parse(&format!("tbl_bench{i:011}")).expect("a valid id"))
        .collect();
    let keys: Vec<String> = tables.iter().map(|t| lease.lease_key(t)).collect();
    let node = node_of_each(&urls, &keys).await?;
    let mut per_node: HashMap<usize, Vec<&String>> = HashMap::new();
    for (k, &i) in keys.iter().zip(&node) {
        per_node.entry(i).or_default().push(k);
    }
    // Held leases, set the way an acquire leaves them, node by node.
    for (&i, ks) in &per_node {
        let mut pipe = redis::pipe();
        for k in ks {
            pipe.cmd("SET")
                .arg(*k)
                .arg("bench|1")
                .arg("PX")
                .arg(ttl_ms)
                .ignore();
        }
        let () = pipe.query_async(&mut direct[i]).await?;
    }
    let held = crate::held_at_fence_1(&tables);

    let (mut renew, mut floor, mut same_shape) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let t0 = Instant::now();
        let outcomes = lease.renew_all(&held).await?;
        renew.push(t0.elapsed());
        if outcomes.len() != n {
            bail!("{} outcomes for {n} leases", outcomes.len());
        }

        let t0 = Instant::now();
        try_join_all(per_node.iter().map(|(&i, ks)| {
            let mut pipe = redis::pipe();
            for k in ks {
                pipe.cmd("PEXPIRE").arg(*k).arg(ttl_ms).ignore();
            }
            let mut conn = direct[i].clone();
            async move { pipe.query_async::<()>(&mut conn).await }
        }))
        .await?;
        floor.push(t0.elapsed());

        let t0 = Instant::now();
        let replies: Vec<redis::RedisResult<i64>> = futures::stream::iter(keys.iter().map(|k| {
            let mut conn = cc.clone();
            async move {
                redis::cmd("PEXPIRE")
                    .arg(k)
                    .arg(ttl_ms)
                    .query_async::<i64>(&mut conn)
                    .await
            }
        }))
        .buffered(IN_FLIGHT)
        .collect()
        .await;
        same_shape.push(t0.elapsed());
        if let Some(Err(e)) = replies.into_iter().find(Result::is_err) {
            bail!("PEXPIRE through the cluster client: {e}");
        }
    }
    for (&i, ks) in &per_node {
        let mut pipe = redis::pipe();
        for k in ks {
            pipe.cmd("DEL").arg(*k).ignore();
        }
        let () = pipe.query_async(&mut direct[i]).await?;
    }
    let (renew, floor, same_shape) = (median(renew), median(floor), median(same_shape));
    let ratio = renew.as_secs_f64() / floor.as_secs_f64();
    println!(
        "renew {n} leases on a {}-node cluster:  pitboss {:9.2} ms   PEXPIRE pipeline per node {:9.2} ms (floor)   \
         one PEXPIRE per lease through the cluster client, {IN_FLIGHT} in flight {:9.2} ms   pitboss/floor {ratio:.2}x",
        urls.len(),
        ms(renew),
        ms(floor),
        ms(same_shape),
    );
    Ok(json!({
        "figure": "renew_cluster", "nodes": urls.len(), "leases": n, "runs": runs,
        "pitboss_ms": ms(renew), "pexpire_pipeline_per_node_ms": ms(floor),
        "pexpire_per_lease_cluster_client_ms": ms(same_shape), "in_flight": IN_FLIGHT, "ratio_to_floor": ratio,
    }))
}
