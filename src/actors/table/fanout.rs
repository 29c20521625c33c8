//! Fan-out: who watches the table, what each may see, the kept history a
//! reconnecting client catches up from, and snapshots. A watcher that
//! stops reading is the transport's to measure ([`Watcher`]); the table
//! drops the subscription of one its transport says is too slow.

use std::sync::Arc;

use actix::prelude::*;
use tracing::warn;

use super::{Phase, Table};
use crate::game::{Audience, Event, EventKind, PlayerId, SeatNo};
use crate::instruments;
use crate::protocol::{ClientError, ServerFrame, SnapshotState, TurnClock};
use crate::types::{ErrorCode, Fence, TableId};

pub type SessionId = u64;

/// One watcher's end of a table: where the table sends its frames and
/// notices. The transport behind it (a WebSocket session, a relay)
/// implements it and decides, from what it has queued but not yet
/// written, whether a frame is taken or the watcher lags too far behind:
/// the table counts no bytes.
pub trait Watcher: Send + Sync + 'static {
    /// Queues `frame` unless the watcher is gone or lags too far behind.
    fn offer(&self, frame: &Arc<str>) -> Delivery;
    /// A notice the watcher gets whatever its lag: the subscription ends
    /// with it.
    fn notify(&self, notice: Outbound);
    /// Whether anyone is still at the other end.
    fn connected(&self) -> bool;
}

/// What a table pushes to one session.
#[derive(Message, Clone, Debug)]
#[rtype(result = "()")]
pub enum Outbound {
    /// A ready JSON text frame.
    Frame(Arc<str>),
    /// The table dropped this session's subscription (frozen, evicted).
    Unsubscribed(TableId),
    /// The table finished draining; the session closes once it has no
    /// table left.
    Released(TableId),
    /// Another instance hosts the table now (a move, or this copy stopped
    /// because a newer owner took it): the session follows it there.
    Moved(TableId),
}

/// How a stopping table parts with its watchers.
pub(super) enum Dismissal {
    /// A last frame (`frozen`, `released`), then the subscription ends.
    Notice(Arc<str>),
    /// Drained at shutdown: sessions close once they have no table left.
    Released,
    /// Hosted elsewhere now: sessions follow it.
    Moved,
}

pub(super) struct Subscriber {
    pub player: PlayerId,
    pub watcher: Arc<dyn Watcher>,
}

/// What became of a frame offered to one watcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    Queued,
    /// The session lags more than the cap behind; nothing was queued.
    TooSlow,
    /// The session's actor has stopped (its connection ended, perhaps
    /// before it learned it had joined).
    Gone,
}

impl Subscriber {
    fn send(&self, frame: &Arc<str>) -> Delivery {
        self.watcher.offer(frame)
    }
}

/// An event as sent, kept so a reconnecting client can catch up.
pub(super) struct Sent {
    seq: u64,
    /// `None`: everyone at the table may see it.
    only: Option<PlayerId>,
    frame: Arc<str>,
}

/// Each hosting of a table numbers its events from its own epoch, derived
/// from the fence: `seq` keeps increasing across redeploys and recoveries,
/// so a `since` from an earlier hosting is never mistaken for a recent one
/// (it falls before the kept history and gets a snapshot).
pub(super) fn seq_epoch(fence: Fence) -> u64 {
    // 2^31 hostings of one table are far beyond any real life; the clamp
    // only keeps the arithmetic from overflowing.
    fence.0.min((1 << 31) - 1) << 32
}

impl Table {
    fn player_at(&self, seat: SeatNo) -> Option<PlayerId> {
        self.game
            .seats()
            .into_iter()
            .find(|s| s.seat == seat)
            .map(|s| s.player)
    }

    fn send_to(&mut self, only: Option<&PlayerId>, frame: &Arc<str>) {
        let mut undelivered = Vec::new();
        for (id, sub) in &self.subscribers {
            if only.is_none_or(|p| *p == sub.player) {
                match sub.send(frame) {
                    Delivery::Queued => {}
                    other => undelivered.push((*id, other)),
                }
            }
        }
        for (id, delivery) in undelivered {
            let Some(sub) = self.drop_subscriber(id) else {
                continue;
            };
            if delivery == Delivery::TooSlow {
                metrics::counter!(instruments::WS_SLOW_CLIENTS_DROPPED).increment(1);
                warn!(player = %sub.player.0, "client too slow to read; no longer sending to it");
                sub.watcher.notify(Outbound::Unsubscribed(self.id.clone()));
            }
        }
    }

    /// Forgets a session; a seated player left with no connection starts
    /// the reconnect window.
    pub(super) fn drop_subscriber(&mut self, session: SessionId) -> Option<Subscriber> {
        let gone = self.subscribers.remove(&session)?;
        let still_here = self.subscribers.values().any(|s| s.player == gone.player);
        if !still_here && self.game.seat_of(&gone.player).is_some() {
            self.mark_absent(gone.player.clone());
        }
        Some(gone)
    }

    /// Numbers, records and sends the game's events, each to whom may see it.
    pub(super) fn broadcast(&mut self, events: Vec<Event>) {
        let history_cap = self.rt.settings.table.history_events;
        for ev in events {
            let only = match ev.to {
                Audience::All => None,
                Audience::Seat(seat) => match self.player_at(seat) {
                    Some(p) => Some(p),
                    // Nobody may see an event addressed to an empty seat.
                    None => continue,
                },
            };
            self.seq = self.seq.saturating_add(1);
            let clock = matches!(ev.kind, EventKind::Turn { .. }).then(|| {
                let timeout = self.rt.action_timeout();
                let clock = TurnClock {
                    deadline_ms: chrono::Utc::now()
                        .timestamp_millis()
                        .saturating_add(i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX)),
                    timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                };
                self.action_deadline_ms = Some(clock.deadline_ms);
                clock
            });
            let frame = ServerFrame::Event {
                table: &self.id,
                seq: self.seq,
                event: &ev.kind,
                clock,
            }
            .to_shared();
            self.send_to(only.as_ref(), &frame);
            self.history.push_back(Sent {
                seq: self.seq,
                only,
                frame,
            });
            while self.history.len() > history_cap {
                self.history.pop_front();
            }
        }
    }

    fn snapshot_frame(&self, viewer: &PlayerId) -> Arc<str> {
        ServerFrame::Snapshot {
            table: &self.id,
            seq: self.seq,
            state: SnapshotState {
                table: &self.id,
                state: self.phase.state(),
                fence: self.fence,
                owner: self.rt.instance_id(),
                game_kind: crate::games::holdem::KIND,
                config: self.game.config(),
                action_deadline_ms: self.action_deadline_ms,
                game: self.game.view_for(Some(viewer)),
            },
        }
        .to_shared()
    }

    /// Subscribes a session: it gets the events after `since` that are still
    /// kept, else a snapshot. Refused when the session cannot take even that
    /// much without passing its backlog cap.
    pub(super) fn subscribe(
        &mut self,
        session: SessionId,
        sub: Subscriber,
        since: Option<u64>,
    ) -> Result<(), ClientError> {
        if !sub.watcher.connected() {
            // The session ended while its join was on the way.
            return Err(ClientError::new(
                ErrorCode::Unavailable,
                "the connection is gone",
            ));
        }
        // A session subscribed already has been sent every event so far (a
        // client's second join, or its join crossing the server's own
        // search for this table): a resume sends only what comes next, so
        // no event reaches the connection twice or out of order.
        let since = match since {
            Some(n) if self.subscribers.contains_key(&session) => Some(n.max(self.seq)),
            other => other,
        };
        let oldest = self.history.front().map_or(self.seq + 1, |s| s.seq);
        let replay = since.filter(|&n| n <= self.seq && n + 1 >= oldest);
        let sent_all = match replay {
            Some(since) => self
                .history
                .iter()
                .filter(|s| s.seq > since && s.only.as_ref().is_none_or(|p| *p == sub.player))
                .all(|s| sub.send(&s.frame) == Delivery::Queued),
            None => sub.send(&self.snapshot_frame(&sub.player)) == Delivery::Queued,
        };
        if !sent_all {
            metrics::counter!(instruments::WS_SLOW_CLIENTS_DROPPED).increment(1);
            return Err(ClientError::new(
                ErrorCode::TooSlow,
                "the connection is not reading",
            ));
        }
        if let Phase::Paused(reason) = self.phase {
            // A watcher who joins a paused table learns it at once.
            let paused = ServerFrame::Paused {
                table: &self.id,
                reason,
            }
            .to_shared();
            let _ = sub.send(&paused);
        }
        self.absent.remove(&sub.player);
        self.subscribers.insert(session, sub);
        Ok(())
    }

    /// Sends a notice that is not a game event (not numbered, not kept) to
    /// every watcher.
    pub(super) fn notify_all(&mut self, frame: &Arc<str>) {
        self.send_to(None, frame);
    }

    /// Sends every watcher a fresh snapshot of the table as they may see it.
    pub(super) fn send_snapshots(&mut self) {
        let mut too_slow = Vec::new();
        for (id, sub) in &self.subscribers {
            if sub.send(&self.snapshot_frame(&sub.player)) != Delivery::Queued {
                too_slow.push(*id);
            }
        }
        for id in too_slow {
            if let Some(sub) = self.drop_subscriber(id) {
                metrics::counter!(instruments::WS_SLOW_CLIENTS_DROPPED).increment(1);
                sub.watcher.notify(Outbound::Unsubscribed(self.id.clone()));
            }
        }
    }

    /// Tells every watcher the table stopped here and forgets them.
    pub(super) fn dismiss_all(&mut self, how: &Dismissal) {
        for sub in self.subscribers.values() {
            match how {
                Dismissal::Notice(frame) => {
                    sub.watcher.notify(Outbound::Frame(frame.clone()));
                    sub.watcher.notify(Outbound::Unsubscribed(self.id.clone()));
                }
                Dismissal::Released => sub.watcher.notify(Outbound::Released(self.id.clone())),
                Dismissal::Moved => sub.watcher.notify(Outbound::Moved(self.id.clone())),
            }
        }
        self.subscribers.clear();
    }
}
