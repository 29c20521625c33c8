//! What the run counts: shared counters and a latency histogram.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::turns::{Answered, Effects};

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

    pub fn count(&self) -> u64 {
        self.total
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
    /// Of the re-syncs, snapshots of the hand in progress this bot was in
    /// (after an owner change: the hand resumed, not voided), each checked
    /// against the cards and board it was told before.
    pub resumed: AtomicU64,
    pub granted: AtomicU64,
    pub protocol_errors: AtomicU64,
    /// Of the protocol errors, frames out of order on their connection: an
    /// event whose `seq` is not above every `seq` told before, or a
    /// snapshot below the last event.
    pub out_of_order: AtomicU64,
    /// Milliseconds since the start at which the last hand completed.
    pub last_hand_ms: AtomicU64,
    /// A bot hit something it cannot play through; the run winds down.
    pub fatal: AtomicBool,
    pub errors: Mutex<Vec<String>>,
    latency: Mutex<Latencies>,
    /// The run's bots and warm-up ([`Stats::set_run`]), how many bots have
    /// been seated at least once, and when the last of them was: play is
    /// steady the warm-up later.
    run: OnceLock<(u64, Duration)>,
    ever_seated: AtomicU64,
    all_seated_at: OnceLock<Instant>,
    /// When the run began to wind down (the bots leave).
    wind_down_at: OnceLock<Instant>,
}

/// The part of the run an act belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Sent before play was steady: tables filling, every bot connecting,
    /// joining and buying in at once, and the warm-up after the last seat
    /// (the first hands of every table dealt and ended in step).
    Arrival,
    /// Sent once every bot had been seated and the warm-up had passed,
    /// answered before the wind-down.
    Play,
    /// Answered after the bots were told to stop and leave, all at once.
    WindDown,
}

impl Phase {
    pub const ALL: [Phase; 3] = [Phase::Arrival, Phase::Play, Phase::WindDown];

    pub fn name(self) -> &'static str {
        match self {
            Phase::Arrival => "in arrival",
            Phase::Play => "in play",
            Phase::WindDown => "in wind-down",
        }
    }
}

/// Act latencies over the whole run and by phase.
#[derive(Debug, Clone, Default)]
pub struct Latencies {
    pub all: Option<Histogram>,
    by_phase: [Option<Histogram>; 3],
}

impl Latencies {
    pub fn phase(&self, p: Phase) -> Option<&Histogram> {
        self.by_phase[p as usize].as_ref()
    }

    fn record(&mut self, phase: Phase, d: Duration) {
        self.by_phase[phase as usize]
            .get_or_insert_with(Histogram::new)
            .record(d);
        self.all.get_or_insert_with(Histogram::new).record(d);
    }
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

    /// How many bots the run has, for [`Stats::seated_once`], and how long
    /// after the last one's seat play counts as steady. Set once, before
    /// the bots start.
    pub fn set_run(&self, bots: u64, warm_up: Duration) {
        let _ = self.run.set((bots, warm_up));
    }

    /// A bot was seated for the first time.
    pub fn seated_once(&self) {
        let n = self.ever_seated.fetch_add(1, Ordering::Relaxed) + 1;
        if self.run.get().is_some_and(|&(bots, _)| n >= bots) {
            let _ = self.all_seated_at.set(Instant::now());
        }
    }

    /// When every bot had been seated at least once.
    pub fn all_seated_at(&self) -> Option<Instant> {
        self.all_seated_at.get().copied()
    }

    /// When steady play began: the warm-up after every bot was seated.
    pub fn play_from(&self) -> Option<Instant> {
        let &(_, warm_up) = self.run.get()?;
        self.all_seated_at()?.checked_add(warm_up)
    }

    pub fn begin_wind_down(&self) {
        let _ = self.wind_down_at.set(Instant::now());
    }

    pub fn wind_down_at(&self) -> Option<Instant> {
        self.wind_down_at.get().copied()
    }

    /// Which part of the run an act sent at `sent` and answered `took`
    /// later belongs to.
    pub fn phase_of(&self, sent: Instant, took: Duration) -> Phase {
        match (self.play_from(), self.wind_down_at.get()) {
            (_, Some(&w)) if sent + took >= w => Phase::WindDown,
            (Some(play), _) if sent >= play => Phase::Play,
            _ => Phase::Arrival,
        }
    }

    fn record_latency(&self, a: Answered) {
        self.acts_answered.fetch_add(1, Ordering::Relaxed);
        let phase = self.phase_of(a.sent, a.took);
        lock(&self.latency).record(phase, a.took);
    }

    /// The whole run's latencies.
    pub fn latency(&self) -> Option<Histogram> {
        lock(&self.latency).all.clone()
    }

    pub fn latencies(&self) -> Latencies {
        lock(&self.latency).clone()
    }

    pub fn apply(&self, bot: &str, e: Effects) {
        self.timeouts.fetch_add(e.timeouts, Ordering::Relaxed);
        self.stale.fetch_add(e.stale, Ordering::Relaxed);
        for a in e.latencies {
            self.record_latency(a);
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
    fn an_act_belongs_to_the_phase_it_was_sent_and_answered_in() {
        let stats = Stats::default();
        let warm_up = Duration::from_millis(20);
        stats.set_run(2, warm_up);
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let hour = Duration::from_secs(3600);
        std::thread::sleep(ms(1));
        assert_eq!(stats.phase_of(t0, ms(1)), Phase::Arrival);
        stats.seated_once();
        assert_eq!(stats.all_seated_at(), None, "one bot of two seated");
        stats.seated_once();
        let seated = stats.all_seated_at().expect("both seated");
        let play = stats.play_from().expect("both seated");
        assert_eq!(play, seated + warm_up);
        assert_eq!(stats.phase_of(t0, ms(1)), Phase::Arrival, "sent before");
        assert_eq!(stats.phase_of(seated, ms(1)), Phase::Arrival, "warming up");
        assert_eq!(stats.phase_of(play, ms(1)), Phase::Play);
        stats.seated_once();
        assert_eq!(stats.all_seated_at(), Some(seated), "the first time counts");
        std::thread::sleep(warm_up);
        std::thread::sleep(ms(5));
        stats.begin_wind_down();
        assert_eq!(stats.phase_of(play, ms(1)), Phase::Play, "answered before");
        assert_eq!(stats.phase_of(play, hour), Phase::WindDown);
        assert_eq!(stats.phase_of(t0, hour), Phase::WindDown);

        let a = |sent, took| Answered { sent, took };
        stats.apply(
            "b",
            Effects {
                latencies: vec![a(t0, ms(1)), a(play, ms(2)), a(play, ms(3)), a(play, hour)],
                ..Effects::default()
            },
        );
        let l = stats.latencies();
        let count = |h: Option<&Histogram>| h.map_or(0, Histogram::count);
        assert_eq!(count(l.all.as_ref()), 4);
        assert_eq!(count(l.phase(Phase::Arrival)), 1);
        assert_eq!(count(l.phase(Phase::Play)), 2);
        assert_eq!(count(l.phase(Phase::WindDown)), 1);
        assert_eq!(l.phase(Phase::Play).map(|h| h.max), Some(3_000));
    }

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
