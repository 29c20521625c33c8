//! The single-flight boundary writer: at most one boundary write at a time
//! per table, tried again with backoff while its failure is transient and
//! the lease is held, the players told `paused` once while it is retried
//! and `resumed` once it has an outcome. Plain state the table drives; the
//! table runs the writes themselves (holding still meanwhile, `ctx.wait`).

use std::time::Duration;

#[derive(Debug, Default)]
pub(super) struct Writer {
    in_flight: bool,
    /// The players were told `paused` because this write is being retried.
    pause_told: bool,
}

/// What the table does once a try has an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Next {
    /// Try again as try number `tries`, after `backoff(tries)`; tell the
    /// players the table is paused first when `tell_paused`.
    Retry { tries: u32, tell_paused: bool },
    /// The write has an outcome (landed or refused, or given up on with
    /// the lease); players who were told `paused` are told it goes on when
    /// `resume`.
    Done { resume: bool },
}

impl Writer {
    /// Whether a boundary write is under way: nothing else that writes may
    /// start, so a later write never runs ahead of the one it depends on.
    pub fn in_flight(&self) -> bool {
        self.in_flight
    }

    /// A boundary write starts.
    pub fn begin(&mut self) {
        self.in_flight = true;
    }

    /// Try `tries` (0 for the first) answered: `transient` when it failed
    /// in a way worth trying again (Postgres unreachable, a budget ran
    /// out), `given_up` when the lease is given up, so nothing more may be
    /// written under it.
    pub fn answered(&mut self, transient: bool, given_up: bool, tries: u32) -> Next {
        if transient && !given_up {
            return Next::Retry {
                tries: tries.saturating_add(1),
                tell_paused: !std::mem::replace(&mut self.pause_told, true),
            };
        }
        self.in_flight = false;
        Next::Done {
            resume: std::mem::take(&mut self.pause_told),
        }
    }
}

/// How long before try `tries`: 0 before the first, then 100 ms doubling
/// up to 2 s.
pub(super) fn backoff(tries: u32) -> Duration {
    if tries == 0 {
        return Duration::ZERO;
    }
    let ms = 100u64.saturating_mul(1 << tries.saturating_sub(1).min(5));
    Duration::from_millis(ms.min(2000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_that_lands_first_time_tells_nothing_and_frees_the_writer() {
        let mut w = Writer::default();
        assert!(!w.in_flight());
        w.begin();
        assert!(w.in_flight());
        assert_eq!(w.answered(false, false, 0), Next::Done { resume: false });
        assert!(!w.in_flight());
    }

    #[test]
    fn transient_failures_are_retried_telling_paused_once_then_resumed_once() {
        let mut w = Writer::default();
        w.begin();
        assert_eq!(
            w.answered(true, false, 0),
            Next::Retry {
                tries: 1,
                tell_paused: true
            }
        );
        assert_eq!(
            w.answered(true, false, 1),
            Next::Retry {
                tries: 2,
                tell_paused: false
            }
        );
        assert!(w.in_flight(), "still under way while retried");
        assert_eq!(w.answered(false, false, 2), Next::Done { resume: true });
        assert!(!w.in_flight());
        // The next write starts with nobody told anything.
        w.begin();
        assert_eq!(w.answered(false, false, 0), Next::Done { resume: false });
    }

    #[test]
    fn a_transient_failure_with_the_lease_given_up_is_not_retried() {
        let mut w = Writer::default();
        w.begin();
        assert!(matches!(
            w.answered(true, false, 0),
            Next::Retry { tries: 1, .. }
        ));
        assert_eq!(w.answered(true, true, 1), Next::Done { resume: true });
        assert!(!w.in_flight());
    }

    #[test]
    fn a_refused_write_is_done_at_once() {
        let mut w = Writer::default();
        w.begin();
        assert_eq!(w.answered(false, true, 0), Next::Done { resume: false });
    }

    #[test]
    fn backoff_starts_at_zero_then_doubles_from_100_ms_to_2_s() {
        let ms: Vec<u128> = (0..9).map(|t| backoff(t).as_millis()).collect();
        assert_eq!(ms, [0, 100, 200, 400, 800, 1600, 2000, 2000, 2000]);
        assert_eq!(backoff(u32::MAX), Duration::from_secs(2));
    }
}
