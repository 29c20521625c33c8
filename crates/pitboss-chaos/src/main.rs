//! `pitboss-chaos`: proof under fire, on one machine. It starts pitboss
//! instances, a private Redis behind a proxy per instance and a fresh
//! Postgres database; the `pitboss-bots` play at every table through any
//! instance; a seeded random schedule of faults runs for a set time; then
//! the invariants are checked in Postgres, in the instances' logs and
//! against what the bots were told, and a report is printed.
//!
//! # Layout
//!
//! - `options`: the command line.
//! - `run`: one whole run, from set-up to clean-up.
//! - `children`: child processes, their logs and signals.
//! - `fleet`: the pitboss instances, each with a fixed port and a proxy.
//! - `proxy`: the TCP proxy between an instance and Redis.
//! - `redis_server`: the private `redis-server`.
//! - `postgres`: the run's database, exhaustion and a held row lock.
//! - `bots`: `pitboss-bots` as a child, and what it was told.
//! - `faults`: the kinds, the seeded schedule, applying them.
//! - `monitor`: ownership, metrics and progress while it runs.
//! - `checks`: the invariants.
//! - `report`: the table on stdout and the JSON.

mod bots;
mod checks;
mod children;
mod faults;
mod fleet;
mod monitor;
mod options;
mod postgres;
mod proxy;
mod redis_server;
mod report;
mod run;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser as _;
use options::Options;

fn main() -> ExitCode {
    // A usage error exits 2 with clap's message; `--help` exits 0.
    let opts = Options::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("pitboss-chaos: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(run::run(opts));
    runtime.shutdown_timeout(Duration::from_secs(2));
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("pitboss-chaos: FAILED: {e:#}");
            ExitCode::FAILURE
        }
    }
}
