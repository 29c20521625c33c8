//! `pitboss-bots`: a load-generating client that drives a running pitboss
//! server through its public API only — the admin HTTP API and one player
//! WebSocket per bot — and checks on the way out that no chip went missing.
//!
//! Each bot is one tokio task holding one connection at a time. It joins and
//! sits, answers its own `turn` events with a random action taken from the
//! turn's `legal` list (now and then leaving the turn to the server's action
//! clock), rebuys when it busts, and leaves its seat at the end so its wallet
//! gets the chips back. The run then reads `GET /admin/audit`.
//!
//! Several `--url`s spread the tables and the bots over a cluster's
//! instances. Instances may drain, crash or hand tables over mid-run: a bot
//! whose connection ends connects again and carries on, and a bot whose
//! table changes owner re-syncs to the new hosting's snapshot.
//!
//! # Layout
//!
//! - `options`: the command line.
//! - `endpoints`: the server's URLs, which tables and bots go to which, and
//!   the back-off between reconnects.
//! - `admin`: the admin HTTP API client (tables, wallets, player tokens, audit).
//! - `run`: set-up, supervision and wind-down of a run.
//! - `bot`: one bot's WebSocket loop, its reconnects and re-syncs.
//! - `actions`, `turns`: what a bot plays, and how it tells the action
//!   clock's races from protocol errors.
//! - `shared`, `stats`: what the bots share and count.
//! - `report`: the end-of-run checks and the summary.
//! - `results`: `--results`, every hand result told, for outside checks.

mod actions;
mod admin;
mod bot;
mod endpoints;
mod options;
mod report;
mod results;
mod run;
mod shared;
mod stats;
mod turns;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser as _;
use options::{Cli, ADMIN_TOKEN_ENV};

fn main() -> ExitCode {
    // A usage error exits 2 with clap's message; `--help` exits 0.
    let opts = Cli::parse().into_options().unwrap_or_else(|e| e.exit());
    let from_env = std::env::var(ADMIN_TOKEN_ENV).ok();
    let Some(admin_token) = opts.admin_token(from_env) else {
        eprintln!(
            "pitboss-bots: no admin token: pass --admin-token <token> or set {ADMIN_TOKEN_ENV} \
             to the server's admin token"
        );
        return ExitCode::from(2);
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("pitboss-bots: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(run::run(opts, admin_token));
    // Bot tasks that overran their bound were aborted; do not wait on them.
    runtime.shutdown_timeout(Duration::from_secs(1));
    match result {
        Ok(report) => {
            print!("{}", report.text);
            if report.failures.is_empty() {
                ExitCode::SUCCESS
            } else {
                eprintln!("pitboss-bots: FAILED: {}", report.failures.join("; "));
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("pitboss-bots: FAILED: {e:#}");
            ExitCode::FAILURE
        }
    }
}
