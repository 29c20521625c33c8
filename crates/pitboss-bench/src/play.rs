//! `pitboss-bench play`: act → broadcast latency under load, with its
//! baseline in the same run.
//!
//! For each table count it starts a fresh `pitboss serve` (its own database,
//! the run's redis-server, the production timings) and runs `pitboss-bots`
//! (beside this binary, or `--bots PATH`) against it: tables of bots playing
//! random legal actions. The bots time each act from the moment it is handed
//! to the socket until the table's `action` event comes back (p50, p99,
//! p99.9). Beside it, the baseline: a WebSocket ping → pong through the same
//! server at the same time, on a connection of the bench's own (the same
//! sockets, worker threads and session actors, without the table). Server
//! CPU per act is the instance's CPU time over the run divided by the acts
//! answered (it includes the tables' creation and the buy-ins, so it is an
//! upper bound).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use futures::{SinkExt, StreamExt};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

use crate::instance::{
    clock_ticks, histogram_quantiles, start_pitboss, usage, Database, ADMIN_TOKEN, SECRET,
};

const ACTION_HISTOGRAM: &str = "pitboss_action_to_broadcast_seconds";

const USAGE: &str = "usage: pitboss-bench play [--tables N[,N...]] [--players P] [--duration SECS]
                          [--ttl-ms MS] [--set KEY=VALUE]... [--pitboss PATH] [--bots PATH]
                          [--pg-url URL] [--json PATH]

  --tables LIST    table counts, one fresh instance each (default 100,1000)
  --players P      bots per table (default 6)
  --duration SECS  how long the bots play at each count (default 60)
  --ttl-ms MS      the instance's lease TTL (default 15000)
  --set K=V        a further setting for the instance, e.g.
                   --set PITBOSS__DATABASE__MAX_CONNECTIONS=32 (repeatable)
  --pitboss PATH   the server binary (default: `pitboss` beside this binary)
  --bots PATH      the bots binary (default: `pitboss-bots` beside this binary)
  --pg-url URL     Postgres server for the run's databases
                   (default $PITBOSS_TEST_PG_URL, else postgres://postgres@127.0.0.1:5432/postgres)
  --json PATH      also write the figures as JSON";

struct Options {
    tables: Vec<usize>,
    players: usize,
    duration: u64,
    ttl_ms: u64,
    set: Vec<(String, String)>,
    pitboss: PathBuf,
    bots: PathBuf,
    pg_url: String,
    json: Option<String>,
}

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let exe = std::env::current_exe()?;
    let mut o = Options {
        tables: vec![100, 1000],
        players: 6,
        duration: 60,
        ttl_ms: 15_000,
        set: Vec::new(),
        pitboss: exe.with_file_name("pitboss"),
        bots: exe.with_file_name("pitboss-bots"),
        pg_url: crate::default_pg_url(),
        json: None,
    };
    crate::each_flag(args, USAGE, |flag, value| {
        match flag {
            "--tables" => {
                o.tables = value()?
                    .split(',')
                    .map(|n| n.trim().parse::<usize>().context("--tables takes counts"))
                    .collect::<anyhow::Result<_>>()?;
            }
            "--players" => o.players = value()?.parse().context("--players takes a count")?,
            "--duration" => o.duration = value()?.parse().context("--duration takes seconds")?,
            "--ttl-ms" => o.ttl_ms = value()?.parse().context("--ttl-ms takes milliseconds")?,
            "--set" => {
                let kv = value()?;
                let (k, v) = kv.split_once('=').context("--set takes KEY=VALUE")?;
                if !k.starts_with("PITBOSS__") {
                    bail!("--set takes PITBOSS__* settings, not {k}");
                }
                o.set.push((k.to_string(), v.to_string()));
            }
            "--pitboss" => o.pitboss = PathBuf::from(value()?),
            "--bots" => o.bots = PathBuf::from(value()?),
            "--pg-url" => o.pg_url = value()?,
            "--json" => o.json = Some(value()?),
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    if o.tables.contains(&0) || o.players < 2 || o.duration == 0 {
        bail!("counts must be above 0, and at least 2 players");
    }
    Ok(o)
}

/// What one bots run printed that the bench reports.
#[derive(Debug, Default)]
struct BotsSummary {
    hands: f64,
    hands_per_s: f64,
    acts_answered: f64,
    p50_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
    max_ms: f64,
    result: String,
}

fn parse_summary(text: &str) -> BotsSummary {
    let field = |key: &str| -> Option<&str> {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(": "))
    };
    let number = |key: &str| -> f64 {
        field(key)
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(f64::NAN)
    };
    let answered = field("actions")
        .and_then(|v| {
            v.split(", ")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(f64::NAN);
    BotsSummary {
        hands: number("hands"),
        hands_per_s: number("hands/s"),
        acts_answered: answered,
        p50_ms: number("latency p50"),
        p99_ms: number("latency p99"),
        p999_ms: number("latency p99.9"),
        max_ms: number("latency max"),
        result: field("result").unwrap_or("missing").to_string(),
    }
}

/// Pings through the server every 100 ms (half the server's default frame
/// rate limit) until told to stop; the round trips measured.
async fn ping_baseline(
    url: String,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<Vec<Duration>> {
    let (mut ws, _) = tokio_tungstenite::connect_async(url.as_str())
        .await
        .context("the baseline's connection")?;
    let mut rtts = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = tick.tick() => {}
        }
        let sent = Instant::now();
        ws.send(Message::Ping(b"bench".to_vec())).await?;
        let pong = async {
            loop {
                match ws.next().await {
                    Some(Ok(Message::Pong(_))) => return Ok(()),
                    Some(Ok(_)) => continue,
                    other => bail!("the baseline's connection ended: {other:?}"),
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(10), pong)
            .await
            .context("no pong within 10 s")??;
        rtts.push(sent.elapsed());
    }
    let _ = ws.close(None).await;
    Ok(rtts)
}

fn quantile_ms(xs: &mut [Duration], q: f64) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort();
    let i = ((xs.len() as f64 - 1.0) * q).round() as usize;
    xs[i].as_secs_f64() * 1000.0
}

pub async fn run(args: &[String]) -> anyhow::Result<()> {
    let o = parse(args)?;
    let redis = crate::OwnRedis::start().await?;
    println!(
        "pitboss-bench play: {} cores, {} bots per table, {} s per count, lease TTL {} ms; command: pitboss-bench play {}",
        std::thread::available_parallelism().map_or(0, usize::from),
        o.players,
        o.duration,
        o.ttl_ms,
        args.join(" ")
    );
    let mut figures = Vec::new();
    let mut failed = Vec::new();
    for &n in &o.tables {
        let db = Database::create(&o.pg_url, &format!("play{n}")).await?;
        let res = one_count(&o, n, &db, &redis.url()).await;
        db.drop_it().await?;
        let (figure, ok) = res?;
        if !ok {
            failed.push(n);
        }
        figures.push(figure);
    }
    if let Some(path) = &o.json {
        let doc = json!({
            "command": format!("pitboss-bench play {}", args.join(" ")),
            "cores": std::thread::available_parallelism().map_or(0, usize::from),
            "figures": figures,
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)
            .with_context(|| format!("write {path}"))?;
        println!("figures written to {path}");
    }
    if !failed.is_empty() {
        bail!("the bots' run failed at {failed:?} tables (see their summary above)");
    }
    Ok(())
}

async fn one_count(
    o: &Options,
    n: usize,
    db: &Database,
    redis: &str,
) -> anyhow::Result<(serde_json::Value, bool)> {
    let extra: Vec<(&str, &str)> = o
        .set
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let inst = start_pitboss(&o.pitboss, "bench-play", o.ttl_ms, db, redis, &extra).await?;
    let pid = inst.child.pid()?;
    let ticks = clock_ticks();
    let signer = pitboss::auth::TokenSigner::new(secrecy::SecretString::from(SECRET));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let token = signer
        .mint("bench_baseline", now)
        .map_err(|e| anyhow::anyhow!("mint a token: {e:?}"))?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let baseline = tokio::spawn(ping_baseline(
        format!("ws://127.0.0.1:{}/ws?token={token}", inst.port),
        stop_rx,
    ));

    let cpu0 = usage(pid, ticks)?.cpu;
    let out = tokio::process::Command::new(&o.bots)
        .args(["--url", &inst.http, "--admin-token", ADMIN_TOKEN])
        .args([
            "--tables",
            &n.to_string(),
            "--players",
            &o.players.to_string(),
        ])
        .args([
            "--duration",
            &o.duration.to_string(),
            "--seed",
            "1",
            "--no-progress",
        ])
        .stdin(Stdio::null())
        .output()
        .await
        .with_context(|| format!("run {} (build it: cargo build --release)", o.bots.display()))?;
    let cpu = usage(pid, ticks)?.cpu - cpu0;
    // The server's own view: from the session reading the act to the table
    // having queued its frames (bucket bounds of its histogram).
    let server: Vec<f64> = histogram_quantiles(&inst.http, ACTION_HISTOGRAM, &[0.5, 0.99, 0.999])
        .await?
        .into_iter()
        .map(|le| le.map_or(f64::NAN, |s| s * 1000.0))
        .collect();
    let _ = stop_tx.send(true);
    let mut rtts = baseline.await??;
    let text = String::from_utf8_lossy(&out.stdout);
    let s = parse_summary(&text);
    let ok = out.status.success() && s.result == "ok";
    if !ok {
        println!(
            "  {n} tables: the bots' run did not pass ({}); its output:\n{text}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let (b50, b99, b999) = (
        quantile_ms(&mut rtts, 0.5),
        quantile_ms(&mut rtts, 0.99),
        quantile_ms(&mut rtts, 0.999),
    );
    let cpu_per_act_us = cpu.as_secs_f64() * 1e6 / s.acts_answered;
    println!(
        "  {n} tables × {}: act → broadcast p50 {:7.2} ms  p99 {:7.2} ms  p99.9 {:7.2} ms  max {:7.2} ms   \
         baseline ping → pong p50 {b50:6.2} ms  p99 {b99:6.2} ms  p99.9 {b999:6.2} ms   \
         server's own (act read → frames queued) p50 ≤ {:.1} ms  p99 ≤ {:.1} ms  p99.9 ≤ {:.1} ms   \
         {:.1} hands/s ({} hands)   server CPU {:.1} µs per act ({:.0} acts, {:.1} s CPU)",
        o.players,
        s.p50_ms,
        s.p99_ms,
        s.p999_ms,
        s.max_ms,
        server[0],
        server[1],
        server[2],
        s.hands_per_s,
        s.hands,
        cpu_per_act_us,
        s.acts_answered,
        cpu.as_secs_f64(),
    );
    Ok((
        json!({
            "figure": "act_to_broadcast", "tables": n, "players": o.players,
            "duration_s": o.duration, "settings": o.set.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
            "p50_ms": s.p50_ms, "p99_ms": s.p99_ms, "p999_ms": s.p999_ms, "max_ms": s.max_ms,
            "server_p50_ms_at_most": server[0], "server_p99_ms_at_most": server[1], "server_p999_ms_at_most": server[2],
            "baseline_ping_p50_ms": b50, "baseline_ping_p99_ms": b99, "baseline_ping_p999_ms": b999,
            "hands": s.hands, "hands_per_s": s.hands_per_s, "acts_answered": s.acts_answered,
            "server_cpu_s": cpu.as_secs_f64(), "server_cpu_us_per_act": cpu_per_act_us,
            "bots_passed": ok,
        }),
        ok,
    ))
}
