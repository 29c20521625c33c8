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
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use clap::error::ErrorKind;
use clap::{Args, CommandFactory, Parser, Subcommand};
use pitboss::lease::{HeldLease, LeaseClient};
use pitboss::types::{Fence, TableId};
use serde_json::json;

/// What pitboss costs, each figure printed beside its floor or baseline
/// measured in the same run. Without a command it measures `leases`.
#[derive(Debug, Parser)]
#[command(
    name = "pitboss-bench",
    verbatim_doc_comment,
    args_conflicts_with_subcommands = true,
    args_override_self = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    leases: Options,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Lease renew and acquire beside their raw-Redis floors (the default)
    #[command(after_help = "\
Renewing N held leases: pitboss's batched renew vs a raw pipeline of\n\
N PEXPIRE (the floor) vs a loop of N awaited PEXPIRE; acquiring a free\n\
lease: pitboss's acquire vs a raw SET NX PX, p50 and p99. It starts a\n\
redis-server of its own unless --redis names one.")]
    Leases(Options),
    /// Idle tables and connections
    #[command(after_help = "\
CPU and memory per idle hosted table and per idle WebSocket connection\n\
of a real instance, each beside its baseline in the same run.")]
    Idle(idle::Options),
    /// Act -> broadcast under bots
    #[command(after_help = "\
Act -> broadcast latency, hands/s and server CPU per act with tables\n\
of bots on a real instance, beside a ping through the same server.")]
    Play(play::Options),
    /// Tables hosted elsewhere after SIGTERM, SIGKILL
    #[command(after_help = "\
How soon another instance hosts every table of one that exits on\n\
SIGTERM or is killed, beside the baseline measured in the same run.")]
    Takeover(takeover::Options),
    /// Fenced hand writes beside pgbench
    #[command(after_help = "\
Fenced hand writes per second, pitboss's own boundary write beside\n\
pgbench running the same transaction shape, in the same run.")]
    Writes(writes::Options),
    /// Journalled commands per second: the group commit beside pgbench's one transaction per command
    Journal(journal::Options),
    /// One floor server of `idle`, run as a process of its own
    #[command(hide = true)]
    WsFloor {
        /// tungstenite, actix or actix-upgrade
        kind: String,
        /// The port to listen on, on 127.0.0.1
        #[arg(long)]
        port: u16,
    },
}

#[derive(Debug, Args)]
struct Options {
    /// Measure this Redis (default: start a redis-server of its own)
    #[arg(long, value_name = "URL")]
    redis: Option<String>,
    /// Lease counts to renew
    #[arg(long, value_name = "N[,N...]", default_value = "10000,100000", value_parser = counts)]
    leases: std::vec::Vec<usize>,
    /// Acquires to time
    #[arg(long, value_name = "N", default_value = "5000", value_parser = count)]
    acquires: usize,
    /// Renew rounds per figure; the median is reported
    #[arg(long, value_name = "N", default_value = "5", value_parser = count)]
    runs: usize,
    /// Also renew on a Redis Cluster of N masters of its own (N >= 3)
    #[arg(long, value_name = "N", default_value = "0", hide_default_value = true)]
    cluster: usize,
    /// Also write the figures as JSON
    #[arg(long, value_name = "PATH")]
    json: Option<String>,
}

/// The Postgres server a bench creates its database on by default.
pub(crate) fn default_pg_url() -> String {
    std::env::var("PITBOSS_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// The binary `name` beside this one (the default of `--pitboss` and
/// `--bots`).
pub(crate) fn beside(name: &str) -> PathBuf {
    std::env::current_exe().map_or_else(|_| PathBuf::from(name), |exe| exe.with_file_name(name))
}

/// A count above 0.
pub(crate) fn count(raw: &str) -> Result<usize, String> {
    match raw.trim().parse() {
        Ok(0) => Err("must be above 0".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("takes a count, not {raw:?}")),
    }
}

/// Counts above 0, comma-separated.
pub(crate) fn counts(raw: &str) -> Result<Vec<usize>, String> {
    raw.split(',').map(count).collect()
}

/// A whole number of seconds above 0.
pub(crate) fn seconds(raw: &str) -> Result<u64, String> {
    match raw.parse() {
        Ok(0) => Err("must be above 0".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("takes seconds, not {raw:?}")),
    }
}

mod cluster;
mod floor;
mod idle;
mod instance;
mod journal;
mod pgbench;
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
    // A usage error exits 2 with clap's message; `--help` exits 0.
    let cli = Cli::parse();
    // The command line as the figures print it, after the command's name.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args = if cli.command.is_some() {
        &args[1..]
    } else {
        &args[..]
    };
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    };
    match cli.command {
        // A floor server runs a runtime of its own (actix's or tokio's).
        Some(Command::WsFloor { kind, port }) => floor::serve(&kind, port),
        Some(Command::Idle(o)) => runtime()?.block_on(idle::run(o, args)),
        Some(Command::Play(o)) => runtime()?.block_on(play::run(o, args)),
        Some(Command::Takeover(o)) => runtime()?.block_on(takeover::run(o, args)),
        Some(Command::Writes(o)) => {
            let o = o
                .checked()
                .unwrap_or_else(|e| usage_error("writes", e).exit());
            runtime()?.block_on(writes::run(o, args))
        }
        Some(Command::Journal(o)) => runtime()?.block_on(journal::run(o, args)),
        Some(Command::Leases(o)) => runtime()?.block_on(leases(o, args)),
        None => runtime()?.block_on(leases(cli.leases, args)),
    }
}

/// A usage error of `subcommand` that its parser could not see, with that
/// subcommand's usage.
fn usage_error(subcommand: &str, message: String) -> clap::Error {
    let mut cli = Cli::command();
    // Building names each subcommand `pitboss-bench <name>` in its usage.
    cli.build();
    match cli.find_subcommand_mut(subcommand) {
        Some(sub) => sub.error(ErrorKind::ValueValidation, message),
        None => cli.error(ErrorKind::ValueValidation, message),
    }
}

async fn leases(o: Options, args: &[String]) -> anyhow::Result<()> {
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
