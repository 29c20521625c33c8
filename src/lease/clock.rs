//! A lease's local deadline, shared by the manager and the table.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::lock;

/// A lease's local deadline: the instant after which this process may no
/// longer act on the lease because it cannot prove it still holds it.
/// Shared between the manager (which extends it on each confirmed renew) and
/// the table (which checks it before dealing each hand).
#[derive(Debug)]
pub struct LeaseClock {
    /// `None` once revoked.
    deadline: Mutex<Option<Instant>>,
    /// Revoked because Postgres holds a newer owner's fence: the copy stops
    /// without a state write rather than freezing.
    superseded: std::sync::atomic::AtomicBool,
    /// The last re-assert found another owner's value in the lease key;
    /// cleared by the next confirmed renew or re-assert.
    contested: std::sync::atomic::AtomicBool,
}

impl LeaseClock {
    /// `sent` is when the acquire or renew that was confirmed was *sent*:
    /// Redis started its TTL no earlier than that, so the lease cannot have
    /// expired before `sent + ttl`; the margin absorbs clock-rate drift
    /// between this process and Redis.
    pub fn new(sent: Instant, ttl: Duration) -> Arc<LeaseClock> {
        Arc::new(LeaseClock {
            deadline: Mutex::new(Some(sent + (ttl - safety_margin(ttl)))),
            superseded: std::sync::atomic::AtomicBool::new(false),
            contested: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Extends the deadline to what a renew sent at `sent` proves; a late
    /// answer to an older renew never shortens it, and a revoked clock
    /// stays revoked.
    pub fn confirm(&self, sent: Instant, ttl: Duration) {
        let proven = sent + (ttl - safety_margin(ttl));
        let mut deadline = self.lock();
        if let Some(d) = deadline.as_mut() {
            *d = (*d).max(proven);
        }
        self.contested
            .store(false, std::sync::atomic::Ordering::Release);
    }

    /// Records that a re-assert found another owner's value in the key.
    pub fn mark_contested(&self) {
        self.contested
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether the lease is unproven because another owner's value holds
    /// the key (rather than because Redis did not answer).
    pub fn is_contested(&self) -> bool {
        self.contested.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn is_valid(&self, now: Instant) -> bool {
        self.lock().is_some_and(|d| now < d)
    }

    pub fn remaining(&self, now: Instant) -> Duration {
        self.lock()
            .map_or(Duration::ZERO, |d| d.saturating_duration_since(now))
    }

    /// Whether the lease was given up for good (lost, or released), as
    /// opposed to merely unproven for now.
    pub fn is_revoked(&self) -> bool {
        self.lock().is_none()
    }

    /// Makes the lease unusable at once (it was lost or released).
    pub fn revoke(&self) {
        *self.lock() = None;
    }

    /// Revokes the lease because a newer owner has stamped the table.
    pub fn supersede(&self) {
        self.superseded
            .store(true, std::sync::atomic::Ordering::Release);
        self.revoke();
    }

    /// Whether the revocation was [`LeaseClock::supersede`]'s.
    pub fn is_superseded(&self) -> bool {
        self.superseded.load(std::sync::atomic::Ordering::Acquire)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        lock(&self.deadline)
    }
}

pub fn safety_margin(ttl: Duration) -> Duration {
    ttl / 5
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_clock_expires_before_the_ttl_runs_out() {
        let ttl = Duration::from_millis(1000);
        let sent = Instant::now();
        let clock = LeaseClock::new(sent, ttl);
        assert!(clock.is_valid(sent + Duration::from_millis(700)));
        assert!(!clock.is_valid(sent + Duration::from_millis(850)));
    }

    #[test]
    fn a_late_confirmation_of_an_older_send_never_shortens_the_deadline() {
        let ttl = Duration::from_millis(1000);
        let sent = Instant::now();
        let clock = LeaseClock::new(sent + Duration::from_millis(500), ttl);
        clock.confirm(sent, ttl);
        assert!(clock.is_valid(sent + Duration::from_millis(1200)));
    }

    #[test]
    fn the_deadline_counts_from_the_send_even_when_it_is_long_past() {
        // The first clock of a process may be built long after its acquire
        // was sent (a slow load): the deadline still counts from the send.
        let ttl = Duration::from_millis(1000);
        let sent = Instant::now();
        std::thread::sleep(Duration::from_millis(50));
        let clock = LeaseClock::new(sent, ttl);
        assert!(!clock.is_valid(sent + Duration::from_millis(810)));
        assert_eq!(
            clock.remaining(sent + Duration::from_millis(300)),
            Duration::from_millis(500)
        );
    }

    #[test]
    fn a_revoked_clock_is_not_revived_by_a_late_confirmation() {
        let ttl = Duration::from_millis(1000);
        let clock = LeaseClock::new(Instant::now(), ttl);
        clock.revoke();
        clock.confirm(Instant::now(), ttl);
        assert!(!clock.is_valid(Instant::now()));
    }

    #[test]
    fn revoked_clock_is_invalid_at_once() {
        let clock = LeaseClock::new(Instant::now(), Duration::from_secs(10));
        clock.revoke();
        assert!(!clock.is_valid(Instant::now()));
        assert!(
            !clock.is_superseded(),
            "a plain revocation is not a newer owner's"
        );
    }

    #[test]
    fn a_superseded_clock_is_revoked_at_once_and_says_why() {
        let ttl = Duration::from_secs(10);
        let clock = LeaseClock::new(Instant::now(), ttl);
        assert!(!clock.is_superseded());
        clock.supersede();
        assert!(clock.is_revoked() && clock.is_superseded());
        clock.confirm(Instant::now(), ttl);
        assert!(!clock.is_valid(Instant::now()));
    }
}
