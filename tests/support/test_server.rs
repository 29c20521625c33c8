//! `pitboss` with a game of the tests' own beside the games of this build:
//! Nim (`nim.rs`), hosted through the same registry, manager, tables,
//! sessions and relay as hold'em, with nothing of it in the product.

use std::process::ExitCode;

#[path = "nim.rs"]
#[allow(dead_code)]
mod nim;

fn main() -> ExitCode {
    pitboss::cli::run(pitboss::games::registry().with::<nim::Nim>())
}
