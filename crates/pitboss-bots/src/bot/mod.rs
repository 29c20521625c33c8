//! One bot: a player WebSocket that joins, sits, answers its turns, rebuys
//! when it busts, and leaves its seat when the run stops.
//!
//! Instances come and go under a bot. When its connection ends (its
//! instance drains or crashes) it connects again, trying the next URL when
//! one does not answer, and joins with the last `seq` it saw. When its
//! table changes owner while the connection stays, the new hosting's
//! snapshot arrives unasked. Either way a snapshot is the truth the bot
//! re-syncs to: where its seat is, whether its sit or leave landed, and
//! whether it is its turn.
//!
//! This file holds a bot's settings and state, what it counts and traces,
//! and the task that runs it. Beside it:
//!
//! - `connection`: connecting, sending frames, getting a lost connection
//!   back, and the salvage of a seat after a failure.
//! - `play`: waiting for the next frame or deadline, and answering events
//!   and turns.
//! - `seat`: the join, sit and leave requests, the rebuy, and what their
//!   refusals mean.
//! - `resync`: the snapshots a bot re-syncs to.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::SeedableRng;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::actions::Pacer;
use crate::endpoints::Backoff;
use crate::shared::Shared;
use crate::stats::Stats;
use crate::turns::{Effects, TurnBook};

mod connection;
mod play;
mod resync;
mod seat;

use connection::salvage;

/// How long a join may wait for its snapshot and a sit for its `seated`.
const ACK_TIMEOUT: Duration = Duration::from_secs(15);

/// Frames each bot remembers for `--dump-errors`.
const DUMP_FRAMES: usize = 40;

const SNAPSHOT: &str = "its snapshot";

const SEATED: &str = "its seated event";

const LEFT: &str = "its left event";

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

#[derive(Clone)]
pub struct BotCfg {
    pub name: String,
    /// The player token the server minted for `name`.
    pub token: String,
    pub table: String,
    pub seat: u64,
    /// The lowest seat counts its table's hands, so each is counted once.
    pub counts_hands: bool,
    pub buy_in: u64,
    pub seed: u64,
    /// The URL (an index into the run's `--url`s) it connects through first.
    pub url: usize,
}

/// Why a bot stopped playing, or paused to get its connection back.
#[derive(Debug)]
enum Fatal {
    /// The connection is gone; a new one picks up where this one left off.
    /// `leaving`: the instance said it is going away, so try another first.
    Lost { why: String, leaving: bool },
    /// No connection could be had within the bound.
    Unreachable(String),
    /// The server closed the connection for a reason of its own; a new
    /// connection can still leave the seat.
    Closed(String),
    /// The table froze: nobody leaves it until an operator disposes it.
    Frozen(String),
    /// Anything else; the connection can still be used to leave.
    Stuck(String),
}

impl std::fmt::Display for Fatal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fatal::Lost { why, .. }
            | Fatal::Unreachable(why)
            | Fatal::Closed(why)
            | Fatal::Stuck(why) => f.write_str(why),
            Fatal::Frozen(why) => write!(f, "table frozen ({why})"),
        }
    }
}

fn lost(why: impl Into<String>) -> Fatal {
    Fatal::Lost {
        why: why.into(),
        leaving: false,
    }
}

/// Why the sit on its way was sent, which decides what its refusals mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SitKind {
    /// Chips just granted for it: any refusal is an error.
    Granted,
    /// Sent again after an owner change or a reconnect, or from the wallet
    /// after the seat was stood up, which may hold less than hoped
    /// (`insufficient_funds`).
    Again,
}

struct Bot {
    shared: Arc<Shared>,
    cfg: BotCfg,
    ws: Option<Ws>,
    /// The URL it is connected through (or trying next).
    url: usize,
    rng: StdRng,
    pacer: Pacer,
    /// Seated at least once (the run's steady play waits for every bot).
    ever_seated: bool,
    turns: TurnBook,
    last_seq: u64,
    /// The highest `seq` told on this connection.
    conn_seq: Option<u64>,
    /// A snapshot has come: from now on `last_seq` can resume a join.
    synced: bool,
    /// A join went out that neither a snapshot nor an event has answered.
    join_pending: bool,
    seated: bool,
    /// A sit on its way: its buy-in, and why it was sent.
    sit: Option<(u64, SitKind)>,
    /// Has sent a sit before: a later one is bought from the wallet.
    has_sat: bool,
    leave_pending: bool,
    /// Answers that may still come to requests already settled, which are
    /// no errors: `already_seated` or `seat_taken` to a sit sent again
    /// while the earlier one landed; `not_seated` to a leave sent again
    /// after the earlier one emptied the seat, or to an act of a seat stood
    /// up meanwhile.
    echo_sits: u32,
    echo_not_seated: u32,
    /// The sit or leave on its way went unanswered once already, and a
    /// join asked for a snapshot.
    asked_snapshot: bool,
    /// The pending leave is a bust: sit again once it is done.
    rebuy: bool,
    /// Could not sit again for want of chips; watches the rest of the run.
    benched: bool,
    /// The table said `paused` and has not resumed: nobody may act.
    paused: bool,
    stopping: bool,
    done: bool,
    /// What the bot waits for, and until when.
    expect: Option<(Instant, &'static str)>,
    /// When to send a refused join, sit or leave again.
    retry_at: Option<Instant>,
    /// When the last frame (or our last join) was: a table in play is
    /// never silent for long (blinds alone keep hands coming).
    heard_at: Instant,
    /// Set while getting a connection back, until the new one delivers a
    /// frame: a connection that keeps dropping at once still gives up.
    backoff: Option<Backoff>,
    /// The last frames in and out, kept only with `--dump-errors`.
    history: VecDeque<String>,
    /// The hand in progress as this bot was told it (its own cards, the
    /// board), checked against a later snapshot of the same hand.
    told: Option<resync::HandTold>,
}

impl Bot {
    fn new(shared: Arc<Shared>, cfg: BotCfg) -> Bot {
        let rate = shared.opts.max_rate;
        Bot {
            rng: StdRng::seed_from_u64(cfg.seed),
            url: cfg.url,
            shared,
            cfg,
            ws: None,
            pacer: Pacer::new(rate),
            turns: TurnBook::default(),
            last_seq: 0,
            conn_seq: None,
            synced: false,
            join_pending: false,
            seated: false,
            sit: None,
            has_sat: false,
            leave_pending: false,
            echo_sits: 0,
            echo_not_seated: 0,
            asked_snapshot: false,
            told: None,
            rebuy: false,
            benched: false,
            paused: false,
            stopping: false,
            done: false,
            expect: None,
            retry_at: None,
            heard_at: Instant::now(),
            ever_seated: false,
            backoff: None,
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

    /// `seq` strictly increases per table on a connection (and across the
    /// connections of one bot): a frame that breaks it is a protocol error
    /// counted on its own too.
    fn out_of_order(&self, what: impl std::fmt::Display) {
        self.shared
            .stats
            .out_of_order
            .fetch_add(1, Ordering::Relaxed);
        self.protocol_error(what);
    }

    fn mark_seated(&mut self) {
        self.seated = true;
        if !self.ever_seated {
            self.ever_seated = true;
            self.shared.stats.seated_once();
        }
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
                "{}: {what}\n  seat {}, via {}; last frames (> sent, < received, ! connection):\n    {}",
                self.cfg.name,
                self.cfg.seat,
                self.shared.urls.http(self.url),
                frames.join("\n    ")
            );
        }
    }

    /// Whether the server may still hold a seat for this bot.
    fn may_hold_seat(&self) -> bool {
        self.seated || self.sit.is_some() || self.leave_pending
    }
}

pub async fn run_bot(shared: Arc<Shared>, cfg: BotCfg, mut stop: watch::Receiver<bool>) {
    let mut bot = Bot::new(shared.clone(), cfg);
    let result = bot.run(&mut stop).await;
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
            shared.stats.fatal.store(true, Ordering::Relaxed);
            let name = bot.cfg.name.clone();
            let reuse = match fatal {
                // No instance answers: neither can a salvage.
                Fatal::Unreachable(why) => {
                    shared.stats.note(format!("{name}: {why}"));
                    return;
                }
                Fatal::Stuck(_) => {
                    bot.protocol_error(&fatal);
                    bot.ws.take()
                }
                Fatal::Closed(_) | Fatal::Lost { .. } => {
                    bot.protocol_error(&fatal);
                    None
                }
                // Nothing can leave a frozen table.
                Fatal::Frozen(_) => {
                    bot.protocol_error(&fatal);
                    return;
                }
            };
            if bot.may_hold_seat() {
                if let Err(e) = salvage(&shared, &bot.cfg, bot.url, reuse).await {
                    shared
                        .stats
                        .note(format!("{name}: could not leave its seat: {e:#}"));
                }
            }
        }
    }
}
