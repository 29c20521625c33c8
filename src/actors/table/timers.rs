//! The table's deadlines as plain parts, each unit-tested without an actor:
//!
//! - [`Timers`]: one slot per kind of deadline (the action clock, the next
//!   deal, the drain, the idle release, the reconnect window, the lease
//!   re-check), each a one-shot timer armed only while something is due;
//!   arming a slot again replaces (and cancels) what it held;
//! - [`Presence`]: since when nobody has been seated, and which seated
//!   players have no connection and since when, with when each is due.
//!
//! An open table with its players present has no timer of its own beyond
//! the hand's (action clock, next deal). Its lease deadline is watched for
//! every table at once by the manager ([`CheckLease`]), so ten thousand
//! idle tables cost no wake-ups (docs/BENCHMARKS.md, "Idle cost").

use std::collections::HashMap;
use std::time::{Duration, Instant};

use actix::prelude::*;

use super::Table;
use crate::chips::PlayerId;
use crate::games::Game;

/// The kinds of deadline a table keeps, one timer each at most.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Slot {
    /// The action clock of the open decision.
    Action,
    /// The next deal.
    NextHand,
    /// The end of a drain's wait.
    Drain,
    /// The idle release, armed while nobody is seated.
    Idle,
    /// The next stand-up, armed while a seated player has no connection.
    Absent,
    /// The lease re-check, armed while paused.
    Recheck,
}

impl Slot {
    const COUNT: usize = 6;

    fn index(self) -> usize {
        match self {
            Slot::Action => 0,
            Slot::NextHand => 1,
            Slot::Drain => 2,
            Slot::Idle => 3,
            Slot::Absent => 4,
            Slot::Recheck => 5,
        }
    }
}

/// What cancels a timer: the actor's context in the table, a recorder in
/// the tests.
pub(super) trait Cancel {
    fn cancel(&mut self, handle: SpawnHandle);
}

impl<A> Cancel for Context<A>
where
    A: Actor<Context = Context<A>>,
{
    fn cancel(&mut self, handle: SpawnHandle) {
        self.cancel_future(handle);
    }
}

/// The table's one-shot timers, one per [`Slot`].
#[derive(Default)]
pub(super) struct Timers {
    slots: [Option<SpawnHandle>; Slot::COUNT],
}

impl Timers {
    pub(super) fn is_armed(&self, slot: Slot) -> bool {
        self.slots[slot.index()].is_some()
    }

    /// Holds `handle` in `slot`, cancelling a timer already there.
    pub(super) fn set(&mut self, slot: Slot, handle: SpawnHandle, c: &mut impl Cancel) {
        if let Some(old) = self.slots[slot.index()].replace(handle) {
            c.cancel(old);
        }
    }

    /// The timer in `slot` ran: there is nothing left to cancel.
    pub(super) fn fired(&mut self, slot: Slot) {
        self.slots[slot.index()] = None;
    }

    /// Cancels the timer in `slot`, if one is armed.
    pub(super) fn cancel(&mut self, slot: Slot, c: &mut impl Cancel) {
        if let Some(h) = self.slots[slot.index()].take() {
            c.cancel(h);
        }
    }

    /// Cancels the timers of play: the action clock, the next deal, the
    /// drain's wait. What a stopping or frozen table no longer runs.
    pub(super) fn cancel_play(&mut self, c: &mut impl Cancel) {
        for slot in [Slot::Action, Slot::NextHand, Slot::Drain] {
            self.cancel(slot, c);
        }
    }
}

/// How soon a deadline that is due but could not be acted on (a write
/// under way, the table paused) is tried again.
pub(super) fn retry_period(window: Duration) -> Duration {
    (window / 4).clamp(Duration::from_millis(20), Duration::from_secs(1))
}

/// How long until `window` has passed since `since`: what is left of it,
/// or the retry period once it has passed already.
pub(super) fn due_in(since: Instant, window: Duration, now: Instant) -> Duration {
    match window.saturating_sub(now.saturating_duration_since(since)) {
        Duration::ZERO => retry_period(window),
        left => left,
    }
}

/// Who is at the table in person: since when nobody has been seated, and
/// the seated players with no connection and since when. Their seats are
/// held for the reconnect window, then they are stood up.
#[derive(Debug, Default)]
pub(super) struct Presence {
    empty_since: Option<Instant>,
    absent: HashMap<PlayerId, Instant>,
}

impl Presence {
    /// A table just hosted: empty if nobody sits, and every seated player
    /// absent until they reconnect (after a redeploy, say), their seats
    /// held like any dropped connection's.
    pub(super) fn hosted(seated: Vec<PlayerId>, now: Instant) -> Presence {
        Presence {
            empty_since: seated.is_empty().then_some(now),
            absent: seated.into_iter().map(|p| (p, now)).collect(),
        }
    }

    /// Nobody is seated (kept from an earlier `now` if already so).
    pub(super) fn emptied(&mut self, now: Instant) {
        self.empty_since.get_or_insert(now);
    }

    /// Someone is seated.
    pub(super) fn occupied(&mut self) {
        self.empty_since = None;
    }

    /// Since when nobody has been seated; `None` while someone is.
    #[cfg(test)]
    fn empty_since(&self) -> Option<Instant> {
        self.empty_since
    }

    /// When the idle release is due, while nobody is seated.
    pub(super) fn idle_due(&self, evict: Duration, now: Instant) -> Option<Duration> {
        self.empty_since.map(|since| due_in(since, evict, now))
    }

    /// Whether the table has stood empty for `evict`.
    pub(super) fn idle_for(&self, evict: Duration, now: Instant) -> bool {
        self.empty_since
            .is_some_and(|since| now.saturating_duration_since(since) >= evict)
    }

    /// A seated player has no connection left; their window starts now, or
    /// is kept from an earlier start.
    pub(super) fn away(&mut self, player: PlayerId, now: Instant) {
        self.absent.entry(player).or_insert(now);
    }

    /// A player is back (or no longer seated): no window runs for them.
    pub(super) fn back(&mut self, player: &PlayerId) {
        self.absent.remove(player);
    }

    /// When the first reconnect window ends, while one runs.
    pub(super) fn absent_due(&self, window: Duration, now: Instant) -> Option<Duration> {
        let first = self.absent.values().min().copied()?;
        Some(due_in(first, window, now))
    }

    /// The players whose window has passed, earliest first.
    pub(super) fn expired(&self, window: Duration, now: Instant) -> Vec<PlayerId> {
        let mut gone: Vec<(&PlayerId, &Instant)> = self
            .absent
            .iter()
            .filter(|(_, since)| now.saturating_duration_since(**since) >= window)
            .collect();
        gone.sort_by_key(|(p, since)| (**since, (*p).clone()));
        gone.into_iter().map(|(p, _)| p.clone()).collect()
    }
}

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
    /// Arms `slot` to run `then` after `after`, replacing what it held.
    pub(super) fn arm(
        &mut self,
        slot: Slot,
        after: Duration,
        ctx: &mut Context<Self>,
        then: impl FnOnce(&mut Self, &mut Context<Self>) + 'static,
    ) {
        let handle = ctx.run_later(after, move |act, ctx| {
            act.timers.fired(slot);
            then(act, ctx);
        });
        self.timers.set(slot, handle, ctx);
    }

    /// Cancels the timer in `slot`, if one is armed.
    pub(super) fn disarm(&mut self, slot: Slot, ctx: &mut Context<Self>) {
        self.timers.cancel(slot, ctx);
    }

    /// Arms the idle release if nobody sits here and it is not armed yet.
    pub(super) fn arm_idle(&mut self, ctx: &mut Context<Self>) {
        if self.timers.is_armed(Slot::Idle) {
            return;
        }
        let Some(due) = self
            .presence
            .idle_due(self.env.idle_evict(), Instant::now())
        else {
            return;
        };
        self.arm(Slot::Idle, due, ctx, |act, ctx| {
            act.check_idle(ctx);
            // Still nobody seated but not released (a write, a pause, an
            // earlier start of the empty spell): look again.
            if !act.phase.is_stopped() {
                act.arm_idle(ctx);
            }
        });
    }

    /// Seats were taken or vacated: the idle release runs while nobody is
    /// seated, and is off while someone is.
    pub(super) fn seats_changed(&mut self, ctx: &mut Context<Self>) {
        if self.game.occupants().is_empty() {
            self.presence.emptied(Instant::now());
            self.arm_idle(ctx);
        } else {
            self.seated(ctx);
        }
    }

    /// Someone sat down: the idle release is off.
    pub(super) fn seated(&mut self, ctx: &mut Context<Self>) {
        self.presence.occupied();
        self.disarm(Slot::Idle, ctx);
    }

    /// Starts the reconnect window of a seated player who has no connection
    /// left (kept from an earlier start if there is one).
    pub(super) fn mark_absent(&mut self, player: PlayerId) {
        self.presence.away(player, Instant::now());
        if !self.timers.is_armed(Slot::Absent) {
            if let Some(me) = self.me.as_ref().and_then(actix::WeakAddr::upgrade) {
                me.do_send(ArmAbsent);
            }
        }
    }

    /// Arms the stand-up of the absent player whose window ends first.
    pub(super) fn arm_absent(&mut self, ctx: &mut Context<Self>) {
        if self.timers.is_armed(Slot::Absent) || self.phase.is_stopped() {
            return;
        }
        let window = self.env.reconnect_window();
        let Some(due) = self.presence.absent_due(window, Instant::now()) else {
            return;
        };
        self.arm(Slot::Absent, due, ctx, |act, ctx| {
            act.check_absent(ctx);
            act.arm_absent(ctx);
        });
    }

    /// While paused, the table looks at its lease on its own clock: it
    /// resumes, or asks for a re-assert again, without waiting to be told.
    pub(super) fn arm_recheck(&mut self, ctx: &mut Context<Self>) {
        if self.timers.is_armed(Slot::Recheck) || self.phase.pause_reason().is_none() {
            return;
        }
        let every = lease_check_period(self.env.ttl());
        self.arm(Slot::Recheck, every, ctx, |act, ctx| act.check_lease(ctx));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records what was cancelled, in order.
    #[derive(Default)]
    struct Cancelled(Vec<SpawnHandle>);

    impl Cancel for Cancelled {
        fn cancel(&mut self, handle: SpawnHandle) {
            self.0.push(handle);
        }
    }

    fn handles() -> impl Iterator<Item = SpawnHandle> {
        std::iter::successors(Some(SpawnHandle::default().next()), |h| Some(h.next()))
    }

    fn player(name: &str) -> PlayerId {
        PlayerId(name.to_owned())
    }

    #[test]
    fn arming_a_slot_again_cancels_the_timer_it_held_and_no_other() {
        let mut timers = Timers::default();
        let mut c = Cancelled::default();
        let mut h = handles();
        let (a, b, n) = (h.next().unwrap(), h.next().unwrap(), h.next().unwrap());
        timers.set(Slot::Action, a, &mut c);
        timers.set(Slot::NextHand, n, &mut c);
        assert!(c.0.is_empty(), "a first arm cancels nothing");
        timers.set(Slot::Action, b, &mut c);
        assert_eq!(c.0, vec![a]);
        assert!(timers.is_armed(Slot::Action) && timers.is_armed(Slot::NextHand));
        timers.cancel(Slot::Action, &mut c);
        assert_eq!(c.0, vec![a, b]);
        assert!(!timers.is_armed(Slot::Action));
        assert!(timers.is_armed(Slot::NextHand), "other slots are untouched");
    }

    #[test]
    fn a_timer_that_fired_is_not_cancelled_afterwards() {
        let mut timers = Timers::default();
        let mut c = Cancelled::default();
        let h = handles().next().unwrap();
        timers.set(Slot::Idle, h, &mut c);
        timers.fired(Slot::Idle);
        assert!(!timers.is_armed(Slot::Idle));
        timers.cancel(Slot::Idle, &mut c);
        assert!(c.0.is_empty(), "a spent handle is never cancelled");
    }

    #[test]
    fn cancelling_play_leaves_the_idle_absent_and_recheck_timers() {
        let mut timers = Timers::default();
        let mut c = Cancelled::default();
        let slots = [
            Slot::Action,
            Slot::NextHand,
            Slot::Drain,
            Slot::Idle,
            Slot::Absent,
            Slot::Recheck,
        ];
        for (slot, h) in slots.into_iter().zip(handles()) {
            timers.set(slot, h, &mut c);
        }
        timers.cancel_play(&mut c);
        assert_eq!(c.0.len(), 3);
        for slot in slots {
            let play = matches!(slot, Slot::Action | Slot::NextHand | Slot::Drain);
            assert_eq!(timers.is_armed(slot), !play, "{slot:?}");
        }
    }

    #[test]
    fn a_deadline_is_what_is_left_of_its_window_and_retried_once_passed() {
        let t0 = Instant::now();
        let window = Duration::from_secs(8);
        assert_eq!(due_in(t0, window, t0), window);
        assert_eq!(
            due_in(t0, window, t0 + Duration::from_secs(3)),
            Duration::from_secs(5)
        );
        // Passed: tried again at a quarter of the window, within bounds.
        assert_eq!(due_in(t0, window, t0 + window), Duration::from_secs(1));
        assert_eq!(
            due_in(t0, Duration::from_millis(200), t0 + Duration::from_secs(1)),
            Duration::from_millis(50)
        );
        assert_eq!(
            due_in(t0, Duration::from_millis(10), t0 + Duration::from_secs(1)),
            Duration::from_millis(20)
        );
    }

    #[test]
    fn a_hosted_table_holds_the_seats_of_players_who_have_not_reconnected() {
        let t0 = Instant::now();
        let window = Duration::from_secs(10);
        let p = Presence::hosted(vec![player("ann"), player("bob")], t0);
        assert_eq!(p.empty_since(), None);
        assert_eq!(p.absent_due(window, t0), Some(window));
        assert!(p.expired(window, t0 + Duration::from_secs(9)).is_empty());
        assert_eq!(
            p.expired(window, t0 + window),
            vec![player("ann"), player("bob")]
        );
        let empty = Presence::hosted(Vec::new(), t0);
        assert_eq!(empty.empty_since(), Some(t0));
        assert_eq!(empty.absent_due(window, t0), None);
    }

    #[test]
    fn a_window_runs_from_the_first_time_a_player_went_away_until_they_are_back() {
        let t0 = Instant::now();
        let window = Duration::from_secs(10);
        let mut p = Presence::default();
        p.away(player("ann"), t0);
        // Losing a second connection does not restart the window.
        p.away(player("ann"), t0 + Duration::from_secs(6));
        p.away(player("bob"), t0 + Duration::from_secs(4));
        assert_eq!(
            p.absent_due(window, t0 + Duration::from_secs(6)),
            Some(Duration::from_secs(4))
        );
        assert_eq!(
            p.expired(window, t0 + Duration::from_secs(12)),
            vec![player("ann")]
        );
        assert_eq!(
            p.expired(window, t0 + Duration::from_secs(14)),
            vec![player("ann"), player("bob")],
            "earliest first"
        );
        p.back(&player("ann"));
        assert_eq!(
            p.absent_due(window, t0 + Duration::from_secs(6)),
            Some(Duration::from_secs(8))
        );
        p.back(&player("bob"));
        assert_eq!(p.absent_due(window, t0), None);
    }

    #[test]
    fn the_idle_release_counts_from_when_the_table_first_emptied() {
        let t0 = Instant::now();
        let evict = Duration::from_secs(30);
        let mut p = Presence::default();
        assert_eq!(p.idle_due(evict, t0), None);
        assert!(!p.idle_for(evict, t0 + evict));
        p.emptied(t0);
        p.emptied(t0 + Duration::from_secs(10));
        assert_eq!(p.empty_since(), Some(t0));
        assert_eq!(
            p.idle_due(evict, t0 + Duration::from_secs(10)),
            Some(Duration::from_secs(20))
        );
        assert!(!p.idle_for(evict, t0 + Duration::from_secs(29)));
        assert!(p.idle_for(evict, t0 + evict));
        p.occupied();
        assert_eq!(p.idle_due(evict, t0 + evict), None);
        assert!(!p.idle_for(evict, t0 + evict));
    }
}
