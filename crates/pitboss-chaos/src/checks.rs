//! The invariants, checked at the end from Postgres, the instances' logs and
//! what the bots were told.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{PgPool, Row};

use crate::bots::Told;

/// One invariant: whether it holds, the figure behind it, and examples of
/// what broke it.
#[derive(Debug, Clone)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    /// A failed gating check fails the run; the others are findings to
    /// read (they depend on how loaded the machine is as well).
    pub gating: bool,
    pub detail: String,
    pub examples: Vec<String>,
}

impl Check {
    fn new(name: &'static str, ok: bool, detail: impl Into<String>) -> Check {
        Check {
            name,
            ok,
            gating: true,
            detail: detail.into(),
            examples: Vec::new(),
        }
    }

    fn not_gating(mut self) -> Check {
        self.gating = false;
        self
    }

    fn with_examples(mut self, mut examples: Vec<String>) -> Check {
        examples.truncate(10);
        self.examples = examples;
        self
    }
}

/// One `hand_dealt` log line: when, which process, which table, which hand,
/// under which fence.
#[derive(Debug, Clone)]
pub struct Dealt {
    pub at: DateTime<Utc>,
    pub instance: String,
    pub table: String,
    pub hand: i64,
    pub fence: i64,
}

/// What the instances' logs say: every hand dealt, and how often each
/// event of interest was logged.
#[derive(Debug, Default)]
pub struct LogFacts {
    pub dealt: Vec<Dealt>,
    pub events: BTreeMap<&'static str, u64>,
    pub unreadable: Vec<String>,
}

/// The log events counted for the report: (name, what the line contains).
/// The manager and the table both log a re-assert; the manager's line
/// ("lease re-asserted") is counted.
const COUNTED: &[(&str, &str)] = &[
    (
        "stale_writes_refused",
        "event=\"stale_owner_boundary_write\"",
    ),
    ("pauses", "event=\"table_paused\""),
    ("resumes", "event=\"table_resumed\""),
    ("reasserts", "lease re-asserted"),
    ("reasserts_refused", "event=\"reassert_refused\""),
    ("reasserts_contested", "event=\"reassert_contested\""),
    ("leases_lost", "event=\"lease_lost\""),
    ("hands_voided", "event=\"hand_voided\""),
    ("tables_frozen", "event=\"table_frozen\""),
    ("store_write_retries", "event=\"store_write_retry\""),
    ("takeovers", "event=\"table_hosted\""),
];

/// The value of ` key=value` in a compact log line (quotes trimmed).
pub fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let needle = format!(" {key}=");
    let start = line.find(&needle)? + needle.len();
    let rest = &line[start..];
    let end = rest.find(' ').unwrap_or(rest.len());
    Some(rest[..end].trim_matches('"'))
}

fn dealt_line(line: &str, instance: &str) -> Option<Dealt> {
    if !line.contains("event=\"hand_dealt\"") {
        return None;
    }
    Some(Dealt {
        at: line.split_whitespace().next()?.parse().ok()?,
        instance: instance.to_string(),
        table: field(line, "table_id")?.to_string(),
        hand: field(line, "hand")?.parse().ok()?,
        fence: field(line, "dealt_fence")?.parse().ok()?,
    })
}

/// Reads every instance log (named `<instance id>.<n>.log`).
pub fn read_logs(paths: &[PathBuf]) -> LogFacts {
    let mut facts = LogFacts::default();
    for (name, _) in COUNTED {
        facts.events.insert(name, 0);
    }
    for path in paths {
        let instance = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.split('.').next())
            .unwrap_or("?")
            .to_string();
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) => {
                facts.unreadable.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        // Lines are read as bytes: one cut short by a SIGKILL must not end
        // the reading of the rest.
        let mut reader = BufReader::new(file);
        let mut buf = Vec::new();
        while matches!(reader.read_until(b'\n', &mut buf), Ok(n) if n > 0) {
            let line = String::from_utf8_lossy(&buf);
            if let Some(d) = dealt_line(&line, &instance) {
                facts.dealt.push(d);
            } else {
                for (name, needle) in COUNTED {
                    if line.contains(needle) {
                        *facts.events.entry(name).or_default() += 1;
                    }
                }
            }
            buf.clear();
        }
    }
    facts
}

/// Everything the checks need besides Postgres.
pub struct Inputs<'a> {
    pub pool: &'a PgPool,
    pub logs: &'a LogFacts,
    pub told: &'a [Told],
    /// `GET /admin/audit` as an instance answered it, if one did.
    pub audit: Option<Value>,
    pub unexpected_exits: &'a [(String, String)],
    /// Tables of the run, and the wall-clock ms from which each must have
    /// told a result again (every fault lifted and settled).
    pub tables: &'a [String],
    pub settled_ms: i64,
    /// The bots' count of frames out of order on their connections
    /// (`None`: their summary did not say).
    pub out_of_order: Option<u64>,
    /// The bots' protocol errors, which name those frames.
    pub bot_errors: &'a [String],
    /// The bots' count of hands they saw resumed after a re-sync (`None`:
    /// their summary did not say).
    pub resumed: Option<u64>,
}

pub async fn run(inp: Inputs<'_>) -> anyhow::Result<(Vec<Check>, i64)> {
    let pool = inp.pool;
    let mut checks = Vec::new();

    let audit = match inp.audit {
        Some(a) => a,
        None => {
            // No instance answered: the same sums, read directly.
            let row = sqlx::query(
                "SELECT (SELECT COALESCE(SUM(balance), 0) FROM accounts)::BIGINT AS w, \
                        (SELECT COALESCE(SUM(stack), 0) FROM seats)::BIGINT AS s, \
                        (SELECT COALESCE(SUM(granted), 0) FROM accounts)::BIGINT AS g",
            )
            .fetch_one(pool)
            .await?;
            let (w, s, g): (i64, i64, i64) = (row.get("w"), row.get("s"), row.get("g"));
            serde_json::json!({"wallets": w, "stacks": s, "granted": g, "delta": w + s - g})
        }
    };
    checks.push(Check::new(
        "audit delta 0 (chips conserved)",
        audit["delta"].as_i64() == Some(0),
        format!(
            "delta {} (wallets {}, stacks {}, granted {})",
            audit["delta"], audit["wallets"], audit["stacks"], audit["granted"]
        ),
    ));

    let hands: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM hands")
        .fetch_one(pool)
        .await?;

    // No hand applied twice: one row per (table, hand) by the primary key,
    // every ledger row of a hand carries that hand's fence, and every
    // hand's ledger nets to 0.
    let mismatched: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM ledger l JOIN hands h ON h.table_id = l.table_id AND h.hand_no = l.hand_no \
         WHERE l.kind = 'hand' AND l.fence <> h.fence",
    )
    .fetch_one(pool)
    .await?;
    let unbalanced: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM (SELECT table_id, hand_no FROM ledger WHERE kind = 'hand' \
         GROUP BY table_id, hand_no HAVING SUM(stack_delta) <> 0) x",
    )
    .fetch_one(pool)
    .await?;
    let orphans: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM (SELECT DISTINCT table_id, hand_no FROM ledger WHERE kind = 'hand') l \
         WHERE NOT EXISTS (SELECT 1 FROM hands h WHERE h.table_id = l.table_id AND h.hand_no = l.hand_no)",
    )
    .fetch_one(pool)
    .await?;
    checks.push(Check::new(
        "no hand applied twice",
        mismatched == 0 && unbalanced == 0 && orphans == 0,
        format!(
            "{hands} hands; ledger rows under another fence than their hand's: {mismatched}; \
             hands whose ledger does not net to 0: {unbalanced}; ledger hands without a hand row: {orphans}"
        ),
    ));

    // Hand fences never decrease along a table's hands.
    let rows = sqlx::query("SELECT table_id, hand_no, fence FROM hands ORDER BY table_id, hand_no")
        .fetch_all(pool)
        .await?;
    let mut last: HashMap<String, (i64, i64)> = HashMap::new();
    let mut decreasing = Vec::new();
    for r in &rows {
        let (t, h, f): (String, i64, i64) = (r.get("table_id"), r.get("hand_no"), r.get("fence"));
        if let Some((ph, pf)) = last.insert(t.clone(), (h, f)) {
            if f < pf {
                decreasing.push(format!(
                    "{t}: hand {h} fence {f} after hand {ph} fence {pf}"
                ));
            }
        }
    }
    checks.push(
        Check::new(
            "hand fences never decrease",
            decreasing.is_empty(),
            format!("{} decreases", decreasing.len()),
        )
        .with_examples(decreasing),
    );

    // No hand dealt by a process after a newer owner stamped the table.
    let stamps =
        sqlx::query("SELECT table_id, fence, at FROM table_events WHERE fence IS NOT NULL")
            .fetch_all(pool)
            .await?;
    let mut by_table: HashMap<String, Vec<(i64, DateTime<Utc>)>> = HashMap::new();
    for r in &stamps {
        by_table
            .entry(r.get("table_id"))
            .or_default()
            .push((r.get("fence"), r.get("at")));
    }
    let mut late = Vec::new();
    for d in &inp.logs.dealt {
        let newer = by_table.get(&d.table).and_then(|s| {
            s.iter()
                .filter(|(f, at)| *f > d.fence && *at < d.at)
                .min_by_key(|(_, at)| *at)
        });
        if let Some((f, at)) = newer {
            late.push(format!(
                "{} dealt hand {} of {} under fence {} at {}, after fence {f} was stamped at {at}",
                d.instance, d.hand, d.table, d.fence, d.at
            ));
        }
    }
    checks.push(
        Check::new(
            "0 hands dealt after a newer owner's stamp",
            late.is_empty(),
            format!(
                "{} hands dealt (log lines), {} stamps; {} late",
                inp.logs.dealt.len(),
                stamps.len(),
                late.len()
            ),
        )
        .with_examples(late),
    );
    // The check above is only as good as the logs it read.
    let logged = inp.logs.dealt.len() as i64;
    let mut unreadable = inp.logs.unreadable.clone();
    unreadable.truncate(10);
    checks.push(
        Check::new(
            "every recorded hand was logged when dealt",
            logged >= hands && inp.logs.unreadable.is_empty(),
            format!("{logged} hand_dealt lines for {hands} recorded hands"),
        )
        .with_examples(unreadable),
    );

    // Every result told is a hand Postgres recorded, with the same stacks.
    let recorded: HashMap<(String, i64), HashMap<u64, u64>> =
        sqlx::query("SELECT table_id, hand_no, result FROM hands")
            .fetch_all(pool)
            .await?
            .iter()
            .map(|r| {
                let result: Value = r.get("result");
                let stacks = result["seats"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|s| Some((s["seat"].as_u64()?, s["end_stack"].as_u64()?)))
                            .collect()
                    })
                    .unwrap_or_default();
                ((r.get("table_id"), r.get("hand_no")), stacks)
            })
            .collect();
    let mut not_recorded = Vec::new();
    for t in inp.told {
        match recorded.get(&(t.table.clone(), t.hand)) {
            Some(rec) if *rec == t.stacks => {}
            Some(rec) => not_recorded.push(format!(
                "{} was told hand {} of {} ended {:?}; recorded {:?}",
                t.bot, t.hand, t.table, t.stacks, rec
            )),
            None => not_recorded.push(format!(
                "{} was told hand {} of {} ended {:?}; no such hand recorded",
                t.bot, t.hand, t.table, t.stacks
            )),
        }
    }
    checks.push(
        Check::new(
            "0 results told but not recorded",
            not_recorded.is_empty() && !inp.told.is_empty(),
            format!(
                "{} results told, {} not as recorded",
                inp.told.len(),
                not_recorded.len()
            ),
        )
        .with_examples(not_recorded),
    );

    let seats: Vec<(String, i64, String, i64)> =
        sqlx::query("SELECT table_id, seat::BIGINT AS seat, player, stack FROM seats")
            .fetch_all(pool)
            .await?
            .iter()
            .map(|r| {
                (
                    r.get("table_id"),
                    r.get("seat"),
                    r.get("player"),
                    r.get("stack"),
                )
            })
            .collect();
    checks.push(
        Check::new(
            "no seat left behind",
            seats.is_empty(),
            format!("{} seats still taken after the bots left", seats.len()),
        )
        .with_examples(
            seats
                .iter()
                .map(|(t, s, p, c)| format!("{t} seat {s}: {p} with {c}"))
                .collect(),
        ),
    );

    let frozen: Vec<(String, Option<String>)> =
        sqlx::query("SELECT id, state_reason FROM tables WHERE state = 'frozen'")
            .fetch_all(pool)
            .await?
            .iter()
            .map(|r| (r.get("id"), r.get("state_reason")))
            .collect();
    checks.push(
        Check::new(
            "no table frozen",
            frozen.is_empty(),
            format!("{} frozen", frozen.len()),
        )
        .with_examples(
            frozen
                .iter()
                .map(|(t, r)| format!("{t}: {}", r.as_deref().unwrap_or("?")))
                .collect(),
        ),
    );

    // Every table played again once the faults were over.
    let mut last_told: HashMap<&str, i64> = HashMap::new();
    for t in inp.told {
        let e = last_told.entry(t.table.as_str()).or_insert(0);
        *e = (*e).max(t.at_ms);
    }
    let stuck: Vec<String> = inp
        .tables
        .iter()
        .filter(|t| last_told.get(t.as_str()).copied().unwrap_or(0) < inp.settled_ms)
        .cloned()
        .collect();
    checks.push(
        Check::new(
            "every table played again after the faults",
            stuck.is_empty(),
            format!(
                "{} of {} tables told no result once the faults were over",
                stuck.len(),
                inp.tables.len()
            ),
        )
        .with_examples(stuck)
        // A table's owner that cannot prove its lease and liveness in time
        // (a starved machine, at a short TTL) pauses rather than deals:
        // slow, not wrong.
        .not_gating(),
    );

    checks.push(
        Check::new(
            "seq strictly increases on every connection",
            inp.out_of_order == Some(0),
            match inp.out_of_order {
                Some(n) => format!("{n} frames out of order, over every bot's connections"),
                None => "the bots did not report their frames' order".to_string(),
            },
        )
        .with_examples(
            inp.bot_errors
                .iter()
                .filter(|e| e.contains(" seq "))
                .cloned()
                .collect(),
        ),
    );

    // I15: every owner change resumes the hand in progress. The run makes
    // no operator freeze and breaks no constraint, so nothing may void a
    // hand; and every hand a bot saw again after a re-sync showed the cards
    // and board it was told before (a bot counts a mismatch as a protocol
    // error, naming the hand).
    let voided = inp.logs.events.get("hands_voided").copied().unwrap_or(0);
    let changed: Vec<String> = inp
        .bot_errors
        .iter()
        .filter(|e| e.contains("changed across a re-sync"))
        .cloned()
        .collect();
    checks.push(
        Check::new(
            "no hand voided by an owner change; resumed hands as told",
            voided == 0 && changed.is_empty(),
            format!(
                "{voided} hands voided; {} hands resumed after a re-sync, {} of them changed",
                inp.resumed
                    .map_or_else(|| "?".to_string(), |n| n.to_string()),
                changed.len()
            ),
        )
        .with_examples(changed),
    );

    checks.push(
        Check::new(
            "no instance exited on its own",
            inp.unexpected_exits.is_empty(),
            format!("{} unexpected exits", inp.unexpected_exits.len()),
        )
        .with_examples(
            inp.unexpected_exits
                .iter()
                .map(|(w, log)| format!("{w}; log {log}"))
                .collect(),
        ),
    );
    Ok((checks, hands))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compact_hand_dealt_line_is_read() {
        let line = "2026-05-01T10:00:00.123456Z  INFO table{table_id=tbl_1 fence=3 hand_no=4}: \
                    hand dealt event=\"hand_dealt\" hand=5 dealt_fence=3 table_id=tbl_1";
        let d = dealt_line(line, "chaos-a").expect("parsed");
        assert_eq!((d.table.as_str(), d.hand, d.fence), ("tbl_1", 5, 3));
        assert_eq!(d.instance, "chaos-a");
        assert!(dealt_line("2026-05-01T10:00:00Z  INFO other", "x").is_none());
        assert_eq!(field("a b=\"c\" d=e", "b"), Some("c"));
    }
}
