//! The config loader's environment path: an arbitrary environment
//! (`NAME=value` entries separated by NUL bytes, as in an environment
//! block; `PITBOSS_ENV` and `PITBOSS__*` variables, mistyped names and
//! anything else) loaded over the repository's `config/` directory the way
//! `Settings::load` loads the process's, without touching the process's.
//!
//! The properties are `pitboss::config::checks::check_environment`, the
//! ones the environment property tests assert too.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pitboss::config::checks;

fuzz_target!(|data: &[u8]| {
    checks::check_environment(data);
});
