//! `pitboss-bench play`: act → broadcast latency under load, with its
//! baseline in the same run.
//!
//! For each table count it starts a fresh `pitboss serve` (its own database,
//! the run's redis-server, the production timings) and runs `pitboss-bots`
//! (beside this binary, or `--bots PATH`) against it: tables of bots playing
//! random legal actions. The bots time each act from the moment it is handed
//! to the socket until the table's `action` event comes back (p50, p99,
//! p99.9), in three phases of the run:
//!
//! - **arrival**: every bot connects, joins and buys in at once (6,000 at
//!   1,000 tables, within a few seconds), then a warm-up (`--warm-up`,
//!   10 s) while the first hands of every table, dealt in step, end in step;
//! - **play**: steady play, from the warm-up's end until the bots are told
//!   to stop. The goal (p99 ≤ 10 ms at 100 tables, ≤ 25 ms at 1,000) is
//!   judged on these acts;
//! - **wind-down**: acts answered after every bot was told to leave at once.
//!
//! Every phase is printed, and the whole run beside them. Beside it, the
//! baseline: a WebSocket ping → pong through the same server at the same
//! time, on a connection of the bench's own (the same sockets, worker
//! threads and session actors, without the table), and the server's own
//! histogram (act read → frames queued), read every second so that both can
//! be shown for steady play as well as for the whole run. Server CPU per act
//! is the instance's CPU time over the run divided by the acts answered (it
//! includes the tables' creation and the buy-ins, so it is an upper bound).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use futures::{SinkExt, StreamExt};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

use crate::instance::{
    bucket_difference, bucket_quantiles, clock_ticks, histogram_buckets, start_pitboss, usage,
    Database, ADMIN_TOKEN, SECRET,
};

const ACTION_HISTOGRAM: &str = "pitboss_action_to_broadcast_seconds";

const USAGE: &str = "usage: pitboss-bench play [--tables N[,N...]] [--players P] [--duration SECS]
                          [--warm-up SECS] [--ttl-ms MS] [--set KEY=VALUE]...
                          [--pitboss PATH] [--bots PATH]
                          [--pg-url URL] [--json PATH]

  --tables LIST    table counts, one fresh instance each (default 100,1000)
  --players P      bots per table (default 6)
  --duration SECS  how long the bots play at each count (default 60)
  --warm-up SECS   after every bot was first seated, how long before play
                   counts as steady (default 10)
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
    warm_up: u64,
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
        warm_up: 10,
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
            "--warm-up" => o.warm_up = value()?.parse().context("--warm-up takes seconds")?,
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
    /// Act latencies over the whole run (`acts` = the acts answered).
    whole: PhaseFigures,
    /// The same acts by phase: in arrival, in play, in wind-down.
    phases: [PhaseFigures; 3],
    /// Seconds into the bots' run when every bot had been seated, and the
    /// wall-clock bounds of steady play (unix ms): from the warm-up's end
    /// until the wind-down began.
    all_seated_s: f64,
    play_from_ms: Option<u128>,
    play_until_ms: Option<u128>,
    result: String,
}

/// One phase's latencies as the bots print them
/// (`latency in play: p50 0.31 ms, p99 3.36 ms, p99.9 6.56 ms, max 13.15 ms, 18599 acts`).
#[derive(Debug, Clone, Copy)]
struct PhaseFigures {
    p50_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
    max_ms: f64,
    acts: f64,
}

impl Default for PhaseFigures {
    fn default() -> Self {
        PhaseFigures {
            p50_ms: f64::NAN,
            p99_ms: f64::NAN,
            p999_ms: f64::NAN,
            max_ms: f64::NAN,
            acts: 0.0,
        }
    }
}

impl PhaseFigures {
    fn parse(v: &str) -> PhaseFigures {
        let mut f = PhaseFigures::default();
        for part in v.split(", ") {
            let mut words = part.split_whitespace();
            let (Some(a), Some(b)) = (words.next(), words.next()) else {
                continue;
            };
            match (a, b.parse::<f64>()) {
                ("p50", Ok(x)) => f.p50_ms = x,
                ("p99", Ok(x)) => f.p99_ms = x,
                ("p99.9", Ok(x)) => f.p999_ms = x,
                ("max", Ok(x)) => f.max_ms = x,
                (n, _) if b == "acts" => f.acts = n.parse().unwrap_or(0.0),
                _ => {}
            }
        }
        f
    }

    fn json(&self) -> serde_json::Value {
        json!({
            "p50_ms": self.p50_ms, "p99_ms": self.p99_ms, "p999_ms": self.p999_ms,
            "max_ms": self.max_ms, "acts": self.acts,
        })
    }
}

const PHASES: [&str; 3] = ["in arrival", "in play", "in wind-down"];

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
        whole: PhaseFigures {
            p50_ms: number("latency p50"),
            p99_ms: number("latency p99"),
            p999_ms: number("latency p99.9"),
            max_ms: number("latency max"),
            acts: answered,
        },
        phases: PHASES.map(|p| {
            field(&format!("latency {p}")).map_or_else(PhaseFigures::default, PhaseFigures::parse)
        }),
        all_seated_s: field("every bot seated")
            .and_then(|v| v.strip_prefix("after ")?.split('s').next()?.parse().ok())
            .unwrap_or(f64::NAN),
        play_from_ms: field("steady play from").and_then(unix_ms),
        play_until_ms: field("wind-down began").and_then(unix_ms),
        result: field("result").unwrap_or("missing").to_string(),
    }
}

/// The `(unix ms N)` of a bots' mark.
fn unix_ms(v: &str) -> Option<u128> {
    v.split_once("(unix ms ")?.1.strip_suffix(')')?.parse().ok()
}

/// Pings through the server every 100 ms (half the server's default frame
/// rate limit) until told to stop; the round trips measured.
async fn ping_baseline(
    url: String,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<Vec<(u128, Duration)>> {
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
        let sent_ms = unix_now_ms();
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
        rtts.push((sent_ms, sent.elapsed()));
    }
    let _ = ws.close(None).await;
    Ok(rtts)
}

fn unix_now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// One reading, every second of the run.
struct Sample {
    at_ms: u128,
    /// The server's act histogram, cumulative buckets.
    buckets: Vec<(f64, f64)>,
    /// CPU time so far, in seconds: the server, the run database's Postgres
    /// backends (those on this host), the bots.
    cpu: [f64; 3],
}

/// What the sampler reads.
struct Probe {
    http: String,
    server: u32,
    bots: Option<u32>,
    pg_url: String,
    database: String,
    ticks: u64,
}

/// Reads the server's act histogram and the CPU time of the server, of
/// Postgres and of the bots every second until told to stop, so that each
/// phase of the run can be told from the rest.
async fn sample(p: Probe, mut stop: tokio::sync::watch::Receiver<bool>) -> Vec<Sample> {
    use sqlx::Connection as _;
    let mut pg = sqlx::PgConnection::connect(&p.pg_url).await.ok();
    // Backends that ended keep the CPU they had at their last reading.
    let mut backends: std::collections::HashMap<i32, f64> = Default::default();
    let mut samples = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let cpu_of = |pid: u32| usage(pid, p.ticks).map_or(f64::NAN, |u| u.cpu.as_secs_f64());
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = tick.tick() => {}
        }
        let at_ms = unix_now_ms();
        let Ok(buckets) = histogram_buckets(&p.http, ACTION_HISTOGRAM).await else {
            continue;
        };
        if let Some(conn) = pg.as_mut() {
            let pids: Vec<i32> =
                sqlx::query_scalar("SELECT pid FROM pg_stat_activity WHERE datname = $1")
                    .bind(&p.database)
                    .fetch_all(conn)
                    .await
                    .unwrap_or_default();
            for pid in pids {
                if let Ok(u) = usage(pid as u32, p.ticks) {
                    backends.insert(pid, u.cpu.as_secs_f64());
                }
            }
        }
        let postgres = if backends.is_empty() {
            f64::NAN
        } else {
            backends.values().sum()
        };
        let bots = p.bots.map_or(f64::NAN, cpu_of);
        samples.push(Sample {
            at_ms,
            buckets,
            cpu: [cpu_of(p.server), postgres, bots],
        });
    }
    samples
}

/// The first and the last sample within `[from, until)` (unix ms); `None`
/// when the window holds fewer than two.
fn window(samples: &[Sample], from: u128, until: u128) -> Option<(&Sample, &Sample)> {
    let inside = |s: &&Sample| s.at_ms >= from && s.at_ms < until;
    let first = samples.iter().find(inside)?;
    let last = samples.iter().rev().find(inside)?;
    (!std::ptr::eq(first, last)).then_some((first, last))
}

/// Share of one core each of server, Postgres and bots used between two
/// samples.
fn cores(a: &Sample, b: &Sample) -> [f64; 3] {
    let secs = (b.at_ms.saturating_sub(a.at_ms)) as f64 / 1000.0;
    [0, 1, 2].map(|i| (b.cpu[i] - a.cpu[i]) / secs)
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

    let (sampling_tx, sampling_rx) = tokio::sync::watch::channel(false);
    let cpu0 = usage(pid, ticks)?.cpu;
    let bots = tokio::process::Command::new(&o.bots)
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
            "--warm-up",
            &o.warm_up.to_string(),
            "--seed",
            "1",
            "--no-progress",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("run {} (build it: cargo build --release)", o.bots.display()))?;
    let sampler = tokio::spawn(sample(
        Probe {
            http: inst.http.clone(),
            server: pid,
            bots: bots.id(),
            pg_url: o.pg_url.clone(),
            database: db.name().to_string(),
            ticks,
        },
        sampling_rx,
    ));
    let out = bots.wait_with_output().await?;
    let cpu = usage(pid, ticks)?.cpu - cpu0;
    let _ = sampling_tx.send(true);
    let samples = sampler.await?;
    // The server's own view: from the session reading the act to the table
    // having queued its frames (bucket bounds of its histogram).
    let server_buckets = histogram_buckets(&inst.http, ACTION_HISTOGRAM).await?;
    let _ = stop_tx.send(true);
    let rtts = baseline.await??;
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
    let server_ms = |buckets: &[(f64, f64)]| -> [f64; 3] {
        let q = bucket_quantiles(buckets, &[0.5, 0.99, 0.999]);
        [0, 1, 2].map(|i| q[i].map_or(f64::NAN, |s| s * 1000.0))
    };
    let server_all = server_ms(&server_buckets);
    let (from, until) = (s.play_from_ms.unwrap_or(0), s.play_until_ms.unwrap_or(0));
    let play_window = window(&samples, from, until);
    let server_play = server_ms(
        &play_window.map_or_else(Vec::new, |(a, b)| bucket_difference(&b.buckets, &a.buckets)),
    );
    let nan3 = [f64::NAN; 3];
    let cores_play = play_window.map_or(nan3, |(a, b)| cores(a, b));
    let cores_arrival = window(&samples, 0, from).map_or(nan3, |(a, b)| cores(a, b));
    // What the goal is judged on: steady play (see the module's comment).
    let goal_ms = if n <= 100 { 10.0 } else { 25.0 };
    let baseline_ms =
        |mut xs: Vec<Duration>| -> [f64; 3] { [0.5, 0.99, 0.999].map(|q| quantile_ms(&mut xs, q)) };
    let base_all = baseline_ms(rtts.iter().map(|x| x.1).collect());
    let base_play = baseline_ms(
        rtts.iter()
            .filter(|(at, _)| *at >= from && *at < until)
            .map(|x| x.1)
            .collect(),
    );
    let cpu_per_act_us = cpu.as_secs_f64() * 1e6 / s.whole.acts;
    let play = s.phases[1];
    println!(
        "  {n} tables × {}: every bot seated after {:.1} s; after {} s of warm-up, {:.1} s of steady play",
        o.players,
        s.all_seated_s,
        o.warm_up,
        until.saturating_sub(from) as f64 / 1000.0
    );
    let row = |what: &str, f: &PhaseFigures| {
        if f.acts == 0.0 {
            return println!("    act → broadcast {what:<14} no acts");
        }
        println!(
            "    act → broadcast {what:<14} p50 {:7.2} ms  p99 {:7.2} ms  p99.9 {:7.2} ms  max {:7.2} ms  ({:.0} acts)",
            f.p50_ms, f.p99_ms, f.p999_ms, f.max_ms, f.acts
        )
    };
    row("in play", &play);
    println!(
        "      goal: p99 in play ≤ {goal_ms} ms: {}",
        if play.acts == 0.0 {
            "no acts in play (a longer --duration or a shorter --warm-up)"
        } else if play.p99_ms <= goal_ms {
            "met"
        } else {
            "missed"
        }
    );
    row("in arrival", &s.phases[0]);
    row("in wind-down", &s.phases[2]);
    row("whole run", &s.whole);
    println!(
        "    baseline ping → pong: in play p50 {:6.2} ms  p99 {:6.2} ms  p99.9 {:6.2} ms;  whole run p50 {:6.2} ms  p99 {:6.2} ms  p99.9 {:6.2} ms",
        base_play[0], base_play[1], base_play[2], base_all[0], base_all[1], base_all[2]
    );
    println!(
        "    server's own (act read → frames queued): in play p50 ≤ {:.1} ms  p99 ≤ {:.1} ms  p99.9 ≤ {:.1} ms;  whole run p50 ≤ {:.1} ms  p99 ≤ {:.1} ms  p99.9 ≤ {:.1} ms",
        server_play[0], server_play[1], server_play[2], server_all[0], server_all[1], server_all[2]
    );
    let pct = |x: f64| format!("{:.0}%", x * 100.0);
    println!(
        "    CPU, share of one core (of {} here): in play server {}, Postgres {}, bots {};  in arrival server {}, Postgres {}, bots {}",
        std::thread::available_parallelism().map_or(0, usize::from),
        pct(cores_play[0]),
        pct(cores_play[1]),
        pct(cores_play[2]),
        pct(cores_arrival[0]),
        pct(cores_arrival[1]),
        pct(cores_arrival[2]),
    );
    println!(
        "    {:.1} hands/s ({} hands)   server CPU {:.1} µs per act ({:.0} acts, {:.1} s CPU)",
        s.hands_per_s,
        s.hands,
        cpu_per_act_us,
        s.whole.acts,
        cpu.as_secs_f64(),
    );
    Ok((
        json!({
            "figure": "act_to_broadcast", "tables": n, "players": o.players,
            "duration_s": o.duration, "settings": o.set.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
            "p50_ms": s.whole.p50_ms, "p99_ms": s.whole.p99_ms, "p999_ms": s.whole.p999_ms, "max_ms": s.whole.max_ms,
            "play": play.json(), "arrival": s.phases[0].json(), "wind_down": s.phases[2].json(),
            "all_seated_after_s": s.all_seated_s, "warm_up_s": o.warm_up, "play_s": until.saturating_sub(from) as f64 / 1000.0,
            "server_p50_ms_at_most": server_all[0], "server_p99_ms_at_most": server_all[1], "server_p999_ms_at_most": server_all[2],
            "server_play_p50_ms_at_most": server_play[0], "server_play_p99_ms_at_most": server_play[1], "server_play_p999_ms_at_most": server_play[2],
            "baseline_ping_p50_ms": base_all[0], "baseline_ping_p99_ms": base_all[1], "baseline_ping_p999_ms": base_all[2],
            "baseline_ping_play_p50_ms": base_play[0], "baseline_ping_play_p99_ms": base_play[1], "baseline_ping_play_p999_ms": base_play[2],
            "cores_in_play": {"server": cores_play[0], "postgres": cores_play[1], "bots": cores_play[2]},
            "cores_in_arrival": {"server": cores_arrival[0], "postgres": cores_arrival[1], "bots": cores_arrival[2]},
            "hands": s.hands, "hands_per_s": s.hands_per_s, "acts_answered": s.whole.acts,
            "server_cpu_s": cpu.as_secs_f64(), "server_cpu_us_per_act": cpu_per_act_us,
            "bots_passed": ok,
        }),
        ok,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A summary as `pitboss-bots` printed it (docs/bots.md).
    const SUMMARY: &str =
        "pitboss-bots: run 86e8f5, seed 8675225382233852051, http://127.0.0.1:9124
hands: 9
hands/s: 0.2
actions: 83 sent, 83 answered
latency p50: 0.19 ms
latency p99: 0.50 ms
latency p99.9: 0.50 ms
latency max: 0.50 ms
latency in arrival: p50 0.18 ms, p99 0.50 ms, p99.9 0.50 ms, max 0.50 ms, 38 acts
latency in play: p50 0.20 ms, p99 0.45 ms, p99.9 0.45 ms, max 0.45 ms, 45 acts
latency in wind-down: no acts
every bot seated: after 0.1s (unix ms 1796379832523)
steady play from: after 5.1s (unix ms 1796379837523)
wind-down began: after 20.0s (unix ms 1796379852410)
result: ok
";

    #[test]
    fn the_bots_summary_is_read_whole_and_by_phase() {
        let s = parse_summary(SUMMARY);
        assert_eq!((s.hands, s.hands_per_s), (9.0, 0.2));
        assert_eq!(
            (
                s.whole.p50_ms,
                s.whole.p99_ms,
                s.whole.p999_ms,
                s.whole.max_ms,
                s.whole.acts
            ),
            (0.19, 0.50, 0.50, 0.50, 83.0)
        );
        let [arrival, play, wind_down] = s.phases;
        assert_eq!((arrival.p50_ms, arrival.acts), (0.18, 38.0));
        assert_eq!(
            (
                play.p50_ms,
                play.p99_ms,
                play.p999_ms,
                play.max_ms,
                play.acts
            ),
            (0.20, 0.45, 0.45, 0.45, 45.0)
        );
        assert_eq!(wind_down.acts, 0.0);
        assert!(wind_down.p99_ms.is_nan());
        assert_eq!(s.all_seated_s, 0.1);
        assert_eq!(
            (s.play_from_ms, s.play_until_ms),
            (Some(1796379837523), Some(1796379852410))
        );
        assert_eq!(s.result, "ok");
    }

    #[test]
    fn a_window_is_the_difference_of_its_first_and_last_sample_inside() {
        let at = |at_ms: u128, count: f64, cpu: f64| Sample {
            at_ms,
            buckets: vec![(0.001, count), (f64::INFINITY, count)],
            cpu: [cpu; 3],
        };
        let samples = [
            at(1_000, 5.0, 1.0),
            at(2_000, 7.0, 1.5),
            at(3_000, 17.0, 2.5),
            at(4_000, 30.0, 4.0),
        ];
        let (a, b) = window(&samples, 1_500, 3_500).expect("two samples inside");
        assert_eq!((a.at_ms, b.at_ms), (2_000, 3_000));
        assert_eq!(
            bucket_difference(&b.buckets, &a.buckets),
            vec![(0.001, 10.0), (f64::INFINITY, 10.0)]
        );
        assert_eq!(cores(a, b), [1.0; 3], "one CPU second in one second");
        assert!(window(&samples, 1_500, 2_500).is_none(), "one sample only");
    }
}
