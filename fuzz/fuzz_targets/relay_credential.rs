//! A relay credential as `/ws/relay` verifies it, and the player tokens an
//! instance verifies before it vouches for a player: arbitrary claims and
//! signatures under an arbitrary secret, the input's claim signed and then
//! shown altered, late, elsewhere or under another secret, arbitrary
//! tokens, and arbitrary token payloads correctly signed.
//!
//! The properties are `pitboss::auth::checks::check_credential`, the ones
//! the credential property tests assert too; the input's fields are
//! separated by 0xFF bytes (`checks::fields`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use pitboss::auth::checks;

fuzz_target!(|data: &[u8]| {
    checks::check_credential(data);
});
