//! The command line: options, their defaults and their limits.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

/// Where the admin token comes from when `--admin-token` is not given.
pub const ADMIN_TOKEN_ENV: &str = "PITBOSS__ADMIN__TOKEN";

pub const USAGE: &str = "\
usage: pitboss-bots [options]

Creates tables on a running pitboss server, seats bots that play random legal
actions over WebSockets, then leaves the seats and prints a summary and the
server's chip audit.

  --url URL[,URL...]  server base URL (default http://127.0.0.1:8080); give
                      several (repeated or comma-separated) to spread the
                      tables and bots over the instances, or one load balancer
  --admin-token T     the server's admin bearer token (default: the
                      PITBOSS__ADMIN__TOKEN environment variable)
  --tables N          tables to create (default 1)
  --players M         bots per table, 2..=10 (default 4)
  --hands H           stop once H hands have completed over all tables
  --duration SECS     stop after SECS seconds (default 30 if --hands is not given)
  --warm-up SECS      how long after every bot was first seated steady play
                      begins, for the latency of acts in play (default 10):
                      acts before are reported as the arrival's
  --buy-in C          chips each bot sits down with, 40..=200 (default 200)
  --seed S            seed for the bots' action RNG (default: random, printed)
  --timeout-rate F    share of turns left to the server's action clock (default 0.02)
  --max-rate R        frames per second each bot sends at most (default 15; the
                      server's own limit, ws.rate_per_sec, is 20 by default)
  --no-progress       no progress bar (also off when stdout is not a terminal)
  --dump-errors       print a bot's last 40 frames on stderr with each protocol error
  --keep-going        a bot that cannot carry on (a refusal, a close, no answer in
                      time) counts a protocol error and starts over on a new
                      connection instead of stopping the run
  --results FILE      write every hand result a bot was told (each hand_ended
                      event, with the time it arrived) to FILE, one JSON line each
  -h, --help          this text

The bots use only the server's public API: the admin API (which also mints
their player tokens, POST /admin/players/{player}/token) and the WebSocket.

With n URLs, table t is created through URL t % n and bot p of table t
connects through URL (t + p) % n. A bot whose connection ends (a drain, a
crash) connects again, to the next URL when its own does not answer, and
rejoins its table; the summary counts these reconnects.

Exit status 0 only when no protocol error was seen, every seat was left and
the audit delta is 0; 2 for a usage error or a missing admin token.";

// Every table the bots create: blinds 1/2, buy-ins 40..=200.
pub const SMALL_BLIND: u64 = 1;
pub const BIG_BLIND: u64 = 2;
pub const MIN_BUY_IN: u64 = 40;
pub const MAX_BUY_IN: u64 = 200;
pub const MAX_SEATS: usize = 10;

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

#[derive(Debug)]
pub enum Parsed {
    Run(Options),
    Help,
}

/// The URLs of one `--url` value: a comma-separated list, each `http://`
/// and without a trailing slash.
fn urls(raw: &str) -> Result<Vec<String>, String> {
    raw.split(',')
        .map(|u| {
            let u = u.trim().trim_end_matches('/');
            if u.is_empty() {
                Err(format!("--url has an empty entry in {raw:?}"))
            } else if !u.starts_with("http://") || u.len() == "http://".len() {
                Err(format!(
                    "--url must start with http:// (this build has no TLS), not {u:?}"
                ))
            } else {
                Ok(u.to_string())
            }
        })
        .collect()
}

fn number<T: FromStr>(flag: &str, raw: &str) -> Result<T, String> {
    raw.parse()
        .map_err(|_| format!("{flag} needs a number, not {raw:?}"))
}

impl Options {
    pub fn parse(args: &[&str]) -> Result<Parsed, String> {
        let mut given_urls: Vec<String> = Vec::new();
        let mut o = Options {
            urls: vec!["http://127.0.0.1:8080".into()],
            admin_token: None,
            tables: 1,
            players: 4,
            hands: None,
            duration: None,
            warm_up: Duration::from_secs(10),
            buy_in: MAX_BUY_IN,
            seed: None,
            timeout_rate: 0.02,
            max_rate: 15.0,
            progress: true,
            dump_errors: false,
            results: None,
            keep_going: false,
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
                "--no-progress" => o.progress = false,
                "--dump-errors" => o.dump_errors = true,
                "--keep-going" => o.keep_going = true,
                "--url" => given_urls.extend(urls(value()?)?),
                "--admin-token" => o.admin_token = Some(value()?.to_string()),
                "--tables" => o.tables = number(flag, value()?)?,
                "--players" => o.players = number(flag, value()?)?,
                "--hands" => o.hands = Some(number(flag, value()?)?),
                "--duration" => {
                    let secs: f64 = number(flag, value()?)?;
                    if !(secs.is_finite() && secs > 0.0 && secs <= 7.0 * 86400.0) {
                        return Err("--duration must be above 0 and at most a week".into());
                    }
                    o.duration = Some(Duration::from_secs_f64(secs));
                }
                "--warm-up" => {
                    let secs: f64 = number(flag, value()?)?;
                    if !(secs.is_finite() && (0.0..=86400.0).contains(&secs)) {
                        return Err("--warm-up must be 0..=86400 seconds".into());
                    }
                    o.warm_up = Duration::from_secs_f64(secs);
                }
                "--buy-in" => o.buy_in = number(flag, value()?)?,
                "--seed" => o.seed = Some(number(flag, value()?)?),
                "--timeout-rate" => o.timeout_rate = number(flag, value()?)?,
                "--max-rate" => o.max_rate = number(flag, value()?)?,
                "--results" => o.results = Some(PathBuf::from(value()?)),
                other => return Err(format!("unknown option {other:?}")),
            }
        }
        if !(1..=1000).contains(&o.tables) {
            return Err("--tables must be 1..=1000".into());
        }
        if !(2..=MAX_SEATS).contains(&o.players) {
            return Err(format!("--players must be 2..={MAX_SEATS}"));
        }
        if o.hands == Some(0) {
            return Err("--hands must be at least 1".into());
        }
        if !(MIN_BUY_IN..=MAX_BUY_IN).contains(&o.buy_in) {
            return Err(format!(
                "--buy-in must be {MIN_BUY_IN}..={MAX_BUY_IN} (the tables' buy-in range)"
            ));
        }
        if !(0.0..=1.0).contains(&o.timeout_rate) {
            return Err("--timeout-rate must be between 0 and 1".into());
        }
        if !(o.max_rate.is_finite() && o.max_rate >= 1.0) {
            return Err("--max-rate must be at least 1".into());
        }
        for (i, u) in given_urls.iter().enumerate() {
            // A URL listed twice would get twice the share of tables and bots.
            if given_urls[..i].contains(u) {
                return Err(format!("--url lists {u} more than once"));
            }
        }
        if !given_urls.is_empty() {
            o.urls = given_urls;
        }
        if o.hands.is_none() && o.duration.is_none() {
            o.duration = Some(Duration::from_secs(30));
        }
        Ok(Parsed::Run(o))
    }

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

    fn opts(args: &[&str]) -> Options {
        match Options::parse(args) {
            Ok(Parsed::Run(o)) => o,
            other => panic!("{args:?} -> {other:?}"),
        }
    }

    #[test]
    fn options_have_the_documented_defaults_and_parse_both_forms() {
        let o = opts(&[]);
        assert_eq!(o.urls, ["http://127.0.0.1:8080"]);
        assert_eq!((o.tables, o.players, o.buy_in), (1, 4, 200));
        assert_eq!(o.duration, Some(Duration::from_secs(30)));
        assert_eq!(o.results, None);
        assert!(!o.keep_going);
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
        ]);
        assert_eq!(o.urls, ["http://h:1"]);
        assert_eq!(o.results, Some(PathBuf::from("told.jsonl")));
        assert!(o.keep_going);
        assert_eq!(
            (o.tables, o.players, o.hands, o.seed),
            (2, 3, Some(30), Some(7))
        );
        assert_eq!(o.duration, None);
        assert!(!o.progress);
        assert!(matches!(Options::parse(&["--help"]), Ok(Parsed::Help)));
    }

    #[test]
    fn bad_options_are_refused_with_the_reason() {
        for args in [
            &["--players", "1"][..],
            &["--players", "11"],
            &["--buy-in", "201"],
            &["--timeout-rate", "2"],
            &["--tables"],
            &["--hands", "x"],
            &["--url", "https://x"],
            &["--url", "http://a:1,https://b:2"],
            &["--url", "http://a:1,"],
            &["--url", "http://"],
            &["--url", "http://a:1", "--url", "http://a:1/"],
            &["--frobnicate"],
        ] {
            assert!(Options::parse(args).is_err(), "{args:?} accepted");
        }
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
        let err = Options::parse(&["--url", "http://a:1,http://b:2", "--url", "http://a:1"])
            .expect_err("a URL listed twice");
        assert!(err.contains("http://a:1"), "{err}");
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
