//! The end of a run: what the server says about the seats, the bots'
//! wallets and the chip audit, and the summary printed on stdout.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::bot::BotCfg;
use crate::shared::Shared;
use crate::stats::{lock, ms, Phase};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Hands,
    Duration,
    Interrupted,
    Stalled,
    BotFailed,
    BotsEnded,
}

impl StopReason {
    fn describe(self) -> &'static str {
        match self {
            StopReason::Hands => "hand count reached",
            StopReason::Duration => "duration reached",
            StopReason::Interrupted => "interrupted",
            StopReason::Stalled => "stalled",
            StopReason::BotFailed => "a bot failed",
            StopReason::BotsEnded => "every bot ended early",
        }
    }
}

/// The summary (stdout) and why the run failed, if it did.
pub struct Report {
    pub text: String,
    pub failures: Vec<String>,
}

/// How the play ended, as the summary reports it.
pub struct Ending {
    pub run_id: String,
    pub seed: u64,
    pub reason: StopReason,
    /// From starting the bots to the stop.
    pub play_time: Duration,
    pub hands_at_stop: u64,
    /// Bots still running (then aborted) when the wind-down's bound passed.
    pub unfinished: usize,
    pub bound: Duration,
}

/// Checks that every seat is empty, the bots' wallets hold what was granted
/// to them and the audit balances, then writes the summary.
pub async fn finish(shared: &Shared, tables: &[String], bots: &[BotCfg], ending: Ending) -> Report {
    let Ending {
        run_id,
        seed,
        reason,
        play_time,
        hands_at_stop,
        unfinished,
        bound,
    } = ending;
    let stats = &shared.stats;
    let mut failures = Vec::new();
    match reason {
        StopReason::Stalled => failures.push(format!(
            "no hand completed for {}s",
            shared.stall_limit().as_secs()
        )),
        StopReason::BotFailed | StopReason::BotsEnded => {
            let first = lock(&stats.errors).first().cloned();
            failures.push(format!(
                "a bot could not carry on: {}",
                first.unwrap_or_else(|| "no reason recorded".into())
            ));
        }
        _ => {}
    }
    if unfinished > 0 {
        failures.push(format!(
            "{unfinished} bots did not finish within {}s",
            bound.as_secs()
        ));
    }

    // The server cashes a seat out right after it announces the `left`; give
    // that write a moment before counting what is still seated.
    let mut seats_left = None;
    let check_until = Instant::now() + Duration::from_secs(10);
    loop {
        let mut n = 0;
        let mut failed = None;
        for table in tables {
            match shared.admin.seats_taken(table).await {
                Ok(k) => n += k,
                Err(e) => failed = Some(e),
            }
        }
        if let Some(e) = failed {
            failures.push(format!("could not read the tables: {e:#}"));
            break;
        }
        seats_left = Some(n);
        if n == 0 || Instant::now() >= check_until {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    if let Some(n) = seats_left.filter(|&n| n > 0) {
        failures.push(format!("{n} bot seats were still taken at the end"));
    }
    let granted = stats.granted.load(Ordering::Relaxed);
    let mut wallets = Some(0u64);
    for b in bots {
        match shared.admin.balance(&b.name).await {
            Ok(v) => wallets = wallets.map(|w| w + v),
            Err(e) => {
                failures.push(format!("could not read {}'s wallet: {e:#}", b.name));
                wallets = None;
                break;
            }
        }
    }
    if let Some(w) = wallets.filter(|&w| w != granted) {
        failures.push(format!(
            "the bots' wallets hold {w} chips of the {granted} granted to them"
        ));
    }
    let audit = match shared.admin.audit().await {
        Ok(a) => Some(a),
        Err(e) => {
            failures.push(format!("GET /admin/audit failed: {e:#}"));
            None
        }
    };
    let delta = audit.as_ref().map(|a| a["delta"].clone());
    if let Some(d) = &delta {
        if d.as_i64() != Some(0) {
            failures.push(format!("the audit delta is {d}, not 0"));
        }
    }
    let protocol_errors = stats.protocol_errors.load(Ordering::Relaxed);
    if protocol_errors > 0 {
        failures.push(format!("{protocol_errors} protocol errors"));
    }
    let early = lock(&stats.errors).clone();
    if !early.is_empty() && protocol_errors == 0 && failures.is_empty() {
        // Notes without a counted error (a connect that failed) still fail.
        failures.push(early[0].clone());
    }

    let hist = stats.latency();
    let q = |p: f64| ms(hist.as_ref().and_then(|h| h.quantile(p)));
    let hands = stats.hands.load(Ordering::Relaxed);
    let secs = play_time.as_secs_f64().max(0.001);
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let mut text = String::new();
    let mut line = |k: &str, v: String| text.push_str(&format!("{k}: {v}\n"));
    line(
        "pitboss-bots",
        format!("run {run_id}, seed {seed}, {}", shared.urls.describe()),
    );
    line("stopped", format!("{} after {secs:.1}s", reason.describe()));
    line("tables", tables.len().to_string());
    line("bots", bots.len().to_string());
    line("hands", hands.to_string());
    line("hands/s", format!("{:.1}", hands_at_stop as f64 / secs));
    line(
        "actions",
        format!(
            "{} sent, {} answered",
            get(&stats.acts_sent),
            get(&stats.acts_answered)
        ),
    );
    line(
        "time-outs",
        format!(
            "{} ({} turns left to the action clock on purpose, {} reached the bot too late to answer)",
            get(&stats.timeouts),
            get(&stats.left_to_clock),
            get(&stats.too_late)
        ),
    );
    line(
        "stale",
        format!(
            "{} (acts overtaken by the action clock, or by the others leaving at the end: benign races)",
            get(&stats.stale)
        ),
    );
    line("rebuys", get(&stats.rebuys).to_string());
    line("reconnects", get(&stats.reconnects).to_string());
    line(
        "re-syncs",
        format!(
            "{} (snapshots after the first: a table's new owner, a rejoin, a pause ending)",
            get(&stats.resyncs)
        ),
    );
    line(
        "resumed hands",
        format!(
            "{} (re-syncs into the hand in progress, its cards and board as told before)",
            get(&stats.resumed)
        ),
    );
    if get(&stats.voided) > 0 {
        line("voided hands", get(&stats.voided).to_string());
    }
    line("latency p50", q(0.50));
    line("latency p99", q(0.99));
    line("latency p99.9", q(0.999));
    line("latency max", ms(hist.as_ref().map(|h| h.max)));
    // The same acts by the part of the run they fell in: the arrival
    // (every bot connecting, joining and buying in at once, then the
    // warm-up), steady play, and the wind-down (every bot leaving at once).
    let phases = stats.latencies();
    for phase in Phase::ALL {
        let text = match phases.phase(phase) {
            Some(h) => format!(
                "p50 {}, p99 {}, p99.9 {}, max {}, {} acts",
                ms(h.quantile(0.5)),
                ms(h.quantile(0.99)),
                ms(h.quantile(0.999)),
                ms(Some(h.max)),
                h.count()
            ),
            None => "no acts".into(),
        };
        line(&format!("latency {}", phase.name()), text);
    }
    // Wall-clock marks as well, so that a harness on the same host can
    // place its own measurements in the same phases.
    let mark = |at: Option<Instant>| match at {
        Some(at) => {
            let ago = Instant::now().saturating_duration_since(at);
            let unix_ms = SystemTime::now()
                .checked_sub(ago)
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_millis());
            format!(
                "after {:.1}s (unix ms {unix_ms})",
                at.saturating_duration_since(shared.start).as_secs_f64()
            )
        }
        None => "never".into(),
    };
    line("every bot seated", mark(stats.all_seated_at()));
    line("steady play from", mark(stats.play_from()));
    line("wind-down began", mark(stats.wind_down_at()));
    line("protocol errors", protocol_errors.to_string());
    line(
        "frames out of order",
        stats.out_of_order.load(Ordering::Relaxed).to_string(),
    );
    for e in &early {
        line("  error", e.clone());
    }
    line(
        "seats left",
        seats_left.map_or("unknown".into(), |n| n.to_string()),
    );
    line(
        "wallets",
        format!(
            "{} of {granted} granted",
            wallets.map_or("unknown".into(), |w| w.to_string())
        ),
    );
    if let Some(a) = &audit {
        line(
            "audit",
            format!(
                "wallets={} stacks={} granted={}",
                a["wallets"], a["stacks"], a["granted"]
            ),
        );
    }
    line("delta", delta.map_or("unknown".into(), |d| d.to_string()));
    line(
        "result",
        if failures.is_empty() {
            "ok".into()
        } else {
            format!("FAILED: {}", failures.join("; "))
        },
    );
    Report { text, failures }
}
