//! `pitboss-bench writes`: fenced hand writes per second, pitboss's own
//! boundary write (`Store::write_boundary`) beside `pgbench` running the same
//! transaction shape against the same server, database and rows in the
//! same run.
//!
//! The shape, for a hand at a table of two seats where one chip changes
//! hands: BEGIN; lock the table row and check its fence; insert the hand;
//! update both seats; insert a ledger row for each; update the table's hand
//! number and button; COMMIT. Each client writes to tables of its own (a
//! table has one writer, its owner), so neither side waits on a row lock
//! the other would not. The phases alternate, pitboss first, and each
//! figure is the median of its rounds.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use pitboss::games::holdem::rules::{
    Chips, HandSummary, PlayerId, PotAward, SeatResult, TableConfig,
};
use pitboss::games::holdem::settlement_of;
use pitboss::games::GameKind;
use pitboss::store::{Boundary, Budgets, Store};
use pitboss::types::{Fence, TableId};

use crate::instance::Database;

const OWNER: &str = "bench-writes";
const STACK: u64 = 1_000_000;

/// The command line of `pitboss-bench writes`.
#[derive(Debug, clap::Args)]
pub struct Options {
    /// Concurrent writers on each side
    #[arg(long, value_name = "N", default_value = "8", value_parser = crate::count)]
    clients: usize,
    /// Tables written to, split among the clients (at
    /// least one per client)
    #[arg(verbatim_doc_comment, long, value_name = "N", default_value = "64", value_parser = crate::count)]
    tables: usize,
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

impl Options {
    /// At least one table per client, and every client the same number of
    /// tables, so pgbench's arithmetic picks the same rows.
    pub fn checked(mut self) -> Result<Options, String> {
        if self.tables < self.clients {
            return Err(format!(
                "--tables {} is fewer than --clients {}: at least one table per client",
                self.tables, self.clients
            ));
        }
        self.tables -= self.tables % self.clients;
        Ok(self)
    }
}

pub async fn run(o: Options, args: &[String]) -> anyhow::Result<()> {
    let db = Database::create(&o.pg_url, "writes").await?;
    let result = measure(&o, &db, args).await;
    db.drop_it().await?;
    result
}

fn table_id(i: usize) -> TableId {
    TableId::parse(&format!("tbl_w{i:06}")).expect("a valid table id")
}

fn player(i: usize, seat: u8) -> PlayerId {
    PlayerId(format!("w{i}s{seat}"))
}

/// Where a table stands: its next hand number and its two stacks.
#[derive(Clone, Copy)]
struct At {
    hand: u64,
    stacks: [u64; 2],
}

/// The next hand at table `i`: one chip from one seat to the other, the
/// direction alternating so the stacks stay put.
fn summary(i: usize, at: At) -> HandSummary {
    let from = usize::from(at.hand % 2 == 1);
    let seat = |s: usize| SeatResult {
        seat: s as u8,
        player: player(i, s as u8),
        start_stack: Chips(at.stacks[s]),
        end_stack: Chips(if s == from {
            at.stacks[s] - 1
        } else {
            at.stacks[s] + 1
        }),
    };
    HandSummary {
        hand: at.hand,
        seats: vec![seat(0), seat(1)],
        pots: vec![PotAward {
            amount: Chips(2),
            winners: vec![(1 - from as u8, Chips(2))],
        }],
    }
}

/// Where every table stands, read back from Postgres.
async fn read_at(store: &Store, tables: usize) -> anyhow::Result<Vec<At>> {
    let mut at = vec![
        At {
            hand: 1,
            stacks: [0, 0]
        };
        tables
    ];
    let rows: Vec<(String, i64)> = sqlx::query_as("SELECT id, hand_no FROM tables")
        .fetch_all(store.pool())
        .await?;
    for (id, hand) in rows {
        if let Some(i) = index(&id).filter(|i| *i < tables) {
            at[i].hand = u64::try_from(hand)? + 1;
        }
    }
    let rows: Vec<(String, i16, i64)> = sqlx::query_as("SELECT table_id, seat, stack FROM seats")
        .fetch_all(store.pool())
        .await?;
    for (id, seat, stack) in rows {
        if let Some(i) = index(&id).filter(|i| *i < tables) {
            at[i].stacks[usize::try_from(seat)? % 2] = u64::try_from(stack)?;
        }
    }
    Ok(at)
}

fn index(id: &str) -> Option<usize> {
    id.strip_prefix("tbl_w")?.parse().ok()
}

async fn measure(o: &Options, db: &Database, args: &[String]) -> anyhow::Result<()> {
    // One connection per client, as pgbench has.
    let store = Store::connect_lazy(
        &db.url,
        OWNER,
        u32::try_from(o.clients).context("--clients")?,
        Duration::from_secs(30),
        Budgets::default(),
    )?;
    store.migrate().await?;
    let env = "bench";
    let config = TableConfig {
        small_blind: Chips(1),
        big_blind: Chips(2),
        ante: Chips(0),
        seats: 2,
        min_buy_in: Chips(STACK),
        max_buy_in: Chips(STACK),
    };
    let fence = Fence(1);
    for i in 0..o.tables {
        let id = table_id(i);
        store
            .create_table(env, &id, GameKind::HOLDEM, &config)
            .await?;
        store.stamp(&id, fence, OWNER, false).await?;
        for seat in 0..2 {
            let p = player(i, seat);
            store.grant(&p.0, Chips(STACK)).await?;
            store.buy_in(&id, fence, seat, &p, Chips(STACK)).await?;
        }
    }
    let version: String = sqlx::query_scalar("SHOW server_version")
        .fetch_one(store.pool())
        .await?;
    println!(
        "pitboss-bench writes: {} cores, Postgres {version}, {} clients, {} tables, {} s × {} rounds; command: pitboss-bench writes {}",
        std::thread::available_parallelism().map_or(0, usize::from),
        o.clients,
        o.tables,
        o.seconds,
        o.rounds,
        args.join(" ")
    );

    let script =
        std::env::temp_dir().join(format!("pitboss-bench-writes-{}.sql", std::process::id()));
    let sample = At {
        hand: 1,
        stacks: [STACK, STACK],
    };
    let result = serde_json::to_string(&summary(0, sample))?;
    std::fs::write(&script, pgbench_script(&result))?;
    let mut ours = Vec::new();
    let mut floor = Vec::new();
    for round in 1..=o.rounds {
        // Each side goes on from where the other left the tables.
        let at = read_at(&store, o.tables).await?;
        let p = pitboss_phase(o, &store, at).await?;
        println!("  round {round} pitboss write_boundary: {p:8.0} writes/s");
        ours.push(p);
        let g = pgbench_phase(o, db, &script).await?;
        println!("  round {round} pgbench, same shape: {g:8.0} writes/s");
        floor.push(g);
    }
    let _ = std::fs::remove_file(&script);
    let med = |xs: &mut Vec<f64>| {
        xs.sort_by(f64::total_cmp);
        xs[xs.len() / 2]
    };
    let (p, g) = (med(&mut ours), med(&mut floor));
    println!("  ─────");
    println!(
        "  fenced hand writes: pitboss {p:.0}/s, pgbench {g:.0}/s (median of {} rounds): {:.0}% of pgbench, goal ≥ 50%",
        o.rounds,
        p / g * 100.0
    );
    // Every write either side made is a hand row with its two ledger rows.
    let (hands, ledger): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM hands), (SELECT COUNT(*) FROM ledger WHERE kind = 'hand')",
    )
    .fetch_one(store.pool())
    .await?;
    if ledger != hands * 2 {
        bail!("{hands} hands written but {ledger} hand ledger rows (expected two per hand)");
    }
    if let Some(path) = &o.json {
        let doc = serde_json::json!({
            "bench": "writes",
            "clients": o.clients,
            "tables": o.tables,
            "seconds": o.seconds,
            "pitboss_writes_per_s": ours,
            "pgbench_writes_per_s": floor,
            "ratio": p / g,
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)
            .with_context(|| format!("write {path}"))?;
    }
    Ok(())
}

/// `o.clients` tasks, each writing hands at its own tables in turn for
/// `o.seconds`; returns writes per second.
async fn pitboss_phase(o: &Options, store: &Store, at: Vec<At>) -> anyhow::Result<f64> {
    let deadline = Instant::now() + Duration::from_secs(o.seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..o.clients {
        let store = store.clone();
        let mut mine: Vec<(usize, At)> = (c..o.tables)
            .step_by(o.clients)
            .map(|i| (i, at[i]))
            .collect();
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            'run: loop {
                for (i, at) in mine.iter_mut() {
                    if Instant::now() >= deadline {
                        break 'run;
                    }
                    let id = table_id(*i);
                    let hand = summary(*i, *at);
                    store
                        .write_boundary(&id, Fence(1), OWNER, &boundary(&hand)?, &[])
                        .await
                        .with_context(|| format!("hand {} at {id}", at.hand))?;
                    at.hand += 1;
                    for s in &hand.seats {
                        at.stacks[usize::from(s.seat)] = s.end_stack.0;
                    }
                    n += 1;
                }
            }
            Ok::<_, anyhow::Error>(n)
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await??;
    }
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

/// A hand as a hold'em table records its boundary (button 0).
fn boundary(hand: &HandSummary) -> anyhow::Result<Boundary> {
    let state = serde_json::json!({ "button": 0 });
    Ok(Boundary::of(settlement_of(hand), state)?)
}

/// The same transaction as `Store::write_boundary` for two seats, as a pgbench
/// script (the seats' stacks in one statement, their ledger rows in
/// another): client `c` writes to tables `c`, `c + clients`, … like the
/// pitboss phase. The hand number comes from the locked row.
fn pgbench_script(result: &str) -> String {
    format!(
        r#"\set t :client_id + :clients * random(0, :per - 1)
\set from random(0, 1)
BEGIN;
SELECT owner_fencing_token AS fence, hand_no + 1 AS hand FROM tables WHERE id = 'tbl_w' || lpad(:t::text, 6, '0') FOR UPDATE \gset
INSERT INTO hands (table_id, hand_no, fence, owner, result) VALUES ('tbl_w' || lpad(:t::text, 6, '0'), :hand, :fence, '{OWNER}', '{result}');
UPDATE seats AS s SET stack = s.stack + v.delta FROM UNNEST(ARRAY[0, 1]::int2[], ARRAY['w' || :t || 's0', 'w' || :t || 's1']::text[], ARRAY[2 * :from - 1, 1 - 2 * :from]::int8[]) AS v(seat, player, delta) WHERE s.table_id = 'tbl_w' || lpad(:t::text, 6, '0') AND s.seat = v.seat AND s.player = v.player AND s.stack > 0;
INSERT INTO ledger (kind, player, table_id, hand_no, fence, wallet_delta, stack_delta) SELECT 'hand', v.player, 'tbl_w' || lpad(:t::text, 6, '0'), :hand, :fence, 0, v.delta FROM UNNEST(ARRAY['w' || :t || 's0', 'w' || :t || 's1']::text[], ARRAY[2 * :from - 1, 1 - 2 * :from]::int8[]) WITH ORDINALITY AS v(player, delta, n) ORDER BY v.n;
UPDATE tables SET hand_no = GREATEST(hand_no, :hand), game_state = '{{"button": 0}}', updated_at = now() WHERE id = 'tbl_w' || lpad(:t::text, 6, '0');
COMMIT;
"#
    )
}

/// Runs pgbench for `o.seconds` with `o.clients` connections; returns its
/// transactions per second.
async fn pgbench_phase(
    o: &Options,
    db: &Database,
    script: &std::path::Path,
) -> anyhow::Result<f64> {
    let defines = [("clients", o.clients), ("per", o.tables / o.clients)];
    crate::pgbench::tps(&o.pgbench, &db.url, o.clients, o.seconds, &defines, script).await
}
