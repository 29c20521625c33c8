//! The command line: options, their defaults and their limits.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

pub const USAGE: &str = "\
usage: pitboss-chaos [options]

Starts pitboss instances, a private redis-server behind one TCP proxy per
instance, and a fresh Postgres database; fills tables with bots
(pitboss-bots) that play through everything; applies a seeded random
schedule of faults; then checks the invariants in Postgres and prints a
report. Exit status 0 only when every invariant holds.

  --instances N     pitboss instances (default 3)
  --tables N        tables, filled by the bots (default 100)
  --players M       bots per table, 2..=10 (default 2)
  --duration D      how long faults are applied: 90s, 10m, 1h or seconds
                    (default 10m)
  --seed S          seed of the fault schedule (default: random, printed)
  --ttl-ms MS       the instances' lease TTL (default 1500)
  --fault-gap SECS  mean time between two faults starting (default 1.0)
  --pitboss PATH    the pitboss binary (default: beside this one)
  --bots PATH       the pitboss-bots binary (default: beside this one)
  --pg-url URL      the Postgres server the run's database is created on
                    (default: PITBOSS_TEST_PG_URL, else
                    postgres://postgres@127.0.0.1:5432/postgres)
  --keep-db         keep the run's database (and its role) afterwards
  --json FILE       also write the report as JSON to FILE
  --work-dir DIR    where logs and the bots' results go (default: a new
                    directory under the system's temp dir, removed after a
                    passing run unless --keep-logs)
  --keep-logs       keep the work directory after a passing run
  --redis-server P  the redis-server binary (default: redis-server on PATH)
  -h, --help        this text

Exit status: 0 all invariants hold; 1 an invariant failed or the run could
not be carried out; 2 usage error.";

#[derive(Debug, Clone)]
pub struct Options {
    pub instances: usize,
    pub tables: usize,
    pub players: usize,
    pub duration: Duration,
    pub seed: Option<u64>,
    pub ttl_ms: u64,
    pub fault_gap: Duration,
    pub pitboss: Option<PathBuf>,
    pub bots: Option<PathBuf>,
    pub pg_url: Option<String>,
    pub keep_db: bool,
    pub json: Option<PathBuf>,
    pub work_dir: Option<PathBuf>,
    pub keep_logs: bool,
    pub redis_server: PathBuf,
}

#[derive(Debug)]
pub enum Parsed {
    Run(Box<Options>),
    Help,
}

fn number<T: FromStr>(flag: &str, raw: &str) -> Result<T, String> {
    raw.parse()
        .map_err(|_| format!("{flag} needs a number, not {raw:?}"))
}

/// `90s`, `10m`, `1h`, `500ms` or a plain number of seconds.
pub fn parse_duration(raw: &str) -> Result<Duration, String> {
    let raw = raw.trim();
    let (digits, scale) = if let Some(n) = raw.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = raw.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = raw.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = raw.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (raw, 1.0)
    };
    let value: f64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("not a duration: {raw:?} (try 90s, 10m or 1h)"))?;
    let secs = value * scale;
    if !(secs.is_finite() && secs > 0.0 && secs <= 7.0 * 86400.0) {
        return Err(format!(
            "a duration must be above 0 and at most a week, not {raw:?}"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

impl Options {
    pub fn parse(args: &[&str]) -> Result<Parsed, String> {
        let mut o = Options {
            instances: 3,
            tables: 100,
            players: 2,
            duration: Duration::from_secs(600),
            seed: None,
            ttl_ms: 1500,
            fault_gap: Duration::from_secs(1),
            pitboss: None,
            bots: None,
            pg_url: None,
            keep_db: false,
            json: None,
            work_dir: None,
            keep_logs: false,
            redis_server: PathBuf::from("redis-server"),
        };
        let mut it = args.iter().copied();
        while let Some(arg) = it.next() {
            // Both `--flag value` and `--flag=value`.
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f, Some(v)),
                _ => (arg, None),
            };
            let mut value = || {
                inline
                    .or_else(|| it.next())
                    .ok_or_else(|| format!("{flag} needs a value"))
            };
            match flag {
                "-h" | "--help" => return Ok(Parsed::Help),
                "--instances" => o.instances = number(flag, value()?)?,
                "--tables" => o.tables = number(flag, value()?)?,
                "--players" => o.players = number(flag, value()?)?,
                "--duration" => {
                    o.duration = parse_duration(value()?).map_err(|e| format!("--duration: {e}"))?
                }
                "--seed" => o.seed = Some(number(flag, value()?)?),
                "--ttl-ms" => o.ttl_ms = number(flag, value()?)?,
                "--fault-gap" => {
                    let secs: f64 = number(flag, value()?)?;
                    if !(secs.is_finite() && (0.05..=600.0).contains(&secs)) {
                        return Err("--fault-gap must be between 0.05 and 600 seconds".into());
                    }
                    o.fault_gap = Duration::from_secs_f64(secs);
                }
                "--pitboss" => o.pitboss = Some(PathBuf::from(value()?)),
                "--bots" => o.bots = Some(PathBuf::from(value()?)),
                "--pg-url" => o.pg_url = Some(value()?.to_string()),
                "--keep-db" => o.keep_db = true,
                "--json" => o.json = Some(PathBuf::from(value()?)),
                "--work-dir" => o.work_dir = Some(PathBuf::from(value()?)),
                "--keep-logs" => o.keep_logs = true,
                "--redis-server" => o.redis_server = PathBuf::from(value()?),
                other => return Err(format!("unknown option {other:?}")),
            }
        }
        if !(1..=9).contains(&o.instances) {
            return Err("--instances must be 1..=9".into());
        }
        if !(1..=1000).contains(&o.tables) {
            return Err("--tables must be 1..=1000".into());
        }
        if !(2..=10).contains(&o.players) {
            return Err("--players must be 2..=10".into());
        }
        if !(300..=60_000).contains(&o.ttl_ms) {
            return Err("--ttl-ms must be 300..=60000".into());
        }
        Ok(Parsed::Run(Box::new(o)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(args: &[&str]) -> Options {
        match Options::parse(args) {
            Ok(Parsed::Run(o)) => *o,
            other => panic!("{args:?} -> {other:?}"),
        }
    }

    #[test]
    fn defaults_are_three_instances_a_hundred_tables_and_ten_minutes() {
        let o = opts(&[]);
        assert_eq!((o.instances, o.tables, o.players), (3, 100, 2));
        assert_eq!(o.duration, Duration::from_secs(600));
        assert_eq!(o.ttl_ms, 1500);
        assert!(!o.keep_db && o.seed.is_none());
        let o = opts(&[
            "--duration=90s",
            "--seed",
            "7",
            "--tables",
            "40",
            "--keep-db",
        ]);
        assert_eq!(o.duration, Duration::from_secs(90));
        assert_eq!((o.seed, o.tables, o.keep_db), (Some(7), 40, true));
        assert!(matches!(Options::parse(&["-h"]), Ok(Parsed::Help)));
    }

    #[test]
    fn durations_take_a_unit_or_plain_seconds() {
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        for bad in ["", "soon", "0s", "-3m", "9999h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn bad_options_are_refused_with_the_reason() {
        for args in [
            &["--instances", "0"][..],
            &["--players", "1"],
            &["--tables", "0"],
            &["--ttl-ms", "10"],
            &["--fault-gap", "0"],
            &["--seed"],
            &["--frobnicate"],
        ] {
            assert!(Options::parse(args).is_err(), "{args:?} accepted");
        }
    }
}
