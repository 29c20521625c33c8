//! A bot's play: the wait for the next frame, deadline, retry or silence,
//! the frames that come in, and the events and turns it answers.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::StreamExt;
use rand::Rng;
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use crate::actions::{choose, parse_legal, Legal};

use super::{lost, Bot, Fatal, SitKind, Ws, ACK_TIMEOUT, LEFT, SNAPSHOT};

async fn next_message(ws: Option<&mut Ws>) -> Option<Result<Message, WsError>> {
    match ws {
        Some(ws) => ws.next().await,
        None => std::future::pending().await,
    }
}

impl Bot {
    /// Waits for the next thing to happen and handles it.
    pub(super) async fn step(&mut self, stop: &mut watch::Receiver<bool>) -> Result<(), Fatal> {
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
    pub(super) fn heard(&mut self) {
        self.join_pending = false;
        self.backoff = None;
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
            "hand_started" | "hole_cards" | "street" => self.note_told(v),
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
    pub(super) async fn answer(
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
}
