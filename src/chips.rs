//! Chip amounts, seats and players: what every game and the runtime
//! count and name.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A non-negative chip amount. There are deliberately no `Add`/`Sub`
/// operator impls: every piece of chip arithmetic goes through the checked
/// methods so that an overflow becomes a refusal instead of a wrap or a
/// panic.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Chips(pub u64);

impl Chips {
    pub const ZERO: Chips = Chips(0);

    pub fn checked_add(self, o: Chips) -> Option<Chips> {
        self.0.checked_add(o.0).map(Chips)
    }

    pub fn checked_sub(self, o: Chips) -> Option<Chips> {
        self.0.checked_sub(o.0).map(Chips)
    }

    /// `self - o`, or zero when `o` is larger. For "how much more" questions
    /// where a negative answer means "nothing".
    pub fn saturating_sub(self, o: Chips) -> Chips {
        Chips(self.0.saturating_sub(o.0))
    }

    pub fn is_zero(self) -> bool {
        self.0 == 0
    }

    /// Sum of many amounts, `None` on overflow.
    pub fn checked_sum<I: IntoIterator<Item = Chips>>(iter: I) -> Option<Chips> {
        iter.into_iter()
            .try_fold(Chips::ZERO, |acc, c| acc.checked_add(c))
    }
}

impl fmt::Display for Chips {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// Seat number, from 0 to the table's seats − 1. Clockwise is increasing
/// seat number, wrapping from the last seat to seat 0.
pub type SeatNo = u8;

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PlayerId(pub String);

impl std::fmt::Display for PlayerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for PlayerId {
    fn from(s: &str) -> PlayerId {
        PlayerId(s.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_arithmetic_reports_overflow_and_underflow_instead_of_wrapping() {
        assert_eq!(Chips(2).checked_add(Chips(3)), Some(Chips(5)));
        assert_eq!(Chips(u64::MAX).checked_add(Chips(1)), None);
        assert_eq!(Chips(5).checked_sub(Chips(3)), Some(Chips(2)));
        assert_eq!(Chips(3).checked_sub(Chips(5)), None);
        assert_eq!(Chips(3).saturating_sub(Chips(5)), Chips::ZERO);
        assert_eq!(Chips::checked_sum([Chips(1), Chips(2)]), Some(Chips(3)));
        assert_eq!(Chips::checked_sum([Chips(u64::MAX), Chips(1)]), None);
    }

    #[test]
    fn chips_serialise_as_a_bare_number_and_display_as_one() {
        assert_eq!(serde_json::to_string(&Chips(250)).expect("json"), "250");
        assert_eq!(serde_json::from_str::<Chips>("7").expect("json"), Chips(7));
        assert!(serde_json::from_str::<Chips>("-1").is_err());
        assert_eq!(Chips(1234).to_string(), "1234");
    }
}
