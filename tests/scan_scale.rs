//! What an idle instance costs Redis and Postgres as the tables it hosts
//! grow: the revive scan's commands and rows, printed beside the renew's and
//! the fence check's own, at 1,000 and at 10,000 idle tables over two
//! instances. The scan looks only at tables that may need an owner, so at
//! rest it reads nothing per table, whatever the number hosted; the renew
//! and the fence check grow with the tables by design (one command and one
//! row per held lease per TTL/3).
//!
//! A benchmark, not part of the default run (it hosts 11,000 tables):
//! `cargo nextest run --test scan_scale --run-ignored only --no-capture`
//! (`scripts/test.sh` runs it after the soak).

mod common;
mod play;

use std::time::{Duration, Instant};

use common::{test_db, unique_env, PrivateRedis, Server, ServerConfig};
use play::metric;

const TTL_MS: u64 = 3000;
/// How long the steady state is watched.
const WINDOW: Duration = Duration::from_secs(9);

/// Counters summed over both instances.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    scans: f64,
    scan_rows: f64,
    scan_redis: f64,
    renewed: f64,
    fence_rows: f64,
    hosted: f64,
}

async fn counts(servers: &[&Server]) -> Counts {
    let mut c = Counts::default();
    for s in servers {
        let (_, text) = s.get("/metrics").await;
        c.scans += metric(&text, "pitboss_revive_scans_total ");
        c.scan_rows += metric(&text, "pitboss_revive_scan_rows_total ");
        c.scan_redis += metric(&text, "pitboss_revive_scan_redis_commands_total ");
        c.renewed += metric(&text, "pitboss_leases_renewed_total ");
        c.fence_rows += metric(&text, "pitboss_fence_check_rows_total ");
        c.hosted += metric(&text, "pitboss_tables_hosted ");
    }
    c
}

/// Every command Redis has served, from `INFO commandstats`.
async fn redis_calls(url: &str) -> u64 {
    let mut conn = common::redis_conn(url).await;
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .expect("INFO");
    info.lines()
        .filter(|l| l.starts_with("cmdstat_") && !l.starts_with("cmdstat_info"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// Rows Postgres returned for the database (`pg_stat_database`), every query.
async fn pg_rows(pool: &sqlx::PgPool) -> i64 {
    // Statistics are flushed by each backend now and then; take a fresh view.
    sqlx::query("SELECT pg_stat_clear_snapshot()")
        .execute(pool)
        .await
        .expect("clear snapshot");
    sqlx::query_scalar(
        "SELECT (tup_returned + tup_fetched)::BIGINT FROM pg_stat_database WHERE datname = current_database()",
    )
    .fetch_one(pool)
    .await
    .expect("pg_stat_database")
}

/// Rows read per relation: sequential scans per table, index entries per
/// index (`pg_stat_user_tables`, `pg_stat_user_indexes`).
async fn reads_by_relation(pool: &sqlx::PgPool) -> std::collections::BTreeMap<String, i64> {
    sqlx::query("SELECT pg_stat_clear_snapshot()")
        .execute(pool)
        .await
        .expect("clear snapshot");
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT 'seq scan of ' || relname, COALESCE(seq_tup_read, 0)::BIGINT FROM pg_stat_user_tables \
         UNION ALL \
         SELECT 'index ' || indexrelname, COALESCE(idx_tup_read, 0)::BIGINT FROM pg_stat_user_indexes",
    )
    .fetch_all(pool)
    .await
    .expect("pg_stat_user_*");
    rows.into_iter().collect()
}

/// Adds `n` tables released by a shutdown (what a drained predecessor
/// leaves), so the instances' revive scans host them.
async fn add_released_tables(
    pool: &sqlx::PgPool,
    env: &str,
    from: usize,
    n: usize,
    config: &serde_json::Value,
) {
    sqlx::query(
        "INSERT INTO tables (id, environment, config, state, state_reason) \
         SELECT 'tbl_scale' || lpad(i::TEXT, 11, '0'), $1, $2, 'released', 'shutdown' \
         FROM generate_series($3::INT, $4::INT) AS i",
    )
    .bind(env)
    .bind(config)
    .bind(from as i32)
    .bind((from + n - 1) as i32)
    .execute(pool)
    .await
    .expect("insert tables");
}

/// Waits until the two instances host `n` tables between them.
async fn hosted(servers: &[&Server], n: usize, within: Duration) -> Duration {
    let started = Instant::now();
    while started.elapsed() < within {
        if counts(servers).await.hosted as usize >= n {
            return started.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!(
        "{n} tables were not hosted within {within:?}: {:?}",
        counts(servers).await
    );
}

/// Watches the steady state for `WINDOW`; prints and returns the deltas.
async fn measure(label: &str, servers: &[&Server], redis_url: &str, pool: &sqlx::PgPool) -> Counts {
    // Let acquisitions and their first renews settle, and let every
    // Postgres backend flush the statistics of what came before (an idle
    // backend flushes within 10 s), so the window counts only the rest.
    tokio::time::sleep(Duration::from_secs(11)).await;
    let (c0, r0, p0) = (
        counts(servers).await,
        redis_calls(redis_url).await,
        pg_rows(pool).await,
    );
    let by_rel0 = reads_by_relation(pool).await;
    let t0 = Instant::now();
    tokio::time::sleep(WINDOW).await;
    let (c1, r1, p1) = (
        counts(servers).await,
        redis_calls(redis_url).await,
        pg_rows(pool).await,
    );
    let by_rel1 = reads_by_relation(pool).await;
    let secs = t0.elapsed().as_secs_f64();
    let mut by_rel: Vec<(String, f64)> = by_rel1
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                (v - by_rel0.get(k).copied().unwrap_or(0)) as f64 / secs,
            )
        })
        .filter(|(_, rate)| *rate >= 0.5)
        .collect();
    by_rel.sort_by(|a, b| b.1.total_cmp(&a.1));
    let d = Counts {
        scans: c1.scans - c0.scans,
        scan_rows: c1.scan_rows - c0.scan_rows,
        scan_redis: c1.scan_redis - c0.scan_redis,
        renewed: c1.renewed - c0.renewed,
        fence_rows: c1.fence_rows - c0.fence_rows,
        hosted: c1.hosted,
    };
    println!(
        "{label}: {} tables hosted over 2 instances, TTL {TTL_MS} ms, {secs:.1} s watched\n  \
         revive scan:  {:.1} scans/s, {:.1} Redis commands/s, {:.1} Postgres rows/s\n  \
         renew:        {:.1} leases renewed/s\n  \
         fence check:  {:.1} Postgres rows/s\n  \
         all of Redis: {:.1} commands/s; all of Postgres (pg_stat_database, this database): {:.1} rows/s",
        d.hosted,
        d.scans / secs,
        d.scan_redis / secs,
        d.scan_rows / secs,
        d.renewed / secs,
        d.fence_rows / secs,
        (r1 - r0) as f64 / secs,
        (p1 - p0) as f64 / secs,
    );
    for (relation, rate) in by_rel {
        println!("    rows read/s by {relation}: {rate:.1}");
    }
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: hosts 11,000 tables; run with --run-ignored only"]
async fn the_revive_scan_costs_nothing_per_hosted_table() {
    let db = test_db().await;
    let env = unique_env();
    let redis = PrivateRedis::start().await;
    let cfg = ServerConfig::new(&db, &env)
        .with_redis(&redis.url())
        .with_ttl_ms(TTL_MS)
        .with_env("PITBOSS__DATABASE__MAX_CONNECTIONS", "20");
    let a = Server::start(cfg.clone().with_instance("scale-a")).await;
    let b = Server::start(cfg.with_instance("scale-b")).await;
    let servers = [&a, &b];
    let pool = db.pool().await;
    let config = serde_json::to_value(common::table_config()).expect("config");

    let mut seen = Vec::new();
    let mut total = 0;
    for (label, n) in [("1,000 tables", 1_000), ("10,000 tables", 9_000)] {
        add_released_tables(&pool, &env, total + 1, n, &config).await;
        total += n;
        let took = hosted(&servers, total, Duration::from_secs(600)).await;
        println!("{total} tables hosted {took:.1?} after they were released to the scans");
        seen.push((total, measure(label, &servers, &redis.url(), &pool).await));
    }
    for (n, d) in &seen {
        // At rest nothing may need an owner: the scans read no row and send
        // no command, at 1,000 tables as at 10,000.
        assert_eq!(d.scan_rows, 0.0, "{n} tables: {d:?}");
        assert_eq!(d.scan_redis, 0.0, "{n} tables: {d:?}");
        assert!(d.scans > 0.0, "the scans ran: {d:?}");
        // The renew covers every lease, TTL/3 after TTL/3.
        assert!(d.renewed >= *n as f64, "{n} tables: {d:?}");
    }
}
