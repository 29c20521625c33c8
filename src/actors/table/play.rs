//! The game's flow: applying commands to its rules, the action clock, the
//! boundary write at each settlement, and the next deal.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::time::{Duration, Instant};

use futures::future::LocalBoxFuture;
use rand_chacha::ChaCha20Rng;

use actix::prelude::*;
use tracing::{error, info, warn};

use super::timers::Slot;
use super::writer::{self, Next};
use super::{note_stale_write, Phase, Table};
use crate::chips::SeatNo;
use crate::games::{Game, Refusal, Role, Told};
use crate::instruments;
use crate::store::{Appended, Boundary, CashOut, Entry, EntryKind, StoreError, TableStore};
use crate::types::{ErrorCode, FreezeReason, PauseReason};

/// The events one change of a game's state produced.
pub(super) type Events<G> = Vec<Told<<G as Game>::Event>>;

/// What the players are told once a boundary's write has an outcome: its
/// result when recorded, else that it was voided.
pub(super) struct Outcome<G: Game> {
    result: Events<G>,
    voided: Told<G::Event>,
    /// The boundary's number.
    number: u64,
}

/// What follows a write once it has an outcome.
pub(super) enum After<G: Game> {
    /// A boundary: its result once recorded, else that it was voided.
    Boundary(Outcome<G>),
    /// A journalled command: the events it produced go out (and whatever
    /// follows them) once it is committed, and never otherwise (I15).
    Journalled {
        events: Events<G>,
        /// When the session read the act, for the latency histogram.
        received: Option<Instant>,
        /// The deadline of the decision the command opened, as journalled.
        deadline_ms: Option<i64>,
    },
}

/// A command a seat's table applied, as the journal records it.
pub(super) struct Applied {
    pub kind: EntryKind,
    pub seat: SeatNo,
    /// The decision it answered (an act's, the clock's).
    pub decision: Option<u64>,
    /// An act's own fields, which the game parses again on a replay.
    pub fields: Option<serde_json::Value>,
    /// How long its decision had been open, for a game with a clock of its
    /// own.
    pub spent: Option<Duration>,
}

/// The hand (or game) in progress as the journal knows it: the seed that
/// decides its randomness and the place of its next command.
#[derive(Clone, Copy)]
pub(super) struct Journalled {
    pub number: u64,
    pub seed: [u8; 32],
    pub next: u32,
}

impl Journalled {
    /// A fresh hand `number` with a seed of its own; its start is seq 0.
    pub(super) fn dealt(number: u64) -> Journalled {
        Journalled {
            number,
            seed: rand::random(),
            next: 0,
        }
    }

    /// The randomness command `seq` of this hand is given: a stream of the
    /// hand's seed of its own, so a refused command (which is not
    /// journalled) never shifts what a later one draws, and a replay of the
    /// journal draws exactly what the hand drew.
    pub(super) fn rng(&self, seq: u32) -> ChaCha20Rng {
        super::replay::rng(&self.seed, seq)
    }
}

impl<G: Game> Table<G> {
    /// Runs one change of the game. A panic inside the rules freezes this
    /// table only; the rest of the process carries on.
    pub(super) fn apply(
        &mut self,
        change: impl FnOnce(&mut G) -> Result<Events<G>, Refusal>,
        ctx: &mut Context<Self>,
    ) -> Result<Events<G>, Refusal> {
        match catch_unwind(AssertUnwindSafe(|| change(&mut self.game))) {
            Ok(result) => result,
            Err(_) => {
                error!("game logic panicked; freezing the table");
                self.freeze(FreezeReason::InternalError, ctx);
                Err(Refusal::new(ErrorCode::Internal, "the rules panicked"))
            }
        }
    }

    /// Runs a change that the runtime itself issues (a time-out). Its
    /// refusal means the table and the rules disagree, which is an internal
    /// error.
    pub(super) fn apply_internal(
        &mut self,
        change: impl FnOnce(&mut G) -> Result<Events<G>, Refusal>,
        ctx: &mut Context<Self>,
    ) -> Option<Events<G>> {
        if self.phase.is_stopped() {
            return None;
        }
        match self.apply(change, ctx) {
            Ok(events) => Some(events),
            Err(e) => {
                if self.phase.freeze_reason().is_none() {
                    error!(error = %e, "the rules refused a runtime command; freezing the table");
                    self.freeze(FreezeReason::InternalError, ctx);
                }
                None
            }
        }
    }

    /// Everything that follows a change of game state: timers, the
    /// boundary write at the end of a hand, the next deal.
    ///
    /// A hand's result (showdown, awards, its end and the seats it frees)
    /// is held back until Postgres has recorded it (I9): players are never
    /// told a result that might not stand.
    pub(super) fn advance(&mut self, mut events: Events<G>, ctx: &mut Context<Self>) {
        // The last decision announced is the one open now.
        let turn = events.iter().rev().find_map(|e| match G::role(&e.event) {
            Role::Decision { seat, number } => Some((seat, number)),
            _ => None,
        });
        let result_at = events
            .iter()
            .position(|e| G::role(&e.event) == Role::Result);
        let result = result_at.map(|at| events.split_off(at));
        self.broadcast(events);
        if let Some((seat, decision)) = turn {
            self.arm_action_timer(seat, decision, ctx);
        }
        // The seats a boundary's end vacates are cashed out by its own
        // write. A `left` anywhere else comes from a stand-up, whose cash-out
        // was recorded before the seat was vacated (`cash_out`).
        if let Some(result) = result {
            self.disarm(Slot::Action, ctx);
            self.action_deadline_ms = None;
            let left = self.cash_outs_of(&result);
            self.write_boundary(left, result, ctx);
        }
    }

    /// The seats these events vacate, as cash-outs to write; their players
    /// are no longer waited for.
    pub(super) fn cash_outs_of(&mut self, events: &Events<G>) -> Vec<CashOut> {
        let outs: Vec<CashOut> = events
            .iter()
            .filter_map(|e| match G::role(&e.event) {
                Role::Left {
                    seat,
                    player,
                    stack,
                } => Some(CashOut {
                    seat,
                    player: player.clone(),
                    stack,
                }),
                _ => None,
            })
            .collect();
        for out in &outs {
            self.presence.back(&out.player);
        }
        outs
    }

    /// The action clock of one decision: when it runs out with that very
    /// decision still open, the game answers it for the seat.
    pub(super) fn arm_action_timer(
        &mut self,
        seat: SeatNo,
        decision: u64,
        ctx: &mut Context<Self>,
    ) {
        // The deadline announced with the decision (a resumed one keeps the
        // deadline its first owner announced).
        let timeout = self.decision_timeout();
        let left = match self.action_deadline_ms {
            Some(deadline) => {
                let ms = deadline.saturating_sub(chrono::Utc::now().timestamp_millis());
                Duration::from_millis(u64::try_from(ms).unwrap_or(0)).min(timeout)
            }
            None => timeout,
        };
        let number = self.game.number();
        self.arm(Slot::Action, left, ctx, move |act, ctx| {
            let _g = act.span.clone().entered();
            let open = act.game.decision().map(|d| (d.seat, d.number));
            if act.game.number() != number || open != Some((seat, decision)) {
                return;
            }
            let Some(command) = act.game.on_timeout() else {
                return;
            };
            info!(seat, "action clock ran out");
            let j = act.journalled();
            let mut rng = j.rng(j.next);
            let spent = act.spent();
            let clocked = act.game.clock().map(|_| spent);
            let change = |g: &mut G| g.apply_timed(seat, decision, command, spent, &mut rng);
            if let Some(events) = act.apply_internal(change, ctx) {
                let applied = Applied {
                    kind: EntryKind::Timeout,
                    seat,
                    decision: Some(decision),
                    fields: None,
                    spent: clocked,
                };
                act.commit(applied, events, None, ctx);
            }
        });
    }

    /// Writes the boundary just reached, then tells its result; if the
    /// write is refused, the players are told it is void instead.
    pub(super) fn write_boundary(
        &mut self,
        outs: Vec<CashOut>,
        result: Events<G>,
        ctx: &mut Context<Self>,
    ) {
        let Some(settlement) = self.game.take_settlement() else {
            error!("a boundary ended without a settlement; freezing the table");
            self.freeze(FreezeReason::InternalError, ctx);
            return;
        };
        let voided = G::unrecorded(&settlement);
        let number = settlement.number;
        let boundary = match Boundary::of(settlement, self.game.boundary_state()) {
            Ok(b) => b,
            Err(e) => {
                error!(error = %e, "a settlement could not be recorded as JSON; freezing the table");
                self.freeze(FreezeReason::InternalError, ctx);
                return;
            }
        };
        let env = self.env.clone();
        let fence = self.fence;
        let (boundary, outs) = (Rc::new(boundary), Rc::new(outs));
        let write: Write = Rc::new(move |retry| {
            let (env, boundary, outs) = (env.clone(), boundary.clone(), outs.clone());
            Box::pin(async move {
                match env.store.write_boundary(fence, &boundary, &outs).await {
                    // An earlier try committed and only its answer was
                    // lost: the fence check passed, so the boundary is ours.
                    Err(StoreError::HandAlreadyApplied(_)) if retry => {}
                    other => other?,
                }
                metrics::counter!(instruments::HANDS_COMPLETED).increment(1);
                Ok(())
            })
        });
        self.persist(
            write,
            After::Boundary(Outcome {
                result,
                voided,
                number,
            }),
            ctx,
        );
    }

    /// Which hand the next journalled command belongs to. A command with no
    /// deal of this hosting behind it (none is dealt yet) gets a hand of its
    /// own, its start not journalled.
    pub(super) fn journalled(&mut self) -> Journalled {
        let number = self.game.number();
        match self.hand {
            Some(j) if j.number == number => j,
            _ => {
                let j = Journalled {
                    next: 1,
                    ..Journalled::dealt(number)
                };
                self.hand = Some(j);
                j
            }
        }
    }

    /// Commits a command just applied to the journal, and tells its events
    /// only once it is committed.
    pub(super) fn commit(
        &mut self,
        applied: Applied,
        events: Events<G>,
        received: Option<Instant>,
        ctx: &mut Context<Self>,
    ) {
        let j = self.journalled();
        let deadline_ms = self.deadline_of(&events);
        let entry = Entry {
            number: j.number,
            seq: j.next,
            kind: applied.kind,
            seat: Some(applied.seat),
            decision: applied.decision,
            command: applied.fields,
            seed: None,
            deadline_ms,
            told_after: Some(self.fanout.seq()),
            spent_ms: applied
                .spent
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        };
        if let Some(h) = &mut self.hand {
            h.next = h.next.saturating_add(1);
        }
        let after = After::Journalled {
            events,
            received,
            deadline_ms,
        };
        self.journal(entry, after, ctx);
    }

    /// The deadline of the decision these events open, if they open one: a
    /// full action clock from now, journalled with the command and
    /// announced with the decision.
    fn deadline_of(&self, events: &Events<G>) -> Option<i64> {
        let opens = events
            .iter()
            .any(|e| matches!(G::role(&e.event), Role::Decision { .. }));
        opens.then(|| self.full_clock_deadline_ms())
    }

    /// How long the open decision may take: the game's own clock (the
    /// side's time left), else the runtime's action clock.
    pub(super) fn decision_timeout(&self) -> Duration {
        self.game
            .clock()
            .unwrap_or_else(|| self.env.action_timeout())
    }

    /// How long the open decision has been open, from the deadline it was
    /// announced with (zero when none is known).
    pub(super) fn spent(&self) -> Duration {
        let Some(deadline) = self.action_deadline_ms else {
            return Duration::ZERO;
        };
        let left = deadline.saturating_sub(chrono::Utc::now().timestamp_millis());
        let left = Duration::from_millis(u64::try_from(left).unwrap_or(0));
        self.decision_timeout().saturating_sub(left)
    }

    /// The deadline (Unix ms) of a decision opened now with a full action
    /// clock (for a game with a clock of its own, the side's time left).
    pub(super) fn full_clock_deadline_ms(&self) -> i64 {
        let timeout = i64::try_from(self.decision_timeout().as_millis()).unwrap_or(i64::MAX);
        chrono::Utc::now()
            .timestamp_millis()
            .saturating_add(timeout)
    }

    /// Carries on with the hand (or game) in progress that the journal
    /// rebuilt for this hosting: its open decision keeps the deadline its
    /// first owner announced, and a result the journal reached but nobody
    /// recorded is recorded now, then told.
    pub(super) fn continue_hand(
        &mut self,
        resumed: super::replay::Resumed<G>,
        ctx: &mut Context<Self>,
    ) {
        let _g = self.span.clone().entered();
        info!(
            event = "hand_resumed",
            hand = resumed.hand.number,
            next = resumed.hand.next,
            "hand in progress resumed from the journal"
        );
        self.hand = Some(resumed.hand);
        self.keep_earlier(resumed.history);
        if !resumed.result.is_empty() {
            self.advance(resumed.result, ctx);
            return;
        }
        // The open decision is told again, with the deadline its first
        // owner announced: an act sent while the owner changed (refused by
        // a copy that was letting go, or lost with a killed one) was never
        // applied, and its player learns here that the turn is still theirs.
        if let Some(turn) = self.game.announce() {
            self.action_deadline_ms = resumed.deadline_ms;
            self.announced_deadline_ms = resumed.deadline_ms;
            self.advance(vec![turn], ctx);
            self.announced_deadline_ms = None;
        }
    }

    /// Writes one journal entry under the table's fence (in the process's
    /// next group commit), holding the table still until it lands, then
    /// does `after`.
    pub(super) fn journal(&mut self, entry: Entry, after: After<G>, ctx: &mut Context<Self>) {
        let env = self.env.clone();
        let fence = self.fence;
        let entry = Rc::new(entry);
        let write: Write = Rc::new(move |retry| {
            let (env, entry) = (env.clone(), entry.clone());
            Box::pin(async move {
                let started = Instant::now();
                match env.store.journal(fence, (*entry).clone()).await? {
                    Appended::Committed => {}
                    // An earlier try committed and only its answer was lost.
                    Appended::AlreadyThere if retry => {}
                    Appended::AlreadyThere => {
                        return Err(StoreError::Inconsistent(format!(
                            "journal entry {} of hand {} is recorded already",
                            entry.seq, entry.number
                        )))
                    }
                }
                metrics::histogram!(instruments::JOURNAL_COMMIT_SECONDS)
                    .record(started.elapsed().as_secs_f64());
                Ok(())
            })
        });
        self.persist(write, after, ctx);
    }

    /// Runs one boundary write, holding the table still until it commits:
    /// no message is handled meanwhile, and nothing else that writes may
    /// start (`Writer::in_flight`), so a later write never runs ahead of the one it
    /// depends on (actix runs queued `wait` futures last-in first-out).
    ///
    /// A transient failure (Postgres unreachable, a budget ran out) is
    /// tried again with backoff for as long as the lease has not been
    /// given up, and the players are told the table is paused meanwhile
    /// (I11). `told` is what the players learn once the write has an
    /// outcome.
    pub(super) fn persist(&mut self, write: Write, told: After<G>, ctx: &mut Context<Self>) {
        self.writer.begin();
        self.attempt(write, told, 0, ctx);
    }

    fn attempt(&mut self, write: Write, told: After<G>, tries: u32, ctx: &mut Context<Self>) {
        let backoff = writer::backoff(tries);
        let run = write.clone();
        let fut = async move {
            if !backoff.is_zero() {
                tokio::time::sleep(backoff).await;
            }
            run(tries > 0).await
        };
        ctx.wait(fut.into_actor(self).map(move |res, act, ctx| {
            let _g = act.span.clone().entered();
            let transient = res.as_ref().is_err_and(StoreError::is_transient);
            let next = act.writer.answered(transient, act.clock.is_revoked(), tries);
            let resume = match next {
                Next::Retry { tries, tell_paused } => {
                    metrics::counter!(instruments::STORE_WRITE_RETRIES).increment(1);
                    if let Err(e) = &res {
                        warn!(event = "store_write_retry", error = %e, tries, "boundary write failed; trying again");
                    }
                    if tell_paused {
                        act.tell_paused(PauseReason::StoreUnreachable);
                    }
                    act.attempt(write, told, tries, ctx);
                    return;
                }
                Next::Done { resume } => resume,
            };
            match res {
                Ok(()) => match told {
                    After::Journalled {
                        events,
                        received,
                        deadline_ms,
                    } => {
                        act.announced_deadline_ms = deadline_ms;
                        act.advance(events, ctx);
                        act.announced_deadline_ms = None;
                        if let Some(at) = received {
                            metrics::histogram!(instruments::ACTION_TO_BROADCAST_SECONDS)
                                .record(at.elapsed().as_secs_f64());
                        }
                        act.end_write_pause(resume, ctx);
                    }
                    told => {
                        if let After::Boundary(told) = told {
                            act.broadcast(told.result);
                        }
                        act.end_write_pause(resume, ctx);
                        act.after_boundary(ctx);
                    }
                },
                Err(e) => {
                    act.end_write_pause(resume, ctx);
                    // A refused write changed nothing: the hand is void. A
                    // transient failure given up on (the lease is gone) may
                    // or may not have landed, so nothing is claimed about it
                    // beyond the freeze.
                    // A journalled command refused is never told (I15).
                    // A boundary refused because a newer owner holds the
                    // table is not void: that owner resumes the hand from
                    // the journal and records it, unless an operator's
                    // freeze voided it.
                    let voided = match &e {
                        StoreError::StaleOwnerBoundaryWrite { frozen, .. } => {
                            *frozen == Some(FreezeReason::Operator)
                        }
                        e => !e.is_transient(),
                    };
                    match told {
                        After::Boundary(told) if voided => {
                            warn!(
                                event = "hand_voided",
                                "the hand's result was not recorded; voided"
                            );
                            act.voided = Some(told.number);
                            act.broadcast(vec![told.voided]);
                        }
                        _ => {}
                    }
                    act.on_write_error(e, ctx);
                }
            }
        }));
    }

    /// After a retried write has an outcome, players who were told the table
    /// paused (`resume`) learn that it goes on.
    fn end_write_pause(&mut self, resume: bool, ctx: &mut Context<Self>) {
        if resume && self.phase.is_open() {
            info!(event = "table_resumed", "boundary recorded; table resumed");
            self.send_resumed();
            self.restart_clock(ctx);
        }
    }

    /// After a pause the decision in progress starts over: its `turn` is
    /// told again (same decision number, a full action clock), so the
    /// player to act knows they still may.
    pub(super) fn restart_clock(&mut self, ctx: &mut Context<Self>) {
        if let Some(turn) = self.game.announce() {
            self.advance(vec![turn], ctx);
        }
    }

    pub(super) fn on_write_error(&mut self, e: StoreError, ctx: &mut Context<Self>) {
        match e {
            StoreError::StaleOwnerBoundaryWrite {
                fence,
                current,
                frozen,
                ..
            } => {
                note_stale_write(fence, current, "boundary write");
                // Frozen in Postgres (an operator, through any instance):
                // told with the reason recorded there.
                self.freeze(frozen.unwrap_or(FreezeReason::LeaseLost), ctx);
            }
            other if self.clock.is_revoked() => {
                error!(error = %other, "boundary write failed and the lease was given up");
                self.on_revoked(ctx);
            }
            other => {
                error!(error = %other, "boundary write failed; freezing the table");
                self.freeze(FreezeReason::StoreError, ctx);
            }
        }
    }

    /// Called once a boundary is safely persisted.
    pub(super) fn after_boundary(&mut self, ctx: &mut Context<Self>) {
        self.seats_changed(ctx);
        match self.phase {
            Phase::Open => self.schedule_next_hand(ctx),
            Phase::Draining(_) if !self.game.in_progress() => self.finish_drain(ctx),
            _ => {}
        }
    }

    pub(super) fn schedule_next_hand(&mut self, ctx: &mut Context<Self>) {
        if !self.phase.is_open() || self.timers.is_armed(Slot::NextHand) || !self.game.can_start() {
            return;
        }
        let delay = self.env.next_hand_delay();
        self.arm(Slot::NextHand, delay, ctx, |act, ctx| act.deal(ctx));
    }

    pub(super) fn deal(&mut self, ctx: &mut Context<Self>) {
        let _g = self.span.clone().entered();
        if !self.phase.is_open() || !self.game.can_start() {
            return;
        }
        // A seat being cashed out must not be dealt in: the deal goes once
        // no cash-out is in flight (`after_cash_out`).
        if self.side.cash_outs() > 0 {
            return;
        }
        // The hand is prepared on a copy first, so that the lease check
        // below is the last step before it exists anywhere: a process
        // stopped (SIGSTOP) or descheduled between the check and the deal
        // has as little room as possible to deal on a lease it has lost.
        // Who is dealt in, as the journal keeps it for a rebuild.
        let seats = super::replay::seats_json(&self.game.occupants());
        let mut next = self.game.clone();
        // The deal's randomness comes from a seed of its own, journalled
        // with it (server-side only): a replay deals the same cards.
        let dealt = Journalled::dealt(0);
        let mut rng = dealt.rng(0);
        let events = match catch_unwind(AssertUnwindSafe(|| next.start(&mut rng))) {
            Ok(Some(events)) => events,
            Ok(None) => {
                error!("the game did not start although it said it could; freezing the table");
                self.freeze(FreezeReason::InternalError, ctx);
                return;
            }
            Err(_) => {
                error!("game logic panicked; freezing the table");
                self.freeze(FreezeReason::InternalError, ctx);
                return;
            }
        };
        // I1: never deal on a lease this process cannot prove it holds, nor
        // while others might already consider this process gone.
        let now = Instant::now();
        if !self.clock.is_valid(now) || !self.env.is_alive_on_record(now) {
            warn!(
                event = "lease_deadline_passed",
                "lease or liveness not proven before dealing"
            );
            self.check_lease(ctx);
            return;
        }
        self.game = next;
        self.refresh_span();
        let _g = self.span.clone().entered();
        info!(
            event = "hand_dealt",
            hand = self.game.number(),
            dealt_fence = self.fence.0,
            "hand dealt"
        );
        let number = self.game.number();
        self.hand = Some(Journalled {
            number,
            next: 1,
            ..dealt
        });
        let deadline_ms = self.deadline_of(&events);
        let start = Entry {
            deadline_ms,
            told_after: Some(self.fanout.seq()),
            ..Entry::start(number, dealt.seed, seats)
        };
        let after = After::Journalled {
            events,
            received: None,
            deadline_ms,
        };
        self.journal(start, after, ctx);
    }

    /// Tells the players the hand in progress is void: an operator froze
    /// the table, and the freeze voided it in Postgres (its journal gone,
    /// its number burnt, every stack the last boundary's). Nothing is
    /// written here: the fence has moved past this copy.
    pub(super) fn tell_voided(&mut self, ctx: &mut Context<Self>) {
        if !self.game.in_progress() {
            return;
        }
        warn!(
            event = "hand_voided",
            hand = self.game.number(),
            "an operator's freeze voided the hand in progress"
        );
        self.disarm(Slot::Action, ctx);
        let void = catch_unwind(AssertUnwindSafe(|| self.game.void()));
        if let Ok(Some(events)) = void {
            self.broadcast(events);
        }
    }
}

/// One boundary write, run again on a transient failure; its argument says
/// whether this is a retry (an earlier try may have committed).
pub(super) type Write = Rc<dyn Fn(bool) -> LocalBoxFuture<'static, Result<(), StoreError>>>;

/// Starts a store write as a task of its own, beside the table's context,
/// and returns its outcome. A write run in the context instead would stay
/// unpolled while a boundary write holds the context still (`ctx.wait`),
/// keeping its pool connection (mid-commit, perhaps) from the very write
/// that waits for one.
pub(super) fn beside<T: 'static>(
    write: impl Future<Output = Result<T, StoreError>> + 'static,
) -> impl Future<Output = Result<T, StoreError>> {
    let task = actix_rt::spawn(write);
    async move {
        match task.await {
            Ok(res) => res,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Only when the arbiter stops, with the process.
            Err(_) => Err(StoreError::Db(sqlx::Error::PoolClosed)),
        }
    }
}

/// A retried cash-out whose seats are already vacated was committed by an
/// earlier try whose answer was lost: that is its success.
pub(super) async fn settled_on_retry(
    store: &TableStore,
    outs: &[CashOut],
    retry: bool,
    res: Result<(), StoreError>,
) -> Result<(), StoreError> {
    match res {
        Err(StoreError::Inconsistent(_)) if retry && !outs.is_empty() => {
            if store.all_vacated(outs).await? {
                Ok(())
            } else {
                res
            }
        }
        other => other,
    }
}
