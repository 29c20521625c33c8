//! Fan-out: who watches the table, what each may see, the kept history a
//! reconnecting client catches up from, and snapshots. [`Fanout`] is the
//! plain part (watchers, numbering, history, replay), tested without an
//! actor; the table builds the frames and decides what a dropped watcher
//! means for its seat. A watcher that stops reading is the transport's to
//! measure ([`Watcher`]); the fan-out drops the subscription of one its
//! transport says is too slow.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use actix::prelude::*;
use tracing::warn;

use super::error::TableError;
use super::play::Events;
use super::replay::{History, Retold};
use super::Table;
use crate::chips::PlayerId;
use crate::games::{Audience, Game, Role};
use crate::instruments;
use crate::protocol::{EventFrame, ServerFrame, SnapshotFrame, SnapshotState, TurnClock};
use crate::types::{Fence, TableId};

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

/// A table's watchers and what it told them: its numbered events, the
/// kept history a reconnecting client catches up from, and who may see
/// each. Plain data the table drives; no actor, no clock.
pub(super) struct Fanout {
    table: TableId,
    subscribers: HashMap<SessionId, Subscriber>,
    seq: u64,
    /// This hosting's first `seq` (before its first event).
    epoch: u64,
    /// The last `seq` of an earlier hosting's events kept in `history`
    /// (what the journal rebuilt), if any: a `since` of that hosting up to
    /// it is answered from the history; a later one (an event the journal
    /// does not keep) gets a snapshot.
    earlier_until: Option<u64>,
    history: VecDeque<Sent>,
    history_cap: usize,
}

/// A watcher the fan-out let go of because a frame did not reach it.
pub(super) struct Dropped {
    pub sub: Subscriber,
    /// It lags too far behind (it was told its subscription ended); else
    /// its connection is gone.
    pub too_slow: bool,
}

/// Why a subscription was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// The connection ended while its join was on the way.
    Gone,
    /// It cannot take even the replay or the snapshot within its cap.
    TooSlow,
}

impl Fanout {
    /// A hosting under `fence` numbers its events from the fence's epoch.
    pub fn new(table: TableId, fence: Fence, history_cap: usize) -> Fanout {
        Fanout {
            table,
            subscribers: HashMap::new(),
            seq: seq_epoch(fence),
            epoch: seq_epoch(fence),
            earlier_until: None,
            history: VecDeque::new(),
            history_cap,
        }
    }

    /// The `seq` of the last event sent (the epoch before the first).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Whether any session of `player` still watches.
    pub fn is_watching(&self, player: &PlayerId) -> bool {
        self.subscribers.values().any(|s| s.player == *player)
    }

    /// Every watching session and its player.
    pub fn watchers(&self) -> impl Iterator<Item = (SessionId, &PlayerId)> {
        self.subscribers.iter().map(|(id, s)| (*id, &s.player))
    }

    pub fn remove(&mut self, session: SessionId) -> Option<Subscriber> {
        self.subscribers.remove(&session)
    }

    /// Sends `frame` to every watcher, or to `only`'s sessions; lets go of
    /// those it did not reach, telling a too slow one its subscription
    /// ended.
    pub fn send(&mut self, only: Option<&PlayerId>, frame: &Arc<str>) -> Vec<Dropped> {
        let undelivered: Vec<(SessionId, Delivery)> = self
            .subscribers
            .iter()
            .filter(|(_, sub)| only.is_none_or(|p| *p == sub.player))
            .map(|(id, sub)| (*id, sub.send(frame)))
            .filter(|(_, d)| *d != Delivery::Queued)
            .collect();
        self.let_go(undelivered)
    }

    /// Sends each session its own frame (a snapshot as its player may see
    /// the table); lets go of those it did not reach.
    pub fn send_each(&mut self, frames: Vec<(SessionId, Arc<str>)>) -> Vec<Dropped> {
        let undelivered: Vec<(SessionId, Delivery)> = frames
            .into_iter()
            .filter_map(|(id, frame)| {
                let d = self.subscribers.get(&id)?.send(&frame);
                (d != Delivery::Queued).then_some((id, d))
            })
            .collect();
        self.let_go(undelivered)
    }

    fn let_go(&mut self, undelivered: Vec<(SessionId, Delivery)>) -> Vec<Dropped> {
        let mut dropped = Vec::with_capacity(undelivered.len());
        for (id, delivery) in undelivered {
            let Some(sub) = self.subscribers.remove(&id) else {
                continue;
            };
            let too_slow = delivery == Delivery::TooSlow;
            if too_slow {
                sub.watcher
                    .notify(Outbound::Unsubscribed(self.table.clone()));
            }
            dropped.push(Dropped { sub, too_slow });
        }
        dropped
    }

    /// Numbers the next event, sends the frame `build` makes for that
    /// number to every watcher (or to `only`'s sessions) and keeps it for
    /// replay, up to the history cap.
    pub fn publish(
        &mut self,
        only: Option<PlayerId>,
        build: impl FnOnce(u64) -> Arc<str>,
    ) -> Vec<Dropped> {
        self.seq = self.seq.saturating_add(1);
        let frame = build(self.seq);
        let dropped = self.send(only.as_ref(), &frame);
        self.history.push_back(Sent {
            seq: self.seq,
            only,
            frame,
        });
        self.trim_history();
        dropped
    }

    /// Forgets the oldest events beyond the history cap.
    fn trim_history(&mut self) {
        while self.history.len() > self.history_cap {
            self.history.pop_front();
        }
    }

    /// Keeps what an earlier hosting told of the hand in progress (as the
    /// journal rebuilt it, in `seq` order and without a gap) ahead of this
    /// hosting's events, before any is sent.
    pub fn keep_earlier(&mut self, earlier: Vec<Sent>) {
        let Some(last) = earlier.last().map(|s| s.seq) else {
            return;
        };
        if last >= self.epoch || !self.history.is_empty() {
            return;
        }
        self.earlier_until = Some(last);
        self.history.extend(earlier);
        self.trim_history();
    }

    /// Subscribes `session`: it gets the events after `since` that are
    /// still kept, else `snapshot`; then `paused` if the table is paused.
    pub fn subscribe(
        &mut self,
        session: SessionId,
        sub: Subscriber,
        since: Option<u64>,
        snapshot: &Arc<str>,
        paused: Option<&Arc<str>>,
    ) -> Result<(), Refused> {
        if !sub.watcher.connected() {
            return Err(Refused::Gone);
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
        let known = |n: u64| n >= self.epoch || self.earlier_until.is_some_and(|last| n <= last);
        let replay = since.filter(|&n| n <= self.seq && n + 1 >= oldest && known(n));
        let sent_all = match replay {
            Some(since) => self
                .history
                .iter()
                .filter(|s| s.seq > since && s.only.as_ref().is_none_or(|p| *p == sub.player))
                .all(|s| sub.send(&s.frame) == Delivery::Queued),
            None => sub.send(snapshot) == Delivery::Queued,
        };
        if !sent_all {
            return Err(Refused::TooSlow);
        }
        if let Some(paused) = paused {
            // A watcher who joins a paused table learns it at once.
            let _ = sub.send(paused);
        }
        self.subscribers.insert(session, sub);
        Ok(())
    }

    /// Tells every watcher the table stopped here and forgets them.
    pub fn dismiss_all(&mut self, how: &Dismissal) {
        for sub in self.subscribers.values() {
            match how {
                Dismissal::Notice(frame) => {
                    sub.watcher.notify(Outbound::Frame(frame.clone()));
                    sub.watcher
                        .notify(Outbound::Unsubscribed(self.table.clone()));
                }
                Dismissal::Released => sub.watcher.notify(Outbound::Released(self.table.clone())),
                Dismissal::Moved => sub.watcher.notify(Outbound::Moved(self.table.clone())),
            }
        }
        self.subscribers.clear();
    }
}

impl<G: Game> Table<G> {
    /// What letting go of watchers means here: a too slow one is counted
    /// and logged, and a seated player left with no connection starts the
    /// reconnect window.
    fn let_go(&mut self, dropped: Vec<Dropped>) {
        for d in dropped {
            if d.too_slow {
                metrics::counter!(instruments::WS_SLOW_CLIENTS_DROPPED).increment(1);
                warn!(player = %d.sub.player.0, "client too slow to read; no longer sending to it");
            }
            self.after_unsubscribe(&d.sub.player);
        }
    }

    fn after_unsubscribe(&mut self, player: &PlayerId) {
        if !self.fanout.is_watching(player) && self.game.seat_of(player).is_some() {
            self.mark_absent(player.clone());
        }
    }

    /// Forgets a session; a seated player left with no connection starts
    /// the reconnect window.
    pub(super) fn drop_subscriber(&mut self, session: SessionId) -> Option<Subscriber> {
        let gone = self.fanout.remove(session)?;
        self.after_unsubscribe(&gone.player);
        Some(gone)
    }

    /// Numbers, records and sends the game's events, each to whom may see it.
    pub(super) fn broadcast(&mut self, events: Events<G>) {
        for ev in events {
            let only = match ev.to {
                Audience::Everyone => None,
                Audience::Seat(seat) => match self.game.player_at(seat) {
                    Some(p) => Some(p),
                    // Nobody may see an event addressed to an empty seat.
                    None => continue,
                },
            };
            let clock = matches!(G::role(&ev.event), Role::Decision { .. }).then(|| {
                let deadline = self
                    .announced_deadline_ms
                    .unwrap_or_else(|| self.full_clock_deadline_ms());
                self.action_deadline_ms = Some(deadline);
                self.turn_clock(deadline)
            });
            let id = &self.id;
            let dropped = self.fanout.publish(only, |seq| {
                EventFrame::new(id, seq, &ev.event, clock).to_shared()
            });
            self.let_go(dropped);
        }
    }

    /// Keeps what the hosting before this one told of the hand in
    /// progress, rebuilt from the journal: each entry's events numbered on
    /// from the `seq` it recorded. Only the entries at the journal's end
    /// whose events follow on without a gap are kept (an event between two
    /// of them that the journal does not hold, such as a sit, ends what a
    /// client can be caught up with).
    pub(super) fn keep_earlier(&mut self, history: History<G>) {
        let mut kept: Vec<Sent> = Vec::new();
        // The `seq` the events kept so far reach.
        let mut reached: Option<u64> = None;
        for retold in &history {
            let Some((after, sent)) = self.retell(retold) else {
                kept.clear();
                reached = None;
                continue;
            };
            if reached != Some(after) {
                kept.clear();
            }
            reached = Some(after.saturating_add(sent.len() as u64));
            kept.extend(sent);
        }
        self.fanout.keep_earlier(kept);
    }

    /// One entry's events as first told, frames and all, with the `seq`
    /// they followed; `None` for an entry journalled without that `seq`,
    /// or whose decision's deadline was not journalled (its frames cannot
    /// be told again as they were).
    fn retell(&self, retold: &Retold<G>) -> Option<(u64, Vec<Sent>)> {
        let after = retold.told_after?;
        let mut sent = Vec::with_capacity(retold.events.len());
        for (seq, (only, event)) in (after.saturating_add(1)..).zip(&retold.events) {
            let clock = match G::role(event) {
                Role::Decision { .. } => Some(self.turn_clock(retold.deadline_ms?)),
                _ => None,
            };
            let frame = EventFrame::new(&self.id, seq, event, clock).to_shared();
            sent.push(Sent {
                seq,
                only: only.clone(),
                frame,
            });
        }
        Some((after, sent))
    }

    /// The clock a decision's frame announces: its deadline and the full
    /// action clock.
    fn turn_clock(&self, deadline_ms: i64) -> TurnClock {
        TurnClock {
            deadline_ms,
            timeout_ms: u64::try_from(self.decision_timeout().as_millis()).unwrap_or(u64::MAX),
        }
    }

    fn snapshot_frame(&self, viewer: &PlayerId) -> Arc<str> {
        SnapshotFrame::new(
            &self.id,
            self.fanout.seq(),
            SnapshotState {
                table: &self.id,
                state: self.phase.state(),
                fence: self.fence,
                owner: self.env.instance_id(),
                game_kind: G::KIND,
                config: self.game.settings(),
                action_deadline_ms: self.action_deadline_ms,
                game: self.game.view(self.game.seat_of(viewer)),
            },
        )
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
    ) -> Result<(), TableError> {
        let player = sub.player.clone();
        let snapshot = self.snapshot_frame(&player);
        let paused = match self.phase.pause_reason() {
            Some(reason) => Some(
                ServerFrame::Paused {
                    table: &self.id,
                    reason,
                }
                .to_shared(),
            ),
            _ => None,
        };
        match self
            .fanout
            .subscribe(session, sub, since, &snapshot, paused.as_ref())
        {
            Ok(()) => {
                self.presence.back(&player);
                Ok(())
            }
            Err(Refused::Gone) => Err(TableError::ConnectionGone),
            Err(Refused::TooSlow) => {
                metrics::counter!(instruments::WS_SLOW_CLIENTS_DROPPED).increment(1);
                Err(TableError::TooSlow)
            }
        }
    }

    /// Sends a notice that is not a game event (not numbered, not kept) to
    /// every watcher.
    pub(super) fn notify_all(&mut self, frame: &Arc<str>) {
        let dropped = self.fanout.send(None, frame);
        self.let_go(dropped);
    }

    /// Sends every watcher a fresh snapshot of the table as they may see it.
    pub(super) fn send_snapshots(&mut self) {
        let frames: Vec<(SessionId, Arc<str>)> = self
            .fanout
            .watchers()
            .map(|(id, player)| (id, self.snapshot_frame(player)))
            .collect();
        let dropped = self.fanout.send_each(frames);
        self.let_go(dropped);
    }

    /// Tells every watcher the table stopped here and forgets them.
    pub(super) fn dismiss_all(&mut self, how: &Dismissal) {
        self.fanout.dismiss_all(how);
    }
}

#[cfg(test)]
mod tests;
