//! The report: faults by kind, what they cost each table, the counts from
//! the logs, the invariants; as a table on stdout and as JSON.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::bots::{BotsOutcome, Told};
use crate::checks::{Check, LogFacts};
use crate::faults::{Kind, Record};

/// How long after a fault was lifted its effect is still looked for.
const AFTERMATH_MS: i64 = 10_000;

/// The earliest time each hand's result was told, per table, in order.
pub fn hand_ends(told: &[Told]) -> HashMap<String, Vec<i64>> {
    let mut first: HashMap<(&str, i64), i64> = HashMap::new();
    for t in told {
        let e = first.entry((t.table.as_str(), t.hand)).or_insert(t.at_ms);
        *e = (*e).min(t.at_ms);
    }
    let mut ends: HashMap<String, Vec<i64>> = HashMap::new();
    for ((table, _), at) in first {
        ends.entry(table.to_string()).or_default().push(at);
    }
    for v in ends.values_mut() {
        v.sort_unstable();
    }
    ends
}

/// The longest time `table` went without a completed hand, counted from
/// the fault's start: over the stretches that begin between the start and
/// `AFTERMATH_MS` after the fault was lifted, each running to the next hand
/// told (or to the end of play, if none came).
pub fn unavailable_ms(ends: &[i64], start: i64, lifted: i64, play_end: i64) -> i64 {
    let window_end = (lifted + AFTERMATH_MS).min(play_end);
    let mut from = start;
    let mut longest = 0;
    for &e in ends.iter().filter(|&&e| e > start) {
        if from > window_end {
            break;
        }
        longest = longest.max(e - from);
        from = e;
    }
    if from <= window_end {
        longest = longest.max(play_end - from);
    }
    longest
}

fn median(sorted: &[i64]) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    Some(sorted[sorted.len() / 2])
}

fn secs(ms: Option<i64>) -> String {
    ms.map_or("-".into(), |ms| format!("{:.1}s", ms as f64 / 1000.0))
}

pub struct Header {
    pub seed: u64,
    pub instances: usize,
    pub tables: usize,
    pub players: usize,
    pub duration_s: f64,
    pub ttl_ms: u64,
    pub command: String,
    pub wall_s: f64,
}

pub struct Report {
    pub text: String,
    pub json: Value,
    pub ok: bool,
}

pub struct ReportInputs<'a> {
    pub header: Header,
    pub records: &'a [Record],
    pub told: &'a [Told],
    pub play_end_ms: i64,
    pub hands: i64,
    pub logs: &'a LogFacts,
    pub checks: &'a [Check],
    pub bots: &'a BotsOutcome,
}

pub fn build(inp: ReportInputs<'_>) -> Report {
    let ends = hand_ends(inp.told);
    // What a table takes between two hands when nothing goes wrong, to read
    // the unavailability figures against.
    let mut gaps: Vec<i64> = ends
        .values()
        .flat_map(|v| v.windows(2).map(|w| w[1] - w[0]))
        .collect();
    gaps.sort_unstable();

    let mut by_kind: BTreeMap<Kind, (u32, u32, Vec<i64>)> =
        Kind::ALL.iter().map(|k| (*k, (0, 0, Vec::new()))).collect();
    for r in inp.records {
        let e = by_kind.entry(r.kind).or_default();
        match r.outcome {
            Ok(_) => {
                e.0 += 1;
                for t in &r.affected {
                    let table_ends = ends.get(t).map(Vec::as_slice).unwrap_or(&[]);
                    e.2.push(unavailable_ms(
                        table_ends,
                        r.start_ms,
                        r.lifted_ms,
                        inp.play_end_ms,
                    ));
                }
            }
            Err(_) => e.1 += 1,
        }
    }
    for (_, _, v) in by_kind.values_mut() {
        v.sort_unstable();
    }

    let h = &inp.header;
    let mut t = String::new();
    let _ = writeln!(t, "\npitboss-chaos report");
    let _ = writeln!(
        t,
        "  seed {} · {} instances · {} tables × {} bots · faults for {:.0}s · lease TTL {} ms · {:.0}s in all",
        h.seed, h.instances, h.tables, h.players, h.duration_s, h.ttl_ms, h.wall_s
    );
    let _ = writeln!(t, "  replay: {}", h.command);
    let _ = writeln!(
        t,
        "\n  {:<26} {:>7} {:>11} {:>9}   {:>22}",
        "fault", "applied", "not applied", "tables", "unavailable median/max"
    );
    let (mut applied, mut skipped) = (0, 0);
    let mut kinds_json = Vec::new();
    for (kind, (ok, not, v)) in &by_kind {
        applied += ok;
        skipped += not;
        let (med, max) = (median(v), v.last().copied());
        let _ = writeln!(
            t,
            "  {:<26} {:>7} {:>11} {:>9}   {:>10} / {:<10}",
            kind.name(),
            ok,
            not,
            v.len(),
            secs(med),
            secs(max)
        );
        kinds_json.push(json!({
            "kind": kind.name(), "applied": ok, "not_applied": not,
            "table_observations": v.len(),
            "unavailable_median_ms": med, "unavailable_max_ms": max,
        }));
    }
    let _ = writeln!(t, "  {:<26} {:>7} {:>11}", "total", applied, skipped);
    let _ = writeln!(
        t,
        "  (unavailable: the longest stretch without a completed hand at a table the fault could reach, \
         from its start to {}s after it was lifted; a table's usual gap between hands is {} median, {} p99)",
        AFTERMATH_MS / 1000,
        secs(median(&gaps)),
        secs(gaps.get(gaps.len().saturating_sub(1) * 99 / 100).copied()),
    );

    let ev = |k: &str| inp.logs.events.get(k).copied().unwrap_or(0);
    let _ = writeln!(t);
    let _ = writeln!(t, "  hands recorded              {}", inp.hands);
    let _ = writeln!(t, "  hand results told           {}", inp.told.len());
    let _ = writeln!(t, "  hands voided                {}", ev("hands_voided"));
    let _ = writeln!(
        t,
        "  stale writes refused        {}",
        ev("stale_writes_refused")
    );
    let _ = writeln!(
        t,
        "  pauses / resumes            {} / {}",
        ev("pauses"),
        ev("resumes")
    );
    let _ = writeln!(
        t,
        "  re-asserts                  {} (refused {}, contested {})",
        ev("reasserts"),
        ev("reasserts_refused"),
        ev("reasserts_contested")
    );
    let _ = writeln!(t, "  leases lost                 {}", ev("leases_lost"));
    let _ = writeln!(
        t,
        "  store write retries         {}",
        ev("store_write_retries")
    );
    let _ = writeln!(
        t,
        "  bots                        {} ({}; reconnects {}, re-syncs {}, protocol errors {})",
        if inp.bots.ok { "ok" } else { "FAILED" },
        inp.bots.exit,
        inp.bots.field("reconnects").unwrap_or("?"),
        inp.bots
            .field("re-syncs")
            .and_then(|s| s.split_whitespace().next())
            .unwrap_or("?"),
        inp.bots.field("protocol errors").unwrap_or("?"),
    );
    // The bots' own verdict is reported, not counted among the
    // invariants: it also judges the bots' reading of races that chaos
    // makes common.
    if let Some(f) = &inp.bots.failure {
        let _ = writeln!(t, "    {f}");
    }
    for e in inp.bots.errors.iter().take(12) {
        let _ = writeln!(t, "    {e}");
    }

    let _ = writeln!(t, "\n  invariants");
    let mut ok = true;
    for c in inp.checks {
        ok &= c.ok || !c.gating;
        let _ = writeln!(
            t,
            "  {:<5} {:<44} {}",
            match (c.ok, c.gating) {
                (true, _) => "ok",
                (false, true) => "FAIL",
                (false, false) => "note",
            },
            c.name,
            c.detail
        );
        for e in &c.examples {
            let _ = writeln!(t, "          {e}");
        }
    }
    let failed: Vec<&str> = inp
        .checks
        .iter()
        .filter(|c| !c.ok && c.gating)
        .map(|c| c.name)
        .collect();
    let _ = writeln!(
        t,
        "\nresult: {}",
        if ok {
            "ok".to_string()
        } else {
            format!("FAILED ({})", failed.join("; "))
        }
    );

    let json = json!({
        "seed": h.seed,
        "command": h.command,
        "instances": h.instances,
        "tables": h.tables,
        "players_per_table": h.players,
        "fault_duration_s": h.duration_s,
        "wall_s": h.wall_s,
        "lease_ttl_ms": h.ttl_ms,
        "faults": {
            "applied": applied,
            "not_applied": skipped,
            "by_kind": kinds_json,
            "log": inp.records.iter().map(|r| json!({
                "kind": r.kind.name(), "target": r.target,
                "start_ms": r.start_ms, "lifted_ms": r.lifted_ms,
                "tables": r.affected.len(),
                "outcome": match &r.outcome { Ok(w) => json!({"applied": w}), Err(e) => json!({"not_applied": e}) },
            })).collect::<Vec<_>>(),
        },
        "usual_gap_between_hands_ms": {"median": median(&gaps), "p99": gaps.get(gaps.len().saturating_sub(1) * 99 / 100)},
        "hands_recorded": inp.hands,
        "results_told": inp.told.len(),
        "log_events": inp.logs.events,
        "bots": {
            "ok": inp.bots.ok,
            "exit": inp.bots.exit,
            "failure": inp.bots.failure,
            "errors": inp.bots.errors,
            "summary": inp.bots.summary.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect::<serde_json::Map<_, _>>(),
        },
        "invariants": inp.checks.iter().map(|c| json!({
            "name": c.name, "ok": c.ok, "gating": c.gating, "detail": c.detail, "examples": c.examples,
        })).collect::<Vec<_>>(),
        "ok": ok,
    });
    Report { text: t, json, ok }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unavailability_is_the_longest_stretch_without_a_hand_from_the_fault_on() {
        let ends = [1_000, 2_000, 3_000, 9_000, 10_000, 11_000];
        // Fault at 2 500, lifted at 4 000: nothing from 3 000 to 9 000.
        assert_eq!(unavailable_ms(&ends, 2_500, 4_000, 11_500), 6_000);
        // A fault that changed nothing costs about the usual gap.
        assert_eq!(unavailable_ms(&ends, 9_500, 9_600, 11_500), 1_000);
        // No hand after the fault at all: until the end of play.
        assert_eq!(unavailable_ms(&ends, 11_500, 12_000, 20_000), 8_500);
        // Stretches that begin after the aftermath are not its doing.
        let later = [0, 1_000, 11_000, 40_000];
        assert_eq!(unavailable_ms(&later, 500, 600, 50_000), 10_000);
    }

    #[test]
    fn each_hand_counts_once_at_the_first_bot_told() {
        let told = |bot: &str, hand, at_ms| Told {
            at_ms,
            bot: bot.into(),
            table: "t".into(),
            hand,
            stacks: HashMap::new(),
        };
        let ends = hand_ends(&[told("a", 1, 120), told("b", 1, 100), told("a", 2, 300)]);
        assert_eq!(ends["t"], [100, 300]);
    }
}
