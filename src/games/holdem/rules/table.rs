//! Table identity and configuration.

use serde::{Deserialize, Serialize};

use super::chips::Chips;
use super::error::RuleError;

pub use crate::chips::{PlayerId, SeatNo};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableConfig {
    pub small_blind: Chips,
    pub big_blind: Chips,
    /// Posted by every dealt-in player before the blinds; zero for none.
    pub ante: Chips,
    /// Number of seats, 2..=10.
    pub seats: u8,
    pub min_buy_in: Chips,
    pub max_buy_in: Chips,
}

impl TableConfig {
    pub const MIN_SEATS: u8 = 2;
    pub const MAX_SEATS: u8 = 10;

    pub fn validate(&self) -> Result<(), RuleError> {
        let bad = |s: &str| Err(RuleError::BadConfig(s.to_string()));
        if !(Self::MIN_SEATS..=Self::MAX_SEATS).contains(&self.seats) {
            return bad("seats must be between 2 and 10");
        }
        if self.small_blind.is_zero() {
            return bad("small_blind must be positive");
        }
        if self.small_blind > self.big_blind {
            return bad("small_blind must not exceed big_blind");
        }
        if self.min_buy_in < self.big_blind {
            return bad("min_buy_in must be at least big_blind");
        }
        if self.min_buy_in > self.max_buy_in {
            return bad("min_buy_in must not exceed max_buy_in");
        }
        // A full table of maximum buy-ins must be countable without overflow,
        // so that chip totals can never overflow in normal play.
        if self
            .max_buy_in
            .0
            .checked_mul(u64::from(self.seats))
            .is_none()
        {
            return bad("max_buy_in is too large");
        }
        Ok(())
    }
}
