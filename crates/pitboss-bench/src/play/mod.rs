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
//!
//! This file holds the command line and the run, one instance per table
//! count. Beside it:
//!
//! - `summary`: what the bots' summary says, whole and by phase.
//! - `sampling`: the ping baseline and the readings taken every second
//!   (the server's histogram, the CPU time of server, Postgres and bots),
//!   and the figures drawn from them.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context as _};
use serde_json::json;

use crate::instance::{
    bucket_difference, bucket_quantiles, clock_ticks, histogram_buckets, start_pitboss, usage,
    Database, ADMIN_TOKEN, SECRET,
};

mod sampling;
mod summary;

use sampling::{cores, ping_baseline, quantile_ms, sample, window, Probe};
use summary::{parse_summary, PhaseFigures};

const ACTION_HISTOGRAM: &str = "pitboss_action_to_broadcast_seconds";

/// The command line of `pitboss-bench play`.
#[derive(Debug, clap::Args)]
pub struct Options {
    /// Table counts, one fresh instance each
    #[arg(long, value_name = "N[,N...]", default_value = "100,1000", value_parser = crate::counts)]
    tables: std::vec::Vec<usize>,
    /// Bots per table, at least 2
    #[arg(long, value_name = "P", default_value = "6", value_parser = players)]
    players: usize,
    /// How long the bots play at each count
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = crate::seconds)]
    duration: u64,
    /// After every bot was first seated, how long before
    /// play counts as steady
    #[arg(verbatim_doc_comment, long, value_name = "SECS", default_value = "10")]
    warm_up: u64,
    /// The instance's lease TTL
    #[arg(long, value_name = "MS", default_value = "15000")]
    ttl_ms: u64,
    /// A further setting for the instance, e.g.
    /// --set PITBOSS__DATABASE__MAX_CONNECTIONS=32
    /// (repeatable)
    #[arg(verbatim_doc_comment, long, value_name = "KEY=VALUE", value_parser = setting)]
    set: Vec<(String, String)>,
    /// The server binary (default: `pitboss` beside this binary)
    #[arg(long, value_name = "PATH", default_value_os_t = crate::beside("pitboss"), hide_default_value = true)]
    pitboss: PathBuf,
    /// The bots binary (default: `pitboss-bots` beside this binary)
    #[arg(long, value_name = "PATH", default_value_os_t = crate::beside("pitboss-bots"), hide_default_value = true)]
    bots: PathBuf,
    /// Postgres server for the run's databases
    /// (default $PITBOSS_TEST_PG_URL, else
    /// postgres://postgres@127.0.0.1:5432/postgres)
    #[arg(verbatim_doc_comment, long, value_name = "URL", default_value_t = crate::default_pg_url(), hide_default_value = true)]
    pg_url: String,
    /// Also write the figures as JSON
    #[arg(long, value_name = "PATH")]
    json: Option<String>,
}

fn players(raw: &str) -> Result<usize, String> {
    match raw.parse() {
        Ok(n) if n >= 2 => Ok(n),
        Ok(_) => Err("must be at least 2".into()),
        Err(_) => Err(format!("takes a count, not {raw:?}")),
    }
}

/// `KEY=VALUE`, where the key names a `PITBOSS__*` setting.
fn setting(raw: &str) -> Result<(String, String), String> {
    let (k, v) = raw.split_once('=').ok_or("takes KEY=VALUE")?;
    if !k.starts_with("PITBOSS__") {
        return Err(format!("takes PITBOSS__* settings, not {k}"));
    }
    Ok((k.to_string(), v.to_string()))
}

pub async fn run(o: Options, args: &[String]) -> anyhow::Result<()> {
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
