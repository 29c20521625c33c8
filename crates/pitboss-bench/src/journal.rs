//! `pitboss-bench journal`: journalled commands per second, pitboss's group
//! commit (`Journal::append`, one command in flight per table, as a table
//! has) beside `pgbench` running one transaction per command on the same
//! rows, in the same run.
//!
//! Both sides write the same row shape with the same fence check: an act's
//! journal row, inserted only while its table's row holds the fence (a
//! share lock on it). pgbench commits each command on its own (a WAL flush
//! per command); pitboss commits every command that arrived while the last
//! batch was being written in one transaction. The phases alternate,
//! pitboss first, and each figure is the median of its rounds.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use pitboss::games::holdem::rules::{Chips, TableConfig};
use pitboss::games::GameKind;
use pitboss::store::{Appended, Budgets, Entry, EntryKind, JournalSettings, Store};
use pitboss::types::{Fence, TableId};

use crate::instance::Database;

const OWNER: &str = "bench-journal";

/// The command line of `pitboss-bench journal`.
#[derive(Debug, clap::Args)]
pub struct Options {
    /// Tables, each with one command in flight at a time
    #[arg(long, value_name = "N", default_value = "200", value_parser = crate::count)]
    tables: usize,
    /// pgbench's connections, each committing one command at a time
    #[arg(long, value_name = "N", default_value = "16", value_parser = crate::count)]
    pgbench_clients: usize,
    /// How long the journal writer waits for more commands once one has
    /// arrived (0: it writes what is queued at once)
    #[arg(verbatim_doc_comment, long, value_name = "MS", default_value = "0")]
    window_ms: u64,
    /// Length of each phase
    #[arg(long, value_name = "S", default_value = "10", value_parser = crate::seconds)]
    seconds: u64,
    /// Phases of each side, alternating
    #[arg(long, value_name = "N", default_value = "3", value_parser = crate::count)]
    rounds: usize,
    /// Postgres server to create the run's database on
    /// (default $PITBOSS_TEST_PG_URL, else
    /// postgres://postgres@127.0.0.1:5432/postgres)
    #[arg(verbatim_doc_comment, long, value_name = "URL", default_value_t = crate::default_pg_url(), hide_default_value = true)]
    pg_url: String,
    /// The pgbench binary (default: pgbench on PATH)
    #[arg(
        long,
        value_name = "PATH",
        default_value = "pgbench",
        hide_default_value = true
    )]
    pgbench: PathBuf,
    /// Also write the figures as JSON
    #[arg(long, value_name = "PATH")]
    json: Option<String>,
}

pub async fn run(o: Options, args: &[String]) -> anyhow::Result<()> {
    let db = Database::create(&o.pg_url, "journal").await?;
    let result = measure(&o, &db, args).await;
    db.drop_it().await?;
    result
}

fn table_id(i: usize) -> TableId {
    TableId::parse(&format!("tbl_j{i:06}")).expect("a valid table id")
}

fn act(seq: u32) -> Entry {
    Entry {
        number: 1,
        seq,
        kind: EntryKind::Act,
        seat: Some(1),
        decision: Some(u64::from(seq)),
        command: Some(serde_json::json!({"hand": 1, "action": "call"})),
        seed: None,
        deadline_ms: None,
        told_after: None,
        spent_ms: None,
    }
}

async fn measure(o: &Options, db: &Database, args: &[String]) -> anyhow::Result<()> {
    let settings = JournalSettings {
        window: Duration::from_millis(o.window_ms),
        ..JournalSettings::default()
    };
    let store = Store::connect_lazy(
        &db.url,
        OWNER,
        u32::try_from(settings.max_in_flight + 2).context("connections")?,
        Duration::from_secs(30),
        Budgets::default(),
    )?
    .with_journal(settings);
    store.migrate().await?;
    let config = TableConfig {
        small_blind: Chips(1),
        big_blind: Chips(2),
        ante: Chips(0),
        seats: 2,
        min_buy_in: Chips(100),
        max_buy_in: Chips(100),
    };
    for i in 0..o.tables {
        let id = table_id(i);
        store
            .create_table("bench", &id, GameKind::HOLDEM, &config)
            .await?;
        store.stamp(&id, Fence(1), OWNER, false).await?;
    }
    sqlx::query("CREATE SEQUENCE bench_seq")
        .execute(store.pool())
        .await?;
    let version: String = sqlx::query_scalar("SHOW server_version")
        .fetch_one(store.pool())
        .await?;
    println!(
        "pitboss-bench journal: {} cores, Postgres {version}, {} tables, pgbench {} clients, window {} ms, {} s × {} rounds; command: pitboss-bench journal {}",
        std::thread::available_parallelism().map_or(0, usize::from),
        o.tables,
        o.pgbench_clients,
        o.window_ms,
        o.seconds,
        o.rounds,
        args.join(" ")
    );
    let script =
        std::env::temp_dir().join(format!("pitboss-bench-journal-{}.sql", std::process::id()));
    std::fs::write(&script, PGBENCH_SCRIPT)?;
    let (mut ours, mut floor) = (Vec::new(), Vec::new());
    let mut next = vec![1u32; o.tables];
    for round in 1..=o.rounds {
        let p = pitboss_phase(o, &store, &mut next).await?;
        println!("  round {round} pitboss group commit: {p:8.0} commands/s");
        ours.push(p);
        let g = pgbench_phase(o, db, &script).await?;
        println!("  round {round} pgbench, one transaction per command: {g:8.0} commands/s");
        floor.push(g);
    }
    let _ = std::fs::remove_file(&script);
    let med = |xs: &mut Vec<f64>| {
        let mut v = xs.clone();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (p, g) = (med(&mut ours), med(&mut floor));
    println!("  ─────");
    println!(
        "  journalled commands: pitboss {p:.0}/s, pgbench {g:.0}/s (median of {} rounds): {:.1}× pgbench, goal ≥ 3×",
        o.rounds,
        p / g
    );
    // Every command pitboss was told committed is a row.
    let ours_rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM journal WHERE number = 1")
        .fetch_one(store.pool())
        .await?;
    let told: i64 = next.iter().map(|n| i64::from(n - 1)).sum();
    if ours_rows != told {
        bail!("{told} commands told committed but {ours_rows} journal rows");
    }
    if let Some(path) = &o.json {
        let doc = serde_json::json!({
            "bench": "journal",
            "tables": o.tables,
            "pgbench_clients": o.pgbench_clients,
            "window_ms": o.window_ms,
            "seconds": o.seconds,
            "pitboss_commands_per_s": ours,
            "pgbench_commands_per_s": floor,
            "ratio": p / g,
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)
            .with_context(|| format!("write {path}"))?;
    }
    Ok(())
}

/// One task per table, each appending its next command once the last one
/// committed, for `o.seconds`; returns commands per second.
async fn pitboss_phase(o: &Options, store: &Store, next: &mut [u32]) -> anyhow::Result<f64> {
    let deadline = Instant::now() + Duration::from_secs(o.seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (i, from) in next.iter().copied().enumerate() {
        let journal = store.journal().clone();
        tasks.push(tokio::spawn(async move {
            let id = table_id(i);
            let mut seq = from;
            while Instant::now() < deadline {
                match journal.append(&id, Fence(1), act(seq)).await? {
                    Appended::Committed => seq += 1,
                    Appended::AlreadyThere => bail!("command {seq} at {id} was there already"),
                }
            }
            Ok::<_, anyhow::Error>(seq)
        }));
    }
    let mut total = 0u64;
    for (slot, t) in next.iter_mut().zip(tasks) {
        let seq = t.await??;
        total += u64::from(seq - *slot);
        *slot = seq;
    }
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

/// The same row and fence check as the journal's group commit, one
/// command per transaction.
const PGBENCH_SCRIPT: &str = r#"\set t random(0, :tables - 1)
INSERT INTO journal (table_id, number, fence, seq, kind, seat, decision, command) SELECT t.id, 2, t.owner_fencing_token, nextval('bench_seq')::int4, 'act', 1, 1, '{"hand": 1, "action": "call"}'::jsonb FROM tables t WHERE t.id = 'tbl_j' || lpad(:t::text, 6, '0') AND t.owner_fencing_token = 1 FOR SHARE;
"#;

/// Runs pgbench for `o.seconds`; returns its transactions per second.
async fn pgbench_phase(
    o: &Options,
    db: &Database,
    script: &std::path::Path,
) -> anyhow::Result<f64> {
    let defines = [("tables", o.tables)];
    crate::pgbench::tps(
        &o.pgbench,
        &db.url,
        o.pgbench_clients,
        o.seconds,
        &defines,
        script,
    )
    .await
}
