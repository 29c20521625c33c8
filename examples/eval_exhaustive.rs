//! Evaluates every one of the C(52,7) = 133,784,560 seven-card hands and
//! checks the category counts against the known totals.
//!
//!     cargo run --release --example eval_exhaustive [-- --threads N]
//!
//! Exits non-zero if any count is off.

use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use pitboss::games::holdem::rules::{evaluate7, standard_deck, Card, Category};

const EXPECTED: [(Category, u64); 9] = [
    (Category::StraightFlush, 41_584),
    (Category::FourOfAKind, 224_848),
    (Category::FullHouse, 3_473_184),
    (Category::Flush, 4_047_644),
    (Category::Straight, 6_180_020),
    (Category::ThreeOfAKind, 6_461_620),
    (Category::TwoPair, 31_433_400),
    (Category::OnePair, 58_627_800),
    (Category::HighCard, 23_294_460),
];

const TOTAL: u64 = 133_784_560;

/// Counts categories of all hands whose two lowest cards are `a` and `b`.
fn count_from(deck: &[Card], a: usize, b: usize, counts: &mut [u64; 9]) {
    let n = deck.len();
    let mut hand = [deck[a]; 7];
    hand[1] = deck[b];
    for c in b + 1..n {
        hand[2] = deck[c];
        for d in c + 1..n {
            hand[3] = deck[d];
            for e in d + 1..n {
                hand[4] = deck[e];
                for f in e + 1..n {
                    hand[5] = deck[f];
                    for &last in &deck[f + 1..] {
                        hand[6] = last;
                        counts[evaluate7(&hand).category().index()] += 1;
                    }
                }
            }
        }
    }
}

fn threads_from_args() -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--threads")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1)
}

fn main() -> ExitCode {
    let deck = standard_deck();
    // Work items are (a, b) pairs of the two lowest cards: fine-grained
    // enough that threads finish together even though low pairs carry far
    // more hands than high ones.
    let pairs: Vec<(usize, usize)> = (0..deck.len())
        .flat_map(|a| (a + 1..deck.len()).map(move |b| (a, b)))
        .filter(|&(_, b)| b + 5 < deck.len())
        .collect();
    let threads = threads_from_args();
    let next = AtomicUsize::new(0);

    let started = Instant::now();
    let counts = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut counts = [0u64; 9];
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&(a, b)) = pairs.get(i) else { break };
                        count_from(&deck, a, b, &mut counts);
                    }
                    counts
                })
            })
            .collect();
        let mut total = [0u64; 9];
        for w in workers {
            let counts = w.join().unwrap_or_else(|_| {
                eprintln!("worker thread panicked");
                std::process::exit(2)
            });
            for (t, c) in total.iter_mut().zip(counts) {
                *t += c;
            }
        }
        total
    });
    let elapsed = started.elapsed();

    let mut ok = true;
    println!("{:<16} {:>12} {:>12}", "category", "count", "expected");
    for (cat, expected) in EXPECTED {
        let got = counts[cat.index()];
        let mark = if got == expected { "" } else { "  MISMATCH" };
        ok &= got == expected;
        println!("{:<16} {:>12} {:>12}{mark}", cat.name(), got, expected);
    }
    let total: u64 = counts.iter().sum();
    ok &= total == TOTAL;
    println!("{:<16} {:>12} {:>12}", "total", total, TOTAL);
    let secs = elapsed.as_secs_f64();
    println!(
        "evaluated {total} hands in {secs:.2} s on {threads} thread(s): {:.1} M evaluations/s",
        total as f64 / secs / 1e6
    );
    if ok {
        println!("all category counts match");
        ExitCode::SUCCESS
    } else {
        println!("category counts DO NOT match");
        ExitCode::FAILURE
    }
}
