//! The summary `pitboss-bots` prints at the end of its run, read into the
//! figures the bench reports: the act latencies over the whole run and by
//! phase, and the marks that bound steady play.

use serde_json::json;

/// What one bots run printed that the bench reports.
#[derive(Debug, Default)]
pub(super) struct BotsSummary {
    pub(super) hands: f64,
    pub(super) hands_per_s: f64,
    /// Act latencies over the whole run (`acts` = the acts answered).
    pub(super) whole: PhaseFigures,
    /// The same acts by phase: in arrival, in play, in wind-down.
    pub(super) phases: [PhaseFigures; 3],
    /// Seconds into the bots' run when every bot had been seated, and the
    /// wall-clock bounds of steady play (unix ms): from the warm-up's end
    /// until the wind-down began.
    pub(super) all_seated_s: f64,
    pub(super) play_from_ms: Option<u128>,
    pub(super) play_until_ms: Option<u128>,
    pub(super) result: String,
}

/// One phase's latencies as the bots print them
/// (`latency in play: p50 0.31 ms, p99 3.36 ms, p99.9 6.56 ms, max 13.15 ms, 18599 acts`).
#[derive(Debug, Clone, Copy)]
pub(super) struct PhaseFigures {
    pub(super) p50_ms: f64,
    pub(super) p99_ms: f64,
    pub(super) p999_ms: f64,
    pub(super) max_ms: f64,
    pub(super) acts: f64,
}

impl Default for PhaseFigures {
    fn default() -> Self {
        PhaseFigures {
            p50_ms: f64::NAN,
            p99_ms: f64::NAN,
            p999_ms: f64::NAN,
            max_ms: f64::NAN,
            acts: 0.0,
        }
    }
}

impl PhaseFigures {
    fn parse(v: &str) -> PhaseFigures {
        let mut f = PhaseFigures::default();
        for part in v.split(", ") {
            let mut words = part.split_whitespace();
            let (Some(a), Some(b)) = (words.next(), words.next()) else {
                continue;
            };
            match (a, b.parse::<f64>()) {
                ("p50", Ok(x)) => f.p50_ms = x,
                ("p99", Ok(x)) => f.p99_ms = x,
                ("p99.9", Ok(x)) => f.p999_ms = x,
                ("max", Ok(x)) => f.max_ms = x,
                (n, _) if b == "acts" => f.acts = n.parse().unwrap_or(0.0),
                _ => {}
            }
        }
        f
    }

    pub(super) fn json(&self) -> serde_json::Value {
        json!({
            "p50_ms": self.p50_ms, "p99_ms": self.p99_ms, "p999_ms": self.p999_ms,
            "max_ms": self.max_ms, "acts": self.acts,
        })
    }
}

const PHASES: [&str; 3] = ["in arrival", "in play", "in wind-down"];

pub(super) fn parse_summary(text: &str) -> BotsSummary {
    let field = |key: &str| -> Option<&str> {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(": "))
    };
    let number = |key: &str| -> f64 {
        field(key)
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(f64::NAN)
    };
    let answered = field("actions")
        .and_then(|v| {
            v.split(", ")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(f64::NAN);
    BotsSummary {
        hands: number("hands"),
        hands_per_s: number("hands/s"),
        whole: PhaseFigures {
            p50_ms: number("latency p50"),
            p99_ms: number("latency p99"),
            p999_ms: number("latency p99.9"),
            max_ms: number("latency max"),
            acts: answered,
        },
        phases: PHASES.map(|p| {
            field(&format!("latency {p}")).map_or_else(PhaseFigures::default, PhaseFigures::parse)
        }),
        all_seated_s: field("every bot seated")
            .and_then(|v| v.strip_prefix("after ")?.split('s').next()?.parse().ok())
            .unwrap_or(f64::NAN),
        play_from_ms: field("steady play from").and_then(unix_ms),
        play_until_ms: field("wind-down began").and_then(unix_ms),
        result: field("result").unwrap_or("missing").to_string(),
    }
}

/// The `(unix ms N)` of a bots' mark.
fn unix_ms(v: &str) -> Option<u128> {
    v.split_once("(unix ms ")?.1.strip_suffix(')')?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A summary as `pitboss-bots` printed it (docs/bots.md).
    const SUMMARY: &str =
        "pitboss-bots: run 86e8f5, seed 8675225382233852051, http://127.0.0.1:9124
hands: 9
hands/s: 0.2
actions: 83 sent, 83 answered
latency p50: 0.19 ms
latency p99: 0.50 ms
latency p99.9: 0.50 ms
latency max: 0.50 ms
latency in arrival: p50 0.18 ms, p99 0.50 ms, p99.9 0.50 ms, max 0.50 ms, 38 acts
latency in play: p50 0.20 ms, p99 0.45 ms, p99.9 0.45 ms, max 0.45 ms, 45 acts
latency in wind-down: no acts
every bot seated: after 0.1s (unix ms 1796379832523)
steady play from: after 5.1s (unix ms 1796379837523)
wind-down began: after 20.0s (unix ms 1796379852410)
result: ok
";

    #[test]
    fn the_bots_summary_is_read_whole_and_by_phase() {
        let s = parse_summary(SUMMARY);
        assert_eq!((s.hands, s.hands_per_s), (9.0, 0.2));
        assert_eq!(
            (
                s.whole.p50_ms,
                s.whole.p99_ms,
                s.whole.p999_ms,
                s.whole.max_ms,
                s.whole.acts
            ),
            (0.19, 0.50, 0.50, 0.50, 83.0)
        );
        let [arrival, play, wind_down] = s.phases;
        assert_eq!((arrival.p50_ms, arrival.acts), (0.18, 38.0));
        assert_eq!(
            (
                play.p50_ms,
                play.p99_ms,
                play.p999_ms,
                play.max_ms,
                play.acts
            ),
            (0.20, 0.45, 0.45, 0.45, 45.0)
        );
        assert_eq!(wind_down.acts, 0.0);
        assert!(wind_down.p99_ms.is_nan());
        assert_eq!(s.all_seated_s, 0.1);
        assert_eq!(
            (s.play_from_ms, s.play_until_ms),
            (Some(1796379837523), Some(1796379852410))
        );
        assert_eq!(s.result, "ok");
    }
}
