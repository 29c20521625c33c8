//! The command line: options, their defaults and their limits.

use std::fmt::Display;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use clap::Parser;

const AFTER_HELP: &str = "\
Exit status: 0 all invariants hold; 1 an invariant failed or the run could
not be carried out; 2 usage error.";

/// Starts pitboss instances, a private redis-server behind one TCP proxy per
/// instance, and a fresh Postgres database; fills tables with bots
/// (pitboss-bots) that play through everything; applies a seeded random
/// schedule of faults; then checks the invariants in Postgres and prints a
/// report. Exit status 0 only when every invariant holds.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "pitboss-chaos",
    verbatim_doc_comment,
    after_help = AFTER_HELP,
    args_override_self = true
)]
pub struct Options {
    /// pitboss instances, 1..=9
    #[arg(long, value_name = "N", default_value = "3", value_parser = |s: &str| number_in(s, 1..=9usize))]
    pub instances: usize,
    /// Tables, filled by the bots, 1..=1000
    #[arg(long, value_name = "N", default_value = "100", value_parser = |s: &str| number_in(s, 1..=1000usize))]
    pub tables: usize,
    /// Bots per table, 2..=10
    #[arg(long, value_name = "M", default_value = "2", value_parser = |s: &str| number_in(s, 2..=10usize))]
    pub players: usize,
    /// How long faults are applied: 90s, 10m, 1h, 500ms
    /// or seconds
    #[arg(verbatim_doc_comment, long, value_name = "D", default_value = "10m", value_parser = parse_duration)]
    pub duration: Duration,
    /// Seed of the fault schedule (default: random, printed)
    #[arg(long, value_name = "S", value_parser = |s: &str| number::<u64>(s))]
    pub seed: Option<u64>,
    /// The instances' lease TTL, 300..=60000
    #[arg(long, value_name = "MS", default_value = "1500", value_parser = |s: &str| number_in(s, 300..=60_000u64))]
    pub ttl_ms: u64,
    /// Mean time between two faults starting, 0.05..=600
    #[arg(long, value_name = "SECS", default_value = "1.0", value_parser = fault_gap)]
    pub fault_gap: Duration,
    /// The pitboss binary (default: beside this one)
    #[arg(long, value_name = "PATH")]
    pub pitboss: Option<PathBuf>,
    /// The pitboss-bots binary (default: beside this one)
    #[arg(long, value_name = "PATH")]
    pub bots: Option<PathBuf>,
    /// The Postgres server the run's database is created
    /// on (default: PITBOSS_TEST_PG_URL, else
    /// postgres://postgres@127.0.0.1:5432/postgres)
    #[arg(verbatim_doc_comment, long, value_name = "URL")]
    pub pg_url: Option<String>,
    /// Keep the run's database (and its role) afterwards
    #[arg(long)]
    pub keep_db: bool,
    /// Also write the report as JSON to FILE
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Where logs and the bots' results go (default: a
    /// new directory under the system's temp dir,
    /// removed after a passing run unless --keep-logs)
    #[arg(verbatim_doc_comment, long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Keep the work directory after a passing run
    #[arg(long)]
    pub keep_logs: bool,
    /// The redis-server binary (a bare name is looked up on PATH)
    #[arg(long, value_name = "P", default_value = "redis-server")]
    pub redis_server: PathBuf,
}

fn number<T: FromStr>(raw: &str) -> Result<T, String> {
    raw.parse()
        .map_err(|_| format!("needs a number, not {raw:?}"))
}

fn number_in<T: FromStr + PartialOrd + Display>(
    raw: &str,
    range: RangeInclusive<T>,
) -> Result<T, String> {
    let n = number(raw)?;
    if !range.contains(&n) {
        return Err(format!("must be {}..={}", range.start(), range.end()));
    }
    Ok(n)
}

fn fault_gap(raw: &str) -> Result<Duration, String> {
    let secs: f64 = number(raw)?;
    if !(secs.is_finite() && (0.05..=600.0).contains(&secs)) {
        return Err("must be between 0.05 and 600 seconds".into());
    }
    Ok(Duration::from_secs_f64(secs))
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

#[cfg(test)]
mod tests {
    use clap::error::ErrorKind;
    use clap::CommandFactory;

    use super::*;

    fn parse(args: &[&str]) -> Result<Options, clap::Error> {
        Options::try_parse_from(std::iter::once("pitboss-chaos").chain(args.iter().copied()))
    }

    fn opts(args: &[&str]) -> Options {
        parse(args).unwrap_or_else(|e| panic!("{args:?} -> {e}"))
    }

    #[test]
    fn the_command_line_is_well_formed() {
        Options::command().debug_assert();
    }

    #[test]
    fn defaults_are_three_instances_a_hundred_tables_and_ten_minutes() {
        let o = opts(&[]);
        assert_eq!((o.instances, o.tables, o.players), (3, 100, 2));
        assert_eq!(o.duration, Duration::from_secs(600));
        assert_eq!(o.ttl_ms, 1500);
        assert_eq!(o.fault_gap, Duration::from_secs(1));
        assert_eq!(o.redis_server, PathBuf::from("redis-server"));
        assert!(!o.keep_db && !o.keep_logs && o.seed.is_none());
        assert!(o.pitboss.is_none() && o.bots.is_none() && o.pg_url.is_none());
        assert!(o.json.is_none() && o.work_dir.is_none());
        let o = opts(&[
            "--duration=90s",
            "--seed",
            "7",
            "--tables",
            "40",
            "--keep-db",
            "--fault-gap",
            "0.8",
            "--keep-logs",
            "--json=chaos.json",
        ]);
        assert_eq!(o.duration, Duration::from_secs(90));
        assert_eq!((o.seed, o.tables, o.keep_db), (Some(7), 40, true));
        assert_eq!(o.fault_gap, Duration::from_millis(800));
        assert!(o.keep_logs);
        assert_eq!(o.json, Some(PathBuf::from("chaos.json")));
        let help = parse(&["-h"]).expect_err("help is not a run");
        assert_eq!(help.kind(), ErrorKind::DisplayHelp);
        assert_eq!(help.exit_code(), 0);
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
        assert_eq!(
            opts(&["--duration", "5m"]).duration,
            Duration::from_secs(300)
        );
        assert_eq!(
            opts(&["--duration", "500ms"]).duration,
            Duration::from_millis(500)
        );
    }

    #[test]
    fn bad_options_are_refused_with_the_reason() {
        for args in [
            &["--instances", "0"][..],
            &["--instances", "10"],
            &["--players", "1"],
            &["--tables", "0"],
            &["--ttl-ms", "10"],
            &["--fault-gap", "0"],
            &["--duration", "soon"],
            &["--seed"],
            &["--frobnicate"],
        ] {
            let err = parse(args).expect_err(&format!("{args:?} accepted"));
            assert_eq!(err.exit_code(), 2, "{args:?}: {err}");
        }
        let err = parse(&["--ttl-ms", "10"]).expect_err("a 10 ms TTL");
        assert!(err.to_string().contains("must be 300..=60000"), "{err}");
    }
}
