//! One bot's turns: telling the action clock's races from protocol errors.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::actions::answers;

/// Turns a bot remembers after they close: a refusal for a raced act can
/// arrive a little after the turn itself has moved on.
const RECENT_TURNS: usize = 8;
/// Error codes an act can legitimately get when the action clock beat it:
/// the decision it answered was closed (`stale_decision`), the turn passed
/// on (`not_your_turn`), the time-out ended the hand and the next one
/// started (`stale_hand`) or is not dealt yet (`no_hand_in_progress`).
pub const RACE_CODES: [&str; 4] = [
    "stale_decision",
    "not_your_turn",
    "stale_hand",
    "no_hand_in_progress",
];

#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// Nothing heard yet.
    Open,
    /// Our act's `action` event arrived after this long. Provisional: a
    /// time-out's check or fold looks the same, and only a refusal arriving
    /// later tells them apart.
    Answered(Duration),
    /// The clock acted on a turn we left alone.
    TimedOut,
    /// The clock acted although we had sent an act; its refusal is to come.
    ClockFirst,
    /// Our act was refused before the clock's action reached us.
    RefusedFirst(&'static str),
    /// Refused because the clock beat it: a benign race.
    Stale,
    /// The hand was voided (or ended by the others leaving), or the table's
    /// owner changed or the connection was lost, with our act unanswered; a
    /// refusal may follow.
    Voided,
    /// Settled as a protocol error.
    Failed,
}

#[derive(Debug, Clone)]
struct Turn {
    hand: u64,
    decision: u64,
    sent: Option<(&'static str, Instant)>,
    outcome: Outcome,
}

/// An act of ours and how long its `action` event took to come back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Answered {
    pub sent: Instant,
    pub took: Duration,
}

/// What the bookkeeping concluded; the caller adds it to the counters.
#[derive(Debug, Default, PartialEq)]
pub struct Effects {
    pub timeouts: u64,
    pub stale: u64,
    pub latencies: Vec<Answered>,
    pub errors: Vec<String>,
}

/// One bot's own turns, kept apart from the socket so the rules that tell a
/// clock race from a real protocol error can be tested on their own.
///
/// The server answers an accepted act with an `action` event and a refused
/// one with an `error` frame that names no request. When the action clock
/// fires just before our act arrives, we get the clock's `action` event (a
/// check or fold) *and* a refusal, in either order: the refusal is written
/// as soon as the table handles the act, while events queued for the
/// session meanwhile follow it.
#[derive(Debug, Default)]
pub struct TurnBook {
    current: Option<Turn>,
    recent: VecDeque<Turn>,
}

impl TurnBook {
    fn turns_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut Turn> {
        self.recent.iter_mut().chain(self.current.iter_mut())
    }

    fn retire(&mut self, turn: Turn, fx: &mut Effects) {
        self.recent.push_back(turn);
        while self.recent.len() > RECENT_TURNS {
            if let Some(old) = self.recent.pop_front() {
                Self::settle(old, fx);
            }
        }
    }

    /// A turn leaving memory: its latency is final now.
    fn settle(turn: Turn, fx: &mut Effects) {
        match turn.outcome {
            Outcome::Answered(took) => {
                if let Some((_, sent)) = turn.sent {
                    fx.latencies.push(Answered { sent, took });
                }
            }
            Outcome::RefusedFirst(code) => fx.errors.push(format!(
                "act for hand {} refused with {code}, and no time-out explains it",
                turn.hand
            )),
            _ => {}
        }
    }

    /// A `turn` event for our seat, or a snapshot showing our turn.
    pub fn open(&mut self, hand: u64, decision: u64) -> Effects {
        let mut fx = Effects::default();
        if let Some(t) = self.current.take() {
            self.retire(t, &mut fx);
        }
        self.current = Some(Turn {
            hand,
            decision,
            sent: None,
            outcome: Outcome::Open,
        });
        fx
    }

    /// Our act for this decision is on its way (sent, neither answered
    /// nor written off): a `turn` repeating the decision (a resumed table
    /// announces it again with a fresh clock) needs no second answer.
    pub fn in_flight(&self, hand: u64, decision: u64) -> bool {
        self.current.as_ref().is_some_and(|t| {
            t.hand == hand
                && t.decision == decision
                && t.sent.is_some()
                && t.outcome == Outcome::Open
        })
    }

    pub fn sent(&mut self, action: &'static str, at: Instant) {
        if let Some(t) = self.current.as_mut() {
            t.sent = Some((action, at));
        }
    }

    /// An `action` event for our seat (not a blind or ante). `ours` is false
    /// while leaving, when a fold is our own `leave` and no time-out.
    pub fn on_action(&mut self, hand: u64, kind: &str, now: Instant, ours: bool) -> Effects {
        let mut fx = Effects::default();
        let Some(t) = self.current.as_mut().filter(|t| t.hand == hand) else {
            return fx;
        };
        t.outcome = match (&t.outcome, t.sent) {
            (Outcome::Open, None) => {
                if ours {
                    fx.timeouts += 1;
                }
                Outcome::TimedOut
            }
            (Outcome::Open, Some((sent, at))) if answers(sent, kind) => {
                Outcome::Answered(now.saturating_duration_since(at))
            }
            (Outcome::Open, Some(_)) => {
                fx.timeouts += 1;
                Outcome::ClockFirst
            }
            (Outcome::RefusedFirst(_), _) => {
                fx.timeouts += 1;
                fx.stale += 1;
                Outcome::Stale
            }
            // A second action on one turn is not something we can place.
            (other, _) => other.clone(),
        };
        fx
    }

    /// An `error` frame while playing. Race codes are matched to the turn
    /// they belong to; any other code is a protocol error.
    pub fn on_refusal(&mut self, code: &str, message: &str) -> Effects {
        let mut fx = Effects::default();
        let Some(&code) = RACE_CODES.iter().find(|c| **c == code) else {
            fx.errors.push(format!("error {code}: {message}"));
            return fx;
        };
        // 1. The clock's action already came: this is the refusal it implies.
        if let Some(t) = self
            .turns_mut()
            .find(|t| matches!(t.outcome, Outcome::ClockFirst | Outcome::Voided))
        {
            t.outcome = Outcome::Stale;
            fx.stale += 1;
            return fx;
        }
        // 2. An act still unanswered: wait for the clock's action to explain
        //    it (by the end of its hand at the latest).
        if let Some(t) = self
            .turns_mut()
            .find(|t| t.sent.is_some() && t.outcome == Outcome::Open)
        {
            t.outcome = Outcome::RefusedFirst(code);
            return fx;
        }
        // 3. What looked like our check or fold was the clock's.
        if let Some(t) = self.turns_mut().rev().find(|t| {
            matches!(t.outcome, Outcome::Answered(_))
                && matches!(t.sent, Some(("check" | "fold", _)))
        }) {
            t.outcome = Outcome::Stale;
            fx.timeouts += 1;
            fx.stale += 1;
            return fx;
        }
        fx.errors.push(format!(
            "error {code} ({message}) for no act of ours that a time-out could explain"
        ));
        fx
    }

    /// `hand_ended` or `hand_voided` for `hand`. Every event of the hand,
    /// the clock's actions included, precedes it, so an act of that hand
    /// still unexplained now never will be — unless the hand ended by other
    /// means than play: `forgive` when it was voided, or when the run is
    /// winding down and the other bots' `leave`s folded them out of turn,
    /// ending the hand while our act was on its way.
    pub fn hand_over(&mut self, hand: u64, forgive: bool) -> Effects {
        let mut fx = Effects::default();
        for t in self.turns_mut().filter(|t| t.hand <= hand) {
            Self::close(t, forgive, &mut fx);
        }
        if self.current.as_ref().is_some_and(|t| t.hand <= hand) {
            if let Some(t) = self.current.take() {
                self.retire(t, &mut fx);
            }
        }
        fx
    }

    /// What is still unexplained about a turn whose hand is over.
    fn close(t: &mut Turn, forgive: bool, fx: &mut Effects) {
        match t.outcome {
            Outcome::Open if t.sent.is_some() && forgive => t.outcome = Outcome::Voided,
            Outcome::RefusedFirst(_) if forgive => {
                t.outcome = Outcome::Stale;
                fx.stale += 1;
            }
            Outcome::Open if t.sent.is_some() => {
                fx.errors.push(format!(
                    "act for hand {} got neither an action event nor an error before the hand ended",
                    t.hand
                ));
                t.outcome = Outcome::Failed;
            }
            Outcome::RefusedFirst(code) => {
                fx.errors.push(format!(
                    "act for hand {} refused with {code}, but the action clock had not acted for us",
                    t.hand
                ));
                t.outcome = Outcome::Failed;
            }
            _ => {}
        }
    }

    /// Our act may never be answered: it was refused while the table's
    /// owner was changing (`unavailable`), or the connection it went out on
    /// is gone. The turn comes back (a snapshot or a replayed `turn`) or the
    /// clock acts; either way the act is no protocol error.
    pub fn interrupt(&mut self) {
        for t in self.turns_mut() {
            if t.outcome == Outcome::Open && t.sent.is_some() {
                t.outcome = Outcome::Voided;
            }
        }
    }

    /// Acts sent and not answered yet, nor written off.
    pub fn unanswered(&mut self) -> u32 {
        let n = self
            .turns_mut()
            .filter(|t| t.outcome == Outcome::Open && t.sent.is_some())
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// A snapshot after the first: the table's new hosting (a drain, a
    /// crash, a move), a rejoin, or the table resuming after a pause. What
    /// it shows replaces whatever the events before it would have said: the
    /// hand our turns belonged to went on there, or was voided, or never
    /// got recorded and is dealt again under the same number. So every turn
    /// remembered is closed leniently — except the one the snapshot shows
    /// still open (`pending`: its hand and decision), when our act for it is
    /// still on its way; then it is kept, and `true` says not to answer it
    /// again.
    pub fn rebase(&mut self, pending: Option<(u64, u64)>) -> (Effects, bool) {
        let mut fx = Effects::default();
        let in_flight = self.current.as_ref().is_some_and(|t| {
            pending == Some((t.hand, t.decision)) && t.sent.is_some() && t.outcome == Outcome::Open
        });
        let kept = if in_flight { self.current.take() } else { None };
        for t in self.turns_mut() {
            Self::close(t, true, &mut fx);
        }
        if let Some(t) = self.current.take() {
            self.retire(t, &mut fx);
        }
        self.current = kept;
        (fx, in_flight)
    }

    /// Everything still remembered is final (the bot is done).
    pub fn finish(&mut self) -> Effects {
        let mut fx = Effects::default();
        if let Some(t) = self.current.take() {
            self.recent.push_back(t);
        }
        for t in self.recent.drain(..) {
            Self::settle(t, &mut fx);
        }
        fx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_repeated_after_a_pause_is_in_flight_until_answered_or_interrupted() {
        let mut book = TurnBook::default();
        let t0 = Instant::now();
        book.open(16, 4);
        assert!(!book.in_flight(16, 4), "nothing sent yet");
        book.sent("bet", t0);
        assert!(book.in_flight(16, 4));
        assert!(!book.in_flight(16, 5));
        assert!(!book.in_flight(17, 4));
        // Refused while the owner changed: it must be answered again.
        book.interrupt();
        assert!(!book.in_flight(16, 4));
    }

    #[test]
    fn an_answered_act_yields_its_latency() {
        let mut book = TurnBook::default();
        let t0 = Instant::now();
        book.open(3, 1);
        book.sent("raise", t0);
        let fx = book.on_action(3, "all_in", t0 + Duration::from_millis(2), true);
        assert_eq!(fx, Effects::default());
        let fx = book.hand_over(3, false);
        assert!(fx.errors.is_empty());
        let fx = book.finish();
        let answered = Answered {
            sent: t0,
            took: Duration::from_millis(2),
        };
        assert_eq!(fx.latencies, vec![answered]);
    }

    #[test]
    fn a_turn_left_alone_counts_one_time_out() {
        let mut book = TurnBook::default();
        book.open(1, 1);
        let fx = book.on_action(1, "fold", Instant::now(), true);
        assert_eq!(fx.timeouts, 1);
        assert_eq!(book.finish(), Effects::default());
    }

    #[test]
    fn refusal_after_the_clocks_action_is_stale_in_either_order() {
        let now = Instant::now();
        // The clock's fold arrives first, then the refusal of our call.
        let mut book = TurnBook::default();
        book.open(5, 1);
        book.sent("call", now);
        assert_eq!(book.on_action(5, "fold", now, true).timeouts, 1);
        let fx = book.on_refusal("not_your_turn", "");
        assert_eq!((fx.stale, fx.errors.len()), (1, 0));
        // The refusal arrives first; the clock's check explains it.
        let mut book = TurnBook::default();
        book.open(5, 1);
        book.sent("bet", now);
        assert_eq!(book.on_refusal("not_your_turn", ""), Effects::default());
        let fx = book.on_action(5, "check", now, true);
        assert_eq!((fx.timeouts, fx.stale), (1, 1));
        assert!(book.hand_over(5, false).errors.is_empty());
        // Our check "answered" by the clock's check: the late stale_hand
        // refusal shows it was the clock's, and no latency is kept.
        let mut book = TurnBook::default();
        book.open(6, 1);
        book.sent("check", now);
        book.on_action(6, "check", now, true);
        book.hand_over(6, false);
        let fx = book.on_refusal("stale_hand", "");
        assert_eq!((fx.timeouts, fx.stale), (1, 1));
        assert!(book.finish().latencies.is_empty());
    }

    #[test]
    fn an_act_overtaken_by_a_void_or_the_wind_down_is_forgiven() {
        let now = Instant::now();
        // The others' leaves end the hand; our act's refusal comes after.
        let mut book = TurnBook::default();
        book.open(9, 1);
        book.sent("call", now);
        assert_eq!(book.hand_over(9, true), Effects::default());
        let fx = book.on_refusal("no_hand_in_progress", "");
        assert_eq!((fx.stale, fx.errors.len()), (1, 0));
        // ... or before it (the session writes a refusal ahead of the
        // events queued while it waited for the table).
        book.open(10, 1);
        book.sent("raise", now);
        assert_eq!(book.on_refusal("stale_hand", ""), Effects::default());
        let fx = book.hand_over(10, true);
        assert_eq!((fx.stale, fx.errors.len()), (1, 0));
        assert_eq!(book.finish(), Effects::default());
    }

    #[test]
    fn an_owner_change_closes_the_turns_it_interrupted_without_errors() {
        let now = Instant::now();
        // Refused `unavailable` while the owner changed: the hand is never
        // finished by this hosting, and nothing is left to explain.
        let mut book = TurnBook::default();
        book.open(7, 3);
        book.sent("call", now);
        book.interrupt();
        assert_eq!(book.hand_over(7, false), Effects::default());
        // The new hosting's snapshot shows hand 7 dealt again under the same
        // number: the old hand's refused act and its unanswered one are
        // closed, and a late race refusal is a benign one.
        let mut book = TurnBook::default();
        book.open(7, 4);
        book.sent("bet", now);
        book.on_refusal("not_your_turn", "");
        book.open(7, 5);
        book.sent("raise", now);
        let (fx, in_flight) = book.rebase(Some((7, 2)));
        assert!(!in_flight);
        assert_eq!((fx.stale, fx.errors.len()), (1, 0));
        assert_eq!(book.on_refusal("stale_hand", "").errors.len(), 0);
        assert!(book.hand_over(7, false).errors.is_empty());
        assert!(book.finish().errors.is_empty());
    }

    #[test]
    fn a_snapshot_showing_the_turn_our_act_answers_keeps_it() {
        let now = Instant::now();
        let mut book = TurnBook::default();
        book.open(4, 6);
        book.sent("call", now);
        let (fx, in_flight) = book.rebase(Some((4, 6)));
        assert_eq!((fx, in_flight), (Effects::default(), true));
        let fx = book.on_action(4, "call", now + Duration::from_millis(3), true);
        assert_eq!(fx, Effects::default());
        let took: Vec<Duration> = book.finish().latencies.iter().map(|a| a.took).collect();
        assert_eq!(took, vec![Duration::from_millis(3)]);
        // Refused meanwhile: answer the turn again.
        let mut book = TurnBook::default();
        book.open(4, 6);
        book.sent("call", now);
        book.interrupt();
        assert!(!book.rebase(Some((4, 6))).1);
    }

    #[test]
    fn refusals_no_time_out_explains_are_protocol_errors() {
        let now = Instant::now();
        let mut book = TurnBook::default();
        assert_eq!(book.on_refusal("illegal_action", "no").errors.len(), 1);
        assert_eq!(book.on_refusal("not_your_turn", "").errors.len(), 1);
        // Refused, and the hand ends without the clock acting for us.
        book.open(2, 1);
        book.sent("call", now);
        book.on_refusal("not_your_turn", "");
        assert_eq!(book.hand_over(2, false).errors.len(), 1);
        // An act that got nothing at all by the end of its hand.
        book.open(3, 1);
        book.sent("call", now);
        assert_eq!(book.hand_over(3, false).errors.len(), 1);
        // A raise answered by a check is the clock's, and needs a refusal.
        book.open(4, 1);
        book.sent("raise", now);
        book.on_action(4, "check", now, true);
        book.hand_over(4, false);
        assert_eq!(
            book.on_refusal("bad_amount", "").errors.len(),
            1,
            "only race codes are benign"
        );
    }
}
