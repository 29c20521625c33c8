//! Standing players up. A seat dealt into the hand in progress is folded at
//! once and vacated by the hand's own write when it ends; any other seat
//! (between hands, busted, seated mid-hand) is cashed out beside the
//! table's other work, and vacated, with its `left` told, once Postgres has
//! recorded the cash-out. Acts at the table never wait behind a cash-out.

use actix::prelude::*;
use tracing::{error, info, warn, Instrument};

use super::error::TableError;
use super::play::{beside, settled_on_retry, Applied};
use super::writer;
use super::Table;
use crate::chips::SeatNo;
use crate::games::{Game, Role};
use crate::instruments;
use crate::store::{CashOut, EntryKind, StoreError};
use crate::types::{Fence, FreezeReason};

impl<G: Game> Table<G> {
    /// Stands the player at `seat` up (a `leave`, or a reconnect window
    /// that ran out). A second stand-up while the first is in flight is the
    /// same stand-up.
    pub(super) fn stand_up(
        &mut self,
        seat: SeatNo,
        ctx: &mut Context<Self>,
    ) -> Result<(), TableError> {
        if self.side.is_cashing_out(seat) {
            return Ok(());
        }
        if self.game.takes_part(seat) {
            let events = self.apply(|g| g.leave(seat), ctx)?;
            let applied = Applied {
                kind: EntryKind::Leave,
                seat,
                decision: None,
                fields: None,
                spent: None,
            };
            self.commit(applied, events, None, ctx);
            return Ok(());
        }
        let Some(info) = self.game.occupants().into_iter().find(|s| s.seat == seat) else {
            return Err(TableError::NotSeated);
        };
        let out = CashOut {
            seat,
            player: info.player,
            stack: info.stack,
        };
        self.side.start_cash_out(seat);
        self.cash_out(out, self.fence, false, ctx);
        Ok(())
    }

    /// Runs one seat's cash-out beside the table's other work (`beside`). A
    /// transient failure is tried again with backoff for as long as the
    /// lease has not been given up (an earlier try may have committed:
    /// `settled_on_retry` tells).
    ///
    /// The seat stays occupied in the rules meanwhile, so nobody else sits
    /// there and no hand is dealt (`deal` waits for it): the seat's chips
    /// never play while Postgres may already have paid them out.
    fn cash_out(&mut self, out: CashOut, fence: Fence, retried: bool, ctx: &mut Context<Self>) {
        let (env, clock) = (self.env.clone(), self.clock.clone());
        let outs = vec![out.clone()];
        let fut = beside(
            async move {
                let mut tries: u32 = 0;
                loop {
                    let backoff = writer::backoff(tries);
                    if !backoff.is_zero() {
                        tokio::time::sleep(backoff).await;
                    }
                    let retry = retried || tries > 0;
                    let res = env.store.cash_out(fence, &outs).await;
                    match settled_on_retry(&env.store, &outs, retry, res).await {
                        Err(e) if e.is_transient() && !clock.is_revoked() => {
                            metrics::counter!(instruments::STORE_WRITE_RETRIES).increment(1);
                            tries = tries.saturating_add(1);
                            warn!(event = "store_write_retry", error = %e, tries, "cash-out failed; trying again");
                        }
                        other => return other,
                    }
                }
            }
            .instrument(self.span.clone()),
        );
        ctx.spawn(
            fut.into_actor(self)
                .map(move |res, act, ctx| act.cashed_out(out, fence, res, ctx)),
        );
    }

    /// A cash-out has an outcome: a recorded one vacates the seat and tells
    /// its `left`; a refused one is the table's to answer.
    fn cashed_out(
        &mut self,
        out: CashOut,
        fence: Fence,
        res: Result<(), StoreError>,
        ctx: &mut Context<Self>,
    ) {
        let _g = self.span.clone().entered();
        let stopped = self.phase.is_stopped();
        // The table moved to a new fence of its own (a re-assert) while the
        // cash-out carried the old one: nothing was recorded by that try,
        // and nobody else owns the table; the cash-out goes again.
        if let Err(StoreError::StaleOwnerBoundaryWrite { .. }) = res {
            if self.fence != fence && !stopped {
                info!(
                    seat = out.seat,
                    "cash-out carried an older fence of this table; trying again"
                );
                self.cash_out(out, self.fence, true, ctx);
                return;
            }
        }
        self.side.cash_out_done(out.seat);
        if let Err(e) = res {
            self.on_write_error(e, ctx);
            return;
        }
        if stopped {
            // Recorded, but this copy no longer deals: whoever hosts the
            // table next finds the seat empty in Postgres.
            return;
        }
        let Ok(events) = self.apply(|g| g.leave(out.seat), ctx) else {
            error!(
                seat = out.seat,
                "the rules refused a leave already paid out; freezing"
            );
            self.freeze(FreezeReason::InternalError, ctx);
            return;
        };
        let told = events.iter().any(|e| {
            matches!(G::role(&e.event), Role::Left { seat, player, stack }
                if seat == out.seat && *player == out.player && stack == out.stack)
        });
        if !told {
            error!(
                seat = out.seat,
                "the seat left with other chips than were paid out; freezing"
            );
            self.freeze(FreezeReason::InternalError, ctx);
            return;
        }
        self.presence.back(&out.player);
        self.broadcast(events);
        self.after_cash_out(ctx);
    }

    /// A seat was vacated; what waited for cash-outs goes on once none is
    /// in flight: a deal that came due meanwhile (`deal` skipped it; one
    /// still scheduled goes on its timer), a drain.
    fn after_cash_out(&mut self, ctx: &mut Context<Self>) {
        self.seats_changed(ctx);
        if self.side.cash_outs() > 0 {
            return;
        }
        if !self.timers.is_armed(super::timers::Slot::NextHand) {
            self.deal(ctx);
        }
        self.after_side_write(ctx);
    }
}
