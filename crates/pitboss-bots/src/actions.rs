//! What a bot plays: a random legal action for its turn, sent no faster
//! than the server's message-rate limit allows.

use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::Value;

/// One entry of a turn's `legal` list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Legal {
    Fold,
    Check,
    Call,
    Bet { min: u64, max: u64 },
    Raise { min: u64, max: u64 },
    AllIn,
}

/// `None` when the list is not a list or an entry is malformed; actions
/// this client does not know are skipped (the contract may add some).
pub fn parse_legal(v: &Value) -> Option<Vec<Legal>> {
    let range = |l: &Value| -> Option<(u64, u64)> {
        let (min, max) = (l["min"].as_u64()?, l["max"].as_u64()?);
        (min <= max).then_some((min, max))
    };
    let mut out = Vec::new();
    for l in v.as_array()? {
        out.push(match l["action"].as_str()? {
            "fold" => Legal::Fold,
            "check" => Legal::Check,
            "call" => Legal::Call,
            "all_in" => Legal::AllIn,
            "bet" => {
                let (min, max) = range(l)?;
                Legal::Bet { min, max }
            }
            "raise" => {
                let (min, max) = range(l)?;
                Legal::Raise { min, max }
            }
            _ => continue,
        });
    }
    Some(out)
}

/// A chosen action: its wire name and, for bet/raise, the "to" amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    pub action: &'static str,
    pub amount: Option<u64>,
}

/// A random legal action: check/call mostly, bet/raise sometimes (sized
/// towards the minimum, as most real bets are), all-in and fold rarely, and
/// never a fold that could have been a free check.
pub fn choose(legal: &[Legal], rng: &mut impl Rng) -> Option<Choice> {
    let can_check = legal.contains(&Legal::Check);
    let weight = |l: &Legal| match l {
        Legal::Fold if can_check => 0,
        Legal::Fold => 8,
        Legal::Check | Legal::Call => 50,
        Legal::Bet { .. } | Legal::Raise { .. } => 22,
        Legal::AllIn => 3,
    };
    let total: u32 = legal.iter().map(weight).sum();
    if total == 0 {
        return None;
    }
    let mut pick = rng.gen_range(0..total);
    let chosen = legal.iter().find(|l| {
        let w = weight(l);
        if pick < w {
            true
        } else {
            pick -= w;
            false
        }
    })?;
    let sized = |min: u64, max: u64, rng: &mut dyn rand::RngCore| {
        let f: f64 = rng.gen::<f64>().powi(3);
        (min + ((max - min) as f64 * f).round() as u64).min(max)
    };
    Some(match *chosen {
        Legal::Fold => Choice {
            action: "fold",
            amount: None,
        },
        Legal::Check => Choice {
            action: "check",
            amount: None,
        },
        Legal::Call => Choice {
            action: "call",
            amount: None,
        },
        Legal::AllIn => Choice {
            action: "all_in",
            amount: None,
        },
        Legal::Bet { min, max } => Choice {
            action: "bet",
            amount: Some(sized(min, max, rng)),
        },
        Legal::Raise { min, max } => Choice {
            action: "raise",
            amount: Some(sized(min, max, rng)),
        },
    })
}

/// Whether the `action` event kind `seen` can be the result of our `sent`
/// act (a call, bet or raise of the whole stack is reported as `all_in`).
pub fn answers(sent: &str, seen: &str) -> bool {
    sent == seen || (seen == "all_in" && matches!(sent, "call" | "bet" | "raise"))
}

/// Client-side token bucket, so a bot never trips the server's per-connection
/// message-rate limit (which answers `rate_limited`, then closes with 1008).
pub struct Pacer {
    tokens: f64,
    rate: f64,
    last: Instant,
}

impl Pacer {
    pub fn new(rate: f64) -> Pacer {
        Pacer {
            tokens: rate,
            rate,
            last: Instant::now(),
        }
    }

    fn refill(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + dt * self.rate).min(self.rate);
        self.last = now;
    }

    /// How long until a frame may go out.
    pub fn wait(&mut self, now: Instant) -> Duration {
        self.refill(now);
        if self.tokens >= 1.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((1.0 - self.tokens) / self.rate)
        }
    }

    pub fn take(&mut self, now: Instant) {
        self.refill(now);
        self.tokens -= 1.0;
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    use serde_json::json;

    use super::*;

    #[test]
    fn chosen_actions_are_always_legal() {
        let mut rng = StdRng::seed_from_u64(1);
        let legal = parse_legal(&json!([
            {"action": "fold"},
            {"action": "call", "amount": 4},
            {"action": "raise", "min": 8, "max": 200},
            {"action": "all_in", "amount": 200},
            {"action": "dance"}
        ]))
        .expect("valid");
        assert_eq!(legal.len(), 4);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..5000 {
            let c = choose(&legal, &mut rng).expect("a choice");
            seen.insert(c.action);
            match c.action {
                "raise" => assert!(matches!(c.amount, Some(8..=200))),
                "fold" | "call" | "all_in" => assert_eq!(c.amount, None),
                other => panic!("{other} is not legal here"),
            }
        }
        assert_eq!(seen.len(), 4);
        let check_or_bet =
            parse_legal(&json!([{"action": "fold"}, {"action": "check"}])).expect("valid");
        for _ in 0..100 {
            assert_eq!(
                choose(&check_or_bet, &mut rng).map(|c| c.action),
                Some("check")
            );
        }
        assert!(parse_legal(&json!([{"action": "bet", "min": 9, "max": 3}])).is_none());
    }
}
