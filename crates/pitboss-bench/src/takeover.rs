//! `pitboss-bench takeover`: how soon another instance hosts the tables of
//! an instance that goes away, after SIGTERM (it drains and releases every
//! lease) and after SIGKILL (nothing is released; the leases and the
//! instance's liveness key run out), beside the baseline measured in the
//! same run: the same instance hosting the same tables released by a
//! drained predecessor long before (its revive scan and acquisitions alone).
//!
//! With `--mid-hand` every table has two seated players and a hand in
//! progress with a decision pending (the action clock is ten minutes): the
//! drain must not wait for it, and the heir must resume every hand from
//! its journal (counted in `pitboss_journal_replays_total`).
//!
//! Two real `pitboss serve` processes share a redis-server of the run's own
//! and a fresh Postgres database. Each round sends SIGTERM to the instance
//! hosting every table, restarts it under the same id once the other hosts
//! them all, then sends SIGKILL to the other and waits the same way. The
//! gauge `pitboss_tables_hosted` of the survivor is read every 20 ms.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::json;

use crate::instance::{
    add_tables, metric, seat_pairs, start_pitboss, wait_hosted, wait_metric, Database, Instance,
};
use crate::ms;

/// The command line of `pitboss-bench takeover`.
#[derive(Debug, clap::Args)]
pub struct Options {
    /// Tables the instance that goes away hosts
    #[arg(long, value_name = "N", default_value = "1000", value_parser = crate::count)]
    tables: usize,
    /// SIGTERM and SIGKILL takeovers each; medians and
    /// maxima are printed
    #[arg(verbatim_doc_comment, long, value_name = "N", default_value = "3", value_parser = crate::count)]
    rounds: usize,
    /// The instances' lease TTL (the production default)
    #[arg(long, value_name = "MS", default_value = "15000", value_parser = ttl_ms)]
    ttl_ms: u64,
    /// The server binary (default: `pitboss` beside this binary)
    #[arg(long, value_name = "PATH", default_value_os_t = crate::beside("pitboss"), hide_default_value = true)]
    pitboss: PathBuf,
    /// Postgres server to create the run's database on
    /// (default $PITBOSS_TEST_PG_URL, else
    /// postgres://postgres@127.0.0.1:5432/postgres)
    #[arg(verbatim_doc_comment, long, value_name = "URL", default_value_t = crate::default_pg_url(), hide_default_value = true)]
    pg_url: String,
    /// Every table with a hand in progress, a decision pending
    #[arg(long)]
    mid_hand: bool,
    /// Also write the figures as JSON
    #[arg(long, value_name = "PATH")]
    json: Option<String>,
}

fn ttl_ms(raw: &str) -> Result<u64, String> {
    match raw.parse() {
        Ok(0) => Err("must be above 0".into()),
        Ok(ms) => Ok(ms),
        Err(_) => Err(format!("takes milliseconds, not {raw:?}")),
    }
}

const POLL: Duration = Duration::from_millis(20);

pub async fn run(o: Options, args: &[String]) -> anyhow::Result<()> {
    let redis = crate::OwnRedis::start().await?;
    let db = Database::create(&o.pg_url, "takeover").await?;
    let result = measure(&o, &db, &redis.url(), args).await;
    db.drop_it().await?;
    result
}

/// One takeover: from the signal to the old owner's exit, and from its
/// exit (SIGTERM) or the signal (SIGKILL) to every table hosted again.
struct Takeover {
    exit: Duration,
    hosted: Duration,
}

const RESUMED: &str = "pitboss_journal_replays_total{result=\"resumed\"}";
const JOURNALLED: &str = "pitboss_journal_entries_total";

async fn measure(o: &Options, db: &Database, redis: &str, args: &[String]) -> anyhow::Result<()> {
    // Idle tables stay hosted until their instance goes; seated players
    // without a connection keep their seats, and a hand's decision waits
    // ten minutes.
    let extra = [
        ("PITBOSS__TABLE__IDLE_EVICT_MS", "86400000"),
        ("PITBOSS__TABLE__RECONNECT_WINDOW_MS", "86400000"),
        ("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "600000"),
        ("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "0"),
    ];
    let start = |id: String| async move {
        start_pitboss(&o.pitboss, &id, o.ttl_ms, db, redis, &extra).await
    };
    let ttl = Duration::from_millis(o.ttl_ms);
    let kill_bound = ttl + ttl / 3 + Duration::from_secs(1);
    println!(
        "pitboss-bench takeover: {} cores, {}, {} tables{}, lease TTL {} ms; command: pitboss-bench takeover {}",
        std::thread::available_parallelism().map_or(0, usize::from),
        o.pitboss.display(),
        o.tables,
        if o.mid_hand { " each mid-hand" } else { "" },
        o.ttl_ms,
        args.join(" ")
    );

    let mut owner = start("bench-a".into()).await?;
    add_tables(db, &owner.env, o.tables).await?;
    if o.mid_hand {
        seat_pairs(db, o.tables).await?;
    }
    let baseline = wait_hosted(&owner.http, o.tables, POLL).await?;
    if o.mid_hand {
        // Every table dealt: its start is in the journal.
        wait_metric(&owner.http, JOURNALLED, o.tables as f64, POLL).await?;
    }
    println!(
        "  baseline: {} released tables hosted by a running instance in {:7.1} ms",
        o.tables,
        ms(baseline)
    );
    let mut other = start("bench-b".into()).await?;
    let (mut terms, mut kills) = (Vec::new(), Vec::new());
    for round in 1..=o.rounds {
        let t = go_away(&mut owner, &other, o.tables, Signal::SIGTERM, o.mid_hand).await?;
        println!(
            "  round {round} SIGTERM: drained and exited {:7.1} ms after the signal, every table hosted elsewhere {:7.1} ms after the exit",
            ms(t.exit),
            ms(t.hosted)
        );
        terms.push(t);
        // The one that went comes back under its id, and hosts nothing.
        owner = start(owner.id.clone()).await?;
        std::mem::swap(&mut owner, &mut other);

        let k = go_away(&mut owner, &other, o.tables, Signal::SIGKILL, o.mid_hand).await?;
        println!(
            "  round {round} SIGKILL: every table hosted elsewhere {:7.1} ms after the signal",
            ms(k.hosted)
        );
        kills.push(k);
        owner = start(owner.id.clone()).await?;
        std::mem::swap(&mut owner, &mut other);
    }

    let summary = |xs: &[Takeover], f: fn(&Takeover) -> Duration| {
        let mut v: Vec<Duration> = xs.iter().map(f).collect();
        v.sort();
        (v[v.len() / 2], v[v.len() - 1])
    };
    let (term_med, term_max) = summary(&terms, |t| t.hosted);
    let (drain_med, _) = summary(&terms, |t| t.exit);
    let (kill_med, kill_max) = summary(&kills, |t| t.hosted);
    println!("  ─────");
    println!(
        "  SIGTERM: hosted elsewhere {:7.1} ms after the exit (median; max {:.1}), goal ≤ 1000 ms; {:.2}× the baseline; drain {:.1} ms",
        ms(term_med),
        ms(term_max),
        ratio(term_med, baseline),
        ms(drain_med),
    );
    println!(
        "  SIGKILL: hosted elsewhere {:7.1} ms after the signal (median; max {:.1}), goal ≤ TTL + TTL/3 + 1 s = {:.0} ms; {:.2}× the baseline + TTL",
        ms(kill_med),
        ms(kill_max),
        ms(kill_bound),
        ratio(kill_med, baseline + ttl),
    );

    if let Some(path) = &o.json {
        let doc = json!({
            "bench": "takeover",
            "tables": o.tables,
            "rounds": o.rounds,
            "ttl_ms": o.ttl_ms,
            "mid_hand": o.mid_hand,
            "baseline_ms": ms(baseline),
            "sigterm_exit_ms": terms.iter().map(|t| ms(t.exit)).collect::<Vec<_>>(),
            "sigterm_hosted_after_exit_ms": terms.iter().map(|t| ms(t.hosted)).collect::<Vec<_>>(),
            "sigkill_hosted_after_signal_ms": kills.iter().map(|t| ms(t.hosted)).collect::<Vec<_>>(),
            "sigkill_bound_ms": ms(kill_bound),
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)
            .with_context(|| format!("write {path}"))?;
    }
    Ok(())
}

/// Sends `signal` to `owner`, which hosts every table, and waits until
/// `heir` hosts them all (`mid_hand`: and has resumed every hand).
async fn go_away(
    owner: &mut Instance,
    heir: &Instance,
    tables: usize,
    signal: Signal,
    mid_hand: bool,
) -> anyhow::Result<Takeover> {
    let pid = i32::try_from(owner.child.pid()?).context("pid")?;
    wait_hosted(&owner.http, tables, POLL).await?;
    let resumed = metric(&heir.http, RESUMED).await?;
    let sent = Instant::now();
    kill(Pid::from_raw(pid), signal).with_context(|| format!("send {signal} to pitboss"))?;
    let status = tokio::time::timeout(Duration::from_secs(120), owner.child.0.wait())
        .await
        .context("pitboss did not exit within 120 s of the signal")??;
    let exit = sent.elapsed();
    if signal == Signal::SIGTERM && !status.success() {
        bail!("pitboss exited with {status} after SIGTERM");
    }
    let hosted = wait_hosted(&heir.http, tables, POLL).await?;
    if mid_hand {
        // Hosted means resumed: the hand is rebuilt before the table
        // starts. Every one of them must have been.
        let now = metric(&heir.http, RESUMED).await?;
        if now - resumed < tables as f64 {
            bail!(
                "the heir resumed {} hands of {tables} tables mid-hand",
                now - resumed
            );
        }
    }
    Ok(Takeover {
        exit,
        hosted: match signal {
            Signal::SIGKILL => exit + hosted,
            _ => hosted,
        },
    })
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-9)
}
