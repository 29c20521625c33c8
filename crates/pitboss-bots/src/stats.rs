//! What the run counts: shared counters and a latency histogram.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::turns::Effects;

/// Error lines kept for the summary; the count covers the rest.
const ERRORS_KEPT: usize = 12;

/// Sub-buckets per power of two: relative error under 1%.
const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;

/// Latencies in microseconds in log-linear buckets, so the progress bar can
/// read percentiles of any number of samples without sorting them.
#[derive(Debug, Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    pub max: u64,
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram {
            counts: vec![0; Self::bucket(u64::MAX) + 1],
            total: 0,
            max: 0,
        }
    }

    fn bucket(v: u64) -> usize {
        if v < SUB {
            return v as usize;
        }
        let shift = 63 - v.leading_zeros() - SUB_BITS;
        let sub = (v >> shift) - SUB;
        (((shift as u64) + 1) * SUB + sub) as usize
    }

    /// The smallest value in bucket `i` and the bucket's width.
    fn bucket_range(i: usize) -> (u64, u64) {
        let i = i as u64;
        if i < SUB {
            return (i, 1);
        }
        let shift = i / SUB - 1;
        ((SUB + i % SUB) << shift, 1 << shift)
    }

    pub fn record(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        if let Some(c) = self.counts.get_mut(Self::bucket(us)) {
            *c += 1;
        }
        self.total += 1;
        self.max = self.max.max(us);
    }

    /// The `q` quantile (0..=1) in microseconds; `None` without samples.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (low, width) = Self::bucket_range(i);
                return Some((low + width / 2).min(self.max));
            }
        }
        Some(self.max)
    }
}

pub fn ms(us: Option<u64>) -> String {
    match us {
        Some(us) => format!("{:.2} ms", us as f64 / 1000.0),
        None => "n/a".into(),
    }
}

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Counters stay meaningful after a panicking bot task.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[derive(Default)]
pub struct Stats {
    pub hands: AtomicU64,
    pub voided: AtomicU64,
    pub acts_sent: AtomicU64,
    pub acts_answered: AtomicU64,
    /// Turns deliberately left to the server's action clock.
    pub left_to_clock: AtomicU64,
    /// Turns that arrived too close to their deadline to answer safely.
    pub too_late: AtomicU64,
    /// The server's clock acted for one of our seats.
    pub timeouts: AtomicU64,
    /// An act overtaken by the clock (or by the wind-down): a benign race.
    pub stale: AtomicU64,
    pub rebuys: AtomicU64,
    /// New connections after one was lost (a drain, a crash, a network cut).
    pub reconnects: AtomicU64,
    /// Snapshots after the first on one connection or after a reconnect: a
    /// table's new hosting, or its state after a pause.
    pub resyncs: AtomicU64,
    pub granted: AtomicU64,
    pub protocol_errors: AtomicU64,
    /// Milliseconds since the start at which the last hand completed.
    pub last_hand_ms: AtomicU64,
    /// A bot hit something it cannot play through; the run winds down.
    pub fatal: AtomicBool,
    pub errors: Mutex<Vec<String>>,
    latency: Mutex<Option<Histogram>>,
}

impl Stats {
    pub fn note(&self, line: String) {
        let mut errors = lock(&self.errors);
        if errors.len() < ERRORS_KEPT {
            errors.push(line);
        }
    }

    pub fn protocol_error(&self, bot: &str, what: impl std::fmt::Display) {
        self.protocol_errors.fetch_add(1, Ordering::Relaxed);
        self.note(format!("{bot}: {what}"));
    }

    fn record_latency(&self, d: Duration) {
        self.acts_answered.fetch_add(1, Ordering::Relaxed);
        lock(&self.latency)
            .get_or_insert_with(Histogram::new)
            .record(d);
    }

    pub fn latency(&self) -> Option<Histogram> {
        lock(&self.latency).clone()
    }

    pub fn apply(&self, bot: &str, e: Effects) {
        self.timeouts.fetch_add(e.timeouts, Ordering::Relaxed);
        self.stale.fetch_add(e.stale, Ordering::Relaxed);
        for d in e.latencies {
            self.record_latency(d);
        }
        for err in e.errors {
            self.protocol_error(bot, err);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_are_within_one_percent() {
        let mut h = Histogram::new();
        for us in 1..=100_000u64 {
            h.record(Duration::from_micros(us));
        }
        for (q, want) in [(0.5, 50_000.0), (0.99, 99_000.0), (0.001, 100.0)] {
            let got = h.quantile(q).expect("samples") as f64;
            assert!((got - want).abs() / want < 0.01, "q{q}: {got} vs {want}");
        }
        assert_eq!(h.max, 100_000);
        for v in [0, 1, 127, 128, 255, 256, 1000, 1 << 40, u64::MAX] {
            let (low, width) = Histogram::bucket_range(Histogram::bucket(v));
            assert!(low <= v && v - low < width, "{v} not in [{low}, +{width})");
        }
    }
}
