//! A whole run: set up, play, apply faults, settle, check, report, clean up.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use rand::Rng;
use serde_json::Value;
use tokio::sync::Mutex as AsyncMutex;

use crate::bots::{read_told, Bots, BotsConfig, BotsOutcome};
use crate::checks::{self, Inputs};
use crate::children;
use crate::faults::{wall_ms, Faults, FaultsConfig, Schedule};
use crate::fleet::{lock, Fleet, FleetConfig};
use crate::monitor::Monitor;
use crate::options::Options;
use crate::postgres::{redact, ChaosDb, DEFAULT_PG_URL};
use crate::redis_server::PrivateRedis;
use crate::report::{self, Header, ReportInputs};

/// The server's defaults, so the run needs no config directory of its own;
/// every setting the run cares about is set by environment variable.
const BASE_TOML: &str = include_str!("../../../config/base.toml");

/// The instances' action clock and pause between hands: short, so tables
/// deal often and a turn left to the clock costs little.
const ACTION_TIMEOUT_MS: u64 = 2000;
const NEXT_HAND_DELAY_MS: u64 = 200;
const DRAIN_TIMEOUT_MS: u64 = 2000;
/// After the faults, every table must tell a result within this long.
const REPLAY_WINDOW: Duration = Duration::from_secs(10);

/// A binary beside this one (cargo puts every binary of the workspace in
/// one target directory).
fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe().context("finding this binary's path")?;
    Ok(me.with_file_name(name))
}

fn binary(given: &Option<PathBuf>, name: &str, build: &str) -> anyhow::Result<PathBuf> {
    let path = match given {
        Some(p) => p.clone(),
        None => sibling(name)?,
    };
    if !path.is_file() {
        bail!(
            "{} not found: build it ({build}) or pass --{}",
            path.display(),
            if name == "pitboss" { "pitboss" } else { "bots" }
        );
    }
    Ok(path)
}

fn random_token(rng: &mut impl Rng) -> String {
    format!("{:032x}", rng.gen::<u128>())
}

/// The run's outcome: whether every invariant held.
pub async fn run(opts: Options) -> anyhow::Result<bool> {
    let started = Instant::now();
    let mut rng = rand::thread_rng();
    let seed = opts.seed.unwrap_or_else(|| rng.gen());
    let run_id = format!("{:08x}", rng.gen::<u32>());
    let pitboss = binary(&opts.pitboss, "pitboss", "cargo build --bin pitboss")?;
    let bots_bin = binary(&opts.bots, "pitboss-bots", "cargo build -p pitboss-bots")?;

    let own_work_dir = opts.work_dir.is_none();
    let work = match &opts.work_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("pitboss-chaos-{run_id}")),
    };
    let config_dir = work.join("config");
    std::fs::create_dir_all(&config_dir)
        .with_context(|| format!("creating {}", config_dir.display()))?;
    std::fs::write(config_dir.join("base.toml"), BASE_TOML)
        .context("writing the instances' base.toml")?;
    let logs = work.join("logs");
    std::fs::create_dir_all(&logs)?;

    let pg_url = opts
        .pg_url
        .clone()
        .or_else(|| std::env::var("PITBOSS_TEST_PG_URL").ok())
        .unwrap_or_else(|| DEFAULT_PG_URL.into());
    println!(
        "chaos: seed {seed}; {} instances, {} tables × {} bots, faults for {:.0}s; work dir {}",
        opts.instances,
        opts.tables,
        opts.players,
        opts.duration.as_secs_f64(),
        work.display()
    );
    let db = Arc::new(ChaosDb::create(&pg_url).await?);
    println!("chaos: database {} on {}", db.name, redact(&pg_url));
    let db_name = db.name.clone();

    let played = tokio::select! {
        r = play(&opts, seed, &run_id, &pitboss, &bots_bin, &config_dir, &logs, &work, &db, started) => r,
        _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
    };
    // Whatever happened, nothing the run started outlives it.
    children::kill_all();
    if opts.keep_db {
        println!("chaos: database {db_name} kept (--keep-db)");
    } else {
        db.drop_all().await;
    }
    let report = played?;
    println!("{}", report.text);
    if let Some(path) = &opts.json {
        let text = serde_json::to_string_pretty(&report.json)?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        println!("chaos: report written to {}", path.display());
    }
    if report.ok && own_work_dir && !opts.keep_logs {
        let _ = std::fs::remove_dir_all(&work);
    } else {
        println!("chaos: logs kept in {}", work.display());
    }
    Ok(report.ok)
}

#[allow(clippy::too_many_arguments)]
async fn play(
    opts: &Options,
    seed: u64,
    run_id: &str,
    pitboss: &Path,
    bots_bin: &Path,
    config_dir: &Path,
    logs: &Path,
    work: &Path,
    db: &Arc<ChaosDb>,
    started: Instant,
) -> anyhow::Result<report::Report> {
    let mut rng = rand::thread_rng();
    let admin_token = random_token(&mut rng);
    let environment = format!("chaos_{run_id}");
    let ttl = Duration::from_millis(opts.ttl_ms);

    let redis = PrivateRedis::start(&opts.redis_server, work).await?;
    let redis_url = redis.url();
    let redis_port = redis.port;
    let redis = Arc::new(AsyncMutex::new(redis));
    println!("chaos: private redis-server on port {redis_port}");

    let ms = |v: u64| v.to_string();
    let env = vec![
        // No environment file is read: the settings below are all there is.
        ("PITBOSS_ENV".into(), "local".into()),
        ("RUST_LOG".into(), "info,sqlx=warn,actix_server=warn".into()),
        ("PITBOSS__LOG__FORMAT".into(), "compact".into()),
        ("PITBOSS__DATABASE__URL".into(), db.url.clone()),
        // The Postgres server is shared: a small pool per instance.
        ("PITBOSS__DATABASE__MAX_CONNECTIONS".into(), "8".into()),
        (
            "PITBOSS__DATABASE__CONNECT_TIMEOUT_MS".into(),
            "10000".into(),
        ),
        ("PITBOSS__REDIS__CONNECT_TIMEOUT_MS".into(), "10000".into()),
        ("PITBOSS__REDIS__OP_TIMEOUT_MS".into(), ms(opts.ttl_ms / 5)),
        ("PITBOSS__INSTANCE__ENVIRONMENT".into(), environment.clone()),
        ("PITBOSS__LEASE__TTL_MS".into(), ms(opts.ttl_ms)),
        (
            "PITBOSS__TABLE__ACTION_TIMEOUT_MS".into(),
            ms(ACTION_TIMEOUT_MS),
        ),
        (
            "PITBOSS__TABLE__NEXT_HAND_DELAY_MS".into(),
            ms(NEXT_HAND_DELAY_MS),
        ),
        (
            "PITBOSS__SHUTDOWN__DRAIN_TIMEOUT_MS".into(),
            ms(DRAIN_TIMEOUT_MS),
        ),
        // Relayed sessions of many bots pass one instance; the limit is
        // not what this run tests.
        ("PITBOSS__WS__RATE_PER_SEC".into(), "200".into()),
        ("PITBOSS__WS__RATE_BURST".into(), "400".into()),
        ("PITBOSS__AUTH__SECRET".into(), random_token(&mut rng)),
        ("PITBOSS__ADMIN__TOKEN".into(), admin_token.clone()),
    ];
    let fleet = Arc::new(
        Fleet::new(FleetConfig {
            instances: opts.instances,
            pitboss,
            config_dir,
            logs,
            redis_port,
            env,
        })
        .await?,
    );
    for slot in &fleet.slots {
        fleet.start(slot).await?;
    }
    println!(
        "chaos: instances {} up after {:.1}s",
        fleet
            .slots
            .iter()
            .map(|s| format!("{} ({})", s.id(), s.http()))
            .collect::<Vec<_>>()
            .join(", "),
        started.elapsed().as_secs_f64()
    );

    let urls = fleet.urls();
    let mut bots = Bots::start(BotsConfig {
        binary: bots_bin,
        urls: &urls,
        admin_token: &admin_token,
        tables: opts.tables,
        players: opts.players,
        seed,
        work,
    })?;
    let tables = wait_for_play(db, &mut bots, opts.tables).await?;
    println!(
        "chaos: {} tables playing after {:.1}s",
        tables.len(),
        started.elapsed().as_secs_f64()
    );

    let monitor = Arc::new(Monitor::new());
    let faults = Arc::new(Faults::new(FaultsConfig {
        fleet: fleet.clone(),
        redis: redis.clone(),
        redis_url,
        db: db.clone(),
        seen: monitor.seen.clone(),
        tables: tables.clone(),
        environment,
        admin_token: admin_token.clone(),
    })?);
    let watching = {
        let (m, f, fl, pool, token) = (
            monitor.clone(),
            faults.clone(),
            fleet.clone(),
            db.pool.clone(),
            admin_token.clone(),
        );
        tokio::spawn(async move { m.run(fl, f, pool, token).await })
    };
    // The first reading of who owns what, before any fault needs it.
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let schedule = Schedule::new(seed, ttl, opts.fault_gap, opts.instances, tables.len());
    faults.clone().run(schedule, opts.duration).await;
    println!(
        "chaos: faults over after {:.1}s; every instance up again, settling",
        started.elapsed().as_secs_f64()
    );
    {
        let _lane = faults.process_lane.lock().await;
        for slot in &fleet.slots {
            slot.proxy.heal();
            if !slot.view().up {
                fleet.start(slot).await?;
            }
        }
    }
    // A table whose owner went away is hosted elsewhere within a TTL or two.
    tokio::time::sleep(ttl * 2 + Duration::from_secs(3)).await;
    let settled_ms = wall_ms();
    tokio::time::sleep(REPLAY_WINDOW).await;
    let play_end_ms = wall_ms();

    println!("chaos: stopping the bots (they leave their seats)");
    let told_path = bots.results.clone();
    let bots_outcome: BotsOutcome = bots.stop(Duration::from_secs(120)).await;
    monitor.stop.store(true, Ordering::Relaxed);
    let _ = watching.await;

    let audit = audit(&fleet, &admin_token).await;
    let told = read_told(&told_path).unwrap_or_else(|e| {
        eprintln!("chaos: reading what the bots were told: {e:#}");
        Vec::new()
    });
    fleet.stop_all().await;
    redis.lock().await.kill();

    let log_paths: Vec<PathBuf> = lock(&fleet.logs_written).clone();
    let logs_facts = checks::read_logs(&log_paths);
    let unexpected = lock(&monitor.seen.unexpected_exits).clone();
    let (checks, hands) = checks::run(Inputs {
        pool: &db.pool,
        logs: &logs_facts,
        told: &told,
        audit,
        unexpected_exits: &unexpected,
        tables: &tables,
        settled_ms,
        out_of_order: bots_outcome
            .field("frames out of order")
            .and_then(|n| n.parse().ok()),
        bot_errors: &bots_outcome.errors,
        resumed: bots_outcome
            .field("resumed hands")
            .and_then(|n| n.split_whitespace().next())
            .and_then(|n| n.parse().ok()),
    })
    .await?;
    let records = lock(&faults.records).clone();
    Ok(report::build(ReportInputs {
        header: Header {
            seed,
            instances: opts.instances,
            tables: tables.len(),
            players: opts.players,
            duration_s: opts.duration.as_secs_f64(),
            ttl_ms: opts.ttl_ms,
            command: replay_command(opts, seed),
            wall_s: started.elapsed().as_secs_f64(),
        },
        records: &records,
        told: &told,
        play_end_ms,
        hands,
        logs: &logs_facts,
        checks: &checks,
        bots: &bots_outcome,
    }))
}

/// The command that replays this run's schedule.
fn replay_command(opts: &Options, seed: u64) -> String {
    format!(
        "pitboss-chaos --instances {} --tables {} --players {} --duration {}s --ttl-ms {} --fault-gap {} --seed {seed}",
        opts.instances,
        opts.tables,
        opts.players,
        opts.duration.as_secs_f64(),
        opts.ttl_ms,
        opts.fault_gap.as_secs_f64(),
    )
}

/// Waits until the bots have created every table and most of them have
/// recorded a hand; returns the tables in creation order.
async fn wait_for_play(db: &ChaosDb, bots: &mut Bots, want: usize) -> anyhow::Result<Vec<String>> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if !bots.running() {
            bail!(
                "pitboss-bots exited before play began; see {}",
                bots.log.display()
            );
        }
        let created: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM tables")
            .fetch_one(&db.pool)
            .await
            .unwrap_or(0);
        let playing: i64 = sqlx::query_scalar("SELECT COUNT(DISTINCT table_id) FROM hands")
            .fetch_one(&db.pool)
            .await
            .unwrap_or(0);
        if created as usize >= want && playing as usize * 10 >= want * 9 {
            break;
        }
        if Instant::now() >= deadline {
            bail!(
                "after 120 s, {created} of {want} tables exist and {playing} have played; see {}",
                bots.log.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let ids: Vec<String> = sqlx::query_scalar("SELECT id FROM tables ORDER BY created_at, id")
        .fetch_all(&db.pool)
        .await?;
    Ok(ids)
}

/// `GET /admin/audit` from the first instance that answers.
async fn audit(fleet: &Fleet, token: &str) -> Option<Value> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .ok()?;
    for slot in &fleet.slots {
        let url = format!("{}/admin/audit", slot.http());
        if let Ok(r) = http.get(&url).bearer_auth(token).send().await {
            if r.status().is_success() {
                if let Ok(v) = r.json::<Value>().await {
                    return Some(v);
                }
            }
        }
    }
    None
}
