//! The table's deadlines, each a one-shot timer armed only while something
//! is due: the idle release while nobody sits, the reconnect window while a
//! seated player has no connection, the lease re-check while paused.
//!
//! An open table with its players present has no timer of its own beyond
//! the hand's (action clock, next deal). Its lease deadline is watched for
//! every table at once by the manager ([`CheckLease`]), so ten thousand
//! idle tables cost no wake-ups (docs/BENCHMARKS.md, "Idle cost").

use std::time::{Duration, Instant};

use actix::prelude::*;

use super::{Phase, Table};
use crate::chips::PlayerId;
use crate::games::Game;

/// From the manager's lease watch: this table's lease or the instance's
/// liveness cannot be proven right now (or the lease was given up), so the
/// table checks its lease at once.
#[derive(Message)]
#[rtype(result = "()")]
pub struct CheckLease;

impl<G: Game> Handler<CheckLease> for Table<G> {
    type Result = ();

    fn handle(&mut self, _msg: CheckLease, ctx: &mut Self::Context) {
        self.check_lease(ctx);
    }
}

/// Sent by a table to itself where a seat's reconnect window starts outside
/// a handler that holds the context.
#[derive(Message)]
#[rtype(result = "()")]
struct ArmAbsent;

impl<G: Game> Handler<ArmAbsent> for Table<G> {
    type Result = ();

    fn handle(&mut self, _msg: ArmAbsent, ctx: &mut Self::Context) {
        self.arm_absent(ctx);
    }
}

/// How often the lease is checked again while a table is paused (and how
/// often the manager's watch looks at every lease).
pub fn lease_check_period(ttl: Duration) -> Duration {
    (ttl / 10).max(Duration::from_millis(20))
}

impl<G: Game> Table<G> {
    /// How soon a deadline that is due but could not be acted on (a write
    /// under way, the table paused) is tried again.
    fn retry_period(window: Duration) -> Duration {
        (window / 4).clamp(Duration::from_millis(20), Duration::from_secs(1))
    }

    /// Arms the idle release if nobody sits here and it is not armed yet.
    pub(super) fn arm_idle(&mut self, ctx: &mut Context<Self>) {
        let Some(since) = self.empty_since else {
            return;
        };
        if self.idle_timer.is_some() {
            return;
        }
        let evict = self.env.idle_evict();
        let due = match evict.saturating_sub(since.elapsed()) {
            Duration::ZERO => Self::retry_period(evict),
            left => left,
        };
        self.idle_timer = Some(ctx.run_later(due, |act, ctx| {
            act.idle_timer = None;
            act.check_idle(ctx);
            // Still nobody seated but not released (a write, a pause, an
            // earlier `empty_since`): look again.
            if !matches!(act.phase, Phase::Frozen(_) | Phase::Stopping) {
                act.arm_idle(ctx);
            }
        }));
    }

    /// Seats were taken or vacated: the idle release runs while nobody is
    /// seated, and is off while someone is.
    pub(super) fn seats_changed(&mut self, ctx: &mut Context<Self>) {
        if self.game.occupants().is_empty() {
            self.empty_since.get_or_insert_with(Instant::now);
            self.arm_idle(ctx);
        } else {
            self.seated(ctx);
        }
    }

    /// Someone sat down: the idle release is off.
    pub(super) fn seated(&mut self, ctx: &mut Context<Self>) {
        self.empty_since = None;
        Self::cancel(ctx, &mut self.idle_timer);
    }

    /// Starts the reconnect window of a seated player who has no connection
    /// left (kept from an earlier start if there is one).
    pub(super) fn mark_absent(&mut self, player: PlayerId) {
        self.absent.entry(player).or_insert_with(Instant::now);
        if self.absent_timer.is_none() {
            if let Some(me) = self.me.as_ref().and_then(actix::WeakAddr::upgrade) {
                me.do_send(ArmAbsent);
            }
        }
    }

    /// Arms the stand-up of the absent player whose window ends first.
    pub(super) fn arm_absent(&mut self, ctx: &mut Context<Self>) {
        if self.absent_timer.is_some() || matches!(self.phase, Phase::Frozen(_) | Phase::Stopping) {
            return;
        }
        let Some(first) = self.absent.values().min().copied() else {
            return;
        };
        let window = Duration::from_millis(self.env.settings.reconnect_window_ms);
        let due = match window.saturating_sub(first.elapsed()) {
            Duration::ZERO => Self::retry_period(window),
            left => left,
        };
        self.absent_timer = Some(ctx.run_later(due, |act, ctx| {
            act.absent_timer = None;
            act.check_absent(ctx);
            act.arm_absent(ctx);
        }));
    }

    /// While paused, the table looks at its lease on its own clock: it
    /// resumes, or asks for a re-assert again, without waiting to be told.
    pub(super) fn arm_recheck(&mut self, ctx: &mut Context<Self>) {
        if self.recheck_timer.is_some() || !matches!(self.phase, Phase::Paused(_)) {
            return;
        }
        let every = lease_check_period(self.env.ttl());
        self.recheck_timer = Some(ctx.run_later(every, |act, ctx| {
            act.recheck_timer = None;
            act.check_lease(ctx);
        }));
    }
}
