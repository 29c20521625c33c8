//! How a table stops: freezing, draining, idle release, standing up absent
//! players, the local lease deadline, and the fenced state write that ends
//! each of them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use tracing::{error, info, warn};

use super::{note_stale_write, Phase, Table};
use crate::game::{Command, PlayerId, SeatNo};
use crate::instruments;
use crate::protocol::{ClientError, ServerFrame};
use crate::store::StoreError;
use crate::types::{FreezeReason, StateReason, TableState};

/// Why a table stops, which decides what Postgres records and what its
/// watchers are told.
#[derive(Clone, Copy)]
pub(super) enum Farewell {
    Frozen(FreezeReason),
    Drained,
    Idle,
}

impl Farewell {
    fn recorded(self) -> (TableState, StateReason) {
        match self {
            Farewell::Frozen(reason) => (TableState::Frozen, reason.into()),
            Farewell::Drained => (TableState::Released, StateReason::Shutdown),
            Farewell::Idle => (TableState::Released, StateReason::Idle),
        }
    }
}

impl Table {
    /// Lease lost, stale write, or broken invariant: deal nothing more, kill
    /// the timers, tell every session why, drop them, stop. The state write
    /// is fenced like any other, so a stale owner freezes only its own copy.
    pub fn freeze(&mut self, reason: FreezeReason, ctx: &mut Context<Self>) {
        if matches!(self.phase, Phase::Frozen(_) | Phase::Stopping) {
            return;
        }
        let _g = self.span.clone().entered();
        warn!(event = "table_frozen", reason = %reason, "table frozen");
        self.phase = Phase::Frozen(reason);
        for t in [
            &mut self.action_timer,
            &mut self.next_hand_timer,
            &mut self.drain_timer,
        ] {
            Self::cancel(ctx, t);
        }
        self.record_and_stop(Farewell::Frozen(reason), ctx);
    }

    /// The last step of every way a table stops: a fenced state write (a
    /// stale owner's is refused and only its own copy stops), then the
    /// watchers are told and dropped, then the actor stops and the manager
    /// releases the lease.
    pub(super) fn record_and_stop(&mut self, farewell: Farewell, ctx: &mut Context<Self>) {
        let (to, reason) = farewell.recorded();
        let rt = self.rt.clone();
        let (id, fence) = (self.id.clone(), self.fence);
        let fut = async move {
            rt.store
                .transition(&id, fence, rt.instance_id(), to, reason)
                .await
        };
        ctx.wait(fut.into_actor(self).map(move |res, act, ctx| {
            let _g = act.span.clone().entered();
            match res {
                Ok(()) => match farewell {
                    Farewell::Drained => {
                        info!(event = "table_drained", "table persisted and released")
                    }
                    _ => info!(state = %to, reason = %reason, "table state recorded"),
                },
                Err(StoreError::StaleOwnerBoundaryWrite { fence, current, .. }) => {
                    note_stale_write(fence, current, to.as_str())
                }
                Err(e) => error!(error = %e, state = %to, "could not record the table's state"),
            }
            let notice: Option<Arc<str>> = match farewell {
                Farewell::Frozen(reason) => Some(
                    ServerFrame::Frozen {
                        table: &act.id,
                        reason,
                    }
                    .to_shared(),
                ),
                // Watchers learn why their subscription ends; a join brings
                // the table back.
                Farewell::Idle => Some(
                    ServerFrame::Released {
                        table: &act.id,
                        reason,
                    }
                    .to_shared(),
                ),
                Farewell::Drained => None,
            };
            act.dismiss_all(notice);
            ctx.stop();
        }));
    }

    pub(super) fn start_drain(&mut self, deadline: Instant, ctx: &mut Context<Self>) {
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
                    .transition(
                        &id,
                        fence,
                        rt.instance_id(),
                        TableState::Draining,
                        StateReason::Shutdown,
                    )
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

    pub(super) fn finish_drain(&mut self, ctx: &mut Context<Self>) {
        if self.phase != Phase::Draining {
            return;
        }
        self.phase = Phase::Stopping;
        self.record_and_stop(Farewell::Drained, ctx);
    }

    pub(super) fn check_idle(&mut self, ctx: &mut Context<Self>) {
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
        self.record_and_stop(Farewell::Idle, ctx);
    }

    /// Stands up players whose connection has been gone longer than the
    /// reconnect window (folded now if in a hand, cashed out at its end).
    ///
    /// One stand-up that writes ends the pass: the next stand-up must see
    /// stacks Postgres has recorded, never a result still being written.
    pub(super) fn check_absent(&mut self, ctx: &mut Context<Self>) {
        if self.phase != Phase::Open || self.writing {
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
            if self.writing {
                break;
            }
        }
    }

    pub(super) fn check_lease(&mut self, ctx: &mut Context<Self>) {
        if matches!(self.phase, Phase::Open | Phase::Draining)
            && !self.clock.is_valid(Instant::now())
        {
            let _g = self.span.clone().entered();
            warn!(
                event = "lease_deadline_passed",
                "lease not confirmed before its local deadline; freezing"
            );
            metrics::counter!(instruments::LEASES_LOST, "reason" => "deadline").increment(1);
            self.freeze(FreezeReason::LeaseLost, ctx);
        }
    }

    /// Why a table that no longer plays refuses a client, if it does.
    pub(super) fn stopped_error(&self) -> Option<ClientError> {
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
    pub(super) fn live_seat_of(&self, player: &PlayerId) -> Result<SeatNo, ClientError> {
        if let Some(e) = self.stopped_error() {
            return Err(e);
        }
        self.game
            .seat_of(player)
            .ok_or_else(|| ClientError::new("not_seated", "you have no seat at this table"))
    }

    pub(super) fn refuse_unless_open(&self) -> Result<(), ClientError> {
        match self.phase {
            Phase::Open => Ok(()),
            Phase::Draining => Err(ClientError::new("draining", "the server is shutting down")),
            _ => Err(self
                .stopped_error()
                .unwrap_or_else(|| ClientError::new("table_frozen", "the table is frozen"))),
        }
    }
}
