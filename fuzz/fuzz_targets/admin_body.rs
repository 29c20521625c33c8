//! The admin API's inputs, as the handlers read them before touching any
//! state: the JSON bodies of `POST /admin/tables`, `…/grant`, `…/freeze`
//! and `…/move`, and the `{player}` and `{id}` path segments. Every input
//! goes through every parser.
//!
//! The properties are `pitboss::http::checks::{check_body,
//! check_path_segment}`, the ones the admin property tests assert too.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pitboss::http::checks;

fuzz_target!(|data: &[u8]| {
    checks::check_body(data);
    // Path segments arrive percent-decoded, as text.
    if let Ok(text) = std::str::from_utf8(data) {
        checks::check_path_segment(text);
    }
});
