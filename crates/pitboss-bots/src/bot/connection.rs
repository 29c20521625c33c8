//! A bot's connection: opening it, sending frames on it, getting it back
//! (through the next URL, backing off) when it is lost, closing it, and the
//! salvage that leaves the seat after a failure.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use crate::endpoints::{Backoff, GIVE_UP_AFTER};
use crate::shared::Shared;

use super::{lost, Bot, BotCfg, Fatal, Ws, ACK_TIMEOUT};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

const SEND_TIMEOUT: Duration = Duration::from_secs(10);

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

impl Bot {
    pub(super) async fn send(&mut self, frame: Value) -> Result<(), Fatal> {
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

    /// Plays until stopped and its seat is left, getting its connection
    /// back whenever it is lost.
    pub(super) async fn run(&mut self, stop: &mut watch::Receiver<bool>) -> Result<(), Fatal> {
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

    pub(super) async fn close(&mut self) {
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

/// After a failure: (re)join and leave, so the stack goes back to the wallet
/// instead of staying on a table nobody plays at.
pub(super) async fn salvage(
    shared: &Shared,
    cfg: &BotCfg,
    url: usize,
    ws: Option<Ws>,
) -> anyhow::Result<()> {
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
