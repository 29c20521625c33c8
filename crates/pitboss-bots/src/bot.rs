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

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use futures::{SinkExt, StreamExt};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::actions::{choose, parse_legal, Legal, Pacer};
use crate::endpoints::{Backoff, GIVE_UP_AFTER};
use crate::options::MIN_BUY_IN;
use crate::shared::Shared;
use crate::stats::Stats;
use crate::turns::{Effects, TurnBook, RACE_CODES};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a join may wait for its snapshot and a sit for its `seated`.
const ACK_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a rejoin may wait for its snapshot. A table whose owner crashed
/// is found again only once the owner's lease has lapsed; meanwhile the
/// join gets no answer. The server searches for up to its drain timeout +
/// 3 lease TTLs + 5 s (80 s by default) before it answers `unavailable`.
const REJOIN_TIMEOUT: Duration = Duration::from_secs(90);
/// How soon a join, sit or leave refused with `unavailable` goes out again
/// when no snapshot has settled it first (a transient write failure is
/// followed by none).
const RETRY_AFTER: Duration = Duration::from_millis(500);
/// Frames each bot remembers for `--dump-errors`.
const DUMP_FRAMES: usize = 40;
const SNAPSHOT: &str = "its snapshot";
const SEATED: &str = "its seated event";
const LEFT: &str = "its left event";

/// Refusals that did nothing and may be tried again: the table's owner is
/// changing, the table is paused, or it is draining off its instance.
const OWNER_CHANGE_CODES: [&str; 2] = ["unavailable", "draining"];

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

enum ConnectError {
    /// The server refused the player token: no other attempt will do better.
    Refused(anyhow::Error),
    Failed(anyhow::Error),
}

impl From<ConnectError> for anyhow::Error {
    fn from(e: ConnectError) -> anyhow::Error {
        match e {
            ConnectError::Refused(e) | ConnectError::Failed(e) => e,
        }
    }
}

async fn connect(shared: &Shared, cfg: &BotCfg, url: usize) -> Result<Ws, ConnectError> {
    // Tokens are base64url and '.', which need no escaping in a query.
    let base = shared.urls.ws(url);
    let target = format!("{base}/ws?token={}", cfg.token);
    // Nagle's algorithm would hold an act behind the ACK of the previous
    // frame, which the server may delay by up to 40 ms: off, as for any
    // request/response protocol of small frames.
    let connecting = tokio_tungstenite::connect_async_with_config(target, None, true);
    match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
        Err(_) => Err(ConnectError::Failed(anyhow!(
            "WebSocket connect to {base} timed out"
        ))),
        Ok(Err(WsError::Http(resp))) if resp.status().as_u16() == 401 => {
            Err(ConnectError::Refused(anyhow!(
                "the server refused the player token it minted (401 from {base}): every \
                 instance behind --url must share one PITBOSS__AUTH__SECRET"
            )))
        }
        Ok(Err(e)) => Err(ConnectError::Failed(
            anyhow!(e).context(format!("WebSocket connect to {base}")),
        )),
        Ok(Ok((ws, _))) => Ok(ws),
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

/// The turn a snapshot shows open for the viewer's seat.
#[derive(Debug, PartialEq)]
struct SnapshotTurn {
    hand: u64,
    decision: u64,
    legal: Vec<Legal>,
}

/// Whether a snapshot's game shows `seat` with no chips between hands.
fn busted_in(game: &Value, seat: u64) -> bool {
    game["hand_in_progress"] == false
        && game["seats"].as_array().is_some_and(|seats| {
            seats
                .iter()
                .any(|s| s["seat"].as_u64() == Some(seat) && s["stack"].as_u64() == Some(0))
        })
}

/// Our turn as a snapshot carries it (`state.game`): our seat is `you` and
/// `to_act`, and `decision` and `legal` are set (they are only for the
/// viewer whose turn it is).
fn snapshot_turn(game: &Value, seat: u64) -> Option<SnapshotTurn> {
    if game["you"].as_u64() != Some(seat)
        || game["to_act"].as_u64() != Some(seat)
        || game["hand_in_progress"] != Value::Bool(true)
    {
        return None;
    }
    Some(SnapshotTurn {
        hand: game["hand"].as_u64()?,
        decision: game["decision"].as_u64()?,
        legal: parse_legal(&game["legal"]).filter(|l| !l.is_empty())?,
    })
}

async fn next_message(ws: Option<&mut Ws>) -> Option<Result<Message, WsError>> {
    match ws {
        Some(ws) => ws.next().await,
        None => std::future::pending().await,
    }
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

    async fn send(&mut self, frame: Value) -> Result<(), Fatal> {
        let wait = self.pacer.wait(Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        self.pacer.take(Instant::now());
        let text = frame.to_string();
        self.trace('>', &text);
        let Some(ws) = self.ws.as_mut() else {
            return Err(lost("no connection to send on"));
        };
        match tokio::time::timeout(SEND_TIMEOUT, ws.send(Message::Text(text))).await {
            Err(_) => Err(lost("sending a frame timed out")),
            Ok(Err(e)) => Err(lost(format!("sending a frame failed: {e}"))),
            Ok(Ok(())) => Ok(()),
        }
    }

    /// Joins the table. On a new connection (`resume`) with `since`, when
    /// the events after the last one seen can say all that was missed.
    async fn send_join(&mut self, resume: bool) -> Result<(), Fatal> {
        // With a sit or leave unanswered only a snapshot will do: replayed
        // events cannot tell one lost with the old connection from one
        // still on its way. On the same connection, too: a join that
        // crosses the server's own search for the table's new owner would
        // have the same events replayed twice.
        let since = (resume && self.synced && self.sit.is_none() && !self.leave_pending)
            .then_some(self.last_seq);
        let mut frame = json!({"type": "join", "table": self.cfg.table});
        if let Some(seq) = since {
            frame["since"] = json!(seq);
        } else {
            let wait = if self.synced {
                REJOIN_TIMEOUT
            } else {
                ACK_TIMEOUT
            };
            self.expect = Some((Instant::now() + wait, SNAPSHOT));
        }
        self.join_pending = true;
        // The silence is counted from the join: the table answers it.
        self.heard_at = Instant::now();
        self.send(frame).await
    }

    /// Marks the sit pending before sending it, so a connection lost on
    /// the way leaves the intent for the re-sync to finish.
    async fn send_sit(&mut self, chips: u64, kind: SitKind) -> Result<(), Fatal> {
        if self.sit.is_some() {
            self.echo_sits += 1;
        }
        self.sit = Some((chips, kind));
        self.has_sat = true;
        self.expect = Some((Instant::now() + ACK_TIMEOUT, SEATED));
        let frame =
            json!({"type": "sit", "table": self.cfg.table, "seat": self.cfg.seat, "buy_in": chips});
        self.send(frame).await
    }

    /// A leave may go out any number of times: the rules ignore a second
    /// one from a seat already leaving.
    async fn send_leave(&mut self) -> Result<(), Fatal> {
        if self.leave_pending {
            self.echo_not_seated += 1;
        }
        self.leave_pending = true;
        self.expect = Some((Instant::now() + self.shared.leave_timeout(), LEFT));
        self.send(json!({"type": "leave", "table": self.cfg.table}))
            .await
    }

    /// Plays until stopped and its seat is left, getting its connection
    /// back whenever it is lost.
    async fn run(&mut self, stop: &mut watch::Receiver<bool>) -> Result<(), Fatal> {
        let mut step = self.start().await;
        loop {
            match step {
                Ok(()) if self.done => return Ok(()),
                Ok(()) => step = self.step(stop).await,
                Err(Fatal::Lost { why, leaving }) => {
                    if self.stopping && !self.may_hold_seat() {
                        self.done = true;
                        return Ok(());
                    }
                    step = self.reconnect(&why, leaving).await;
                }
                // `--keep-going`: a bot that cannot carry on on this
                // connection counts the error and starts over on a new one,
                // so one bot's trouble does not end everybody's play.
                Err(fatal)
                    if self.shared.opts.keep_going
                        && !self.stopping
                        && !matches!(fatal, Fatal::Frozen(_)) =>
                {
                    self.protocol_error(format!("{fatal}; connecting again (--keep-going)"));
                    self.backoff = None;
                    step = self.reconnect(&fatal.to_string(), true).await;
                }
                Err(fatal) => return Err(fatal),
            }
        }
    }

    async fn start(&mut self) -> Result<(), Fatal> {
        match connect(&self.shared, &self.cfg, self.url).await {
            Ok(ws) => self.ws = Some(ws),
            Err(ConnectError::Refused(e)) => return Err(Fatal::Unreachable(format!("{e:#}"))),
            // An instance may be restarting: try the others.
            Err(ConnectError::Failed(e)) => {
                self.connect_with_backoff(&format!("{e:#}"), true).await?;
            }
        }
        self.send_join(false).await
    }

    /// A new connection after the last one was lost, then a join that
    /// resumes from the last `seq` seen (or asks for a snapshot).
    async fn reconnect(&mut self, why: &str, leaving: bool) -> Result<(), Fatal> {
        self.trace('!', &format!("connection lost: {why}"));
        self.ws = None;
        self.conn_seq = None;
        // Whatever was on its way is answered in the replay, or settled by
        // the snapshot, or never.
        self.turns.interrupt();
        self.join_pending = false;
        self.paused = false;
        self.retry_at = None;
        self.connect_with_backoff(why, leaving).await?;
        self.stats().reconnects.fetch_add(1, Ordering::Relaxed);
        let url = self.shared.urls.http(self.url).to_string();
        self.trace('!', &format!("connected again through {url}"));
        self.send_join(true).await
    }

    /// Tries the bot's URL, then the next ones, backing off, until a
    /// connection opens or the bound since the loss has passed.
    async fn connect_with_backoff(&mut self, why: &str, rotate_first: bool) -> Result<(), Fatal> {
        if rotate_first {
            self.url = self.shared.urls.next(self.url);
        }
        let mut backoff = self
            .backoff
            .take()
            .unwrap_or_else(|| Backoff::new(Instant::now()));
        let mut last = None;
        let result = loop {
            let Some(wait) = backoff.next_wait(Instant::now()) else {
                let last = last.map_or_else(String::new, |e| format!("; last attempt: {e:#}"));
                break Err(Fatal::Unreachable(format!(
                    "{why}, and no new connection within {}s{last}",
                    GIVE_UP_AFTER.as_secs()
                )));
            };
            tokio::time::sleep(wait).await;
            match connect(&self.shared, &self.cfg, self.url).await {
                Ok(ws) => {
                    self.ws = Some(ws);
                    break Ok(());
                }
                Err(ConnectError::Refused(e)) => break Err(Fatal::Unreachable(format!("{e:#}"))),
                Err(ConnectError::Failed(e)) => {
                    last = Some(e);
                    self.url = self.shared.urls.next(self.url);
                }
            }
        };
        self.backoff = Some(backoff);
        result
    }

    /// Waits for the next thing to happen and handles it.
    async fn step(&mut self, stop: &mut watch::Receiver<bool>) -> Result<(), Fatal> {
        let far = Instant::now() + Duration::from_secs(3600);
        let deadline = self.expect.map_or(far, |(at, _)| at);
        let retry = self.retry_at;
        // Seated, or on the way to a seat (a leave before a rebuy, a sit):
        // either way the table has things to say.
        let watch_silence = !self.stopping && !self.benched && self.ws.is_some();
        let silent_at = self.heard_at + self.shared.silence_limit();
        tokio::select! {
            // A dropped sender means the run is over as well.
            _ = stop.changed(), if !self.stopping => self.begin_stop().await,
            _ = tokio::time::sleep_until(deadline.into()) => self.on_expect_passed().await,
            _ = tokio::time::sleep_until(retry.unwrap_or(far).into()), if retry.is_some() => {
                self.retry().await
            }
            _ = tokio::time::sleep_until(silent_at.into()), if watch_silence => {
                self.on_silence().await
            }
            msg = next_message(self.ws.as_mut()) => self.on_message(msg).await,
        }
    }

    /// Playing, and nothing heard from the table for a long while: whatever
    /// was lost on the way (a subscription dropped unannounced, a frame
    /// that never came), a join asks for the table's state. Counted as a
    /// protocol error, with the frames before it under `--dump-errors`.
    async fn on_silence(&mut self) -> Result<(), Fatal> {
        self.protocol_error(format!(
            "nothing heard from the table for {}s (seated {}, sit pending {}, leave pending {}, paused {}); joining again",
            self.shared.silence_limit().as_secs(),
            self.seated,
            self.sit.is_some(),
            self.leave_pending,
            self.paused,
        ));
        self.turns.interrupt();
        self.send_join(false).await
    }

    async fn on_expect_passed(&mut self) -> Result<(), Fatal> {
        let Some((_, what)) = self.expect else {
            return Ok(());
        };
        if self.paused {
            // Nothing moves at a paused table; the run's stall check bounds
            // a pause that never ends.
            self.expect = Some((Instant::now() + ACK_TIMEOUT, what));
            return Ok(());
        }
        if what != SNAPSHOT && !self.asked_snapshot {
            // A sit or leave that reached an owner just before it crashed
            // is never answered, and the new hosting's snapshot comes
            // unasked only once the old lease has lapsed. A join asks for
            // it; a second silence is an error.
            self.asked_snapshot = true;
            self.trace('!', &format!("no {what} in time; joining again"));
            return self.send_join(false).await;
        }
        Err(Fatal::Stuck(format!("no {what} in time")))
    }

    async fn retry(&mut self) -> Result<(), Fatal> {
        self.retry_at = None;
        if self.join_pending {
            self.send_join(false).await
        } else if let Some((chips, _)) = self.sit {
            self.send_sit(chips, SitKind::Again).await
        } else if self.leave_pending {
            self.send_leave().await
        } else {
            Ok(())
        }
    }

    async fn begin_stop(&mut self) -> Result<(), Fatal> {
        self.stopping = true;
        if self.leave_pending {
            self.expect = Some((Instant::now() + self.shared.leave_timeout(), LEFT));
        } else if self.seated {
            // Folds us at once if we are live in a hand; the seat empties
            // (and the stack goes back to the wallet) when the hand ends.
            self.send_leave().await?;
        } else if self.sit.is_none() {
            self.done = true;
        }
        Ok(())
    }

    async fn on_message(&mut self, msg: Option<Result<Message, WsError>>) -> Result<(), Fatal> {
        match msg {
            None => Err(lost("the connection ended without a close frame")),
            Some(Err(e)) => Err(lost(format!("connection error: {e}"))),
            Some(Ok(Message::Text(text))) => {
                self.heard_at = Instant::now();
                self.trace('<', &text);
                self.on_text(&text).await
            }
            Some(Ok(Message::Close(frame))) => {
                let (code, reason) = frame
                    .map(|f| (u16::from(f.code), f.reason.to_string()))
                    .unwrap_or((1005, String::new()));
                match code {
                    // The instance is going away (a drain, a restart):
                    // another one serves the table as well.
                    1001 | 1012 => Err(Fatal::Lost {
                        why: format!("the server is going away (close {code} {reason})"),
                        leaving: true,
                    }),
                    _ => Err(Fatal::Closed(format!(
                        "the server closed the connection ({code} {reason})"
                    ))),
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
            Some("error") => self.on_error(&v).await,
            Some("frozen") => Err(Fatal::Frozen(v["reason"].as_str().unwrap_or("?").into())),
            Some("paused") => {
                self.paused = true;
                Ok(())
            }
            // A snapshot follows.
            Some("resumed") => {
                self.paused = false;
                Ok(())
            }
            // Nobody sat at the table for a while and it was let go; a join
            // hosts it again.
            Some("released") if !self.join_pending => self.send_join(false).await,
            Some(_) => Ok(()), // pong, or a frame type added after this client
            None => {
                self.protocol_error(format!("malformed frame without a type: {text:.200}"));
                Ok(())
            }
        }
    }

    /// The connection delivers: joined, and the back-off is over.
    fn heard(&mut self) {
        self.join_pending = false;
        self.backoff = None;
    }

    /// Every snapshot but the first re-syncs the bot: the table's new
    /// hosting after a drain, crash or move, a rejoin, or the table's state
    /// after a pause.
    async fn on_snapshot(&mut self, v: &Value) -> Result<(), Fatal> {
        let Some(seq) = v["seq"].as_u64() else {
            self.protocol_error(format!("snapshot without a seq: {v:.300}"));
            return Ok(());
        };
        if self.synced {
            self.stats().resyncs.fetch_add(1, Ordering::Relaxed);
        }
        self.synced = true;
        // A snapshot shows the table as of its `seq`: never older than
        // what this connection was told (a new hosting numbers from a
        // higher epoch). Across connections a stale copy may still answer
        // a join before the fence check stops it.
        if let Some(told) = self.conn_seq.filter(|&told| seq < told) {
            self.out_of_order(format!("snapshot seq {seq} after {told}"));
        }
        self.conn_seq = Some(self.conn_seq.map_or(seq, |c| c.max(seq)));
        // The new baseline: events go on from here.
        self.last_seq = seq;
        self.heard();
        // If the table is still paused, `paused` follows the snapshot.
        self.paused = false;
        self.retry_at = None;
        if matches!(self.expect, Some((_, SNAPSHOT))) {
            self.expect = None;
        }
        let game = &v["state"]["game"];
        let pending = snapshot_turn(game, self.cfg.seat);
        let unanswered = self.turns.unanswered();
        let (fx, in_flight) = self
            .turns
            .rebase(pending.as_ref().map(|t| (t.hand, t.decision)));
        self.apply(fx);
        match game["you"].as_u64() {
            Some(seat) if seat == self.cfg.seat => {
                self.mark_seated();
                if self.sit.take().is_some() {
                    self.expect = None;
                    self.asked_snapshot = false;
                }
                if self.leave_pending || self.stopping {
                    return self.send_leave().await;
                }
                if busted_in(game, self.cfg.seat) {
                    // Busted in a hand whose end this connection never saw
                    // (told by an owner that went away right after): the
                    // seat is never dealt in again, so rebuy as usual.
                    self.rebuy = true;
                    return self.send_leave().await;
                }
                if let Some(turn) = pending.filter(|_| !in_flight) {
                    let left = self
                        .shared
                        .snapshot_time_left(v["state"]["action_deadline_ms"].as_i64());
                    let decision = json!(turn.decision);
                    self.answer(turn.hand, turn.decision, decision, &turn.legal, left)
                        .await?;
                }
                Ok(())
            }
            Some(seat) => {
                self.protocol_error(format!(
                    "snapshot seats us at {seat}, not {}",
                    self.cfg.seat
                ));
                Ok(())
            }
            None => {
                if self.seated {
                    // Stood up meanwhile: see `echo_not_seated`.
                    self.echo_not_seated += unanswered;
                }
                self.resync_unseated().await
            }
        }
    }

    /// A snapshot shows no seat for us. By then the table has written any
    /// cash-out: it answers a join only between writes, and a new hosting
    /// starts from what was written.
    async fn resync_unseated(&mut self) -> Result<(), Fatal> {
        let believed_seated = std::mem::replace(&mut self.seated, false);
        if self.leave_pending {
            return self.leave_done().await;
        }
        if let Some((chips, _)) = self.sit {
            // Lost on the way, refused while the owner changed, or still on
            // its way. Should the first one land after all, this one is
            // refused (see `echo_sits`); no sit is ever paid for twice.
            return self.send_sit(chips, SitKind::Again).await;
        }
        if self.stopping {
            self.done = true;
            return Ok(());
        }
        if self.benched {
            return Ok(());
        }
        if believed_seated || self.has_sat {
            // Stood up while away (the reconnect window passed).
            return self.sit_from_wallet(0).await;
        }
        self.send_sit(self.cfg.buy_in, SitKind::Granted).await
    }

    /// Our leave is done: the seat is empty and its stack in the wallet.
    async fn leave_done(&mut self) -> Result<(), Fatal> {
        self.seated = false;
        self.leave_pending = false;
        self.expect = None;
        self.asked_snapshot = false;
        if self.stopping {
            self.done = true;
        } else if self.rebuy {
            self.rebuy = false;
            self.sit_again().await?;
        }
        Ok(())
    }

    async fn on_error(&mut self, v: &Value) -> Result<(), Fatal> {
        let code = v["code"].as_str().unwrap_or("?");
        let message = v["message"].as_str().unwrap_or("");
        if code == "draining" && self.join_pending {
            // The instance this connection reached is going away.
            return Err(Fatal::Lost {
                why: "the join was refused: the instance is draining".into(),
                leaving: true,
            });
        }
        if OWNER_CHANGE_CODES.contains(&code) {
            // Not done, and not an error: an act outstanding is answered
            // again once the turn comes back (or the clock acts); a join,
            // sit or leave goes out again after the next snapshot.
            self.turns.interrupt();
            if v["subscription_ended"] == true {
                // The server stopped looking for the table's new owner and
                // dropped the subscription: join again in a while.
                self.trace('!', "subscription ended; joining again");
                self.join_pending = true;
            }
            if self.join_pending || self.sit.is_some() || self.leave_pending {
                self.retry_at = Some(Instant::now() + RETRY_AFTER);
            }
            return Ok(());
        }
        if code == "not_joined" || (code == "table_frozen" && !self.join_pending) {
            // This connection no longer reaches the table: a frame raced
            // the table leaving its instance, or the search for its new
            // owner gave up. A table that really froze says so with a
            // `frozen` frame first, and refuses the join.
            self.turns.interrupt();
            if self.join_pending {
                return Ok(());
            }
            return self.send_join(false).await;
        }
        match code {
            // The rules name the seat first: our own seat, taken by the
            // earlier sit, is `seat_taken` to the later one.
            "already_seated" | "seat_taken" if self.echo_sits > 0 => {
                self.echo_sits -= 1;
                if self.sit.take().is_some() {
                    self.mark_seated();
                    self.expect = None;
                    self.asked_snapshot = false;
                    if self.stopping && !self.leave_pending {
                        self.send_leave().await?;
                    }
                }
                return Ok(());
            }
            "not_seated" if self.echo_not_seated > 0 => {
                self.echo_not_seated -= 1;
                if self.leave_pending {
                    return self.leave_done().await;
                }
                return Ok(());
            }
            "insufficient_funds" if matches!(self.sit, Some((_, SitKind::Again))) => {
                // Nothing extra is granted: the wallet holds what the table
                // paid out, and the audit must show exactly that.
                self.sit = None;
                self.expect = None;
                self.benched = true;
                self.done = self.stopping;
                let name = &self.cfg.name;
                self.stats().note(format!(
                    "{name}: sitting down again was refused ({message}); it sits out the rest of the run"
                ));
                return Ok(());
            }
            _ => {}
        }
        if !RACE_CODES.contains(&code) {
            // Without a seat this bot cannot play (its table may stall), and
            // a refused leave would leave it waiting for nothing.
            let refused = if self.join_pending {
                Some("join")
            } else if self.sit.is_some() {
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
        self.heard();
        // Events addressed to other seats (their hole cards) use numbers we
        // never see, so only the order is checked, not gaps.
        if seq <= self.last_seq {
            self.out_of_order(format!("event seq {seq} after {}", self.last_seq));
        }
        self.last_seq = self.last_seq.max(seq);
        self.conn_seq = Some(self.conn_seq.map_or(seq, |c| c.max(seq)));
        let me = v["player"].as_str() == Some(self.cfg.name.as_str());
        let my_seat = v["seat"].as_u64() == Some(self.cfg.seat);
        match v["kind"].as_str().unwrap_or("") {
            "seated" if me => {
                self.mark_seated();
                self.sit = None;
                self.expect = None;
                self.asked_snapshot = false;
                if self.stopping && !self.leave_pending {
                    self.send_leave().await?;
                }
            }
            // Unless a snapshot already showed the seat empty.
            "left" if me && (self.seated || self.leave_pending) => {
                if self.leave_pending {
                    self.leave_done().await?;
                } else {
                    // Stood up: the reconnect window passed while away. An
                    // act answering a turn replayed meanwhile finds no seat.
                    self.echo_not_seated += self.turns.unanswered();
                    self.turns.interrupt();
                    self.seated = false;
                    if self.stopping {
                        self.done = true;
                    } else {
                        let stack = v["stack"].as_u64().unwrap_or(0);
                        self.sit_from_wallet(stack).await?;
                    }
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
        let (Some(hand), Some(decision), Some(legal), Some(deadline_ms)) = (
            v["hand"].as_u64(),
            v["decision"].as_u64(),
            parse_legal(&v["legal"]),
            v["deadline_ms"].as_i64(),
        ) else {
            self.protocol_error(format!("malformed turn: {v}"));
            return Ok(());
        };
        let left = self.shared.time_left(deadline_ms, v["timeout_ms"].as_u64());
        if self.turns.in_flight(hand, decision) {
            // The same decision announced again (after a pause, with a
            // fresh clock) while our act for it is on its way: one answer
            // per decision, or the second is refused as stale.
            return Ok(());
        }
        self.answer(hand, decision, v["decision"].clone(), &legal, left)
            .await
    }

    /// Answers our turn, from a `turn` event or a snapshot, with `left` of
    /// its action clock to go.
    async fn answer(
        &mut self,
        hand: u64,
        decision: u64,
        decision_field: Value,
        legal: &[Legal],
        left: Duration,
    ) -> Result<(), Fatal> {
        let fx = self.turns.open(hand, decision);
        self.apply(fx);
        if self.rng.gen_bool(self.shared.opts.timeout_rate) {
            self.stats().left_to_clock.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        // An act that lands after the deadline races the clock (and is
        // refused as `stale_decision`), so a turn that reached us late is
        // left to the clock instead.
        let guard = (self.shared.action_clock() / 4)
            .clamp(Duration::from_millis(20), Duration::from_secs(2));
        let pace = self.pacer.wait(Instant::now());
        if left <= guard + pace {
            self.stats().too_late.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let Some(choice) = choose(legal, &mut self.rng) else {
            self.protocol_error(format!(
                "turn with nothing to choose from: hand {hand}, {legal:?}"
            ));
            return Ok(());
        };
        let mut frame = json!({
            "type": "act", "table": self.cfg.table, "hand": hand,
            "decision": decision_field, "action": choice.action
        });
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
        if let Some(log) = &self.shared.results {
            log.record(&self.cfg.name, v);
        }
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
        self.send_sit(self.cfg.buy_in, SitKind::Granted).await
    }

    /// Sits down again after the seat was stood up, with what the wallet
    /// holds (up to the usual buy-in) and no new grant. `known` is the stack
    /// the `left` event named: the table may not have written it to the
    /// wallet yet when we read it, but does before it handles our sit.
    async fn sit_from_wallet(&mut self, known: u64) -> Result<(), Fatal> {
        let balance = self
            .shared
            .admin
            .balance(&self.cfg.name)
            .await
            .map_err(|e| Fatal::Stuck(format!("reading its wallet to sit again failed: {e:#}")))?;
        let chips = balance.max(known).min(self.cfg.buy_in);
        if chips < MIN_BUY_IN {
            self.benched = true;
            let name = &self.cfg.name;
            self.stats().note(format!(
                "{name}: stood up with {chips} chips, less than the minimum buy-in; it sits out the rest of the run"
            ));
            return Ok(());
        }
        self.send_sit(chips, SitKind::Again).await
    }

    /// Whether the server may still hold a seat for this bot.
    fn may_hold_seat(&self) -> bool {
        self.seated || self.sit.is_some() || self.leave_pending
    }

    async fn close(&mut self) {
        let Some(ws) = self.ws.as_mut() else {
            return;
        };
        let frame = CloseFrame {
            code: CloseCode::Normal,
            reason: "bots done".into(),
        };
        let _ = tokio::time::timeout(Duration::from_secs(2), ws.close(Some(frame))).await;
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

/// After a failure: (re)join and leave, so the stack goes back to the wallet
/// instead of staying on a table nobody plays at.
async fn salvage(shared: &Shared, cfg: &BotCfg, url: usize, ws: Option<Ws>) -> anyhow::Result<()> {
    let mut ws = match ws {
        Some(ws) => ws,
        None => connect(shared, cfg, url).await?,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `state.game` as the server shapes it (`GameView`), for the viewer in
    /// seat 1.
    fn game(to_act: Option<u64>, decision: Option<u64>, legal: Value) -> Value {
        json!({
            "hand": 12, "hand_in_progress": true, "button": 0, "street": "flop",
            "board": [], "pots": [], "to_act": to_act, "legal": legal,
            "decision": decision, "you": 1, "seats": []
        })
    }

    #[test]
    fn a_snapshot_taken_during_our_turn_carries_it() {
        let legal = json!([{"action": "fold"}, {"action": "call", "amount": 4}]);
        assert_eq!(
            snapshot_turn(&game(Some(1), Some(7), legal.clone()), 1),
            Some(SnapshotTurn {
                hand: 12,
                decision: 7,
                legal: vec![Legal::Fold, Legal::Call],
            })
        );
        // Another seat's turn, another viewer, or no decision: not ours.
        assert_eq!(snapshot_turn(&game(Some(0), None, json!([])), 1), None);
        assert_eq!(
            snapshot_turn(&game(Some(1), Some(7), legal.clone()), 2),
            None
        );
        assert_eq!(snapshot_turn(&game(Some(1), None, legal), 1), None);
        let mut between_hands = game(None, None, json!([]));
        between_hands["hand_in_progress"] = json!(false);
        assert_eq!(snapshot_turn(&between_hands, 1), None);
    }

    #[test]
    fn a_snapshot_between_hands_with_our_stack_at_zero_means_busted() {
        let game = |in_progress: bool, stack: u64| {
            json!({"hand_in_progress": in_progress, "seats": [
                {"seat": 0, "stack": stack}, {"seat": 1, "stack": 400}
            ]})
        };
        assert!(busted_in(&game(false, 0), 0));
        assert!(!busted_in(&game(false, 1), 0));
        assert!(!busted_in(&game(false, 0), 1));
        // All-in during a hand: not busted yet.
        assert!(!busted_in(&game(true, 0), 0));
    }
}
