//! How a table stops: freezing, draining, idle release, standing up absent
//! players, the local lease deadline, and the fenced state write that ends
//! each of them.

use std::time::Instant;

use actix::prelude::*;
use tracing::{error, info, warn};

use super::error::TableError;
use super::fanout::Dismissal;
use super::timers::Slot;
use super::{note_stale_write, Phase, ReassertLease, Stop, Table};
use crate::chips::{PlayerId, SeatNo};
use crate::games::Game;
use crate::instruments;
use crate::protocol::ServerFrame;
use crate::store::StoreError;
use crate::types::{FreezeReason, PauseReason, StateReason, TableState};

/// Why a table stops, which decides what Postgres records and what its
/// watchers are told.
#[derive(Clone)]
pub(super) enum Farewell {
    Frozen(FreezeReason),
    Drained,
    Idle,
    /// Released for a move to the named instance.
    Moved(String),
}

/// How a stopping copy ends once its buy-ins in flight are answered.
pub(super) enum Ending {
    /// With a state write (`record_and_stop`).
    Record(Farewell),
    /// Without one: its watchers are dismissed so.
    Unwritten(Dismissal),
}

impl Farewell {
    fn recorded(&self) -> (TableState, StateReason) {
        match self {
            Farewell::Frozen(reason) => (TableState::Frozen, (*reason).into()),
            Farewell::Drained => (TableState::Released, StateReason::Shutdown),
            Farewell::Idle => (TableState::Released, StateReason::Idle),
            Farewell::Moved(_) => (TableState::Released, StateReason::Moved),
        }
    }
}

impl<G: Game> Table<G> {
    /// Lease lost, stale write, or broken invariant: deal nothing more, kill
    /// the timers, tell every session why, drop them, stop. The state write
    /// is fenced like any other, so a stale owner freezes only its own copy.
    pub fn freeze(&mut self, reason: FreezeReason, ctx: &mut Context<Self>) {
        if self.phase.is_stopped() {
            return;
        }
        let _g = self.span.clone().entered();
        warn!(event = "table_frozen", reason = %reason, "table frozen");
        // The one owner change that voids the hand in progress (I15).
        if reason == FreezeReason::Operator {
            self.tell_voided(ctx);
        }
        self.set_phase(Phase::frozen(reason));
        self.timers.cancel_play(ctx);
        self.end_when_settled(Ending::Record(Farewell::Frozen(reason)), ctx);
    }

    /// Ends this stopping copy once no buy-in is in flight: a buy-in
    /// Postgres recorded is answered as such (the seat is the player's,
    /// wherever the table is hosted next) instead of being cut off.
    pub(super) fn end_when_settled(&mut self, ending: Ending, ctx: &mut Context<Self>) {
        if self.side.buy_ins() > 0 {
            info!(
                buy_ins = self.side.buy_ins(),
                "stopping once the buy-ins in flight have an outcome"
            );
            if let Phase::Stopping(stop) = &mut self.phase {
                stop.then = Some(ending);
            }
            return;
        }
        match ending {
            Ending::Record(farewell) => self.record_and_stop(farewell, ctx),
            Ending::Unwritten(how) => {
                self.dismiss_all(&how);
                ctx.stop();
            }
        }
    }

    /// The last step of every way a table stops: a fenced state write (a
    /// stale owner's is refused and only its own copy stops), then the
    /// watchers are told and dropped, then the actor stops and the manager
    /// releases the lease.
    pub(super) fn record_and_stop(&mut self, farewell: Farewell, ctx: &mut Context<Self>) {
        let (to, reason) = farewell.recorded();
        let env = self.env.clone();
        let fence = self.fence;
        let target = match &farewell {
            Farewell::Moved(target) => Some(target.clone()),
            _ => None,
        };
        let voided = match farewell {
            Farewell::Frozen(_) => self.voided,
            _ => None,
        };
        let fut = async move {
            match (target, voided) {
                (Some(target), _) => env.store.release_to(fence, &target).await,
                (None, Some(number)) => env.store.freeze_voided(fence, reason, number).await,
                (None, None) => env.store.transition(fence, to, reason).await,
            }
        };
        ctx.wait(fut.into_actor(self).map(move |res, act, ctx| {
            let _g = act.span.clone().entered();
            // A freeze is told only as Postgres holds it. A lost lease whose
            // write is refused as stale means a newer owner holds the table;
            // a write that failed otherwise (Postgres unreachable, a row lock
            // past the lock budget) left it open under this owner's fence.
            // Either way its watchers look for the table again (a join hosts
            // it anew under a higher fence). An operator's freeze is told as
            // such: a refusal then means the operator's own freeze landed.
            //
            // Whatever this copy meant to record, a refusal from a row that
            // Postgres holds frozen (an operator froze it through another
            // instance) is told as that freeze, once, with its reason.
            let stale = matches!(res, Err(StoreError::StaleOwnerBoundaryWrite { .. }));
            let recorded = match &res {
                Err(StoreError::StaleOwnerBoundaryWrite { frozen, .. }) => *frozen,
                _ => None,
            };
            let untold = match farewell {
                _ if recorded.is_some() => false,
                Farewell::Frozen(FreezeReason::LeaseLost) => res.is_err(),
                Farewell::Frozen(_) => res.is_err() && !stale,
                _ => false,
            };
            if let Some(reason) = recorded {
                // The manager keeps what Postgres says (an operator's freeze
                // is never recovered automatically).
                act.set_phase(Phase::frozen(reason));
            }
            if untold && !stale {
                // Not frozen anywhere: the manager must not treat it so.
                act.set_phase(Phase::stopping());
            }
            match res {
                Ok(()) => match &farewell {
                    Farewell::Drained => {
                        info!(event = "table_drained", "table persisted and released")
                    }
                    Farewell::Moved(target) => {
                        info!(event = "table_moved", to = %target, "table persisted and released to its new owner")
                    }
                    _ => info!(state = %to, reason = %reason, "table state recorded"),
                },
                Err(StoreError::StaleOwnerBoundaryWrite { fence, current, .. }) => {
                    note_stale_write(fence, current, to.as_str())
                }
                Err(e) => error!(error = %e, state = %to, "could not record the table's state"),
            }
            let frozen = recorded.or(match farewell {
                Farewell::Frozen(reason) if !untold => Some(reason),
                _ => None,
            });
            let how = match (frozen, &farewell) {
                (Some(reason), _) => Dismissal::Notice(
                    ServerFrame::Frozen {
                        table: &act.id,
                        reason,
                    }
                    .to_shared(),
                ),
                // Watchers learn why their subscription ends; a join brings
                // the table back.
                (None, Farewell::Idle) => Dismissal::Notice(
                    ServerFrame::Released {
                        table: &act.id,
                        reason,
                    }
                    .to_shared(),
                ),
                (None, Farewell::Drained) => Dismissal::Released,
                // Hosted elsewhere now, or not frozen anywhere: watchers
                // look for the table again.
                (None, Farewell::Moved(_) | Farewell::Frozen(_)) => Dismissal::Moved,
            };
            act.dismiss_all(&how);
            ctx.stop();
        }));
    }

    /// Drains for a shutdown, or for a move when `to` names the instance
    /// the table is released to (a drain under way keeps its target).
    ///
    /// Nothing waits for the hand in progress (I15): every command it
    /// applied is in the journal, so the next owner resumes it where it
    /// stands. The table takes no more commands, the write in flight (if
    /// any: the actor is held still while one runs) has landed, and the
    /// buy-ins and cash-outs in flight finish; then it is released.
    pub(super) fn start_drain(&mut self, to: Option<String>, ctx: &mut Context<Self>) {
        let to = match &self.phase {
            Phase::Open | Phase::Paused(_) => to,
            Phase::Draining(drain) => drain.to.clone().or(to),
            Phase::Stopping(_) => return,
        };
        let _g = self.span.clone().entered();
        self.set_phase(Phase::Draining(super::Draining { to }));
        // The hand stands as journalled: its clock stops here and runs on
        // at the next owner, to the deadline announced.
        self.timers.cancel_play(ctx);
        if self.game.in_progress() {
            info!(
                event = "table_drain_mid_hand",
                hand = self.game.number(),
                "releasing with the hand in progress; the next owner resumes it"
            );
        }
        self.finish_drain(ctx);
    }

    pub(super) fn finish_drain(&mut self, ctx: &mut Context<Self>) {
        // Buy-ins and cash-outs in flight finish first (`after_side_write`
        // comes back here).
        let to = match &self.phase {
            Phase::Draining(drain) if self.side.is_idle() => drain.to.clone(),
            _ => return,
        };
        self.set_phase(Phase::stopping());
        let farewell = match to {
            Some(target) => Farewell::Moved(target),
            None => Farewell::Drained,
        };
        self.record_and_stop(farewell, ctx);
    }

    /// A buy-in or a cash-out has an outcome: a drain that waited for it
    /// goes on.
    pub(super) fn after_side_write(&mut self, ctx: &mut Context<Self>) {
        if self.side.buy_ins() == 0 {
            let then = match &mut self.phase {
                Phase::Stopping(stop) => stop.then.take(),
                _ => None,
            };
            if let Some(ending) = then {
                self.end_when_settled(ending, ctx);
                return;
            }
        }
        if self.phase.is_draining() && !self.writer.in_flight() {
            self.finish_drain(ctx);
        }
    }

    pub(super) fn check_idle(&mut self, ctx: &mut Context<Self>) {
        if !self.phase.is_open()
            || self.game.in_progress()
            || !self.game.occupants().is_empty()
            || self.side.buy_ins() > 0
            || !self
                .presence
                .idle_for(self.env.idle_evict(), Instant::now())
        {
            return;
        }
        let _g = self.span.clone().entered();
        info!(
            event = "table_idle_evicted",
            "nobody seated; releasing the table"
        );
        self.set_phase(Phase::stopping());
        self.record_and_stop(Farewell::Idle, ctx);
    }

    /// Stands up players whose connection has been gone longer than the
    /// reconnect window (folded now if in a hand, cashed out at its end).
    ///
    /// One stand-up that writes ends the pass: the next stand-up must see
    /// stacks Postgres has recorded, never a result still being written.
    pub(super) fn check_absent(&mut self, ctx: &mut Context<Self>) {
        if !self.phase.is_open() || self.writer.in_flight() {
            return;
        }
        let expired = self
            .presence
            .expired(self.env.reconnect_window(), Instant::now());
        for player in expired {
            let Some(seat) = self.game.seat_of(&player) else {
                self.presence.back(&player);
                continue;
            };
            let _g = self.span.clone().entered();
            info!(player = %player.0, seat, "reconnect window passed; standing the player up");
            if let Err(e) = self.stand_up(seat, ctx) {
                warn!(error = %e, "could not stand up an absent player");
            }
            if self.writer.in_flight() {
                break;
            }
        }
    }

    /// The manager gave the lease up: a refused re-assert freezes the copy
    /// loudly; a forced release at shutdown (second signal, hard drain
    /// deadline) only stops it, recording nothing, so the next owner revives
    /// the table as Postgres left it instead of finding it frozen; a newer
    /// owner's stamp (seen by the fence check) stops it as superseded.
    pub(super) fn on_revoked(&mut self, ctx: &mut Context<Self>) {
        let _g = self.span.clone().entered();
        if self.env.is_draining() {
            warn!(
                event = "table_abandoned",
                "lease released by a forced shutdown; stopping without a state write"
            );
            self.stop_unwritten(Dismissal::Released, ctx);
            return;
        }
        if self.clock.is_superseded() {
            // Postgres holds a newer owner's fence (the manager's fence
            // check, whose message may still be on its way).
            self.supersede(ctx);
            return;
        }
        warn!(event = "lease_revoked", "the lease was given up; freezing");
        self.freeze(FreezeReason::LeaseLost, ctx);
    }

    /// Postgres holds a newer owner's fence: this copy stops without a
    /// state write (it would be refused) and its watchers follow the table
    /// to its owner, as on any owner change. Nothing is told as frozen:
    /// nothing was recorded so.
    pub fn supersede(&mut self, ctx: &mut Context<Self>) {
        if self.phase.is_stopped() {
            return;
        }
        let _g = self.span.clone().entered();
        warn!(
            event = "table_superseded",
            "a newer owner holds this table; stopping this copy"
        );
        self.stop_unwritten(Dismissal::Moved, ctx);
    }

    /// Stops without a state write: no more dealing, no timers, watchers
    /// dismissed `how`, once the buy-ins in flight have an outcome (not
    /// waited for at a forced shutdown, which exits now).
    fn stop_unwritten(&mut self, how: Dismissal, ctx: &mut Context<Self>) {
        self.set_phase(Phase::stopping());
        self.timers.cancel_play(ctx);
        if matches!(how, Dismissal::Released) {
            self.dismiss_all(&how);
            ctx.stop();
            return;
        }
        self.end_when_settled(Ending::Unwritten(how), ctx);
    }

    /// Moves to `phase`, keeping the paused-tables gauge true.
    pub(super) fn set_phase(&mut self, phase: Phase) {
        match (
            self.phase.pause_reason().is_some(),
            phase.pause_reason().is_some(),
        ) {
            (false, true) => metrics::gauge!(instruments::TABLES_PAUSED).increment(1.0),
            (true, false) => metrics::gauge!(instruments::TABLES_PAUSED).decrement(1.0),
            _ => {}
        }
        self.phase = phase;
    }

    /// Runs when the manager's watch (every TTL/10) finds this table's
    /// lease or liveness unproven, before each hand is dealt, and every
    /// TTL/10 while paused: a lease given up for good freezes the table;
    /// one that cannot be proven now (Redis slow or unreachable), or a
    /// liveness Postgres has not recorded lately, pauses it; once both are
    /// proven again it resumes (I4).
    pub(super) fn check_lease(&mut self, ctx: &mut Context<Self>) {
        let now = Instant::now();
        let live = !self.phase.is_stopped();
        if live && self.clock.is_revoked() {
            self.on_revoked(ctx);
            return;
        }
        let leased = self.clock.is_valid(now);
        let alive = self.env.is_alive_on_record(now);
        let unproven = if self.clock.is_contested() {
            PauseReason::Contested
        } else {
            PauseReason::RedisUnreachable
        };
        match self.phase.pause_reason() {
            None if self.phase.is_open() && !leased => {
                metrics::counter!(instruments::LEASES_LOST, "reason" => "deadline").increment(1);
                self.pause(unproven, ctx);
                self.ask_reassert();
            }
            // A pause over the lease learns why: a re-assert found another
            // owner's value in the key, or that value went and Redis is
            // what cannot be reached. Watchers are told the new reason.
            Some(reason @ (PauseReason::RedisUnreachable | PauseReason::Contested))
                if !leased && reason != unproven =>
            {
                let _g = self.span.clone().entered();
                warn!(event = "table_paused", reason = %unproven, "table paused");
                if let Phase::Paused(pause) = &mut self.phase {
                    pause.reason = unproven;
                }
                self.tell_paused(unproven);
                self.ask_reassert();
            }
            None if self.phase.is_open() && !alive => {
                self.pause(PauseReason::StoreUnreachable, ctx)
            }
            Some(_) if leased && alive => self.resume(ctx),
            Some(_) if !leased => self.ask_reassert(),
            _ => {}
        }
        self.arm_recheck(ctx);
    }

    /// Stops dealing without giving the table up: the hand in progress is
    /// held as it is (its action clock stops), nobody may act, and every
    /// watcher is told why.
    pub(super) fn pause(&mut self, reason: PauseReason, ctx: &mut Context<Self>) {
        if !self.phase.is_open() {
            return;
        }
        let _g = self.span.clone().entered();
        warn!(event = "table_paused", reason = %reason, "table paused");
        self.set_phase(Phase::paused(reason));
        self.arm_recheck(ctx);
        self.disarm(Slot::Action, ctx);
        self.disarm(Slot::NextHand, ctx);
        self.action_deadline_ms = None;
        self.tell_paused(reason);
    }

    /// Counts a pause and tells every watcher why play stopped.
    pub(super) fn tell_paused(&mut self, reason: PauseReason) {
        metrics::counter!(instruments::TABLE_PAUSES, "reason" => reason.as_str()).increment(1);
        self.notify_all(
            &ServerFrame::Paused {
                table: &self.id,
                reason,
            }
            .to_shared(),
        );
    }

    /// Deals again after a pause: watchers are told `resumed` with a fresh
    /// snapshot, and the decision in progress gets a full action clock.
    pub(super) fn resume(&mut self, ctx: &mut Context<Self>) {
        if self.phase.pause_reason().is_none() {
            return;
        }
        let _g = self.span.clone().entered();
        info!(event = "table_resumed", "table resumed");
        self.set_phase(Phase::Open);
        self.send_resumed();
        self.restart_clock(ctx);
        self.schedule_next_hand(ctx);
    }

    /// Tells every watcher the table deals again, with a snapshot each.
    pub(super) fn send_resumed(&mut self) {
        self.notify_all(&ServerFrame::Resumed { table: &self.id }.to_shared());
        self.send_snapshots();
    }

    /// Asks the manager to take the lease again, at most once per renew
    /// period while the table stays paused.
    fn ask_reassert(&mut self) {
        let period = self.env.ttl() / 3;
        let Phase::Paused(pause) = &mut self.phase else {
            return;
        };
        if pause.reassert_asked.is_some_and(|at| at.elapsed() < period) {
            return;
        }
        pause.reassert_asked = Some(Instant::now());
        self.owner.reassert.do_send(ReassertLease {
            table: self.id.clone(),
            fence: self.fence,
        });
    }

    /// Why a table that no longer plays refuses a client, if it does.
    pub(super) fn stopped_error(&self) -> Option<TableError> {
        match &self.phase {
            Phase::Open | Phase::Draining(_) | Phase::Paused(_) => None,
            Phase::Stopping(Stop {
                frozen: Some(_), ..
            }) => Some(TableError::Frozen),
            Phase::Stopping(_) if self.env.is_draining() => Some(TableError::ShuttingDown),
            Phase::Stopping(_) => Some(TableError::Releasing),
        }
    }

    /// The seat of a player acting at a table that still plays.
    pub(super) fn live_seat_of(&self, player: &PlayerId) -> Result<SeatNo, TableError> {
        if let Some(e) = self.stopped_error().or_else(|| self.paused_error()) {
            return Err(e);
        }
        self.game.seat_of(player).ok_or(TableError::NotSeated)
    }

    pub(super) fn refuse_unless_open(&self) -> Result<(), TableError> {
        match &self.phase {
            Phase::Open => Ok(()),
            Phase::Draining(_) => Err(TableError::ShuttingDown),
            Phase::Paused(pause) => Err(TableError::Paused(pause.reason)),
            Phase::Stopping(_) => Err(self.stopped_error().unwrap_or(TableError::Frozen)),
        }
    }

    /// Why nobody may act at a paused table.
    fn paused_error(&self) -> Option<TableError> {
        self.phase.pause_reason().map(TableError::Paused)
    }
}
