//! `pitboss-bench idle`: what an idle instance costs per hosted table and
//! per idle WebSocket connection, each beside its baseline in the same run.
//!
//! It starts a real `pitboss serve` (release build beside this binary, or
//! `--pitboss PATH`) on a redis-server of its own and a fresh Postgres
//! database, and reads the process's CPU time and resident memory from
//! `/proc`:
//!
//! 1. the instance hosting no table (the baseline);
//! 2. the same instance hosting N idle tables (nobody seated; released to
//!    its revive scan the way a drained predecessor leaves them), so
//!    CPU and memory per table are the difference over N;
//! 3. the same again with C idle WebSocket connections (connected,
//!    answering pings, joined to nothing), per connection;
//! 4. the same C connections held by three floors, each a process of its
//!    own (see `floor.rs`): a bare tokio-tungstenite server, a bare
//!    actix-web-actors server, and an actix-http server that takes the
//!    socket after the upgrade and keeps one actor per connection.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use futures::{SinkExt, StreamExt};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

use crate::instance::{
    add_tables, clock_ticks, free_port, metric, start_pitboss, usage, wait_hosted, watch, Child,
    Database, SECRET,
};

/// The command line of `pitboss-bench idle`.
#[derive(Debug, clap::Args)]
pub struct Options {
    /// Idle tables to host
    #[arg(long, value_name = "N", default_value = "10000", value_parser = crate::count)]
    tables: usize,
    /// Idle WebSocket connections to hold
    #[arg(long, value_name = "N", default_value = "10000", value_parser = crate::count)]
    conns: usize,
    /// How long CPU is watched at each step
    #[arg(long, value_name = "SECS", default_value = "20", value_parser = window)]
    window: Duration,
    /// The instance's lease TTL (the production default)
    #[arg(long, value_name = "MS", default_value = "15000")]
    ttl_ms: u64,
    /// The server binary (default: `pitboss` beside this binary)
    #[arg(long, value_name = "PATH", default_value_os_t = crate::beside("pitboss"), hide_default_value = true)]
    pitboss: PathBuf,
    /// Postgres server to create the run's database on
    /// (default $PITBOSS_TEST_PG_URL, else
    /// postgres://postgres@127.0.0.1:5432/postgres)
    #[arg(verbatim_doc_comment, long, value_name = "URL", default_value_t = crate::default_pg_url(), hide_default_value = true)]
    pg_url: String,
    /// Also write the figures as JSON
    #[arg(long, value_name = "PATH")]
    json: Option<String>,
}

fn window(raw: &str) -> Result<Duration, String> {
    crate::seconds(raw).map(Duration::from_secs)
}

/// `n` idle WebSocket connections to `url_of(i)`, each read by a task of
/// its own (which answers pings), until the returned guard is dropped.
struct Connections {
    stop: tokio::sync::watch::Sender<bool>,
    /// Each change asks every connection for one ping → pong.
    ping: tokio::sync::watch::Sender<u64>,
    pongs: tokio::sync::mpsc::UnboundedReceiver<()>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Connections {
    async fn open(n: usize, url_of: impl Fn(usize) -> String) -> anyhow::Result<Connections> {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let (ping, pinged) = tokio::sync::watch::channel(0u64);
        let (pong_tx, pongs) = tokio::sync::mpsc::unbounded_channel();
        let (up_tx, mut up_rx) = tokio::sync::mpsc::channel::<Result<(), String>>(n);
        // At most this many handshakes at once, so the accept queue never
        // overflows.
        let gate = Arc::new(tokio::sync::Semaphore::new(128));
        let mut tasks = Vec::with_capacity(n);
        for i in 0..n {
            let url = url_of(i);
            let (gate, up, mut stopped) = (gate.clone(), up_tx.clone(), stopped.clone());
            let (mut pinged, pong) = (pinged.clone(), pong_tx.clone());
            tasks.push(tokio::spawn(async move {
                let permit = gate.acquire_owned().await;
                let ws = tokio_tungstenite::connect_async(url.as_str()).await;
                drop(permit);
                let mut ws = match ws {
                    Ok((ws, _)) => {
                        let _ = up.send(Ok(())).await;
                        ws
                    }
                    Err(e) => {
                        let _ = up.send(Err(e.to_string())).await;
                        return;
                    }
                };
                loop {
                    tokio::select! {
                        frame = ws.next() => match frame {
                            Some(Ok(Message::Pong(p))) if p.as_slice() == b"bench" => {
                                let _ = pong.send(());
                            }
                            Some(Ok(_)) => {}
                            _ => return,
                        },
                        _ = pinged.changed() => {
                            if ws.send(Message::Ping(b"bench".to_vec())).await.is_err() {
                                return;
                            }
                        }
                        _ = stopped.changed() => {
                            let _ = ws.close(None).await;
                            return;
                        }
                    }
                }
            }));
        }
        drop(up_tx);
        let mut up = 0;
        while let Some(res) = up_rx.recv().await {
            match res {
                Ok(()) => up += 1,
                Err(e) => bail!("a connection failed after {up} were open: {e}"),
            }
            if up == n {
                break;
            }
        }
        if up < n {
            bail!("only {up} of {n} connections opened");
        }
        Ok(Connections {
            stop,
            ping,
            pongs,
            tasks,
        })
    }

    /// `rounds` rounds of one ping on every connection, each round waiting
    /// for every pong.
    async fn ping_all(&mut self, rounds: u64) -> anyhow::Result<()> {
        let n = self.tasks.len();
        for _ in 0..rounds {
            self.ping.send_modify(|r| *r += 1);
            for got in 0..n {
                match tokio::time::timeout(Duration::from_secs(30), self.pongs.recv()).await {
                    Ok(Some(())) => {}
                    _ => bail!("only {got} of {n} pongs came back"),
                }
            }
        }
        Ok(())
    }

    /// Server CPU per ping → pong on these connections (`rounds` × each).
    async fn cpu_per_ping(&mut self, pid: u32, rounds: u64) -> anyhow::Result<Duration> {
        let ticks = clock_ticks();
        let before = usage(pid, ticks)?.cpu;
        self.ping_all(rounds).await?;
        let cpu = usage(pid, ticks)?.cpu.saturating_sub(before);
        Ok(cpu / u32::try_from(rounds * self.tasks.len() as u64).unwrap_or(u32::MAX))
    }

    async fn close(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// Pings per connection when the bench measures the CPU of a ping → pong.
const PING_ROUNDS: u64 = 5;

/// A floor server (`pitboss-bench ws-floor KIND --port P`) holding `n`
/// connections: its memory per connection, and its CPU per ping → pong.
async fn floor(kind: &str, n: usize, settle: Duration) -> anyhow::Result<(f64, Duration)> {
    let port = free_port()?;
    let child = Child(
        tokio::process::Command::new(std::env::current_exe()?)
            .args(["ws-floor", kind, "--port", &port.to_string()])
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()?,
    );
    let pid = child.pid()?;
    let t0 = Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        if t0.elapsed() > Duration::from_secs(10) {
            bail!("the {kind} floor did not listen");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(settle).await;
    let ticks = clock_ticks();
    let before = usage(pid, ticks)?.rss_kib;
    let mut conns = Connections::open(n, |_| format!("ws://127.0.0.1:{port}/ws")).await?;
    tokio::time::sleep(settle).await;
    let after = usage(pid, ticks)?.rss_kib;
    let per_ping = conns.cpu_per_ping(pid, PING_ROUNDS).await?;
    conns.close().await;
    drop(child);
    Ok((kib_to_kb(after.saturating_sub(before)) / n as f64, per_ping))
}

/// Kibibytes as kilobytes (the unit the goals are written in).
fn kib_to_kb(kib: u64) -> f64 {
    kib as f64 * 1.024
}

pub async fn run(o: Options, args: &[String]) -> anyhow::Result<()> {
    let redis = crate::OwnRedis::start().await?;
    let db = Database::create(&o.pg_url, "idle").await?;
    let result = measure(&o, &db, &redis.url(), args).await;
    db.drop_it().await?;
    result
}

async fn measure(o: &Options, db: &Database, redis: &str, args: &[String]) -> anyhow::Result<()> {
    // Idle tables stay hosted for the whole run.
    let inst = start_pitboss(
        &o.pitboss,
        "bench-idle",
        o.ttl_ms,
        db,
        redis,
        &[("PITBOSS__TABLE__IDLE_EVICT_MS", "86400000")],
    )
    .await?;
    let pid = inst.child.pid()?;
    println!(
        "pitboss-bench idle: {} cores, {}, lease TTL {} ms, {} s windows; command: pitboss-bench idle {}",
        std::thread::available_parallelism().map_or(0, usize::from),
        o.pitboss.display(),
        o.ttl_ms,
        o.window.as_secs(),
        args.join(" ")
    );
    let settle = Duration::from_secs(5);
    tokio::time::sleep(settle).await;
    let empty = watch(pid, o.window).await?;
    println!(
        "  no table:        {:6.2}% of a core, RSS {:8.1} MB  (baseline)",
        empty.core_share * 100.0,
        empty.rss_kib as f64 / 1024.0
    );

    add_tables(db, &inst.env, o.tables).await?;
    let took = wait_hosted(&inst.http, o.tables, Duration::from_millis(500)).await?;
    println!(
        "  {} tables hosted {took:.1?} after they were released",
        o.tables
    );
    // Let the acquisitions' first renews and the scan's backlog settle.
    tokio::time::sleep(settle + Duration::from_millis(o.ttl_ms)).await;
    let tables = watch(pid, o.window).await?;
    let per_table_cpu = (tables.core_share - empty.core_share) / o.tables as f64;
    let per_table_kb = kib_to_kb(tables.rss_kib.saturating_sub(empty.rss_kib)) / o.tables as f64;
    println!(
        "  {} idle tables: {:6.2}% of a core, RSS {:8.1} MB  → per table {:.3} µs CPU/s ({:.2}% of a core per 10,000), {:.2} kB",
        o.tables,
        tables.core_share * 100.0,
        tables.rss_kib as f64 / 1024.0,
        per_table_cpu * 1e6,
        per_table_cpu * 10_000.0 * 100.0,
        per_table_kb,
    );

    let signer = pitboss::auth::TokenSigner::new(secrecy::SecretString::from(SECRET));
    let now = chrono_now();
    let tokens: Vec<String> = (0..o.conns)
        .map(|i| signer.mint(&format!("idle{i}"), now))
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("mint a token: {e:?}"))?;
    let port = inst.port;
    let mut conns = Connections::open(o.conns, |i| {
        format!("ws://127.0.0.1:{port}/ws?token={}", tokens[i])
    })
    .await?;
    let open = metric(&inst.http, "pitboss_ws_connections").await?;
    if open < o.conns as f64 {
        bail!("pitboss counts {open} connections of {}", o.conns);
    }
    tokio::time::sleep(settle).await;
    let with_conns = watch(pid, o.window).await?;
    let per_ping = conns.cpu_per_ping(pid, PING_ROUNDS).await?;
    conns.close().await;
    let per_conn_kb = kib_to_kb(with_conns.rss_kib.saturating_sub(tables.rss_kib)) / o.conns as f64;
    let per_conn_cpu = (with_conns.core_share - tables.core_share) / o.conns as f64;
    println!(
        "  + {} idle connections: {:6.2}% of a core, RSS {:8.1} MB  → per connection {:.2} kB, {:.3} µs CPU/s",
        o.conns,
        with_conns.core_share * 100.0,
        with_conns.rss_kib as f64 / 1024.0,
        per_conn_kb,
        per_conn_cpu * 1e6,
    );
    drop(inst);

    let (actix, actix_ping) = floor("actix", o.conns, settle).await?;
    let (tungstenite, tungstenite_ping) = floor("tungstenite", o.conns, settle).await?;
    let (upgrade, upgrade_ping) = floor("actix-upgrade", o.conns, settle).await?;
    println!(
        "  per idle connection: pitboss {per_conn_kb:.2} kB   actix-web-actors floor {actix:.2} kB   tokio-tungstenite floor {tungstenite:.2} kB   \
         socket taken after the upgrade, one actor each {upgrade:.2} kB   pitboss/actix {:.2}x   pitboss/socket-taking {:.2}x",
        per_conn_kb / actix,
        per_conn_kb / upgrade
    );
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "  server CPU per ping → pong ({PING_ROUNDS} on each connection): pitboss {:.1} µs   actix-web-actors floor {:.1} µs   \
         tokio-tungstenite floor {:.1} µs   socket taken after the upgrade {:.1} µs",
        us(per_ping),
        us(actix_ping),
        us(tungstenite_ping),
        us(upgrade_ping),
    );

    if let Some(path) = &o.json {
        let doc = json!({
            "command": format!("pitboss-bench idle {}", args.join(" ")),
            "cores": std::thread::available_parallelism().map_or(0, usize::from),
            "ttl_ms": o.ttl_ms,
            "window_s": o.window.as_secs(),
            "figures": [
                {"figure": "idle_tables", "tables": o.tables,
                 "baseline_core_share": empty.core_share, "core_share": tables.core_share,
                 "baseline_rss_kib": empty.rss_kib, "rss_kib": tables.rss_kib,
                 "per_table_cpu_us_per_s": per_table_cpu * 1e6, "per_table_kb": per_table_kb},
                {"figure": "idle_connections", "connections": o.conns,
                 "core_share": with_conns.core_share, "rss_kib": with_conns.rss_kib,
                 "per_connection_kb": per_conn_kb, "per_connection_cpu_us_per_s": per_conn_cpu * 1e6,
                 "actix_floor_kb": actix, "tungstenite_floor_kb": tungstenite,
                 "upgrade_floor_kb": upgrade,
                 "cpu_us_per_ping": us(per_ping), "actix_floor_cpu_us_per_ping": us(actix_ping),
                 "tungstenite_floor_cpu_us_per_ping": us(tungstenite_ping),
                 "upgrade_floor_cpu_us_per_ping": us(upgrade_ping)},
            ],
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)
            .with_context(|| format!("write {path}"))?;
        println!("figures written to {path}");
    }
    Ok(())
}

fn chrono_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
