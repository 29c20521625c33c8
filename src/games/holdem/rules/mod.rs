//! Pure No-Limit Texas hold'em rules: cards, chips, hand evaluation and the
//! table state machine. Nothing here does I/O, reads a clock or draws random
//! numbers on its own: shuffled decks and timeouts come in as commands.
//! See `docs/game.md` for the rules as implemented.

pub mod cards;
#[doc(hidden)]
pub mod checks;
pub use crate::chips;
pub mod engine;
mod error;
pub mod eval;
mod pots;
mod protocol;
mod table;

pub use cards::*;
pub use chips::*;
pub use engine::*;
pub use eval::*;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod sequence_proptests;
#[cfg(test)]
mod tests;
