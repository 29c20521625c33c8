//! A WebSocket text frame from a client, as the session handles it: parsed
//! by `protocol::parse`, then, for `sit`, `act` and `leave`, turned into the
//! rules command the table applies (the seat comes from who the player is,
//! never from the frame), at a table between hands and at one in the middle
//! of a hand, for the player to act, a seated player waiting, and a watcher.
//!
//! The properties are `pitboss::games::holdem::frames::check_text`, the ones the
//! client-frame property tests assert too.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pitboss::games::holdem::frames as checks;

fuzz_target!(|data: &[u8]| {
    // The session closes a text frame that is not UTF-8 (1007) before any
    // parsing; only text reaches `parse`.
    if let Ok(text) = std::str::from_utf8(data) {
        checks::check_text(text);
    }
});
