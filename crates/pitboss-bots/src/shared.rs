//! What every bot of a run shares, and how it judges a turn's deadline.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::admin::Admin;
use crate::endpoints::Endpoints;
use crate::options::Options;
use crate::results::ResultLog;
use crate::stats::Stats;

/// The contract's default action clock, assumed until a `turn` says otherwise.
const DEFAULT_ACTION_CLOCK: Duration = Duration::from_secs(20);

/// What every bot shares.
pub struct Shared {
    pub opts: Options,
    pub admin: Admin,
    pub urls: Endpoints,
    pub stats: Stats,
    /// `--results`: where every hand result told is written.
    pub results: Option<ResultLog>,
    pub start: Instant,
    /// The smallest (local wall clock − server send time) seen on any turn,
    /// in ms: the clock offset plus the best-case delivery time. How far a
    /// turn exceeds it is how late that turn reached us.
    clock_offset_ms: AtomicI64,
    /// The longest action clock seen in a `turn`, in ms (0 = none yet).
    action_clock_ms: AtomicU64,
}

impl Shared {
    pub fn new(opts: Options, admin: Admin, urls: Endpoints, results: Option<ResultLog>) -> Shared {
        Shared {
            opts,
            admin,
            urls,
            stats: Stats::default(),
            results,
            start: Instant::now(),
            clock_offset_ms: AtomicI64::new(i64::MAX),
            action_clock_ms: AtomicU64::new(0),
        }
    }

    /// Called just before the bots are told to stop, so that a bot which
    /// has not noticed the stop yet already judges hand ends leniently; the
    /// acts answered from now on are the wind-down's.
    pub fn begin_wind_down(&self) {
        self.stats.begin_wind_down();
    }

    pub fn winding_down(&self) -> bool {
        self.stats.wind_down_at().is_some()
    }

    pub fn action_clock(&self) -> Duration {
        match self.action_clock_ms.load(Ordering::Relaxed) {
            0 => DEFAULT_ACTION_CLOCK,
            ms => Duration::from_millis(ms),
        }
    }

    /// Long enough for a hand in progress to finish when every live player
    /// is folded by their own `leave` and a stray seat times out.
    pub fn leave_timeout(&self) -> Duration {
        Duration::from_secs(10) + self.action_clock() * 4
    }

    /// How long a playing bot's table may say nothing before the bot asks
    /// for its state again.
    pub fn silence_limit(&self) -> Duration {
        Duration::from_secs(20) + self.action_clock() * 5
    }

    /// A run in which no hand completes for this long is stuck.
    pub fn stall_limit(&self) -> Duration {
        Duration::from_secs(30) + self.action_clock() * 10
    }

    /// How long the server will still wait for this turn (see
    /// [`turn_time_left`]); also learns the server's action clock.
    pub fn time_left(&self, deadline_ms: i64, timeout_ms: Option<u64>) -> Duration {
        if let Some(t) = timeout_ms {
            self.action_clock_ms.fetch_max(t, Ordering::Relaxed);
        }
        turn_time_left(&self.clock_offset_ms, wall_ms(), deadline_ms, timeout_ms)
    }

    /// How long the server will still wait for a turn found in a snapshot,
    /// which says only when the clock runs out (`None`: it is about to be
    /// restarted in full, as after a pause).
    pub fn snapshot_time_left(&self, deadline_ms: Option<i64>) -> Duration {
        let clock = self.action_clock();
        match deadline_ms {
            None => clock,
            Some(deadline) => deadline_time_left(
                self.clock_offset_ms.load(Ordering::Relaxed),
                wall_ms(),
                deadline,
            )
            .min(clock),
        }
    }
}

/// How long until a deadline read off the server's wall clock. The best
/// offset seen on `turn`s (our clock minus the server's, plus the quickest
/// delivery) converts it to ours; a snapshot taken in the middle of a turn
/// cannot teach it anything, as it was not sent when the turn began.
fn deadline_time_left(best_offset: i64, now_ms: i64, deadline_ms: i64) -> Duration {
    let left = if best_offset == i64::MAX {
        // No turn seen yet: the wall clocks are all there is.
        deadline_ms.saturating_sub(now_ms)
    } else {
        deadline_ms
            .saturating_add(best_offset)
            .saturating_sub(now_ms)
    };
    Duration::from_millis(u64::try_from(left).unwrap_or(0))
}

/// How long the server will still wait for a turn, judged without trusting
/// the two wall clocks to agree: the turn's own `timeout_ms`, less how much
/// later than the best case seen so far (`best_offset`, shared) it reached
/// us. A turn delivered late (a busy client, a slow network) has less time.
fn turn_time_left(
    best_offset: &AtomicI64,
    now_ms: i64,
    deadline_ms: i64,
    timeout_ms: Option<u64>,
) -> Duration {
    let Some(timeout) = timeout_ms else {
        // A server that does not say its clock: trust the wall clocks.
        return Duration::from_millis(u64::try_from(deadline_ms - now_ms).unwrap_or(0));
    };
    let sent = deadline_ms.saturating_sub_unsigned(timeout);
    let offset = now_ms.saturating_sub(sent);
    let best = best_offset.fetch_min(offset, Ordering::Relaxed).min(offset);
    let lag = u64::try_from(offset - best).unwrap_or(0);
    Duration::from_millis(timeout.saturating_sub(lag))
}

fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_left_discounts_a_late_delivery_whatever_the_clock_offset() {
        let best = AtomicI64::new(i64::MAX);
        // The server's wall clock runs 5 s ahead of ours.
        let turn = |now: i64, late_ms: i64| {
            let sent = now + 5000 - late_ms;
            turn_time_left(&best, now, sent + 300, Some(300))
        };
        assert_eq!(turn(1_000_000, 0), Duration::from_millis(300));
        assert_eq!(turn(1_000_500, 200), Duration::from_millis(100));
        assert_eq!(turn(1_001_000, 900), Duration::ZERO);
        assert_eq!(turn(1_002_000, 0), Duration::from_millis(300));
        // Without timeout_ms the wall clocks are all there is.
        assert_eq!(
            turn_time_left(&best, 1000, 1250, None),
            Duration::from_millis(250)
        );
    }

    #[test]
    fn a_snapshot_deadline_is_read_through_the_best_offset_seen() {
        // Our clock runs 5 s behind the server's; the quickest turn took 2 ms.
        let best = -5000 + 2;
        let now = 1_000_000;
        let deadline = now + 5000 + 300;
        assert_eq!(
            deadline_time_left(best, now, deadline),
            Duration::from_millis(302)
        );
        assert_eq!(
            deadline_time_left(best, now + 400, deadline),
            Duration::ZERO
        );
        assert_eq!(
            deadline_time_left(i64::MAX, now, now + 250),
            Duration::from_millis(250)
        );
    }
}
