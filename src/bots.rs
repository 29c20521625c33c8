//! `pitboss bots`: a load-generating client that drives a running server
//! through its public API only — the admin HTTP API and one player WebSocket
//! per bot — and checks on the way out that no chip went missing.
//!
//! Each bot is one tokio task holding one connection. It joins and sits,
//! answers its own `turn` events with a random action taken from the turn's
//! `legal` list (now and then leaving the turn to the server's action clock),
//! rebuys when it busts, and leaves its seat at the end so its wallet gets
//! the chips back. The run then reads `GET /admin/audit`.

use std::collections::VecDeque;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context as _};
use futures::{SinkExt, StreamExt};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use secrecy::ExposeSecret;
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::auth::{now_unix, TokenSigner};
use crate::config::Settings;

const USAGE: &str = "\
usage: pitboss bots [options]

Creates tables on a running pitboss server, seats bots that play random legal
actions over WebSockets, then leaves the seats and prints a summary and the
server's chip audit.

  --url URL           server base URL (default http://127.0.0.1:8080)
  --admin-token T     bearer token for /admin (default: admin.token from config)
  --tables N          tables to create (default 1)
  --players M         bots per table, 2..=10 (default 4)
  --hands H           stop once H hands have completed over all tables
  --duration SECS     stop after SECS seconds (default 30 if --hands is not given)
  --buy-in C          chips each bot sits down with, 40..=200 (default 200)
  --seed S            seed for the bots' action RNG (default: random, printed)
  --timeout-rate F    share of turns left to the server's action clock (default 0.02)
  --max-rate R        frames per second each bot sends at most (default 15; the
                      server's own limit, ws.rate_per_sec, is 20 by default)
  --no-progress       no progress bar (also off when stdout is not a terminal)
  --dump-errors       print a bot's last 40 frames on stderr with each protocol error
  -h, --help          this text

Player tokens are minted locally with auth.secret (PITBOSS__AUTH__SECRET),
so the server must share it. Exit status 0 only when no protocol error was
seen, every seat was left and the audit delta is 0.";

// Every table the bots create: blinds 1/2, buy-ins 40..=200.
const SMALL_BLIND: u64 = 1;
const BIG_BLIND: u64 = 2;
const MIN_BUY_IN: u64 = 40;
const MAX_BUY_IN: u64 = 200;
const MAX_SEATS: usize = 10;

const HTTP_TIMEOUT: Duration = Duration::from_secs(15);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a join may wait for its snapshot and a sit for its `seated`.
const ACK_TIMEOUT: Duration = Duration::from_secs(15);
/// The contract's default action clock, assumed until a `turn` says otherwise.
const DEFAULT_ACTION_CLOCK: Duration = Duration::from_secs(20);
/// Turns a bot remembers after they close: a refusal for a raced act can
/// arrive a little after the turn itself has moved on.
const RECENT_TURNS: usize = 8;
/// Error codes an act can legitimately get when the action clock beat it:
/// the turn passed on (`not_your_turn`), the time-out ended the hand and the
/// next one started (`stale_hand`) or is not dealt yet (`no_hand_in_progress`).
const RACE_CODES: [&str; 3] = ["not_your_turn", "stale_hand", "no_hand_in_progress"];
/// Error lines kept for the summary; the count covers the rest.
const ERRORS_KEPT: usize = 12;
/// Frames each bot remembers for `--dump-errors`.
const DUMP_FRAMES: usize = 40;

pub fn main(settings: &Settings, args: &[&str]) -> ExitCode {
    let opts = match Options::parse(args) {
        Ok(Parsed::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(Parsed::Run(opts)) => opts,
        Err(e) => {
            eprintln!("pitboss bots: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let Some(secret) = settings.auth.secret.clone() else {
        eprintln!(
            "pitboss bots: auth.secret is not set (PITBOSS__AUTH__SECRET); \
             the bots sign their players' tokens with the server's secret"
        );
        return ExitCode::from(2);
    };
    let admin_token = opts.admin_token.clone().or_else(|| {
        settings
            .admin
            .token
            .as_ref()
            .map(|t| t.expose_secret().to_string())
    });
    let Some(admin_token) = admin_token else {
        eprintln!("pitboss bots: no admin token: pass --admin-token or set PITBOSS__ADMIN__TOKEN");
        return ExitCode::from(2);
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("pitboss bots: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(run(opts, TokenSigner::new(secret), admin_token));
    // Bot tasks that overran their bound were aborted; do not wait on them.
    runtime.shutdown_timeout(Duration::from_secs(1));
    match result {
        Ok(report) => {
            print!("{}", report.text);
            if report.failures.is_empty() {
                ExitCode::SUCCESS
            } else {
                eprintln!("pitboss bots: FAILED: {}", report.failures.join("; "));
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("pitboss bots: FAILED: {e:#}");
            ExitCode::FAILURE
        }
    }
}

// ---------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Options {
    /// Base URL without a trailing slash.
    url: String,
    admin_token: Option<String>,
    tables: usize,
    players: usize,
    hands: Option<u64>,
    duration: Option<Duration>,
    buy_in: u64,
    seed: Option<u64>,
    timeout_rate: f64,
    max_rate: f64,
    progress: bool,
    dump_errors: bool,
}

#[derive(Debug)]
enum Parsed {
    Run(Options),
    Help,
}

fn number<T: FromStr>(flag: &str, raw: &str) -> Result<T, String> {
    raw.parse()
        .map_err(|_| format!("{flag} needs a number, not {raw:?}"))
}

impl Options {
    fn parse(args: &[&str]) -> Result<Parsed, String> {
        let mut o = Options {
            url: "http://127.0.0.1:8080".into(),
            admin_token: None,
            tables: 1,
            players: 4,
            hands: None,
            duration: None,
            buy_in: MAX_BUY_IN,
            seed: None,
            timeout_rate: 0.02,
            max_rate: 15.0,
            progress: true,
            dump_errors: false,
        };
        let mut it = args.iter().copied();
        while let Some(arg) = it.next() {
            // Both `--flag value` and `--flag=value`.
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f, Some(v)),
                _ => (arg, None),
            };
            let mut value = || {
                inline
                    .or_else(|| it.next())
                    .ok_or_else(|| format!("{flag} needs a value"))
            };
            match flag {
                "-h" | "--help" => return Ok(Parsed::Help),
                "--no-progress" => o.progress = false,
                "--dump-errors" => o.dump_errors = true,
                "--url" => o.url = value()?.trim_end_matches('/').to_string(),
                "--admin-token" => o.admin_token = Some(value()?.to_string()),
                "--tables" => o.tables = number(flag, value()?)?,
                "--players" => o.players = number(flag, value()?)?,
                "--hands" => o.hands = Some(number(flag, value()?)?),
                "--duration" => {
                    let secs: f64 = number(flag, value()?)?;
                    if !(secs.is_finite() && secs > 0.0 && secs <= 7.0 * 86400.0) {
                        return Err("--duration must be above 0 and at most a week".into());
                    }
                    o.duration = Some(Duration::from_secs_f64(secs));
                }
                "--buy-in" => o.buy_in = number(flag, value()?)?,
                "--seed" => o.seed = Some(number(flag, value()?)?),
                "--timeout-rate" => o.timeout_rate = number(flag, value()?)?,
                "--max-rate" => o.max_rate = number(flag, value()?)?,
                other => return Err(format!("unknown option {other:?}")),
            }
        }
        if !(1..=1000).contains(&o.tables) {
            return Err("--tables must be 1..=1000".into());
        }
        if !(2..=MAX_SEATS).contains(&o.players) {
            return Err(format!("--players must be 2..={MAX_SEATS}"));
        }
        if o.hands == Some(0) {
            return Err("--hands must be at least 1".into());
        }
        if !(MIN_BUY_IN..=MAX_BUY_IN).contains(&o.buy_in) {
            return Err(format!(
                "--buy-in must be {MIN_BUY_IN}..={MAX_BUY_IN} (the tables' buy-in range)"
            ));
        }
        if !(0.0..=1.0).contains(&o.timeout_rate) {
            return Err("--timeout-rate must be between 0 and 1".into());
        }
        if !(o.max_rate.is_finite() && o.max_rate >= 1.0) {
            return Err("--max-rate must be at least 1".into());
        }
        if !o.url.starts_with("http://") {
            return Err(format!(
                "--url must start with http:// (this build has no TLS), not {:?}",
                o.url
            ));
        }
        if o.hands.is_none() && o.duration.is_none() {
            o.duration = Some(Duration::from_secs(30));
        }
        Ok(Parsed::Run(o))
    }
}

// ---------------------------------------------------------------------------
// Latency histogram
// ---------------------------------------------------------------------------

/// Sub-buckets per power of two: relative error under 1%.
const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;

/// Latencies in microseconds in log-linear buckets, so the progress bar can
/// read percentiles of any number of samples without sorting them.
#[derive(Debug, Clone)]
struct Histogram {
    counts: Vec<u64>,
    total: u64,
    max: u64,
}

impl Histogram {
    fn new() -> Histogram {
        Histogram {
            counts: vec![0; Self::bucket(u64::MAX) + 1],
            total: 0,
            max: 0,
        }
    }

    fn bucket(v: u64) -> usize {
        if v < SUB {
            return v as usize;
        }
        let shift = 63 - v.leading_zeros() - SUB_BITS;
        let sub = (v >> shift) - SUB;
        (((shift as u64) + 1) * SUB + sub) as usize
    }

    /// The smallest value in bucket `i` and the bucket's width.
    fn bucket_range(i: usize) -> (u64, u64) {
        let i = i as u64;
        if i < SUB {
            return (i, 1);
        }
        let shift = i / SUB - 1;
        ((SUB + i % SUB) << shift, 1 << shift)
    }

    fn record(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        if let Some(c) = self.counts.get_mut(Self::bucket(us)) {
            *c += 1;
        }
        self.total += 1;
        self.max = self.max.max(us);
    }

    /// The `q` quantile (0..=1) in microseconds; `None` without samples.
    fn quantile(&self, q: f64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (low, width) = Self::bucket_range(i);
                return Some((low + width / 2).min(self.max));
            }
        }
        Some(self.max)
    }
}

fn ms(us: Option<u64>) -> String {
    match us {
        Some(us) => format!("{:.2} ms", us as f64 / 1000.0),
        None => "n/a".into(),
    }
}

// ---------------------------------------------------------------------------
// Shared counters
// ---------------------------------------------------------------------------

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Counters stay meaningful after a panicking bot task.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[derive(Default)]
struct Stats {
    hands: AtomicU64,
    voided: AtomicU64,
    acts_sent: AtomicU64,
    acts_answered: AtomicU64,
    /// Turns deliberately left to the server's action clock.
    left_to_clock: AtomicU64,
    /// Turns that arrived too close to their deadline to answer safely.
    too_late: AtomicU64,
    /// The server's clock acted for one of our seats.
    timeouts: AtomicU64,
    /// An act overtaken by the clock (or by the wind-down): a benign race.
    stale: AtomicU64,
    rebuys: AtomicU64,
    granted: AtomicU64,
    protocol_errors: AtomicU64,
    /// Milliseconds since the start at which the last hand completed.
    last_hand_ms: AtomicU64,
    /// A bot hit something it cannot play through; the run winds down.
    fatal: AtomicBool,
    errors: Mutex<Vec<String>>,
    latency: Mutex<Option<Histogram>>,
}

impl Stats {
    fn note(&self, line: String) {
        let mut errors = lock(&self.errors);
        if errors.len() < ERRORS_KEPT {
            errors.push(line);
        }
    }

    fn protocol_error(&self, bot: &str, what: impl std::fmt::Display) {
        self.protocol_errors.fetch_add(1, Ordering::Relaxed);
        self.note(format!("{bot}: {what}"));
    }

    fn record_latency(&self, d: Duration) {
        self.acts_answered.fetch_add(1, Ordering::Relaxed);
        lock(&self.latency)
            .get_or_insert_with(Histogram::new)
            .record(d);
    }

    fn latency(&self) -> Option<Histogram> {
        lock(&self.latency).clone()
    }

    fn apply(&self, bot: &str, e: Effects) {
        self.timeouts.fetch_add(e.timeouts, Ordering::Relaxed);
        self.stale.fetch_add(e.stale, Ordering::Relaxed);
        for d in e.latencies {
            self.record_latency(d);
        }
        for err in e.errors {
            self.protocol_error(bot, err);
        }
    }
}

/// What every bot shares.
struct Shared {
    opts: Options,
    admin: Admin,
    /// `ws://host:port`
    ws_base: String,
    signer: TokenSigner,
    stats: Stats,
    start: Instant,
    /// The smallest (local wall clock − server send time) seen on any turn,
    /// in ms: the clock offset plus the best-case delivery time. How far a
    /// turn exceeds it is how late that turn reached us.
    clock_offset_ms: AtomicI64,
    /// The longest action clock seen in a `turn`, in ms (0 = none yet).
    action_clock_ms: AtomicU64,
    /// Set just before the bots are told to stop, so that a bot which has
    /// not noticed the stop yet already judges hand ends leniently.
    winding_down: AtomicBool,
}

impl Shared {
    fn winding_down(&self) -> bool {
        self.winding_down.load(Ordering::Relaxed)
    }

    fn action_clock(&self) -> Duration {
        match self.action_clock_ms.load(Ordering::Relaxed) {
            0 => DEFAULT_ACTION_CLOCK,
            ms => Duration::from_millis(ms),
        }
    }

    /// Long enough for a hand in progress to finish when every live player
    /// is folded by their own `leave` and a stray seat times out.
    fn leave_timeout(&self) -> Duration {
        Duration::from_secs(10) + self.action_clock() * 4
    }

    /// A run in which no hand completes for this long is stuck.
    fn stall_limit(&self) -> Duration {
        Duration::from_secs(30) + self.action_clock() * 10
    }

    /// How long the server will still wait for this turn (see
    /// [`turn_time_left`]); also learns the server's action clock.
    fn time_left(&self, deadline_ms: i64, timeout_ms: Option<u64>) -> Duration {
        if let Some(t) = timeout_ms {
            self.action_clock_ms.fetch_max(t, Ordering::Relaxed);
        }
        turn_time_left(&self.clock_offset_ms, wall_ms(), deadline_ms, timeout_ms)
    }
}

/// How long the server will still wait for a turn, judged without trusting
/// the two wall clocks to agree: the turn's own `timeout_ms`, less how much
/// later than the best case seen so far (`best_offset`, shared) it reached
/// us. A turn delivered late (a busy client, a slow network) has less time.
fn turn_time_left(
    best_offset: &AtomicI64,
    now_ms: i64,
    deadline_ms: i64,
    timeout_ms: Option<u64>,
) -> Duration {
    let Some(timeout) = timeout_ms else {
        // A server that does not say its clock: trust the wall clocks.
        return Duration::from_millis(u64::try_from(deadline_ms - now_ms).unwrap_or(0));
    };
    let sent = deadline_ms.saturating_sub_unsigned(timeout);
    let offset = now_ms.saturating_sub(sent);
    let best = best_offset.fetch_min(offset, Ordering::Relaxed).min(offset);
    let lag = u64::try_from(offset - best).unwrap_or(0);
    Duration::from_millis(timeout.saturating_sub(lag))
}

fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------
// Admin API
// ---------------------------------------------------------------------------

struct Admin {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Admin {
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.base);
        let mut req = self
            .http
            .request(method.clone(), &url)
            .bearer_auth(&self.token);
        if let Some(b) = &body {
            req = req.json(b);
        }
        let resp = req.send().await.map_err(|e| {
            // reqwest's own chain repeats the URL at every level; the
            // innermost cause ("Connection refused") is the useful part.
            let root = std::iter::successors(Some(&e as &dyn std::error::Error), |e| e.source())
                .last()
                .map(ToString::to_string)
                .unwrap_or_default();
            anyhow!("{method} {url}: the server did not answer ({root})")
        })?;
        let status = resp.status();
        let text = resp
            .text()
            .await
            .with_context(|| format!("{method} {url}: reading the answer"))?;
        if status == reqwest::StatusCode::UNAUTHORIZED {
            bail!(
                "the server refused the admin token (401 on {method} {path}): pass --admin-token \
                 or set PITBOSS__ADMIN__TOKEN to the server's admin token"
            );
        }
        if !status.is_success() {
            bail!("{method} {path} -> {status}: {text:.300}");
        }
        serde_json::from_str(&text)
            .with_context(|| format!("{method} {path}: the answer is not JSON: {text:.300}"))
    }

    async fn create_table(&self, seats: usize) -> anyhow::Result<String> {
        let view = self
            .call(
                reqwest::Method::POST,
                "/admin/tables",
                Some(json!({
                    "small_blind": SMALL_BLIND,
                    "big_blind": BIG_BLIND,
                    "ante": 0,
                    "seats": seats,
                    "min_buy_in": MIN_BUY_IN,
                    "max_buy_in": MAX_BUY_IN,
                })),
            )
            .await?;
        view["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| anyhow!("POST /admin/tables answered without an id: {view}"))
    }

    async fn grant(&self, player: &str, chips: u64) -> anyhow::Result<()> {
        let path = format!("/admin/players/{player}/grant");
        self.call(
            reqwest::Method::POST,
            &path,
            Some(json!({ "chips": chips })),
        )
        .await
        .map(drop)
    }

    async fn balance(&self, player: &str) -> anyhow::Result<u64> {
        let path = format!("/admin/players/{player}");
        let v = self.call(reqwest::Method::GET, &path, None).await?;
        v["balance"]
            .as_u64()
            .ok_or_else(|| anyhow!("GET {path} answered without a balance: {v}"))
    }

    async fn seats_taken(&self, table: &str) -> anyhow::Result<usize> {
        let path = format!("/admin/tables/{table}");
        let v = self.call(reqwest::Method::GET, &path, None).await?;
        v["seats"]
            .as_array()
            .map(Vec::len)
            .ok_or_else(|| anyhow!("GET {path} answered without seats: {v}"))
    }

    async fn audit(&self) -> anyhow::Result<Value> {
        self.call(reqwest::Method::GET, "/admin/audit", None).await
    }
}

// ---------------------------------------------------------------------------
// Actions
// ---------------------------------------------------------------------------

/// One entry of a turn's `legal` list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Legal {
    Fold,
    Check,
    Call,
    Bet { min: u64, max: u64 },
    Raise { min: u64, max: u64 },
    AllIn,
}

/// `None` when the list is not a list or an entry is malformed; actions
/// this client does not know are skipped (the contract may add some).
fn parse_legal(v: &Value) -> Option<Vec<Legal>> {
    let range = |l: &Value| -> Option<(u64, u64)> {
        let (min, max) = (l["min"].as_u64()?, l["max"].as_u64()?);
        (min <= max).then_some((min, max))
    };
    let mut out = Vec::new();
    for l in v.as_array()? {
        out.push(match l["action"].as_str()? {
            "fold" => Legal::Fold,
            "check" => Legal::Check,
            "call" => Legal::Call,
            "all_in" => Legal::AllIn,
            "bet" => {
                let (min, max) = range(l)?;
                Legal::Bet { min, max }
            }
            "raise" => {
                let (min, max) = range(l)?;
                Legal::Raise { min, max }
            }
            _ => continue,
        });
    }
    Some(out)
}

/// A chosen action: its wire name and, for bet/raise, the "to" amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Choice {
    action: &'static str,
    amount: Option<u64>,
}

/// A random legal action: check/call mostly, bet/raise sometimes (sized
/// towards the minimum, as most real bets are), all-in and fold rarely, and
/// never a fold that could have been a free check.
fn choose(legal: &[Legal], rng: &mut impl Rng) -> Option<Choice> {
    let can_check = legal.contains(&Legal::Check);
    let weight = |l: &Legal| match l {
        Legal::Fold if can_check => 0,
        Legal::Fold => 8,
        Legal::Check | Legal::Call => 50,
        Legal::Bet { .. } | Legal::Raise { .. } => 22,
        Legal::AllIn => 3,
    };
    let total: u32 = legal.iter().map(weight).sum();
    if total == 0 {
        return None;
    }
    let mut pick = rng.gen_range(0..total);
    let chosen = legal.iter().find(|l| {
        let w = weight(l);
        if pick < w {
            true
        } else {
            pick -= w;
            false
        }
    })?;
    let sized = |min: u64, max: u64, rng: &mut dyn rand::RngCore| {
        let f: f64 = rng.gen::<f64>().powi(3);
        (min + ((max - min) as f64 * f).round() as u64).min(max)
    };
    Some(match *chosen {
        Legal::Fold => Choice {
            action: "fold",
            amount: None,
        },
        Legal::Check => Choice {
            action: "check",
            amount: None,
        },
        Legal::Call => Choice {
            action: "call",
            amount: None,
        },
        Legal::AllIn => Choice {
            action: "all_in",
            amount: None,
        },
        Legal::Bet { min, max } => Choice {
            action: "bet",
            amount: Some(sized(min, max, rng)),
        },
        Legal::Raise { min, max } => Choice {
            action: "raise",
            amount: Some(sized(min, max, rng)),
        },
    })
}

/// Whether the `action` event kind `seen` can be the result of our `sent`
/// act (a call, bet or raise of the whole stack is reported as `all_in`).
fn answers(sent: &str, seen: &str) -> bool {
    sent == seen || (seen == "all_in" && matches!(sent, "call" | "bet" | "raise"))
}

// ---------------------------------------------------------------------------
// Turn bookkeeping
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// Nothing heard yet.
    Open,
    /// Our act's `action` event arrived after this long. Provisional: a
    /// time-out's check or fold looks the same, and only a refusal arriving
    /// later tells them apart.
    Answered(Duration),
    /// The clock acted on a turn we left alone.
    TimedOut,
    /// The clock acted although we had sent an act; its refusal is to come.
    ClockFirst,
    /// Our act was refused before the clock's action reached us.
    RefusedFirst(&'static str),
    /// Refused because the clock beat it: a benign race.
    Stale,
    /// The hand was voided (or ended by the others leaving) with our act
    /// unanswered; a refusal may follow.
    Voided,
    /// Settled as a protocol error.
    Failed,
}

#[derive(Debug, Clone)]
struct Turn {
    hand: u64,
    sent: Option<(&'static str, Instant)>,
    outcome: Outcome,
}

/// What the bookkeeping concluded; the caller adds it to the counters.
#[derive(Debug, Default, PartialEq)]
struct Effects {
    timeouts: u64,
    stale: u64,
    latencies: Vec<Duration>,
    errors: Vec<String>,
}

/// One bot's own turns, kept apart from the socket so the rules that tell a
/// clock race from a real protocol error can be tested on their own.
///
/// The server answers an accepted act with an `action` event and a refused
/// one with an `error` frame that names no request. When the action clock
/// fires just before our act arrives, we get the clock's `action` event (a
/// check or fold) *and* a refusal, in either order: the refusal is written
/// as soon as the table handles the act, while events queued for the
/// session meanwhile follow it.
#[derive(Debug, Default)]
struct TurnBook {
    current: Option<Turn>,
    recent: VecDeque<Turn>,
}

impl TurnBook {
    fn turns_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut Turn> {
        self.recent.iter_mut().chain(self.current.iter_mut())
    }

    fn retire(&mut self, turn: Turn, fx: &mut Effects) {
        self.recent.push_back(turn);
        while self.recent.len() > RECENT_TURNS {
            if let Some(old) = self.recent.pop_front() {
                Self::settle(old, fx);
            }
        }
    }

    /// A turn leaving memory: its latency is final now.
    fn settle(turn: Turn, fx: &mut Effects) {
        match turn.outcome {
            Outcome::Answered(d) => fx.latencies.push(d),
            Outcome::RefusedFirst(code) => fx.errors.push(format!(
                "act for hand {} refused with {code}, and no time-out explains it",
                turn.hand
            )),
            _ => {}
        }
    }

    /// A `turn` event for our seat.
    fn open(&mut self, hand: u64) -> Effects {
        let mut fx = Effects::default();
        if let Some(t) = self.current.take() {
            self.retire(t, &mut fx);
        }
        self.current = Some(Turn {
            hand,
            sent: None,
            outcome: Outcome::Open,
        });
        fx
    }

    fn sent(&mut self, action: &'static str, at: Instant) {
        if let Some(t) = self.current.as_mut() {
            t.sent = Some((action, at));
        }
    }

    /// An `action` event for our seat (not a blind or ante). `ours` is false
    /// while leaving, when a fold is our own `leave` and no time-out.
    fn on_action(&mut self, hand: u64, kind: &str, now: Instant, ours: bool) -> Effects {
        let mut fx = Effects::default();
        let Some(t) = self.current.as_mut().filter(|t| t.hand == hand) else {
            return fx;
        };
        t.outcome = match (&t.outcome, t.sent) {
            (Outcome::Open, None) => {
                if ours {
                    fx.timeouts += 1;
                }
                Outcome::TimedOut
            }
            (Outcome::Open, Some((sent, at))) if answers(sent, kind) => {
                Outcome::Answered(now.saturating_duration_since(at))
            }
            (Outcome::Open, Some(_)) => {
                fx.timeouts += 1;
                Outcome::ClockFirst
            }
            (Outcome::RefusedFirst(_), _) => {
                fx.timeouts += 1;
                fx.stale += 1;
                Outcome::Stale
            }
            // A second action on one turn is not something we can place.
            (other, _) => other.clone(),
        };
        fx
    }

    /// An `error` frame while playing. Race codes are matched to the turn
    /// they belong to; any other code is a protocol error.
    fn on_refusal(&mut self, code: &str, message: &str) -> Effects {
        let mut fx = Effects::default();
        let Some(&code) = RACE_CODES.iter().find(|c| **c == code) else {
            fx.errors.push(format!("error {code}: {message}"));
            return fx;
        };
        // 1. The clock's action already came: this is the refusal it implies.
        if let Some(t) = self
            .turns_mut()
            .find(|t| matches!(t.outcome, Outcome::ClockFirst | Outcome::Voided))
        {
            t.outcome = Outcome::Stale;
            fx.stale += 1;
            return fx;
        }
        // 2. An act still unanswered: wait for the clock's action to explain
        //    it (by the end of its hand at the latest).
        if let Some(t) = self
            .turns_mut()
            .find(|t| t.sent.is_some() && t.outcome == Outcome::Open)
        {
            t.outcome = Outcome::RefusedFirst(code);
            return fx;
        }
        // 3. What looked like our check or fold was the clock's.
        if let Some(t) = self.turns_mut().rev().find(|t| {
            matches!(t.outcome, Outcome::Answered(_))
                && matches!(t.sent, Some(("check" | "fold", _)))
        }) {
            t.outcome = Outcome::Stale;
            fx.timeouts += 1;
            fx.stale += 1;
            return fx;
        }
        fx.errors.push(format!(
            "error {code} ({message}) for no act of ours that a time-out could explain"
        ));
        fx
    }

    /// `hand_ended` or `hand_voided` for `hand`. Every event of the hand,
    /// the clock's actions included, precedes it, so an act of that hand
    /// still unexplained now never will be — unless the hand ended by other
    /// means than play: `forgive` when it was voided, or when the run is
    /// winding down and the other bots' `leave`s folded them out of turn,
    /// ending the hand while our act was on its way.
    fn hand_over(&mut self, hand: u64, forgive: bool) -> Effects {
        let mut fx = Effects::default();
        for t in self.turns_mut().filter(|t| t.hand <= hand) {
            match t.outcome {
                Outcome::Open if t.sent.is_some() && forgive => t.outcome = Outcome::Voided,
                Outcome::RefusedFirst(_) if forgive => {
                    t.outcome = Outcome::Stale;
                    fx.stale += 1;
                }
                Outcome::Open if t.sent.is_some() => {
                    fx.errors.push(format!(
                        "act for hand {} got neither an action event nor an error before the hand ended",
                        t.hand
                    ));
                    t.outcome = Outcome::Failed;
                }
                Outcome::RefusedFirst(code) => {
                    fx.errors.push(format!(
                        "act for hand {} refused with {code}, but the action clock had not acted for us",
                        t.hand
                    ));
                    t.outcome = Outcome::Failed;
                }
                _ => {}
            }
        }
        if self.current.as_ref().is_some_and(|t| t.hand <= hand) {
            if let Some(t) = self.current.take() {
                self.retire(t, &mut fx);
            }
        }
        fx
    }

    /// Everything still remembered is final (the bot is done).
    fn finish(&mut self) -> Effects {
        let mut fx = Effects::default();
        if let Some(t) = self.current.take() {
            self.recent.push_back(t);
        }
        for t in self.recent.drain(..) {
            Self::settle(t, &mut fx);
        }
        fx
    }
}

// ---------------------------------------------------------------------------
// Pacing
// ---------------------------------------------------------------------------

/// Client-side token bucket, so a bot never trips the server's per-connection
/// message-rate limit (which answers `rate_limited`, then closes with 1008).
struct Pacer {
    tokens: f64,
    rate: f64,
    last: Instant,
}

impl Pacer {
    fn new(rate: f64) -> Pacer {
        Pacer {
            tokens: rate,
            rate,
            last: Instant::now(),
        }
    }

    fn refill(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + dt * self.rate).min(self.rate);
        self.last = now;
    }

    /// How long until a frame may go out.
    fn wait(&mut self, now: Instant) -> Duration {
        self.refill(now);
        if self.tokens >= 1.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((1.0 - self.tokens) / self.rate)
        }
    }

    fn take(&mut self, now: Instant) {
        self.refill(now);
        self.tokens -= 1.0;
    }
}

// ---------------------------------------------------------------------------
// One bot
// ---------------------------------------------------------------------------

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

#[derive(Debug, Clone)]
struct BotCfg {
    name: String,
    table: String,
    seat: u64,
    /// The lowest seat counts its table's hands, so each is counted once.
    counts_hands: bool,
    buy_in: u64,
    seed: u64,
}

/// Why a bot stopped playing before its time.
#[derive(Debug)]
enum Fatal {
    /// The connection is gone; `retry` says whether a new one may leave the
    /// seat (not after a server shutdown).
    Closed { why: String, retry: bool },
    /// The table froze: nobody leaves it until an operator disposes it.
    Frozen(String),
    /// Anything else; the connection can still be used to leave.
    Stuck(String),
}

impl std::fmt::Display for Fatal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fatal::Closed { why, .. } | Fatal::Stuck(why) => f.write_str(why),
            Fatal::Frozen(why) => write!(f, "table frozen ({why})"),
        }
    }
}

fn closed(why: impl Into<String>) -> Fatal {
    Fatal::Closed {
        why: why.into(),
        retry: true,
    }
}

async fn connect(shared: &Shared, name: &str) -> anyhow::Result<Ws> {
    let token = shared
        .signer
        .mint(name, now_unix())
        .with_context(|| format!("minting a token for {name}"))?;
    // Tokens are base64url and '.', which need no escaping in a query.
    let url = format!("{}/ws?token={token}", shared.ws_base);
    // Nagle's algorithm would hold an act behind the ACK of the previous
    // frame, which the server may delay by up to 40 ms: off, as for any
    // request/response protocol of small frames.
    let connecting = tokio_tungstenite::connect_async_with_config(url, None, true);
    match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
        Err(_) => bail!("{name}: WebSocket connect timed out"),
        Ok(Err(WsError::Http(resp))) if resp.status().as_u16() == 401 => bail!(
            "{name}: the server refused the player token (401): the bots sign tokens with \
             auth.secret from their own config, which must match the server's PITBOSS__AUTH__SECRET"
        ),
        Ok(Err(e)) => Err(anyhow!(e)).with_context(|| format!("{name}: WebSocket connect")),
        Ok(Ok((ws, _))) => Ok(ws),
    }
}

struct Bot {
    shared: Arc<Shared>,
    cfg: BotCfg,
    ws: Ws,
    rng: StdRng,
    pacer: Pacer,
    turns: TurnBook,
    last_seq: u64,
    joined: bool,
    seated: bool,
    sit_pending: bool,
    leave_pending: bool,
    /// The pending leave is a bust: sit again once it is done.
    rebuy: bool,
    stopping: bool,
    done: bool,
    /// What the bot waits for, and until when.
    expect: Option<(Instant, &'static str)>,
    /// The last frames in and out, kept only with `--dump-errors`.
    history: VecDeque<String>,
}

impl Bot {
    fn new(shared: Arc<Shared>, cfg: BotCfg, ws: Ws) -> Bot {
        let rate = shared.opts.max_rate;
        Bot {
            rng: StdRng::seed_from_u64(cfg.seed),
            shared,
            cfg,
            ws,
            pacer: Pacer::new(rate),
            turns: TurnBook::default(),
            last_seq: 0,
            joined: false,
            seated: false,
            sit_pending: false,
            leave_pending: false,
            rebuy: false,
            stopping: false,
            done: false,
            expect: None,
            history: VecDeque::new(),
        }
    }

    fn stats(&self) -> &Stats {
        &self.shared.stats
    }

    fn protocol_error(&self, what: impl std::fmt::Display) {
        self.dump(&what);
        self.shared.stats.protocol_error(&self.cfg.name, what);
    }

    fn apply(&self, fx: Effects) {
        for e in &fx.errors {
            self.dump(e);
        }
        self.shared.stats.apply(&self.cfg.name, fx);
    }

    /// With `--dump-errors`, keeps the frame for [`Bot::dump`].
    fn trace(&mut self, dir: char, text: &str) {
        if self.shared.opts.dump_errors {
            let at = self.shared.start.elapsed().as_secs_f64();
            self.history.push_back(format!("{at:9.3} {dir} {text}"));
            if self.history.len() > DUMP_FRAMES {
                self.history.pop_front();
            }
        }
    }

    /// With `--dump-errors`, prints the frames that led up to an error.
    fn dump(&self, what: &dyn std::fmt::Display) {
        if self.shared.opts.dump_errors {
            let frames: Vec<&str> = self.history.iter().map(String::as_str).collect();
            eprintln!(
                "{}: {what}\n  seat {}; last frames (> sent, < received):\n    {}",
                self.cfg.name,
                self.cfg.seat,
                frames.join("\n    ")
            );
        }
    }

    async fn send(&mut self, frame: Value) -> Result<(), Fatal> {
        let wait = self.pacer.wait(Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        self.pacer.take(Instant::now());
        let text = frame.to_string();
        self.trace('>', &text);
        match tokio::time::timeout(SEND_TIMEOUT, self.ws.send(Message::Text(text))).await {
            Err(_) => Err(closed("sending a frame timed out")),
            Ok(Err(e)) => Err(closed(format!("sending a frame failed: {e}"))),
            Ok(Ok(())) => Ok(()),
        }
    }

    async fn send_sit(&mut self) -> Result<(), Fatal> {
        let frame = json!({"type": "sit", "table": self.cfg.table, "seat": self.cfg.seat, "buy_in": self.cfg.buy_in});
        self.send(frame).await?;
        self.sit_pending = true;
        self.expect = Some((Instant::now() + ACK_TIMEOUT, "its seated event"));
        Ok(())
    }

    async fn send_leave(&mut self) -> Result<(), Fatal> {
        self.send(json!({"type": "leave", "table": self.cfg.table}))
            .await?;
        self.leave_pending = true;
        self.expect = Some((
            Instant::now() + self.shared.leave_timeout(),
            "its left event",
        ));
        Ok(())
    }

    /// Joins, sits and plays until stopped, then leaves.
    async fn play(&mut self, stop: &mut watch::Receiver<bool>) -> Result<(), Fatal> {
        self.send(json!({"type": "join", "table": self.cfg.table}))
            .await?;
        self.expect = Some((Instant::now() + ACK_TIMEOUT, "its snapshot"));
        while !self.done {
            let deadline = self
                .expect
                .map(|(at, _)| at)
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                // A dropped sender means the run is over as well.
                _ = stop.changed(), if !self.stopping => self.begin_stop().await?,
                _ = tokio::time::sleep_until(deadline.into()) => {
                    if let Some((_, what)) = self.expect {
                        return Err(Fatal::Stuck(format!("no {what} in time")));
                    }
                }
                msg = self.ws.next() => self.on_message(msg).await?,
            }
        }
        Ok(())
    }

    async fn begin_stop(&mut self) -> Result<(), Fatal> {
        self.stopping = true;
        if self.seated && !self.leave_pending {
            // Folds us at once if we are live in a hand; the seat empties
            // (and the stack goes back to the wallet) when the hand ends.
            self.send_leave().await?;
        } else if self.leave_pending {
            self.expect = Some((
                Instant::now() + self.shared.leave_timeout(),
                "its left event",
            ));
        } else if !self.sit_pending {
            self.done = true;
        }
        Ok(())
    }

    async fn on_message(&mut self, msg: Option<Result<Message, WsError>>) -> Result<(), Fatal> {
        match msg {
            None => Err(closed("the connection ended without a close frame")),
            Some(Err(e)) => Err(closed(format!("connection error: {e}"))),
            Some(Ok(Message::Text(text))) => {
                self.trace('<', &text);
                self.on_text(&text).await
            }
            Some(Ok(Message::Close(frame))) => {
                let (code, reason) = frame
                    .map(|f| (u16::from(f.code), f.reason.to_string()))
                    .unwrap_or((1005, String::new()));
                if code == 1012 {
                    Err(Fatal::Closed {
                        why: format!("the server is shutting down (close 1012 {reason})"),
                        retry: false,
                    })
                } else {
                    Err(closed(format!(
                        "the server closed the connection ({code} {reason})"
                    )))
                }
            }
            Some(Ok(Message::Binary(_))) => {
                self.protocol_error("malformed frame: binary, not JSON text");
                Ok(())
            }
            // Pings are answered by the WebSocket layer itself.
            Some(Ok(_)) => Ok(()),
        }
    }

    async fn on_text(&mut self, text: &str) -> Result<(), Fatal> {
        let v: Value = match serde_json::from_str(text) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                self.protocol_error(format!("malformed frame: {text:.200}"));
                return Ok(());
            }
        };
        match v["type"].as_str() {
            Some("event") => self.on_event(&v).await,
            Some("snapshot") => self.on_snapshot(&v).await,
            Some("error") => self.on_error(&v),
            Some("frozen") => Err(Fatal::Frozen(v["reason"].as_str().unwrap_or("?").into())),
            Some(_) => Ok(()), // pong, or a frame type added after this client
            None => {
                self.protocol_error(format!("malformed frame without a type: {text:.200}"));
                Ok(())
            }
        }
    }

    async fn on_snapshot(&mut self, v: &Value) -> Result<(), Fatal> {
        if let Some(seq) = v["seq"].as_u64() {
            self.last_seq = self.last_seq.max(seq);
        }
        if self.joined {
            return Ok(());
        }
        self.joined = true;
        self.expect = None;
        if self.stopping {
            self.done = true;
            Ok(())
        } else {
            self.send_sit().await
        }
    }

    fn on_error(&mut self, v: &Value) -> Result<(), Fatal> {
        let code = v["code"].as_str().unwrap_or("?");
        let message = v["message"].as_str().unwrap_or("");
        if !RACE_CODES.contains(&code) {
            // Without a seat this bot cannot play (its table may stall), and
            // a refused leave would leave it waiting for nothing.
            let refused = if !self.joined {
                Some("join")
            } else if self.sit_pending {
                Some("sit")
            } else if self.leave_pending {
                Some("leave")
            } else {
                None
            };
            if let Some(what) = refused {
                return Err(Fatal::Stuck(format!("{what} refused: {code} ({message})")));
            }
        }
        let fx = self.turns.on_refusal(code, message);
        self.apply(fx);
        Ok(())
    }

    async fn on_event(&mut self, v: &Value) -> Result<(), Fatal> {
        let Some(seq) = v["seq"].as_u64() else {
            self.protocol_error(format!("event without a seq: {v}"));
            return Ok(());
        };
        // Events addressed to other seats (their hole cards) use numbers we
        // never see, so only the order is checked, not gaps.
        if seq <= self.last_seq {
            self.protocol_error(format!("event seq {seq} after {}", self.last_seq));
        }
        self.last_seq = self.last_seq.max(seq);
        let me = v["player"].as_str() == Some(self.cfg.name.as_str());
        let my_seat = v["seat"].as_u64() == Some(self.cfg.seat);
        match v["kind"].as_str().unwrap_or("") {
            "seated" if me => {
                self.seated = true;
                self.sit_pending = false;
                self.expect = None;
                if self.stopping {
                    self.send_leave().await?;
                }
            }
            "left" if me => {
                self.seated = false;
                self.leave_pending = false;
                self.expect = None;
                if self.stopping {
                    self.done = true;
                } else if self.rebuy {
                    self.rebuy = false;
                    self.sit_again().await?;
                }
            }
            "turn" if my_seat && self.seated && !self.stopping && !self.leave_pending => {
                self.on_turn(v).await?;
            }
            "action" if my_seat => {
                let kind = v["action"].as_str().unwrap_or("");
                if !matches!(kind, "small_blind" | "big_blind" | "ante") {
                    let hand = v["hand"].as_u64().unwrap_or(0);
                    let ours = !self.stopping;
                    let fx = self.turns.on_action(hand, kind, Instant::now(), ours);
                    self.apply(fx);
                }
            }
            "hand_ended" => self.on_hand_ended(v).await?,
            "hand_voided" => {
                if self.cfg.counts_hands {
                    self.stats().voided.fetch_add(1, Ordering::Relaxed);
                }
                let fx = self
                    .turns
                    .hand_over(v["hand"].as_u64().unwrap_or(u64::MAX), true);
                self.apply(fx);
            }
            _ => {}
        }
        Ok(())
    }

    async fn on_turn(&mut self, v: &Value) -> Result<(), Fatal> {
        let (Some(hand), Some(legal), Some(deadline_ms)) = (
            v["hand"].as_u64(),
            parse_legal(&v["legal"]),
            v["deadline_ms"].as_i64(),
        ) else {
            self.protocol_error(format!("malformed turn: {v}"));
            return Ok(());
        };
        let fx = self.turns.open(hand);
        self.apply(fx);
        let left = self.shared.time_left(deadline_ms, v["timeout_ms"].as_u64());
        if self.rng.gen_bool(self.shared.opts.timeout_rate) {
            self.stats().left_to_clock.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        // An act that lands after the deadline races the clock (and can even
        // be applied to our next turn in the same hand), so a turn that
        // reached us late is left to the clock instead.
        let guard = (self.shared.action_clock() / 4)
            .clamp(Duration::from_millis(20), Duration::from_secs(2));
        let pace = self.pacer.wait(Instant::now());
        if left <= guard + pace {
            self.stats().too_late.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let Some(choice) = choose(&legal, &mut self.rng) else {
            self.protocol_error(format!("turn with nothing to choose from: {v}"));
            return Ok(());
        };
        let mut frame =
            json!({"type": "act", "table": self.cfg.table, "hand": hand, "action": choice.action});
        if let Some(amount) = choice.amount {
            frame["amount"] = json!(amount);
        }
        // Latency runs from the moment the frame is handed to the socket.
        if !pace.is_zero() {
            tokio::time::sleep(pace).await;
        }
        self.turns.sent(choice.action, Instant::now());
        self.send(frame).await?;
        self.stats().acts_sent.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    async fn on_hand_ended(&mut self, v: &Value) -> Result<(), Fatal> {
        let hand = v["hand"].as_u64().unwrap_or(u64::MAX);
        if self.cfg.counts_hands {
            let stats = self.stats();
            stats.hands.fetch_add(1, Ordering::Relaxed);
            let at = u64::try_from(self.shared.start.elapsed().as_millis()).unwrap_or(u64::MAX);
            stats.last_hand_ms.fetch_max(at, Ordering::Relaxed);
        }
        let fx = self.turns.hand_over(hand, self.shared.winding_down());
        self.apply(fx);
        let busted = v["stacks"].as_array().is_some_and(|stacks| {
            stacks.iter().any(|s| {
                s["seat"].as_u64() == Some(self.cfg.seat) && s["stack"].as_u64() == Some(0)
            })
        });
        if busted && self.seated && !self.stopping && !self.leave_pending {
            // A busted seat is never dealt in again; without a rebuy the
            // table would run out of players.
            self.rebuy = true;
            self.send_leave().await?;
        }
        Ok(())
    }

    async fn sit_again(&mut self) -> Result<(), Fatal> {
        if let Err(e) = self
            .shared
            .admin
            .grant(&self.cfg.name, self.cfg.buy_in)
            .await
        {
            return Err(Fatal::Stuck(format!("rebuy grant failed: {e:#}")));
        }
        let stats = self.stats();
        stats.granted.fetch_add(self.cfg.buy_in, Ordering::Relaxed);
        stats.rebuys.fetch_add(1, Ordering::Relaxed);
        self.send_sit().await
    }

    /// Whether the server may still hold a seat for this bot.
    fn may_hold_seat(&self) -> bool {
        self.seated || self.sit_pending || self.leave_pending
    }

    async fn close(&mut self) {
        let frame = CloseFrame {
            code: CloseCode::Normal,
            reason: "bots done".into(),
        };
        let _ = tokio::time::timeout(Duration::from_secs(2), self.ws.close(Some(frame))).await;
    }
}

async fn run_bot(shared: Arc<Shared>, cfg: BotCfg, mut stop: watch::Receiver<bool>) {
    let ws = match connect(&shared, &cfg.name).await {
        Ok(ws) => ws,
        Err(e) => {
            shared.stats.note(format!("{e:#}"));
            shared.stats.fatal.store(true, Ordering::Relaxed);
            return;
        }
    };
    let mut bot = Bot::new(shared.clone(), cfg, ws);
    let result = bot.play(&mut stop).await;
    let fx = bot.turns.finish();
    match result {
        Ok(()) => {
            bot.apply(fx);
            bot.close().await;
        }
        Err(fatal) => {
            // Only latencies: what is unsettled now is the fatal error's echo.
            bot.apply(Effects {
                latencies: fx.latencies,
                ..Effects::default()
            });
            bot.protocol_error(&fatal);
            shared.stats.fatal.store(true, Ordering::Relaxed);
            if bot.may_hold_seat() {
                let name = bot.cfg.name.clone();
                let reuse = match fatal {
                    Fatal::Stuck(_) => Some(bot.ws),
                    Fatal::Closed { retry: true, .. } => None,
                    // Nothing can leave a frozen table or a server going away.
                    Fatal::Frozen(_) | Fatal::Closed { retry: false, .. } => return,
                };
                if let Err(e) = salvage(&shared, &bot.cfg, reuse).await {
                    shared
                        .stats
                        .note(format!("{name}: could not leave its seat: {e:#}"));
                }
            }
        }
    }
}

/// After a failure: (re)join and leave, so the stack goes back to the wallet
/// instead of staying on a table nobody plays at.
async fn salvage(shared: &Shared, cfg: &BotCfg, ws: Option<Ws>) -> anyhow::Result<()> {
    let mut ws = match ws {
        Some(ws) => ws,
        None => connect(shared, &cfg.name).await?,
    };
    let table = &cfg.table;
    let send = |v: Value| Message::Text(v.to_string());
    ws.send(send(json!({"type": "join", "table": table})))
        .await?;
    let deadline = Instant::now() + ACK_TIMEOUT + shared.leave_timeout();
    let mut leave_sent = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let msg = match tokio::time::timeout(left, ws.next()).await {
            Err(_) => bail!("timed out"),
            Ok(None) => bail!("connection ended"),
            Ok(Some(msg)) => msg?,
        };
        let Message::Text(text) = msg else { continue };
        let v: Value = serde_json::from_str(&text)?;
        match v["type"].as_str() {
            Some("snapshot") if !leave_sent => {
                if v["state"]["game"]["you"].is_null() {
                    return Ok(()); // not seated after all
                }
                ws.send(send(json!({"type": "leave", "table": table})))
                    .await?;
                leave_sent = true;
            }
            Some("event") if v["kind"] == "left" && v["player"] == cfg.name.as_str() => {
                let _ = ws.close(None).await;
                return Ok(());
            }
            Some("error") if leave_sent => bail!("leave refused: {}", v["code"]),
            Some("frozen") => bail!("table frozen"),
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopReason {
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

struct Report {
    text: String,
    failures: Vec<String>,
}

fn ws_base(url: &str) -> anyhow::Result<String> {
    url.strip_prefix("http://")
        .map(|rest| format!("ws://{rest}"))
        .ok_or_else(|| anyhow!("--url must start with http://"))
}

async fn run(opts: Options, signer: TokenSigner, admin_token: String) -> anyhow::Result<Report> {
    let mut rng = rand::thread_rng();
    let run_id = format!("{:06x}", rng.gen::<u32>() & 0xff_ffff);
    let seed = opts.seed.unwrap_or_else(|| rng.gen());
    let http = reqwest::Client::builder()
        .timeout(HTTP_TIMEOUT)
        .build()
        .context("building the HTTP client")?;
    let admin = Admin {
        http,
        base: opts.url.clone(),
        token: admin_token,
    };
    // Read-only, so a wrong URL or admin token fails before anything exists.
    admin.audit().await?;

    let seats = opts.players.clamp(2, MAX_SEATS);
    let mut tables = Vec::with_capacity(opts.tables);
    for _ in 0..opts.tables {
        tables.push(admin.create_table(seats).await?);
    }
    let shared = Arc::new(Shared {
        ws_base: ws_base(&opts.url)?,
        opts: opts.clone(),
        admin,
        signer,
        stats: Stats::default(),
        start: Instant::now(),
        clock_offset_ms: AtomicI64::new(i64::MAX),
        action_clock_ms: AtomicU64::new(0),
        winding_down: AtomicBool::new(false),
    });
    let mut bots = Vec::new();
    for (t, table) in tables.iter().enumerate() {
        for p in 0..opts.players {
            let name = format!("bot-{run_id}-{t}-{p}");
            shared.admin.grant(&name, opts.buy_in).await?;
            shared
                .stats
                .granted
                .fetch_add(opts.buy_in, Ordering::Relaxed);
            // Each bot its own stream, all derived from the one seed.
            let mix = ((t as u64) << 16 | p as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            bots.push(BotCfg {
                name,
                table: table.clone(),
                seat: p as u64,
                counts_hands: p == 0,
                buy_in: opts.buy_in,
                seed: seed ^ mix,
            });
        }
    }

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
    shared.winding_down.store(true, Ordering::Relaxed);
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
        for table in &tables {
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
    for b in &bots {
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
        "pitboss bots",
        format!("run {run_id}, seed {seed}, {}", opts.url),
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
    if get(&stats.voided) > 0 {
        line("voided hands", get(&stats.voided).to_string());
    }
    line("latency p50", q(0.50));
    line("latency p99", q(0.99));
    line("latency max", ms(hist.as_ref().map(|h| h.max)));
    line("protocol errors", protocol_errors.to_string());
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
    Ok(Report { text, failures })
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
                "{hands} hands  {:.1}/s  p50 {}  p99 {}  errors {}",
                hands as f64 / elapsed.as_secs_f64().max(0.001),
                q(0.5),
                q(0.99),
                stats.protocol_errors.load(Ordering::Relaxed)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(args: &[&str]) -> Options {
        match Options::parse(args) {
            Ok(Parsed::Run(o)) => o,
            other => panic!("{args:?} -> {other:?}"),
        }
    }

    #[test]
    fn options_have_the_documented_defaults_and_parse_both_forms() {
        let o = opts(&[]);
        assert_eq!(o.url, "http://127.0.0.1:8080");
        assert_eq!((o.tables, o.players, o.buy_in), (1, 4, 200));
        assert_eq!(o.duration, Some(Duration::from_secs(30)));
        let o = opts(&[
            "--url=http://h:1/",
            "--tables",
            "2",
            "--players",
            "3",
            "--hands",
            "30",
            "--seed",
            "7",
            "--no-progress",
        ]);
        assert_eq!(o.url, "http://h:1");
        assert_eq!(
            (o.tables, o.players, o.hands, o.seed),
            (2, 3, Some(30), Some(7))
        );
        assert_eq!(o.duration, None);
        assert!(!o.progress);
        assert!(matches!(Options::parse(&["--help"]), Ok(Parsed::Help)));
    }

    #[test]
    fn bad_options_are_refused_with_the_reason() {
        for args in [
            &["--players", "1"][..],
            &["--players", "11"],
            &["--buy-in", "201"],
            &["--timeout-rate", "2"],
            &["--tables"],
            &["--hands", "x"],
            &["--url", "https://x"],
            &["--frobnicate"],
        ] {
            assert!(Options::parse(args).is_err(), "{args:?} accepted");
        }
    }

    #[test]
    fn histogram_quantiles_are_within_one_percent() {
        let mut h = Histogram::new();
        for us in 1..=100_000u64 {
            h.record(Duration::from_micros(us));
        }
        for (q, want) in [(0.5, 50_000.0), (0.99, 99_000.0), (0.001, 100.0)] {
            let got = h.quantile(q).expect("samples") as f64;
            assert!((got - want).abs() / want < 0.01, "q{q}: {got} vs {want}");
        }
        assert_eq!(h.max, 100_000);
        for v in [0, 1, 127, 128, 255, 256, 1000, 1 << 40, u64::MAX] {
            let (low, width) = Histogram::bucket_range(Histogram::bucket(v));
            assert!(low <= v && v - low < width, "{v} not in [{low}, +{width})");
        }
    }

    #[test]
    fn chosen_actions_are_always_legal() {
        let mut rng = StdRng::seed_from_u64(1);
        let legal = parse_legal(&json!([
            {"action": "fold"},
            {"action": "call", "amount": 4},
            {"action": "raise", "min": 8, "max": 200},
            {"action": "all_in", "amount": 200},
            {"action": "dance"}
        ]))
        .expect("valid");
        assert_eq!(legal.len(), 4);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..5000 {
            let c = choose(&legal, &mut rng).expect("a choice");
            seen.insert(c.action);
            match c.action {
                "raise" => assert!(matches!(c.amount, Some(8..=200))),
                "fold" | "call" | "all_in" => assert_eq!(c.amount, None),
                other => panic!("{other} is not legal here"),
            }
        }
        assert_eq!(seen.len(), 4);
        let check_or_bet =
            parse_legal(&json!([{"action": "fold"}, {"action": "check"}])).expect("valid");
        for _ in 0..100 {
            assert_eq!(
                choose(&check_or_bet, &mut rng).map(|c| c.action),
                Some("check")
            );
        }
        assert!(parse_legal(&json!([{"action": "bet", "min": 9, "max": 3}])).is_none());
    }

    #[test]
    fn an_answered_act_yields_its_latency() {
        let mut book = TurnBook::default();
        let t0 = Instant::now();
        book.open(3);
        book.sent("raise", t0);
        let fx = book.on_action(3, "all_in", t0 + Duration::from_millis(2), true);
        assert_eq!(fx, Effects::default());
        let fx = book.hand_over(3, false);
        assert!(fx.errors.is_empty());
        let fx = book.finish();
        assert_eq!(fx.latencies, vec![Duration::from_millis(2)]);
    }

    #[test]
    fn a_turn_left_alone_counts_one_time_out() {
        let mut book = TurnBook::default();
        book.open(1);
        let fx = book.on_action(1, "fold", Instant::now(), true);
        assert_eq!(fx.timeouts, 1);
        assert_eq!(book.finish(), Effects::default());
    }

    #[test]
    fn refusal_after_the_clocks_action_is_stale_in_either_order() {
        let now = Instant::now();
        // The clock's fold arrives first, then the refusal of our call.
        let mut book = TurnBook::default();
        book.open(5);
        book.sent("call", now);
        assert_eq!(book.on_action(5, "fold", now, true).timeouts, 1);
        let fx = book.on_refusal("not_your_turn", "");
        assert_eq!((fx.stale, fx.errors.len()), (1, 0));
        // The refusal arrives first; the clock's check explains it.
        let mut book = TurnBook::default();
        book.open(5);
        book.sent("bet", now);
        assert_eq!(book.on_refusal("not_your_turn", ""), Effects::default());
        let fx = book.on_action(5, "check", now, true);
        assert_eq!((fx.timeouts, fx.stale), (1, 1));
        assert!(book.hand_over(5, false).errors.is_empty());
        // Our check "answered" by the clock's check: the late stale_hand
        // refusal shows it was the clock's, and no latency is kept.
        let mut book = TurnBook::default();
        book.open(6);
        book.sent("check", now);
        book.on_action(6, "check", now, true);
        book.hand_over(6, false);
        let fx = book.on_refusal("stale_hand", "");
        assert_eq!((fx.timeouts, fx.stale), (1, 1));
        assert!(book.finish().latencies.is_empty());
    }

    #[test]
    fn an_act_overtaken_by_a_void_or_the_wind_down_is_forgiven() {
        let now = Instant::now();
        // The others' leaves end the hand; our act's refusal comes after.
        let mut book = TurnBook::default();
        book.open(9);
        book.sent("call", now);
        assert_eq!(book.hand_over(9, true), Effects::default());
        let fx = book.on_refusal("no_hand_in_progress", "");
        assert_eq!((fx.stale, fx.errors.len()), (1, 0));
        // ... or before it (the session writes a refusal ahead of the
        // events queued while it waited for the table).
        book.open(10);
        book.sent("raise", now);
        assert_eq!(book.on_refusal("stale_hand", ""), Effects::default());
        let fx = book.hand_over(10, true);
        assert_eq!((fx.stale, fx.errors.len()), (1, 0));
        assert_eq!(book.finish(), Effects::default());
    }

    #[test]
    fn refusals_no_time_out_explains_are_protocol_errors() {
        let now = Instant::now();
        let mut book = TurnBook::default();
        assert_eq!(book.on_refusal("illegal_action", "no").errors.len(), 1);
        assert_eq!(book.on_refusal("not_your_turn", "").errors.len(), 1);
        // Refused, and the hand ends without the clock acting for us.
        book.open(2);
        book.sent("call", now);
        book.on_refusal("not_your_turn", "");
        assert_eq!(book.hand_over(2, false).errors.len(), 1);
        // An act that got nothing at all by the end of its hand.
        book.open(3);
        book.sent("call", now);
        assert_eq!(book.hand_over(3, false).errors.len(), 1);
        // A raise answered by a check is the clock's, and needs a refusal.
        book.open(4);
        book.sent("raise", now);
        book.on_action(4, "check", now, true);
        book.hand_over(4, false);
        assert_eq!(
            book.on_refusal("bad_amount", "").errors.len(),
            1,
            "only race codes are benign"
        );
    }

    #[test]
    fn time_left_discounts_a_late_delivery_whatever_the_clock_offset() {
        let best = AtomicI64::new(i64::MAX);
        // The server's wall clock runs 5 s ahead of ours.
        let turn = |now: i64, late_ms: i64| {
            let sent = now + 5000 - late_ms;
            turn_time_left(&best, now, sent + 300, Some(300))
        };
        assert_eq!(turn(1_000_000, 0), Duration::from_millis(300));
        assert_eq!(turn(1_000_500, 200), Duration::from_millis(100));
        assert_eq!(turn(1_001_000, 900), Duration::ZERO);
        assert_eq!(turn(1_002_000, 0), Duration::from_millis(300));
        // Without timeout_ms the wall clocks are all there is.
        assert_eq!(
            turn_time_left(&best, 1000, 1250, None),
            Duration::from_millis(250)
        );
    }
}
