//! Release-mode throughput of the rules core, with a baseline in the same
//! process so the figures have something to be compared with.
//!
//!     cargo run --release --example game_bench
//!
//! 1. Seven-card evaluation: the bitmask evaluator (`evaluate7`) against the
//!    naive best-of-21-five-card-subsets evaluator (`evaluate_reference`) on
//!    the same random hands (and they must agree on every one).
//! 2. `Game::apply`: random full hands at a 6-max table driven by a seeded
//!    RNG, counting every accepted command (start hand and player actions).

use std::hint::black_box;
use std::time::{Duration, Instant};

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use pitboss::games::holdem::rules::{
    evaluate7, evaluate_reference, shuffled_deck, standard_deck, Action, Card, Chips, Command,
    Game, LegalAction, PlayerId, SeatNo, TableConfig,
};

const SEED: u64 = 0x5EED;

fn random_hands(rng: &mut ChaCha8Rng, n: usize) -> Vec<[Card; 7]> {
    let mut deck = standard_deck();
    (0..n)
        .map(|_| {
            let (hand, _) = deck.partial_shuffle(rng, 7);
            [
                hand[0], hand[1], hand[2], hand[3], hand[4], hand[5], hand[6],
            ]
        })
        .collect()
}

fn per_sec(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

fn bench_eval(rng: &mut ChaCha8Rng) -> Result<(), String> {
    let hands = random_hands(rng, 1_000_000);
    let rounds = 10;
    let started = Instant::now();
    let mut acc = 0u64;
    for _ in 0..rounds {
        for h in &hands {
            acc = acc.wrapping_add(u64::from(evaluate7(black_box(h)).value()));
        }
    }
    let fast = started.elapsed();
    black_box(acc);
    let fast_n = (hands.len() * rounds) as u64;

    let sample = &hands[..200_000];
    let started = Instant::now();
    let mut acc = 0u64;
    for h in sample {
        acc = acc.wrapping_add(u64::from(evaluate_reference(black_box(h)).value()));
    }
    let slow = started.elapsed();
    black_box(acc);
    let slow_n = sample.len() as u64;

    if let Some(h) = sample
        .iter()
        .find(|h| evaluate7(h) != evaluate_reference(&h[..]))
    {
        return Err(format!("evaluators disagree on {h:?}"));
    }

    let fast_rate = per_sec(fast_n, fast);
    let slow_rate = per_sec(slow_n, slow);
    println!("7-card hand evaluation (random hands, one thread)");
    println!(
        "  evaluate7 (bitmask)                 {:>8.1} M evals/s  ({fast_n} evals in {:.2} s)",
        fast_rate / 1e6,
        fast.as_secs_f64()
    );
    println!(
        "  baseline: best of 21 five-card sets {:>8.2} M evals/s  ({slow_n} evals in {:.2} s)",
        slow_rate / 1e6,
        slow.as_secs_f64()
    );
    println!(
        "  speed-up                            {:>8.0}x",
        fast_rate / slow_rate
    );
    Ok(())
}

fn config() -> TableConfig {
    TableConfig {
        small_blind: Chips(1),
        big_blind: Chips(2),
        ante: Chips(0),
        seats: 6,
        min_buy_in: Chips(40),
        max_buy_in: Chips(400),
    }
}

fn fresh_table(rng: &mut ChaCha8Rng, hand_no: u64) -> Result<Game, String> {
    let seats = (0..6)
        .map(|s: SeatNo| {
            let stack = rng.gen_range(40..=400);
            (s, PlayerId(format!("bench{s}")), Chips(stack))
        })
        .collect();
    Game::resume(config(), hand_no, None, seats).map_err(|e| e.to_string())
}

fn pick_action(rng: &mut ChaCha8Rng, legal: &[LegalAction]) -> Option<Action> {
    let pick = legal
        .choose_weighted(rng, |l| match l {
            LegalAction::Fold => 3,
            LegalAction::Check | LegalAction::Call { .. } => 8,
            LegalAction::Bet { .. } | LegalAction::Raise { .. } => 3,
            LegalAction::AllIn { .. } => 1,
        })
        .ok()?;
    Some(match *pick {
        LegalAction::Fold => Action::Fold,
        LegalAction::Check => Action::Check,
        LegalAction::Call { .. } => Action::Call,
        LegalAction::Bet { min, max } => Action::Bet(Chips(rng.gen_range(min.0..=max.0))),
        LegalAction::Raise { min, max } => Action::Raise(Chips(rng.gen_range(min.0..=max.0))),
        LegalAction::AllIn { .. } => Action::AllIn,
    })
}

fn bench_apply(rng: &mut ChaCha8Rng) -> Result<(), String> {
    let target_hands = 100_000u64;
    let mut game = fresh_table(rng, 0)?;
    let mut commands = 0u64;
    let mut hands = 0u64;
    let mut deciding = Duration::ZERO;
    let started = Instant::now();
    while hands < target_hands {
        if !game.can_start_hand() {
            game = fresh_table(rng, game.hand_no())?;
        }
        let deck = shuffled_deck(rng);
        game.apply(Command::StartHand { deck })
            .map_err(|e| format!("start hand: {e}"))?;
        commands += 1;
        while let Some(seat) = game.to_act() {
            let t = Instant::now();
            let legal = game.legal_actions();
            let action = pick_action(rng, &legal).ok_or("no legal action")?;
            deciding += t.elapsed();
            let (hand, decision) = (game.hand_no(), game.decision().unwrap_or(0));
            game.apply(Command::Act {
                hand,
                seat,
                decision,
                action,
            })
            .map_err(|e| format!("legal {action:?} refused: {e}"))?;
            commands += 1;
        }
        hands += 1;
    }
    let total = started.elapsed();
    let applying = total.saturating_sub(deciding);
    println!("Game::apply on random 6-max hands (seed {SEED:#x}, one thread)");
    println!(
        "  {commands} commands over {hands} hands ({:.1} per hand) in {:.2} s",
        commands as f64 / hands as f64,
        total.as_secs_f64()
    );
    println!(
        "  apply incl. shuffling and choosing   {:>8.0} k commands/s, {:>6.1} k hands/s",
        per_sec(commands, total) / 1e3,
        per_sec(hands, total) / 1e3
    );
    println!(
        "  apply alone (choosing time removed)  {:>8.0} k commands/s",
        per_sec(commands, applying) / 1e3
    );
    Ok(())
}

fn main() -> Result<(), String> {
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    bench_eval(&mut rng)?;
    println!();
    bench_apply(&mut rng)
}
