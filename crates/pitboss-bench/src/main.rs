//! `pitboss-bench`: what pitboss costs, each figure printed beside its
//! floor or baseline measured in the same run.
//!
//! `pitboss-bench [leases]`, the lease operations on Redis:
//!
//! 1. renewing N held leases: pitboss's batched renew (one script call per
//!    lease, one round trip) vs a raw pipeline of N `PEXPIRE` (the floor)
//!    vs a loop of N awaited `PEXPIRE` (no batching);
//! 2. acquiring a free lease: pitboss's acquire (one script: lease, fence
//!    counter, floor) vs a raw `SET NX PX`, p50 and p99.
//!
//! By default it starts a `redis-server` of its own on a free port (and
//! stops it at the end), so it never touches a shared server; `--redis URL`
//! measures another one, under a key prefix of the run's own that it
//! deletes afterwards. `--json PATH` writes the figures for comparison
//! across commits.
//!
//! `--cluster N` adds the renew on a Redis Cluster of N masters of its own,
//! beside per-node `PEXPIRE` pipelines (see `cluster.rs`).
//!
//! `pitboss-bench idle`: CPU and memory per idle hosted table and per idle
//! WebSocket connection of a real instance (see `idle.rs`).
//!
//! `pitboss-bench play`: act → broadcast latency, hands/s and server CPU per
//! act with tables of bots on a real instance (see `play.rs`).
//!
//! `pitboss-bench takeover`: how soon another instance hosts every table of
//! one that exits on SIGTERM or is killed (see `takeover.rs`).
//!
//! `pitboss-bench writes`: fenced hand writes per second beside `pgbench`
//! running the same transaction shape (see `writes.rs`).

use std::net::TcpListener;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use pitboss::lease::{HeldLease, LeaseClient};
use pitboss::types::{Fence, TableId};
use serde_json::json;

const USAGE: &str =
    "usage: pitboss-bench [leases] [--redis URL] [--leases N[,N...]] [--acquires N] [--runs N]
                     [--cluster N] [--json PATH]
       pitboss-bench idle --help   (idle tables and connections)
       pitboss-bench play --help   (act -> broadcast under bots)
       pitboss-bench takeover --help   (tables hosted elsewhere after SIGTERM, SIGKILL)
       pitboss-bench writes --help   (fenced hand writes beside pgbench)

  --redis URL     measure this Redis (default: start a redis-server of its own)
  --leases LIST   lease counts to renew (default 10000,100000)
  --acquires N    acquires to time (default 5000)
  --runs N        renew rounds per figure; the median is reported (default 5)
  --cluster N     also renew on a Redis Cluster of N masters of its own (N >= 3)
  --json PATH     also write the figures as JSON";

struct Options {
    redis: Option<String>,
    leases: Vec<usize>,
    acquires: usize,
    runs: usize,
    cluster: usize,
    json: Option<String>,
}

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let mut o = Options {
        redis: None,
        leases: vec![10_000, 100_000],
        acquires: 5_000,
        runs: 5,
        cluster: 0,
        json: None,
    };
    crate::each_flag(args, USAGE, |flag, value| {
        match flag {
            "--redis" => o.redis = Some(value()?),
            "--leases" => {
                o.leases = value()?
                    .split(',')
                    .map(|n| n.trim().parse::<usize>().context("--leases takes counts"))
                    .collect::<anyhow::Result<_>>()?;
            }
            "--acquires" => o.acquires = value()?.parse().context("--acquires takes a count")?,
            "--runs" => o.runs = value()?.parse().context("--runs takes a count")?,
            "--cluster" => o.cluster = value()?.parse().context("--cluster takes a count")?,
            "--json" => o.json = Some(value()?),
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    if o.leases.contains(&0) || o.acquires == 0 || o.runs == 0 {
        bail!("counts must be above 0");
    }
    Ok(o)
}

/// The Postgres server a bench creates its database on by default.
pub(crate) fn default_pg_url() -> String {
    std::env::var("PITBOSS_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// Walks `--flag value` arguments: `take(flag, value)` handles each flag
/// (`value()` reads the next argument) and returns false for one it does
/// not know, which is refused with `usage`; `-h`/`--help` prints `usage`
/// and exits.
pub(crate) fn each_flag(
    args: &[String],
    usage: &str,
    mut take: impl FnMut(&str, &mut dyn FnMut() -> anyhow::Result<String>) -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if matches!(flag.as_str(), "-h" | "--help") {
            println!("{usage}");
            std::process::exit(0);
        }
        let mut value = || {
            it.next()
                .cloned()
                .with_context(|| format!("{flag} needs a value"))
        };
        if !take(flag, &mut value)? {
            bail!("unknown option {flag}\n\n{usage}");
        }
    }
    Ok(())
}

mod cluster;
mod floor;
mod idle;
mod instance;
mod play;
mod takeover;
mod writes;

/// A `redis-server` of the bench's own, killed on drop.
pub(crate) struct OwnRedis {
    _child: tokio::process::Child,
    port: u16,
}

impl OwnRedis {
    pub(crate) async fn start() -> anyhow::Result<OwnRedis> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = tokio::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("start redis-server (is it installed? scripts/services.sh installs it)")?;
        let own = OwnRedis {
            _child: child,
            port,
        };
        let url = own.url();
        for _ in 0..100 {
            if let Ok(client) = redis::Client::open(url.as_str()) {
                if let Ok(mut c) = client.get_multiplexed_async_connection().await {
                    let pong: redis::RedisResult<String> =
                        redis::cmd("PING").query_async(&mut c).await;
                    if pong.is_ok() {
                        return Ok(own);
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("the bench's redis-server on port {port} did not answer")
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

/// The leases the bench sets up (`bench|1`), as the renew takes them.
pub(crate) fn held_at_fence_1(tables: &[TableId]) -> Vec<HeldLease> {
    tables
        .iter()
        .map(|t| HeldLease {
            table: t.clone(),
            fence: Fence(1),
        })
        .collect()
}

pub(crate) fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn quantile(xs: &mut [Duration], q: f64) -> Duration {
    xs.sort();
    let i = ((xs.len() as f64 - 1.0) * q).round() as usize;
    xs[i]
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // A floor server runs a runtime of its own (actix's or tokio's).
    if let ["ws-floor", kind, "--port", port] = args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        return floor::serve(kind, port.parse().context("--port takes a port")?);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    match args.first().map(String::as_str) {
        Some("idle") => rt.block_on(idle::run(&args[1..])),
        Some("play") => rt.block_on(play::run(&args[1..])),
        Some("takeover") => rt.block_on(takeover::run(&args[1..])),
        Some("writes") => rt.block_on(writes::run(&args[1..])),
        Some("leases") => rt.block_on(leases(&args[1..])),
        _ => rt.block_on(leases(&args)),
    }
}

async fn leases(args: &[String]) -> anyhow::Result<()> {
    let o = parse(args)?;
    let own = match &o.redis {
        Some(_) => None,
        None => Some(OwnRedis::start().await?),
    };
    let url = match (&o.redis, &own) {
        (Some(u), _) => u.clone(),
        (None, Some(own)) => own.url(),
        (None, None) => unreachable!("a server was started"),
    };
    let env = format!("bench{}", std::process::id());
    let ttl = Duration::from_secs(60);
    let op_timeout = Duration::from_secs(30);
    let lease = LeaseClient::connect(&url, &env, "bench", ttl, op_timeout).await?;
    let raw_client = redis::Client::open(url.as_str())?;
    let mut raw = raw_client.get_multiplexed_async_connection().await?;

    println!(
        "pitboss-bench: {} cores, Redis {url}{}, command: pitboss-bench {}",
        std::thread::available_parallelism().map_or(0, usize::from),
        if own.is_some() { " (its own)" } else { "" },
        args.join(" ")
    );
    let mut figures = Vec::new();

    for &n in &o.leases {
        let tables: Vec<TableId> = (0..n)
            .map(|i| TableId::parse(&format!("tbl_bench{i:011}")).expect("a valid id"))
            .collect();
        // Held leases, set up the way an acquire leaves them.
        let mut pipe = redis::pipe();
        for t in &tables {
            pipe.cmd("SET")
                .arg(lease.lease_key(t))
                .arg("bench|1")
                .arg("PX")
                .arg(ttl.as_millis() as u64)
                .ignore();
        }
        let () = pipe.query_async(&mut raw).await?;
        let held = held_at_fence_1(&tables);
        let keys: Vec<String> = tables.iter().map(|t| lease.lease_key(t)).collect();
        let ttl_ms = ttl.as_millis() as u64;

        let mut renew = Vec::new();
        let mut floor = Vec::new();
        for _ in 0..o.runs {
            let t0 = Instant::now();
            let outcomes = lease.renew_all(&held).await?;
            renew.push(t0.elapsed());
            if outcomes.len() != n {
                bail!("{} outcomes for {n} leases", outcomes.len());
            }
            let mut pipe = redis::pipe();
            for k in &keys {
                pipe.cmd("PEXPIRE").arg(k).arg(ttl_ms).ignore();
            }
            let t0 = Instant::now();
            let () = pipe.query_async(&mut raw).await?;
            floor.push(t0.elapsed());
        }
        // One awaited command at a time: what batching saves.
        let t0 = Instant::now();
        for k in &keys {
            let _: i64 = redis::cmd("PEXPIRE")
                .arg(k)
                .arg(ttl_ms)
                .query_async(&mut raw)
                .await?;
        }
        let looped = t0.elapsed();
        let (renew, floor) = (median(renew), median(floor));
        println!(
            "renew {n} leases:  pitboss {:9.2} ms   raw PEXPIRE pipeline {:9.2} ms (floor)   per-key loop {:9.2} ms   pitboss/floor {:.2}x",
            ms(renew),
            ms(floor),
            ms(looped),
            renew.as_secs_f64() / floor.as_secs_f64()
        );
        figures.push(json!({
            "figure": "renew", "leases": n, "runs": o.runs,
            "pitboss_ms": ms(renew), "pexpire_pipeline_ms": ms(floor), "per_key_loop_ms": ms(looped),
            "ratio_to_floor": renew.as_secs_f64() / floor.as_secs_f64(),
        }));
        let mut del = redis::pipe();
        for k in &keys {
            del.cmd("DEL").arg(k).ignore();
        }
        let () = del.query_async(&mut raw).await?;
    }

    let mut acquire = Vec::with_capacity(o.acquires);
    let mut set_nx = Vec::with_capacity(o.acquires);
    for i in 0..o.acquires {
        let t = TableId::parse(&format!("tbl_acq{i:011}")).expect("a valid id");
        let t0 = Instant::now();
        lease.acquire(&t, Fence(0)).await?;
        acquire.push(t0.elapsed());
        let key = format!("bench:{env}:setnx:{i}");
        let t0 = Instant::now();
        let _: Option<String> = redis::cmd("SET")
            .arg(&key)
            .arg("bench|1")
            .arg("NX")
            .arg("PX")
            .arg(ttl.as_millis() as u64)
            .query_async(&mut raw)
            .await?;
        set_nx.push(t0.elapsed());
        let () = redis::pipe()
            .cmd("DEL")
            .arg(lease.lease_key(&t))
            .ignore()
            .cmd("DEL")
            .arg(lease.fence_key(&t))
            .ignore()
            .cmd("DEL")
            .arg(&key)
            .ignore()
            .query_async(&mut raw)
            .await?;
    }
    let (a50, a99) = (quantile(&mut acquire, 0.5), quantile(&mut acquire, 0.99));
    let (s50, s99) = (quantile(&mut set_nx, 0.5), quantile(&mut set_nx, 0.99));
    println!(
        "acquire ({} times): pitboss p50 {:7.1} µs p99 {:7.1} µs   raw SET NX PX p50 {:7.1} µs p99 {:7.1} µs   p50 ratio {:.2}x",
        o.acquires,
        us(a50),
        us(a99),
        us(s50),
        us(s99),
        a50.as_secs_f64() / s50.as_secs_f64()
    );
    figures.push(json!({
        "figure": "acquire", "count": o.acquires,
        "pitboss_p50_us": us(a50), "pitboss_p99_us": us(a99),
        "set_nx_p50_us": us(s50), "set_nx_p99_us": us(s99),
        "p50_ratio": a50.as_secs_f64() / s50.as_secs_f64(),
    }));

    if o.cluster > 0 {
        let own = cluster::OwnCluster::start(o.cluster).await?;
        for &n in &o.leases {
            figures.push(cluster::renew(&own, n, o.runs).await?);
        }
    }

    if let Some(path) = &o.json {
        let doc = json!({
            "command": format!("pitboss-bench {}", args.join(" ")),
            "cores": std::thread::available_parallelism().map_or(0, usize::from),
            "own_redis": own.is_some(),
            "figures": figures,
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)
            .with_context(|| format!("write {path}"))?;
        println!("figures written to {path}");
    }
    Ok(())
}
