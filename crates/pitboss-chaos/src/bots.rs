//! The players: the `pitboss-bots` binary as a child process, spread over
//! every instance. It creates the tables, plays until it is interrupted,
//! then leaves every seat and checks its own chips. With `--results` it
//! writes every hand result each bot was told, which the checks compare
//! with what Postgres recorded.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use nix::sys::signal::Signal;
use serde_json::Value;

use crate::children::{guarded_command, ChildProc};

pub struct BotsConfig<'a> {
    pub binary: &'a Path,
    pub urls: &'a [String],
    pub admin_token: &'a str,
    pub tables: usize,
    pub players: usize,
    pub seed: u64,
    pub work: &'a Path,
}

pub struct Bots {
    child: ChildProc,
    pub log: PathBuf,
    pub results: PathBuf,
}

/// How `pitboss-bots` ended: its exit and its summary lines.
#[derive(Debug, Default, Clone)]
pub struct BotsOutcome {
    pub exit: String,
    pub ok: bool,
    pub summary: Vec<(String, String)>,
    /// Its `FAILED` line, if any.
    pub failure: Option<String>,
    /// The protocol errors its summary names.
    pub errors: Vec<String>,
}

impl BotsOutcome {
    pub fn field(&self, key: &str) -> Option<&str> {
        self.summary
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A hand result as a bot was told it.
#[derive(Debug, Clone)]
pub struct Told {
    pub at_ms: i64,
    pub bot: String,
    pub table: String,
    pub hand: i64,
    pub stacks: HashMap<u64, u64>,
}

impl Bots {
    pub fn start(cfg: BotsConfig<'_>) -> anyhow::Result<Bots> {
        let results = cfg.work.join("told.jsonl");
        let log = cfg.work.join("bots.log");
        let mut cmd = guarded_command(cfg.binary);
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("PITBOSS") {
                cmd.env_remove(key);
            }
        }
        cmd.arg("--url")
            .arg(cfg.urls.join(","))
            .args(["--admin-token", cfg.admin_token])
            .args(["--tables", &cfg.tables.to_string()])
            .args(["--players", &cfg.players.to_string()])
            .args(["--seed", &cfg.seed.to_string()])
            // Stopped by SIGINT when the run is over, never by the clock.
            .args(["--duration", "604800"])
            // A turn left to the action clock now and then keeps the
            // clock's races in play.
            .args(["--timeout-rate", "0.01"])
            .arg("--no-progress")
            // One bot in trouble must not end the play at a hundred tables.
            .arg("--keep-going")
            // Each protocol error with the frames that led up to it, in
            // the bots' log, so a finding can be read and not only counted.
            .arg("--dump-errors")
            .arg("--results")
            .arg(&results);
        let child = ChildProc::spawn(cmd, &log).context("starting pitboss-bots")?;
        Ok(Bots {
            child,
            log,
            results,
        })
    }

    /// True while it runs.
    pub fn running(&mut self) -> bool {
        self.child.poll().is_none()
    }

    /// Interrupts the bots (they leave their seats and check their chips)
    /// and waits for their summary.
    pub async fn stop(mut self, timeout: Duration) -> BotsOutcome {
        let _ = self.child.signal(Signal::SIGINT);
        let exit = match self.child.wait_exit(timeout).await {
            Some(s) => s,
            None => {
                self.child.kill();
                let mut o = self.outcome(format!(
                    "did not finish within {}s of SIGINT; killed",
                    timeout.as_secs()
                ));
                o.ok = false;
                return o;
            }
        };
        let mut o = self.outcome(exit.to_string());
        o.ok = exit.success();
        o
    }

    fn outcome(&self, exit: String) -> BotsOutcome {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let mut summary = Vec::new();
        let mut failure = None;
        let mut errors = Vec::new();
        for line in text.lines() {
            if let Some(f) = line.strip_prefix("pitboss-bots: FAILED: ") {
                failure = Some(f.to_string());
            } else if let Some(e) = line.trim_start().strip_prefix("error: ") {
                errors.push(e.to_string());
            } else if let Some((k, v)) = line.split_once(": ") {
                if !k.contains(' ')
                    || k.starts_with("latency")
                    || k.starts_with("protocol")
                    || k.starts_with("frames")
                    || k.starts_with("resumed")
                {
                    summary.push((k.trim().to_string(), v.trim().to_string()));
                }
            }
        }
        BotsOutcome {
            exit,
            ok: false,
            summary,
            failure,
            errors,
        }
    }
}

/// Every result the bots wrote to `path`.
pub fn read_told(path: &Path) -> anyhow::Result<Vec<Told>> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut out = Vec::new();
    for (n, line) in BufReader::new(file).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(&line)
            .with_context(|| format!("{} line {}: not JSON", path.display(), n + 1))?;
        let stacks = v["stacks"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| Some((s["seat"].as_u64()?, s["stack"].as_u64()?)))
                    .collect()
            })
            .unwrap_or_default();
        out.push(Told {
            at_ms: v["at_ms"].as_i64().unwrap_or(0),
            bot: v["bot"].as_str().unwrap_or("?").to_string(),
            table: v["table"].as_str().unwrap_or("?").to_string(),
            hand: v["hand"].as_i64().unwrap_or(-1),
            stacks,
        });
    }
    Ok(out)
}
