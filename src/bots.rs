//! `pitboss bots`: drives a running server through its public API.

use std::process::ExitCode;

use crate::config::Settings;

pub fn main(_settings: &Settings, _args: &[&str]) -> ExitCode {
    eprintln!("pitboss bots: not built yet");
    ExitCode::from(2)
}
