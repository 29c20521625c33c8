//! A bot's requests for its seat: the join, sit and leave it sends, the
//! rebuy after a bust, and what the server's refusals of them mean.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::options::MIN_BUY_IN;
use crate::turns::RACE_CODES;

use super::{Bot, Fatal, SitKind, ACK_TIMEOUT, LEFT, SEATED, SNAPSHOT};

/// How long a rejoin may wait for its snapshot. A table whose owner crashed
/// is found again only once the owner's lease has lapsed; meanwhile the
/// join gets no answer. The server searches for up to its drain timeout +
/// 3 lease TTLs + 5 s (80 s by default) before it answers `unavailable`.
const REJOIN_TIMEOUT: Duration = Duration::from_secs(90);

/// How soon a join, sit or leave refused with `unavailable` goes out again
/// when no snapshot has settled it first (a transient write failure is
/// followed by none).
const RETRY_AFTER: Duration = Duration::from_millis(500);

/// Refusals that did nothing and may be tried again: the table's owner is
/// changing, the table is paused, or it is draining off its instance.
const OWNER_CHANGE_CODES: [&str; 2] = ["unavailable", "draining"];

impl Bot {
    /// Joins the table. On a new connection (`resume`) with `since`, when
    /// the events after the last one seen can say all that was missed.
    pub(super) async fn send_join(&mut self, resume: bool) -> Result<(), Fatal> {
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
    pub(super) async fn send_sit(&mut self, chips: u64, kind: SitKind) -> Result<(), Fatal> {
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
    pub(super) async fn send_leave(&mut self) -> Result<(), Fatal> {
        if self.leave_pending {
            self.echo_not_seated += 1;
        }
        self.leave_pending = true;
        self.expect = Some((Instant::now() + self.shared.leave_timeout(), LEFT));
        self.send(json!({"type": "leave", "table": self.cfg.table}))
            .await
    }

    /// Our leave is done: the seat is empty and its stack in the wallet.
    pub(super) async fn leave_done(&mut self) -> Result<(), Fatal> {
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
    pub(super) async fn sit_from_wallet(&mut self, known: u64) -> Result<(), Fatal> {
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

    pub(super) async fn on_error(&mut self, v: &Value) -> Result<(), Fatal> {
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
}
