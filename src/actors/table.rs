//! One hosted table: the hold'em game, its timers, its subscribed sessions,
//! and the fenced writes at every boundary.

use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use serde_json::{json, Value};
use tracing::{error, info, warn};

use super::table_manager::{TableManager, TableStopped};
use crate::game::{Audience, Command, Event, EventKind, Game, PlayerId, RuleError, SeatNo};
use crate::lease::LeaseClock;
use crate::runtime::Runtime;
use crate::store::{CashOut, StoreError};
use crate::types::{Fence, TableId};
use crate::ws::protocol::{Backlog, ClientError, Outbound};

pub type SessionId = u64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Open,
    Draining,
    /// Frozen, with the reason the manager and the watchers are told.
    Frozen(&'static str),
    /// Released (drained or idle): persisting its state, about to stop.
    Stopping,
}

struct Subscriber {
    player: PlayerId,
    tx: Recipient<Outbound>,
    backlog: Arc<Backlog>,
}

impl Subscriber {
    /// Queues a frame unless the session lags more than `cap` bytes behind.
    fn send(&self, frame: &Arc<str>, cap: u64) -> bool {
        if !self.backlog.admit(frame.len(), cap) {
            return false;
        }
        self.tx.do_send(Outbound::Frame(frame.clone()));
        true
    }
}

/// An event as sent, kept so a reconnecting client can catch up.
struct Sent {
    seq: u64,
    /// `None`: everyone at the table may see it.
    only: Option<PlayerId>,
    frame: Arc<str>,
}

pub struct Table {
    id: TableId,
    fence: Fence,
    rt: Arc<Runtime>,
    clock: Arc<LeaseClock>,
    manager: Addr<TableManager>,
    game: Game,
    phase: Phase,
    subscribers: HashMap<SessionId, Subscriber>,
    seq: u64,
    history: VecDeque<Sent>,
    action_timer: Option<SpawnHandle>,
    next_hand_timer: Option<SpawnHandle>,
    drain_timer: Option<SpawnHandle>,
    /// Since when nobody has been seated; `None` while someone is.
    empty_since: Option<Instant>,
    /// Seated players with no connection, and since when: their seats are
    /// held for the reconnect window, then they are stood up.
    absent: HashMap<PlayerId, Instant>,
    /// Unix millis at which the current action clock runs out.
    action_deadline_ms: Option<i64>,
    span: tracing::Span,
}

/// Each hosting of a table numbers its events from its own epoch, derived
/// from the fence: `seq` keeps increasing across redeploys and recoveries,
/// so a `since` from an earlier hosting is never mistaken for a recent one
/// (it falls before the kept history and gets a snapshot).
fn seq_epoch(fence: Fence) -> u64 {
    // 2^31 hostings of one table are far beyond any real life; the clamp
    // only keeps the arithmetic from overflowing.
    fence.0.min((1 << 31) - 1) << 32
}

/// The span every log line of a table runs in. A root span: a new one per
/// hand replaces the old rather than nesting under it.
fn table_span(id: &TableId, fence: Fence, hand_no: u64) -> tracing::Span {
    tracing::info_span!(parent: None, "table", table_id = %id, fence = fence.0, hand_no)
}

/// Counts and logs a write refused because a newer owner holds the table.
fn note_stale_write(fence: Fence, current: Fence, what: &str) {
    metrics::counter!("pitboss_stale_boundary_writes_total").increment(1);
    warn!(
        event = "stale_owner_boundary_write",
        fence = fence.0,
        current = current.0,
        "StaleOwnerBoundaryWrite: {what} refused, a newer owner holds this table"
    );
}

/// What a table's watchers are told when it stops.
enum Farewell {
    Frozen(&'static str),
    Drained,
    Idle,
}

impl Table {
    pub fn new(
        id: TableId,
        fence: Fence,
        rt: Arc<Runtime>,
        clock: Arc<LeaseClock>,
        manager: Addr<TableManager>,
        game: Game,
    ) -> Table {
        let span = table_span(&id, fence, game.hand_no());
        let empty_since = game.seats().is_empty().then(Instant::now);
        // A revived table's players reconnect after the redeploy; until then
        // their seats are held like any dropped connection's.
        let now = Instant::now();
        let absent = game.seats().into_iter().map(|s| (s.player, now)).collect();
        Table {
            id,
            fence,
            rt,
            clock,
            manager,
            game,
            phase: Phase::Open,
            subscribers: HashMap::new(),
            seq: seq_epoch(fence),
            history: VecDeque::new(),
            action_timer: None,
            next_hand_timer: None,
            drain_timer: None,
            empty_since,
            absent,
            action_deadline_ms: None,
            span,
        }
    }

    /// Log lines carry the current hand number; a fresh span per hand keeps
    /// exactly one `hand_no` field on each line.
    fn refresh_span(&mut self) {
        self.span = table_span(&self.id, self.fence, self.game.hand_no());
    }

    fn state_name(&self) -> &'static str {
        match self.phase {
            Phase::Open => "open",
            Phase::Draining => "draining",
            Phase::Frozen(_) => "frozen",
            Phase::Stopping => "released",
        }
    }

    fn player_at(&self, seat: SeatNo) -> Option<PlayerId> {
        self.game
            .seats()
            .into_iter()
            .find(|s| s.seat == seat)
            .map(|s| s.player)
    }

    fn send_to(&mut self, only: Option<&PlayerId>, frame: &Arc<str>) {
        let cap = self.rt.settings.ws.outbound_queue_bytes;
        let mut too_slow = Vec::new();
        for (id, sub) in &self.subscribers {
            if only.is_none_or(|p| *p == sub.player) && !sub.send(frame, cap) {
                too_slow.push(*id);
            }
        }
        for id in too_slow {
            if let Some(sub) = self.drop_subscriber(id) {
                metrics::counter!("pitboss_ws_slow_clients_dropped_total").increment(1);
                warn!(player = %sub.player.0, "client too slow to read; no longer sending to it");
                sub.tx.do_send(Outbound::Unsubscribed(self.id.clone()));
            }
        }
    }

    /// Forgets a session; a seated player left with no connection starts
    /// the reconnect window.
    fn drop_subscriber(&mut self, session: SessionId) -> Option<Subscriber> {
        let gone = self.subscribers.remove(&session)?;
        let still_here = self.subscribers.values().any(|s| s.player == gone.player);
        if !still_here && self.game.seat_of(&gone.player).is_some() {
            self.absent
                .entry(gone.player.clone())
                .or_insert_with(Instant::now);
        }
        Some(gone)
    }

    /// Numbers, records and sends the game's events, each to whom may see it.
    fn broadcast(&mut self, events: Vec<Event>) {
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
            let mut body = match serde_json::to_value(&ev.kind) {
                Ok(Value::Object(m)) => m,
                _ => continue,
            };
            if let EventKind::Turn { .. } = ev.kind {
                let timeout = self.rt.action_timeout();
                let deadline = chrono::Utc::now().timestamp_millis() + timeout.as_millis() as i64;
                body.insert("deadline_ms".into(), json!(deadline));
                body.insert("timeout_ms".into(), json!(timeout.as_millis() as u64));
                self.action_deadline_ms = Some(deadline);
            }
            body.insert("type".into(), json!("event"));
            body.insert("table".into(), json!(self.id));
            body.insert("seq".into(), json!(self.seq));
            let frame: Arc<str> = Value::Object(body).to_string().into();
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
        json!({
            "type": "snapshot",
            "table": self.id,
            "seq": self.seq,
            "state": {
                "table": self.id,
                "state": self.state_name(),
                "fence": self.fence,
                "owner": self.rt.instance_id(),
                "config": self.game.config(),
                "action_deadline_ms": self.action_deadline_ms,
                "game": self.game.view_for(Some(viewer)),
            }
        })
        .to_string()
        .into()
    }

    /// Applies a command to the game. A panic inside the rules freezes this
    /// table only; the rest of the process carries on.
    fn apply(&mut self, cmd: Command, ctx: &mut Context<Self>) -> Result<Vec<Event>, RuleError> {
        match catch_unwind(AssertUnwindSafe(|| self.game.apply(cmd))) {
            Ok(result) => result,
            Err(_) => {
                error!("game logic panicked; freezing the table");
                self.freeze("internal_error", ctx);
                Err(RuleError::Internal("the rules panicked".into()))
            }
        }
    }

    /// Applies a command that the runtime itself issues (deal, time-out,
    /// void). Its refusal means the table and the rules disagree, which is
    /// an internal error.
    fn apply_internal(&mut self, cmd: Command, ctx: &mut Context<Self>) -> Option<Vec<Event>> {
        if matches!(self.phase, Phase::Frozen(_) | Phase::Stopping) {
            return None;
        }
        match self.apply(cmd, ctx) {
            Ok(events) => Some(events),
            Err(e) => {
                if !matches!(self.phase, Phase::Frozen(_)) {
                    error!(error = %e, "the rules refused a runtime command; freezing the table");
                    self.freeze("internal_error", ctx);
                }
                None
            }
        }
    }

    fn cancel(ctx: &mut Context<Self>, timer: &mut Option<SpawnHandle>) {
        if let Some(h) = timer.take() {
            ctx.cancel_future(h);
        }
    }

    /// Everything that follows a change of game state: timers, the
    /// boundary write at the end of a hand, the next deal.
    fn advance(&mut self, events: Vec<Event>, ctx: &mut Context<Self>) {
        let ended = events
            .iter()
            .any(|e| matches!(e.kind, EventKind::HandEnded { .. }));
        let turn = events.iter().rev().find_map(|e| match e.kind {
            EventKind::Turn { hand, seat, .. } => Some((hand, seat)),
            _ => None,
        });
        let left: Vec<CashOut> = events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Left {
                    seat,
                    player,
                    stack,
                } => Some(CashOut {
                    seat: *seat,
                    player: player.clone(),
                    stack: *stack,
                }),
                _ => None,
            })
            .collect();
        for out in &left {
            self.absent.remove(&out.player);
        }
        self.broadcast(events);
        if let Some((hand, seat)) = turn {
            self.arm_action_timer(hand, seat, ctx);
        }
        if ended {
            Self::cancel(ctx, &mut self.action_timer);
            self.action_deadline_ms = None;
            self.write_boundary(left, ctx);
        } else if !left.is_empty() {
            self.write_cash_outs(left, ctx);
        }
    }

    fn arm_action_timer(&mut self, hand: u64, seat: SeatNo, ctx: &mut Context<Self>) {
        Self::cancel(ctx, &mut self.action_timer);
        let timeout = self.rt.action_timeout();
        self.action_timer = Some(ctx.run_later(timeout, move |act, ctx| {
            act.action_timer = None;
            let _g = act.span.clone().entered();
            if act.game.hand_no() != hand || act.game.to_act() != Some(seat) {
                return;
            }
            info!(seat, "action clock ran out");
            if let Some(events) = act.apply_internal(Command::Timeout { hand, seat }, ctx) {
                act.advance(events, ctx);
            }
        }));
    }

    fn write_boundary(&mut self, outs: Vec<CashOut>, ctx: &mut Context<Self>) {
        let Some(summary) = self.game.last_summary().cloned() else {
            error!("hand ended without a summary; freezing the table");
            self.freeze("internal_error", ctx);
            return;
        };
        let rt = self.rt.clone();
        let (id, fence, button) = (self.id.clone(), self.fence, self.game.button());
        let owner = rt.instance_id().to_string();
        let fut = async move {
            rt.store
                .write_hand(&id, fence, &owner, &summary, button, &outs)
                .await
        };
        ctx.wait(fut.into_actor(self).map(|res, act, ctx| {
            let _g = act.span.clone().entered();
            match res {
                Ok(()) => {
                    metrics::counter!("pitboss_hands_completed_total").increment(1);
                    act.after_boundary(ctx);
                }
                Err(e) => act.on_write_error(e, ctx),
            }
        }));
    }

    fn write_cash_outs(&mut self, outs: Vec<CashOut>, ctx: &mut Context<Self>) {
        let rt = self.rt.clone();
        let (id, fence) = (self.id.clone(), self.fence);
        let fut = async move { rt.store.cash_out(&id, fence, &outs).await };
        ctx.wait(fut.into_actor(self).map(|res, act, ctx| match res {
            Ok(()) => act.after_boundary(ctx),
            Err(e) => act.on_write_error(e, ctx),
        }));
    }

    fn on_write_error(&mut self, e: StoreError, ctx: &mut Context<Self>) {
        match e {
            StoreError::StaleOwnerBoundaryWrite { fence, current, .. } => {
                note_stale_write(fence, current, "boundary write");
                self.freeze("lease_lost", ctx);
            }
            other => {
                error!(error = %other, "boundary write failed; freezing the table");
                self.freeze("store_error", ctx);
            }
        }
    }

    /// Called once a boundary is safely persisted.
    fn after_boundary(&mut self, ctx: &mut Context<Self>) {
        if self.game.seats().is_empty() {
            self.empty_since.get_or_insert_with(Instant::now);
        } else {
            self.empty_since = None;
        }
        match self.phase {
            Phase::Open => self.schedule_next_hand(ctx),
            Phase::Draining if !self.game.hand_in_progress() => self.finish_drain(ctx),
            _ => {}
        }
    }

    fn schedule_next_hand(&mut self, ctx: &mut Context<Self>) {
        if self.phase != Phase::Open
            || self.next_hand_timer.is_some()
            || !self.game.can_start_hand()
        {
            return;
        }
        let delay = self.rt.next_hand_delay();
        self.next_hand_timer = Some(ctx.run_later(delay, |act, ctx| {
            act.next_hand_timer = None;
            act.deal(ctx);
        }));
    }

    fn deal(&mut self, ctx: &mut Context<Self>) {
        let _g = self.span.clone().entered();
        if self.phase != Phase::Open || !self.game.can_start_hand() {
            return;
        }
        // I1: never deal on a lease this process cannot prove it holds.
        if !self.clock.is_valid(Instant::now()) {
            warn!(
                event = "lease_deadline_passed",
                "lease deadline passed before dealing; freezing"
            );
            metrics::counter!("pitboss_leases_lost_total", "reason" => "deadline").increment(1);
            self.freeze("lease_lost", ctx);
            return;
        }
        let deck = crate::game::shuffled_deck(&mut rand::thread_rng());
        if let Some(events) = self.apply_internal(Command::StartHand { deck }, ctx) {
            self.refresh_span();
            self.advance(events, ctx);
        }
    }

    /// Lease lost, stale write, or broken invariant: deal nothing more, kill
    /// the timers, tell every session why, drop them, stop. The state write
    /// is fenced like any other, so a stale owner freezes only its own copy.
    pub fn freeze(&mut self, reason: &'static str, ctx: &mut Context<Self>) {
        if matches!(self.phase, Phase::Frozen(_) | Phase::Stopping) {
            return;
        }
        let _g = self.span.clone().entered();
        warn!(event = "table_frozen", reason, "table frozen");
        self.phase = Phase::Frozen(reason);
        for t in [
            &mut self.action_timer,
            &mut self.next_hand_timer,
            &mut self.drain_timer,
        ] {
            Self::cancel(ctx, t);
        }
        self.record_and_stop("frozen", reason, Farewell::Frozen(reason), ctx);
    }

    /// The last step of every way a table stops: a fenced state write (a
    /// stale owner's is refused and only its own copy stops), then the
    /// watchers are told and dropped, then the actor stops and the manager
    /// releases the lease.
    fn record_and_stop(
        &mut self,
        to: &'static str,
        reason: &'static str,
        farewell: Farewell,
        ctx: &mut Context<Self>,
    ) {
        let rt = self.rt.clone();
        let (id, fence) = (self.id.clone(), self.fence);
        let fut = async move {
            rt.store
                .transition(&id, fence, rt.instance_id(), to, Some(reason))
                .await
        };
        ctx.wait(fut.into_actor(self).map(move |res, act, ctx| {
            let _g = act.span.clone().entered();
            match res {
                Ok(()) => match farewell {
                    Farewell::Drained => {
                        info!(event = "table_drained", "table persisted and released")
                    }
                    _ => info!(state = to, reason, "table state recorded"),
                },
                Err(StoreError::StaleOwnerBoundaryWrite { fence, current, .. }) => {
                    note_stale_write(fence, current, to)
                }
                Err(e) => error!(error = %e, state = to, "could not record the table's state"),
            }
            let notice: Option<Arc<str>> = match farewell {
                Farewell::Frozen(reason) => Some(
                    json!({"type": "frozen", "table": act.id, "reason": reason})
                        .to_string()
                        .into(),
                ),
                // Watchers learn why their subscription ends; a join brings
                // the table back.
                Farewell::Idle => Some(
                    json!({"type": "released", "table": act.id, "reason": "idle"})
                        .to_string()
                        .into(),
                ),
                Farewell::Drained => None,
            };
            for sub in act.subscribers.values() {
                match &notice {
                    Some(frame) => {
                        sub.tx.do_send(Outbound::Frame(frame.clone()));
                        sub.tx.do_send(Outbound::Unsubscribed(act.id.clone()));
                    }
                    None => sub.tx.do_send(Outbound::Released(act.id.clone())),
                }
            }
            act.subscribers.clear();
            ctx.stop();
        }));
    }

    fn start_drain(&mut self, deadline: Instant, ctx: &mut Context<Self>) {
        if !matches!(self.phase, Phase::Open | Phase::Draining) {
            return;
        }
        let _g = self.span.clone().entered();
        let first = self.phase == Phase::Open;
        self.phase = Phase::Draining;
        Self::cancel(ctx, &mut self.next_hand_timer);
        Self::cancel(ctx, &mut self.drain_timer);
        if !self.game.hand_in_progress() {
            self.finish_drain(ctx);
            return;
        }
        if first {
            // Operators see the table draining while its hand finishes.
            let rt = self.rt.clone();
            let (id, fence) = (self.id.clone(), self.fence);
            let fut = async move {
                rt.store
                    .transition(&id, fence, rt.instance_id(), "draining", Some("shutdown"))
                    .await
            };
            // Waited for, so it can never land after the release.
            ctx.wait(fut.into_actor(self).map(|res, act, _ctx| {
                if let Err(e) = res {
                    let _g = act.span.clone().entered();
                    warn!(error = %e, "could not record the drain");
                }
            }));
        }
        info!(
            event = "table_drain_waiting",
            "waiting for the hand in progress"
        );
        let wait = deadline.saturating_duration_since(Instant::now());
        self.drain_timer = Some(ctx.run_later(wait, |act, ctx| {
            act.drain_timer = None;
            act.void_hand(ctx);
        }));
    }

    /// Abandons the hand in progress: stacks go back to the last boundary,
    /// which is what Postgres already holds; only the burnt hand number is
    /// written.
    fn void_hand(&mut self, ctx: &mut Context<Self>) {
        if !self.game.hand_in_progress() {
            return;
        }
        let _g = self.span.clone().entered();
        warn!(
            event = "hand_voided",
            hand = self.game.hand_no(),
            "voiding the hand in progress"
        );
        Self::cancel(ctx, &mut self.action_timer);
        let Some(events) = self.apply_internal(Command::VoidHand, ctx) else {
            return;
        };
        self.broadcast(events);
        let rt = self.rt.clone();
        let (id, fence, hand) = (self.id.clone(), self.fence, self.game.hand_no());
        let fut = async move { rt.store.record_void(&id, fence, hand).await };
        ctx.wait(fut.into_actor(self).map(|res, act, ctx| match res {
            Ok(()) => act.after_boundary(ctx),
            Err(e) => act.on_write_error(e, ctx),
        }));
    }

    fn finish_drain(&mut self, ctx: &mut Context<Self>) {
        if self.phase != Phase::Draining {
            return;
        }
        self.phase = Phase::Stopping;
        self.record_and_stop("released", "shutdown", Farewell::Drained, ctx);
    }

    fn check_idle(&mut self, ctx: &mut Context<Self>) {
        let Some(since) = self.empty_since else {
            return;
        };
        if self.phase != Phase::Open
            || self.game.hand_in_progress()
            || !self.game.seats().is_empty()
            || since.elapsed() < self.rt.idle_evict()
        {
            return;
        }
        let _g = self.span.clone().entered();
        info!(
            event = "table_idle_evicted",
            "nobody seated; releasing the table"
        );
        self.phase = Phase::Stopping;
        self.record_and_stop("released", "idle", Farewell::Idle, ctx);
    }

    /// Stands up players whose connection has been gone longer than the
    /// reconnect window (folded now if in a hand, cashed out at its end).
    fn check_absent(&mut self, ctx: &mut Context<Self>) {
        if self.phase != Phase::Open {
            return;
        }
        let window = Duration::from_millis(self.rt.settings.table.reconnect_window_ms);
        let expired: Vec<PlayerId> = self
            .absent
            .iter()
            .filter(|(_, since)| since.elapsed() >= window)
            .map(|(p, _)| p.clone())
            .collect();
        for player in expired {
            let Some(seat) = self.game.seat_of(&player) else {
                self.absent.remove(&player);
                continue;
            };
            let _g = self.span.clone().entered();
            info!(player = %player.0, seat, "reconnect window passed; standing the player up");
            match self.apply(Command::Leave { seat }, ctx) {
                Ok(events) => self.advance(events, ctx),
                Err(e) => warn!(error = %e, "could not stand up an absent player"),
            }
        }
    }

    fn check_lease(&mut self, ctx: &mut Context<Self>) {
        if matches!(self.phase, Phase::Open | Phase::Draining)
            && !self.clock.is_valid(Instant::now())
        {
            let _g = self.span.clone().entered();
            warn!(
                event = "lease_deadline_passed",
                "lease not confirmed before its local deadline; freezing"
            );
            metrics::counter!("pitboss_leases_lost_total", "reason" => "deadline").increment(1);
            self.freeze("lease_lost", ctx);
        }
    }

    /// Why a table that no longer plays refuses a client, if it does.
    fn stopped_error(&self) -> Option<ClientError> {
        match self.phase {
            Phase::Open | Phase::Draining => None,
            Phase::Frozen(_) => Some(ClientError::new("table_frozen", "the table is frozen")),
            Phase::Stopping if self.rt.is_draining() => {
                Some(ClientError::new("draining", "the server is shutting down"))
            }
            Phase::Stopping => Some(ClientError::new(
                "unavailable",
                "the table is being released; join it again in a moment",
            )),
        }
    }

    /// The seat of a player acting at a table that still plays.
    fn live_seat_of(&self, player: &PlayerId) -> Result<SeatNo, ClientError> {
        if let Some(e) = self.stopped_error() {
            return Err(e);
        }
        self.game
            .seat_of(player)
            .ok_or_else(|| ClientError::new("not_seated", "you have no seat at this table"))
    }

    fn refuse_unless_open(&self) -> Result<(), ClientError> {
        match self.phase {
            Phase::Open => Ok(()),
            Phase::Draining => Err(ClientError::new("draining", "the server is shutting down")),
            _ => Err(self
                .stopped_error()
                .unwrap_or_else(|| ClientError::new("table_frozen", "the table is frozen"))),
        }
    }
}

impl Actor for Table {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let _g = self.span.clone().entered();
        info!(event = "table_hosted", "table hosted");
        metrics::gauge!("pitboss_tables_hosted").increment(1.0);
        // The local deadline is checked on a clock of its own, so a slow or
        // dead Redis freezes the table before anyone else could take it.
        let check = (self.rt.ttl() / 10).max(Duration::from_millis(20));
        ctx.run_interval(check, |act, ctx| act.check_lease(ctx));
        let idle_check =
            (self.rt.idle_evict() / 4).clamp(Duration::from_millis(50), Duration::from_secs(5));
        ctx.run_interval(idle_check, |act, ctx| act.check_idle(ctx));
        let absent_check = Duration::from_millis(self.rt.settings.table.reconnect_window_ms / 4)
            .clamp(Duration::from_millis(20), Duration::from_secs(1));
        ctx.run_interval(absent_check, |act, ctx| act.check_absent(ctx));
        self.schedule_next_hand(ctx);
    }

    fn stopped(&mut self, _ctx: &mut Self::Context) {
        metrics::gauge!("pitboss_tables_hosted").decrement(1.0);
        self.manager.do_send(TableStopped {
            table: self.id.clone(),
            fence: self.fence,
            frozen: match self.phase {
                Phase::Frozen(reason) => Some(reason),
                _ => None,
            },
        });
    }
}

/// Subscribe a session; the table sends it a snapshot, or with `since` the
/// events it missed if they are still kept.
#[derive(Message)]
#[rtype(result = "Result<(), ClientError>")]
pub struct Join {
    pub session: SessionId,
    pub player: PlayerId,
    pub since: Option<u64>,
    pub tx: Recipient<Outbound>,
    pub backlog: Arc<Backlog>,
}

impl Handler<Join> for Table {
    type Result = Result<(), ClientError>;

    fn handle(&mut self, msg: Join, _ctx: &mut Self::Context) -> Self::Result {
        if let Some(e) = self.stopped_error() {
            return Err(e);
        }
        let sub = Subscriber {
            player: msg.player,
            tx: msg.tx,
            backlog: msg.backlog,
        };
        let cap = self.rt.settings.ws.outbound_queue_bytes;
        let oldest = self.history.front().map(|s| s.seq).unwrap_or(self.seq + 1);
        let replay = msg.since.filter(|&n| n <= self.seq && n + 1 >= oldest);
        let sent_all = match replay {
            Some(since) => self
                .history
                .iter()
                .filter(|s| s.seq > since && s.only.as_ref().is_none_or(|p| *p == sub.player))
                .all(|s| sub.send(&s.frame, cap)),
            None => sub.send(&self.snapshot_frame(&sub.player), cap),
        };
        if !sent_all {
            metrics::counter!("pitboss_ws_slow_clients_dropped_total").increment(1);
            return Err(ClientError::new(
                "too_slow",
                "the connection is not reading",
            ));
        }
        self.absent.remove(&sub.player);
        self.subscribers.insert(msg.session, sub);
        Ok(())
    }
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct Unsubscribe {
    pub session: SessionId,
}

impl Handler<Unsubscribe> for Table {
    type Result = ();

    fn handle(&mut self, msg: Unsubscribe, _ctx: &mut Self::Context) {
        self.drop_subscriber(msg.session);
    }
}

/// Wallet → stack, fenced, then the player is seated.
#[derive(Message)]
#[rtype(result = "Result<(), ClientError>")]
pub struct Sit {
    pub player: PlayerId,
    pub seat: SeatNo,
    pub buy_in: crate::game::Chips,
}

impl Handler<Sit> for Table {
    type Result = AtomicResponse<Self, Result<(), ClientError>>;

    fn handle(&mut self, msg: Sit, _ctx: &mut Self::Context) -> Self::Result {
        let refuse = |e: ClientError| AtomicResponse::new(Box::pin(fut::ready(Err(e))));
        if let Err(e) = self.refuse_unless_open() {
            return refuse(e);
        }
        let cmd = Command::Sit {
            seat: msg.seat,
            player: msg.player.clone(),
            stack: msg.buy_in,
        };
        // Validate against a copy first: the wallet is only debited for a
        // sit the rules accept.
        if let Err(e) = self.game.clone().apply(cmd.clone()) {
            return refuse(e.into());
        }
        let rt = self.rt.clone();
        let (id, fence) = (self.id.clone(), self.fence);
        let fut = async move {
            rt.store
                .buy_in(&id, fence, msg.seat, &msg.player, msg.buy_in)
                .await
        };
        AtomicResponse::new(Box::pin(fut.into_actor(self).map(
            move |res, act, ctx| match res {
                Ok(_balance) => match act.apply(cmd, ctx) {
                    Ok(events) => {
                        act.empty_since = None;
                        act.advance(events, ctx);
                        act.schedule_next_hand(ctx);
                        Ok(())
                    }
                    Err(e) => {
                        error!(error = %e, "the rules refused a sit already paid for; freezing");
                        act.freeze("internal_error", ctx);
                        Err(ClientError::new("table_frozen", "the table is frozen"))
                    }
                },
                Err(e) => Err(match e {
                    StoreError::InsufficientFunds => {
                        ClientError::new("insufficient_funds", "wallet balance is too low")
                    }
                    StoreError::SeatTaken => ClientError::new("seat_taken", "that seat is taken"),
                    StoreError::AlreadySeated => {
                        ClientError::new("already_seated", "already seated at this table")
                    }
                    StoreError::WrongState(_) => {
                        ClientError::new("table_frozen", "the table is not open")
                    }
                    other => {
                        act.on_write_error(other, ctx);
                        ClientError::new("table_frozen", "the table could not record the buy-in")
                    }
                }),
            },
        )))
    }
}

#[derive(Message)]
#[rtype(result = "Result<(), ClientError>")]
pub struct Act {
    pub player: PlayerId,
    pub hand: u64,
    pub action: crate::game::Action,
    /// When the session read the frame, for the latency histogram.
    pub received: Instant,
}

impl Handler<Act> for Table {
    type Result = Result<(), ClientError>;

    fn handle(&mut self, msg: Act, ctx: &mut Self::Context) -> Self::Result {
        let _g = self.span.clone().entered();
        let seat = self.live_seat_of(&msg.player)?;
        let events = self.apply(
            Command::Act {
                hand: msg.hand,
                seat,
                action: msg.action,
            },
            ctx,
        )?;
        self.advance(events, ctx);
        metrics::histogram!("pitboss_action_to_broadcast_seconds")
            .record(msg.received.elapsed().as_secs_f64());
        Ok(())
    }
}

#[derive(Message)]
#[rtype(result = "Result<(), ClientError>")]
pub struct Leave {
    pub player: PlayerId,
}

impl Handler<Leave> for Table {
    type Result = Result<(), ClientError>;

    fn handle(&mut self, msg: Leave, ctx: &mut Self::Context) -> Self::Result {
        let _g = self.span.clone().entered();
        let seat = self.live_seat_of(&msg.player)?;
        // Between hands the seat is vacated at once (and `advance` cashes it
        // out); during a hand the rules fold the player and vacate the seat
        // at the hand's end, when the boundary write cashes it out.
        let events = self.apply(Command::Leave { seat }, ctx)?;
        self.advance(events, ctx);
        Ok(())
    }
}

/// Sent by the manager when the lease is gone, foreign, or past its deadline.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Freeze {
    pub reason: &'static str,
}

impl Handler<Freeze> for Table {
    type Result = ();

    fn handle(&mut self, msg: Freeze, ctx: &mut Self::Context) {
        self.freeze(msg.reason, ctx);
    }
}

/// Graceful shutdown: no new hands; the hand in progress may finish until
/// `deadline`, then it is voided; the table persists and stops.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Drain {
    pub deadline: Instant,
}

impl Handler<Drain> for Table {
    type Result = ();

    fn handle(&mut self, msg: Drain, ctx: &mut Self::Context) {
        self.start_drain(msg.deadline, ctx);
    }
}
