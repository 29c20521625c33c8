//! The command line: options, their defaults and their limits.

use std::fmt::Display;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};

/// Where the admin token comes from when `--admin-token` is not given.
pub const ADMIN_TOKEN_ENV: &str = "PITBOSS__ADMIN__TOKEN";

// Every table the bots create: blinds 1/2, buy-ins 40..=200.
pub const SMALL_BLIND: u64 = 1;
pub const BIG_BLIND: u64 = 2;
pub const MIN_BUY_IN: u64 = 40;
pub const MAX_BUY_IN: u64 = 200;
pub const MAX_SEATS: usize = 10;

const AFTER_HELP: &str = "\
The bots use only the server's public API: the admin API (which also mints
their player tokens, POST /admin/players/{player}/token) and the WebSocket.

With n URLs, table t is created through URL t % n and bot p of table t
connects through URL (t + p) % n. A bot whose connection ends (a drain, a
crash) connects again, to the next URL when its own does not answer, and
rejoins its table; the summary counts these reconnects.

Exit status 0 only when no protocol error was seen, every seat was left and
the audit delta is 0; 2 for a usage error or a missing admin token.";

/// Creates tables on a running pitboss server, seats bots that play random
/// legal actions over WebSockets, then leaves the seats and prints a summary
/// and the server's chip audit.
#[derive(Debug, Parser)]
#[command(
    verbatim_doc_comment,
    name = "pitboss-bots",
    after_help = AFTER_HELP,
    args_override_self = true
)]
pub struct Cli {
    /// Server base URL; give several (repeated or
    /// comma-separated) to spread the tables and bots
    /// over the instances, or one load balancer
    #[arg(
        verbatim_doc_comment,
        long = "url",
        value_name = "URL[,URL...]",
        default_value = "http://127.0.0.1:8080",
        value_parser = urls
    )]
    urls: Vec<Urls>,
    /// The server's admin bearer token (default: the
    /// PITBOSS__ADMIN__TOKEN environment variable)
    #[arg(
        verbatim_doc_comment,
        long,
        value_name = "T",
        allow_hyphen_values = true
    )]
    admin_token: Option<String>,
    /// Tables to create
    #[arg(long, value_name = "N", default_value = "1", value_parser = |s: &str| number_in(s, 1..=1000usize))]
    tables: usize,
    /// Bots per table, 2..=10
    #[arg(long, value_name = "M", default_value = "4", value_parser = |s: &str| number_in(s, 2..=MAX_SEATS))]
    players: usize,
    /// Stop once H hands have completed over all tables
    #[arg(long, value_name = "H", value_parser = hands)]
    hands: Option<u64>,
    /// Stop after SECS seconds (default 30 if --hands
    /// is not given)
    #[arg(verbatim_doc_comment, long, value_name = "SECS", value_parser = duration)]
    duration: Option<Duration>,
    /// How long after every bot was first seated steady
    /// play begins, for the latency of acts in play:
    /// acts before are reported as the arrival's
    #[arg(verbatim_doc_comment, long, value_name = "SECS", default_value = "10", value_parser = warm_up)]
    warm_up: Duration,
    /// Chips each bot sits down with, 40..=200
    #[arg(long, value_name = "C", default_value = "200", value_parser = |s: &str| number_in(s, MIN_BUY_IN..=MAX_BUY_IN))]
    buy_in: u64,
    /// Seed for the bots' action RNG (default: random, printed)
    #[arg(long, value_name = "S", value_parser = |s: &str| number::<u64>(s))]
    seed: Option<u64>,
    /// Share of turns left to the server's action
    /// clock, 0..=1
    #[arg(verbatim_doc_comment, long, value_name = "F", default_value = "0.02", value_parser = |s: &str| number_in(s, 0.0..=1.0f64))]
    timeout_rate: f64,
    /// Frames per second each bot sends at most, at
    /// least 1 (the server's own limit,
    /// ws.rate_per_sec, is 20 by default)
    #[arg(verbatim_doc_comment, long, value_name = "R", default_value = "15", value_parser = max_rate)]
    max_rate: f64,
    /// No progress bar (also off when stdout is not a
    /// terminal)
    #[arg(verbatim_doc_comment, long)]
    no_progress: bool,
    /// Print a bot's last 40 frames on stderr with each
    /// protocol error
    #[arg(verbatim_doc_comment, long)]
    dump_errors: bool,
    /// A bot that cannot carry on (a refusal, a close,
    /// no answer in time) counts a protocol error and
    /// starts over on a new connection instead of
    /// stopping the run
    #[arg(verbatim_doc_comment, long)]
    keep_going: bool,
    /// Write every hand result a bot was told (each
    /// hand_ended event, with the time it arrived) to
    /// FILE, one JSON line each
    #[arg(
        verbatim_doc_comment,
        long,
        value_name = "FILE",
        allow_hyphen_values = true
    )]
    results: Option<PathBuf>,
}

/// What the run is told to do, checked.
#[derive(Debug, Clone)]
pub struct Options {
    /// Base URLs without a trailing slash, in the order given; never empty.
    pub urls: Vec<String>,
    admin_token: Option<String>,
    pub tables: usize,
    pub players: usize,
    pub hands: Option<u64>,
    pub duration: Option<Duration>,
    pub warm_up: Duration,
    pub buy_in: u64,
    pub seed: Option<u64>,
    pub timeout_rate: f64,
    pub max_rate: f64,
    pub progress: bool,
    pub dump_errors: bool,
    pub results: Option<PathBuf>,
    pub keep_going: bool,
}

/// The URLs of one `--url` value.
#[derive(Debug, Clone)]
struct Urls(Vec<String>);

/// The URLs of one `--url` value: a comma-separated list, each `http://`
/// and without a trailing slash.
fn urls(raw: &str) -> Result<Urls, String> {
    raw.split(',')
        .map(|u| {
            let u = u.trim().trim_end_matches('/');
            if u.is_empty() {
                Err(format!("has an empty entry in {raw:?}"))
            } else if !u.starts_with("http://") || u.len() == "http://".len() {
                Err(format!(
                    "must start with http:// (this build has no TLS), not {u:?}"
                ))
            } else {
                Ok(u.to_string())
            }
        })
        .collect::<Result<_, _>>()
        .map(Urls)
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

fn hands(raw: &str) -> Result<u64, String> {
    match number(raw)? {
        0 => Err("must be at least 1".into()),
        n => Ok(n),
    }
}

fn duration(raw: &str) -> Result<Duration, String> {
    let secs: f64 = number(raw)?;
    if !(secs.is_finite() && secs > 0.0 && secs <= 7.0 * 86400.0) {
        return Err("must be above 0 and at most a week".into());
    }
    Ok(Duration::from_secs_f64(secs))
}

fn warm_up(raw: &str) -> Result<Duration, String> {
    let secs: f64 = number(raw)?;
    if !(secs.is_finite() && (0.0..=86400.0).contains(&secs)) {
        return Err("must be 0..=86400 seconds".into());
    }
    Ok(Duration::from_secs_f64(secs))
}

fn max_rate(raw: &str) -> Result<f64, String> {
    let rate: f64 = number(raw)?;
    if !(rate.is_finite() && rate >= 1.0) {
        return Err("must be at least 1".into());
    }
    Ok(rate)
}

impl Cli {
    /// The options, with the checks that span more than one value: a URL
    /// given twice is refused, and a run with neither `--hands` nor
    /// `--duration` lasts 30 s.
    pub fn into_options(self) -> Result<Options, clap::Error> {
        let urls: Vec<String> = self.urls.into_iter().flat_map(|u| u.0).collect();
        for (i, u) in urls.iter().enumerate() {
            // A URL listed twice would get twice the share of tables and bots.
            if urls[..i].contains(u) {
                return Err(Cli::command().error(
                    ErrorKind::ValueValidation,
                    format!("--url lists {u} more than once"),
                ));
            }
        }
        let duration = match (self.hands, self.duration) {
            (None, None) => Some(Duration::from_secs(30)),
            (_, duration) => duration,
        };
        Ok(Options {
            urls,
            admin_token: self.admin_token,
            tables: self.tables,
            players: self.players,
            hands: self.hands,
            duration,
            warm_up: self.warm_up,
            buy_in: self.buy_in,
            seed: self.seed,
            timeout_rate: self.timeout_rate,
            max_rate: self.max_rate,
            progress: !self.no_progress,
            dump_errors: self.dump_errors,
            results: self.results,
            keep_going: self.keep_going,
        })
    }
}

impl Options {
    /// `--admin-token`, else `from_env` (the value of [`ADMIN_TOKEN_ENV`]);
    /// an empty value counts as none.
    pub fn admin_token(&self, from_env: Option<String>) -> Option<String> {
        self.admin_token
            .clone()
            .or(from_env)
            .filter(|t| !t.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Options, clap::Error> {
        Cli::try_parse_from(std::iter::once("pitboss-bots").chain(args.iter().copied()))
            .and_then(Cli::into_options)
    }

    fn opts(args: &[&str]) -> Options {
        parse(args).unwrap_or_else(|e| panic!("{args:?} -> {e}"))
    }

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn options_have_the_documented_defaults_and_parse_both_forms() {
        let o = opts(&[]);
        assert_eq!(o.urls, ["http://127.0.0.1:8080"]);
        assert_eq!((o.tables, o.players, o.buy_in), (1, 4, 200));
        assert_eq!(o.duration, Some(Duration::from_secs(30)));
        assert_eq!(o.warm_up, Duration::from_secs(10));
        assert_eq!((o.timeout_rate, o.max_rate), (0.02, 15.0));
        assert_eq!(o.results, None);
        assert!(o.progress && !o.keep_going && !o.dump_errors);
        let o = opts(&[
            "--url=http://h:1/",
            "--tables",
            "2",
            "--players",
            "3",
            "--hands",
            "30",
            "--seed",
            "7",
            "--no-progress",
            "--results=told.jsonl",
            "--keep-going",
            "--dump-errors",
            "--warm-up=2.5",
            "--buy-in",
            "40",
            "--timeout-rate",
            "0",
            "--max-rate",
            "1",
        ]);
        assert_eq!(o.urls, ["http://h:1"]);
        assert_eq!(o.results, Some(PathBuf::from("told.jsonl")));
        assert!(o.keep_going && o.dump_errors);
        assert_eq!(
            (o.tables, o.players, o.hands, o.seed),
            (2, 3, Some(30), Some(7))
        );
        assert_eq!(o.duration, None);
        assert_eq!(o.warm_up, Duration::from_millis(2500));
        assert_eq!((o.buy_in, o.timeout_rate, o.max_rate), (40, 0.0, 1.0));
        assert!(!o.progress);
        assert_eq!(
            opts(&["--duration", "1.5"]).duration,
            Some(Duration::from_millis(1500))
        );
        // The last of a repeated option wins.
        assert_eq!(opts(&["--tables", "2", "--tables", "3"]).tables, 3);
        let help = parse(&["--help"]).expect_err("help is not a run");
        assert_eq!(help.kind(), ErrorKind::DisplayHelp);
        assert_eq!(help.exit_code(), 0);
    }

    #[test]
    fn bad_options_are_refused_with_the_reason() {
        for args in [
            &["--players", "1"][..],
            &["--players", "11"],
            &["--tables", "0"],
            &["--tables", "1001"],
            &["--hands", "0"],
            &["--buy-in", "201"],
            &["--buy-in", "39"],
            &["--timeout-rate", "2"],
            &["--max-rate", "0.5"],
            &["--duration", "0"],
            &["--duration", "604801"],
            &["--warm-up", "86401"],
            &["--tables"],
            &["--hands", "x"],
            &["--url", "https://x"],
            &["--url", "http://a:1,https://b:2"],
            &["--url", "http://a:1,"],
            &["--url", "http://"],
            &["--url", "http://a:1", "--url", "http://a:1/"],
            &["--frobnicate"],
        ] {
            let err = parse(args).expect_err(&format!("{args:?} accepted"));
            assert_eq!(err.exit_code(), 2, "{args:?}: {err}");
        }
        let err = parse(&["--players", "11"]).expect_err("11 players");
        assert!(err.to_string().contains("must be 2..=10"), "{err}");
    }

    #[test]
    fn several_urls_may_be_repeated_or_comma_separated_and_keep_their_order() {
        let o = opts(&[
            "--url",
            "http://a:8080/, http://b:8080",
            "--url=http://c:8080",
        ]);
        assert_eq!(o.urls, ["http://a:8080", "http://b:8080", "http://c:8080"]);
        // Any --url replaces the default rather than adding to it.
        assert_eq!(opts(&["--url", "http://lb:80"]).urls, ["http://lb:80"]);
        let err = parse(&["--url", "http://a:1,http://b:2", "--url", "http://a:1"])
            .expect_err("a URL listed twice");
        assert!(err.to_string().contains("http://a:1"), "{err}");
    }

    #[test]
    fn the_admin_token_flag_wins_over_the_environment_and_empty_is_none() {
        let env = || Some("from-env".to_string());
        assert_eq!(
            opts(&["--admin-token", "flag"])
                .admin_token(env())
                .as_deref(),
            Some("flag")
        );
        assert_eq!(opts(&[]).admin_token(env()).as_deref(), Some("from-env"));
        assert_eq!(opts(&[]).admin_token(None), None);
        assert_eq!(opts(&[]).admin_token(Some(String::new())), None);
    }
}
