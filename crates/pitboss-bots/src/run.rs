//! The run: set the tables and bots up, watch them play, wind them down.

use std::io::IsTerminal;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::Rng;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::admin::Admin;
use crate::bot::{run_bot, BotCfg};
use crate::endpoints::{bot_url, table_url, Endpoints};
use crate::options::{Options, MAX_SEATS};
use crate::report::{self, Ending, Report, StopReason};
use crate::results::ResultLog;
use crate::shared::Shared;
use crate::stats::ms;

pub async fn run(opts: Options, admin_token: String) -> anyhow::Result<Report> {
    let mut rng = rand::thread_rng();
    let run_id = format!("{:06x}", rng.gen::<u32>() & 0xff_ffff);
    let seed = opts.seed.unwrap_or_else(|| rng.gen());
    let urls =
        Endpoints::new(&opts.urls).ok_or_else(|| anyhow!("--url must start with http://"))?;
    let n = urls.count();
    let admin = Admin::new(urls.clone(), admin_token)?;
    let results = match &opts.results {
        Some(path) => Some(
            ResultLog::create(path)
                .with_context(|| format!("creating --results file {}", path.display()))?,
        ),
        None => None,
    };
    // Read-only, so a wrong URL or admin token fails before anything exists.
    admin.check_each().await?;

    let seats = opts.players.clamp(2, MAX_SEATS);
    let mut tables = Vec::with_capacity(opts.tables);
    for t in 0..opts.tables {
        tables.push(admin.create_table(table_url(t, n), seats).await?);
    }
    let mut bots = Vec::new();
    let mut granted = 0;
    for (t, table) in tables.iter().enumerate() {
        for p in 0..opts.players {
            let name = format!("bot-{run_id}-{t}-{p}");
            admin.grant(&name, opts.buy_in).await?;
            granted += opts.buy_in;
            let token = admin.player_token(&name).await?;
            // Each bot its own stream, all derived from the one seed.
            let mix = ((t as u64) << 16 | p as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            bots.push(BotCfg {
                name,
                token,
                table: table.clone(),
                seat: p as u64,
                counts_hands: p == 0,
                buy_in: opts.buy_in,
                seed: seed ^ mix,
                url: bot_url(t, p, n),
            });
        }
    }
    let shared = Arc::new(Shared::new(opts.clone(), admin, urls, results));
    shared.stats.granted.fetch_add(granted, Ordering::Relaxed);
    shared.stats.set_run(bots.len() as u64, opts.warm_up);

    let started = Instant::now();
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut handles: Vec<JoinHandle<()>> = bots
        .iter()
        .cloned()
        .map(|cfg| tokio::spawn(run_bot(shared.clone(), cfg, stop_rx.clone())))
        .collect();
    let reason = supervise(&shared, &handles, started).await;
    let play_time = started.elapsed();
    let hands_at_stop = shared.stats.hands.load(Ordering::Relaxed);
    shared.begin_wind_down();
    let _ = stop_tx.send(true);

    let bound = shared.leave_timeout() + Duration::from_secs(15);
    let unfinished =
        match tokio::time::timeout(bound, futures::future::join_all(handles.iter_mut())).await {
            Ok(results) => results.iter().filter(|r| r.is_err()).count(),
            Err(_) => {
                let n = handles.iter().filter(|h| !h.is_finished()).count();
                handles.iter().for_each(JoinHandle::abort);
                n
            }
        };

    if let Some(Err(e)) = shared.results.as_ref().map(ResultLog::flush) {
        shared
            .stats
            .note(format!("writing the --results file failed: {e}"));
    }

    let ending = Ending {
        run_id,
        seed,
        reason,
        play_time,
        hands_at_stop,
        unfinished,
        bound,
    };
    Ok(report::finish(&shared, &tables, &bots, ending).await)
}

/// Watches the run, draws the progress bar, and says why to stop.
async fn supervise(shared: &Shared, handles: &[JoinHandle<()>], started: Instant) -> StopReason {
    let opts = &shared.opts;
    let stats = &shared.stats;
    let bar = progress_bar(opts);
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let reason = loop {
        tokio::select! {
            _ = &mut ctrl_c => break StopReason::Interrupted,
            _ = tick.tick() => {}
        }
        let hands = stats.hands.load(Ordering::Relaxed);
        let elapsed = started.elapsed();
        if let Some(bar) = &bar {
            let hist = stats.latency();
            let q = |p: f64| ms(hist.as_ref().and_then(|h| h.quantile(p)));
            match opts.hands {
                Some(_) => bar.set_position(hands),
                None => bar.set_position(u64::try_from(elapsed.as_millis()).unwrap_or(0)),
            }
            bar.set_message(format!(
                "{hands} hands  {:.1}/s  p50 {}  p99 {}  errors {}  reconnects {}",
                hands as f64 / elapsed.as_secs_f64().max(0.001),
                q(0.5),
                q(0.99),
                stats.protocol_errors.load(Ordering::Relaxed),
                stats.reconnects.load(Ordering::Relaxed)
            ));
        }
        if opts.hands.is_some_and(|h| hands >= h) {
            break StopReason::Hands;
        }
        if opts.duration.is_some_and(|d| elapsed >= d) {
            break StopReason::Duration;
        }
        if stats.fatal.load(Ordering::Relaxed) {
            break StopReason::BotFailed;
        }
        if handles.iter().all(JoinHandle::is_finished) {
            break StopReason::BotsEnded;
        }
        let last = Duration::from_millis(stats.last_hand_ms.load(Ordering::Relaxed));
        let since_start = shared.start.elapsed();
        if since_start.saturating_sub(last) > shared.stall_limit() {
            break StopReason::Stalled;
        }
    };
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    reason
}

fn progress_bar(opts: &Options) -> Option<ProgressBar> {
    if !opts.progress || !std::io::stdout().is_terminal() {
        return None;
    }
    let (len, template) = match (opts.hands, opts.duration) {
        (Some(h), _) => (h, "{elapsed_precise} [{bar:30}] {msg}"),
        (None, Some(d)) => (
            u64::try_from(d.as_millis()).unwrap_or(u64::MAX),
            "{elapsed_precise} [{bar:30}] {msg}",
        ),
        (None, None) => (0, "{elapsed_precise} {msg}"),
    };
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stdout());
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    Some(bar)
}
