//! A real `pitboss serve` for the benchmarks that need one: its own
//! database, its process's CPU time and memory read from `/proc`, and its
//! metrics.

use std::net::TcpListener;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use serde_json::json;
use sqlx::Connection as _;

pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// CPU time (user + system) and resident memory of a process, from /proc.
#[derive(Clone, Copy)]
pub(crate) struct Usage {
    pub(crate) cpu: Duration,
    pub(crate) rss_kib: u64,
}

pub(crate) fn clock_ticks() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

pub(crate) fn usage(pid: u32, ticks: u64) -> anyhow::Result<Usage> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("process {pid} is gone"))?;
    // The command name may hold spaces; the fields after it do not.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| -> anyhow::Result<u64> {
        fields
            .get(i)
            .and_then(|f| f.parse().ok())
            .with_context(|| format!("/proc/{pid}/stat field {i}"))
    };
    // utime and stime: fields 14 and 15 of stat(5), 11 and 12 after `)`.
    let cpu_ticks = field(11)? + field(12)?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .context("VmRSS")?;
    Ok(Usage {
        cpu: Duration::from_secs_f64(cpu_ticks as f64 / ticks as f64),
        rss_kib,
    })
}

/// One step's reading: the share of one core the process used over the
/// window, and its resident memory at the end.
#[derive(Clone, Copy)]
pub(crate) struct Reading {
    pub(crate) core_share: f64,
    pub(crate) rss_kib: u64,
}

pub(crate) async fn watch(pid: u32, window: Duration) -> anyhow::Result<Reading> {
    let ticks = clock_ticks();
    let u0 = usage(pid, ticks)?;
    let t0 = Instant::now();
    tokio::time::sleep(window).await;
    let u1 = usage(pid, ticks)?;
    Ok(Reading {
        core_share: (u1.cpu - u0.cpu).as_secs_f64() / t0.elapsed().as_secs_f64(),
        rss_kib: u1.rss_kib,
    })
}

/// A child process killed on drop.
pub(crate) struct Child(pub(crate) tokio::process::Child);

impl Child {
    pub(crate) fn pid(&self) -> anyhow::Result<u32> {
        self.0.id().context("the process has exited")
    }
}

/// The run's own database on the given server, dropped at the end.
pub(crate) struct Database {
    admin_url: String,
    name: String,
    pub(crate) url: String,
}

impl Database {
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) async fn create(admin_url: &str, label: &str) -> anyhow::Result<Database> {
        let name = format!("pitboss_bench_{label}_{}", std::process::id());
        let mut admin = sqlx::PgConnection::connect(admin_url)
            .await
            .context("connect to Postgres (--pg-url)")?;
        sqlx::query(&format!("DROP DATABASE IF EXISTS {name}"))
            .execute(&mut admin)
            .await?;
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut admin)
            .await?;
        let mut url = url::Url::parse(admin_url).context("--pg-url")?;
        url.set_path(&name);
        Ok(Database {
            admin_url: admin_url.to_string(),
            name,
            url: url.to_string(),
        })
    }

    pub(crate) async fn drop_it(self) -> anyhow::Result<()> {
        let mut admin = sqlx::PgConnection::connect(&self.admin_url).await?;
        sqlx::query(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ))
        .execute(&mut admin)
        .await?;
        Ok(())
    }
}

pub(crate) struct Instance {
    pub(crate) id: String,
    pub(crate) child: Child,
    pub(crate) http: String,
    pub(crate) port: u16,
    pub(crate) env: String,
}

pub(crate) const SECRET: &str = "pitboss-bench-player-token-secret";
pub(crate) const ADMIN_TOKEN: &str = "pitboss-bench-admin-token";

/// Starts `pitboss serve` with instance id `id` on the run's Redis and
/// database; `extra` are further `PITBOSS__*` settings.
pub(crate) async fn start_pitboss(
    pitboss: &Path,
    id: &str,
    ttl_ms: u64,
    db: &Database,
    redis: &str,
    extra: &[(&str, &str)],
) -> anyhow::Result<Instance> {
    let port = free_port()?;
    let env = format!("bench{}", std::process::id());
    let log = std::env::temp_dir().join(format!("pitboss-bench-{}-{id}.log", std::process::id()));
    let log_file = std::fs::File::create(&log)?;
    let mut cmd = tokio::process::Command::new(pitboss);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("PITBOSS") {
            cmd.env_remove(key);
        }
    }
    // The workspace root holds `config/`.
    cmd.current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .arg("serve")
        .env("PITBOSS_ENV", "local")
        .env("PITBOSS__HTTP__PORT", port.to_string())
        .env("PITBOSS__DATABASE__URL", &db.url)
        .env("PITBOSS__DATABASE__MAX_CONNECTIONS", "20")
        .env("PITBOSS__REDIS__URL", redis)
        .env("PITBOSS__INSTANCE__ID", id)
        .env("PITBOSS__INSTANCE__ENVIRONMENT", &env)
        .env("PITBOSS__LEASE__TTL_MS", ttl_ms.to_string())
        .env("PITBOSS__AUTH__SECRET", SECRET)
        .env("PITBOSS__ADMIN__TOKEN", ADMIN_TOKEN)
        .env("PITBOSS__LOG__FORMAT", "json")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        .kill_on_drop(true);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let child = Child(cmd.spawn().with_context(|| {
        format!(
            "start {} (build it: cargo build --release)",
            pitboss.display()
        )
    })?);
    let http = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(60) {
        if let Ok(r) = client.get(format!("{http}/readyz")).send().await {
            if r.status().is_success() {
                return Ok(Instance {
                    id: id.to_string(),
                    child,
                    http,
                    port,
                    env,
                });
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!(
        "pitboss did not become ready within 60 s; its log: {}",
        log.display()
    )
}

pub(crate) async fn metric(http: &str, name: &str) -> anyhow::Result<f64> {
    let text = reqwest::get(format!("{http}/metrics"))
        .await?
        .text()
        .await?;
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0.0))
}

/// Adds `n` idle tables the way a drained predecessor leaves them; the
/// instance's revive scan hosts them.
pub(crate) async fn add_tables(db: &Database, env: &str, n: usize) -> anyhow::Result<()> {
    let mut conn = sqlx::PgConnection::connect(&db.url).await?;
    let config = json!({
        "small_blind": 1, "big_blind": 2, "ante": 0, "seats": 6,
        "min_buy_in": 40, "max_buy_in": 200
    });
    sqlx::query(
        "INSERT INTO tables (id, environment, config, state, state_reason) \
         SELECT 'tbl_idle' || lpad(i::TEXT, 11, '0'), $1, $2, 'released', 'shutdown' \
         FROM generate_series(1, $3::INT) AS i",
    )
    .bind(env)
    .bind(config)
    .bind(n as i32)
    .execute(&mut conn)
    .await
    .context("insert the tables")?;
    Ok(())
}

/// Seats two players (100 chips each, bought in) at each of the `n` tables
/// [`add_tables`] added, the way players who sat down and then lost their
/// connection leave them: once hosted, each table deals a hand.
pub(crate) async fn seat_pairs(db: &Database, n: usize) -> anyhow::Result<()> {
    let mut conn = sqlx::PgConnection::connect(&db.url).await?;
    sqlx::query(
        "INSERT INTO accounts (player, balance, granted) \
         SELECT 'p' || i || '_' || s, 0, 100 \
         FROM generate_series(1, $1::INT) AS i, generate_series(0, 1) AS s",
    )
    .bind(n as i32)
    .execute(&mut conn)
    .await
    .context("insert the players")?;
    sqlx::query(
        "INSERT INTO seats (table_id, seat, player, stack) \
         SELECT 'tbl_idle' || lpad(i::TEXT, 11, '0'), s, 'p' || i || '_' || s, 100 \
         FROM generate_series(1, $1::INT) AS i, generate_series(0, 1) AS s",
    )
    .bind(n as i32)
    .execute(&mut conn)
    .await
    .context("seat the players")?;
    Ok(())
}

/// Waits until the instance at `http` counts at least `n` of `name`,
/// reading it every `poll`.
pub(crate) async fn wait_metric(
    http: &str,
    name: &str,
    n: f64,
    poll: Duration,
) -> anyhow::Result<Duration> {
    let t0 = Instant::now();
    while metric(http, name).await? < n {
        if t0.elapsed() > Duration::from_secs(600) {
            bail!("{name} did not reach {n} within 600 s");
        }
        tokio::time::sleep(poll).await;
    }
    Ok(t0.elapsed())
}

/// Waits until the instance at `http` hosts at least `n` tables, reading its
/// gauge every `poll`; returns how long that took.
pub(crate) async fn wait_hosted(http: &str, n: usize, poll: Duration) -> anyhow::Result<Duration> {
    let t0 = Instant::now();
    while metric(http, "pitboss_tables_hosted").await? < n as f64 {
        if t0.elapsed() > Duration::from_secs(600) {
            bail!("{n} tables were not hosted within 600 s");
        }
        tokio::time::sleep(poll).await;
    }
    Ok(t0.elapsed())
}

/// The cumulative buckets `(upper bound, count)` of the histogram `name`
/// (summed over its labels), from one read of the instance's `/metrics`,
/// in order of their bounds.
pub(crate) async fn histogram_buckets(http: &str, name: &str) -> anyhow::Result<Vec<(f64, f64)>> {
    let text = reqwest::get(format!("{http}/metrics"))
        .await?
        .text()
        .await?;
    let prefix = format!("{name}_bucket{{");
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    for line in text.lines().filter(|l| l.starts_with(&prefix)) {
        let Some((labels, count)) = line.rsplit_once(' ') else {
            continue;
        };
        let Some(le) = labels
            .split("le=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
        else {
            continue;
        };
        let le = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse()?
        };
        let count: f64 = count.trim().parse()?;
        match buckets.iter_mut().find(|(b, _)| *b == le) {
            Some((_, c)) => *c += count,
            None => buckets.push((le, count)),
        }
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(buckets)
}

/// The samples recorded between two reads of one histogram.
pub(crate) fn bucket_difference(later: &[(f64, f64)], earlier: &[(f64, f64)]) -> Vec<(f64, f64)> {
    later
        .iter()
        .map(|&(le, c)| {
            let before = earlier.iter().find(|(b, _)| *b == le).map_or(0.0, |x| x.1);
            (le, (c - before).max(0.0))
        })
        .collect()
}

/// The upper bounds of the buckets holding each of the quantiles `qs`;
/// `None` for each while the buckets hold no sample.
pub(crate) fn bucket_quantiles(buckets: &[(f64, f64)], qs: &[f64]) -> Vec<Option<f64>> {
    let total = buckets.last().map_or(0.0, |&(_, c)| c);
    qs.iter()
        .map(|q| {
            buckets
                .iter()
                .find(|(_, c)| total > 0.0 && *c >= q * total)
                .map(|&(le, _)| le)
        })
        .collect()
}
