//! One bot: a player WebSocket that joins, sits, answers its turns, rebuys
//! when it busts, and leaves its seat when the run stops.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
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

use crate::actions::{choose, parse_legal, Pacer};
use crate::shared::Shared;
use crate::stats::Stats;
use crate::turns::{Effects, TurnBook, RACE_CODES};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a join may wait for its snapshot and a sit for its `seated`.
const ACK_TIMEOUT: Duration = Duration::from_secs(15);
/// Frames each bot remembers for `--dump-errors`.
const DUMP_FRAMES: usize = 40;

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

async fn connect(shared: &Shared, cfg: &BotCfg) -> anyhow::Result<Ws> {
    let name = &cfg.name;
    // Tokens are base64url and '.', which need no escaping in a query.
    let url = format!("{}/ws?token={}", shared.ws_base, cfg.token);
    // Nagle's algorithm would hold an act behind the ACK of the previous
    // frame, which the server may delay by up to 40 ms: off, as for any
    // request/response protocol of small frames.
    let connecting = tokio_tungstenite::connect_async_with_config(url, None, true);
    match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
        Err(_) => bail!("{name}: WebSocket connect timed out"),
        Ok(Err(WsError::Http(resp))) if resp.status().as_u16() == 401 => bail!(
            "{name}: the server refused the player token it minted (401): every instance \
             behind --url must share one PITBOSS__AUTH__SECRET"
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
        let Some(choice) = choose(&legal, &mut self.rng) else {
            self.protocol_error(format!("turn with nothing to choose from: {v}"));
            return Ok(());
        };
        let mut frame = json!({
            "type": "act", "table": self.cfg.table, "hand": hand,
            "decision": v["decision"], "action": choice.action
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

pub async fn run_bot(shared: Arc<Shared>, cfg: BotCfg, mut stop: watch::Receiver<bool>) {
    let ws = match connect(&shared, &cfg).await {
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
        None => connect(shared, cfg).await?,
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
