//! The writes a table makes beside its game: buy-ins and cash-outs in
//! flight. Each runs as a task of its own while the table goes on; what is
//! kept here is what they hold meanwhile (a buy-in its seat and its player,
//! a cash-out its seat), so nothing else takes them, no deal goes while a
//! seat is being paid out, and a drain or an idle release waits for them.
//! Plain state the table drives.

use std::collections::{HashMap, HashSet};

use super::error::TableError;
use crate::chips::{PlayerId, SeatNo};

#[derive(Debug, Default)]
pub(super) struct SideWrites {
    /// Buy-ins in flight: the seats they reserve, and for whom.
    buying_in: HashMap<SeatNo, PlayerId>,
    /// Cash-outs in flight: the seats they vacate once recorded.
    cashing_out: HashSet<SeatNo>,
}

impl SideWrites {
    /// Reserves `seat` for `player`'s buy-in; refused when a buy-in in
    /// flight holds either.
    pub fn reserve_buy_in(&mut self, seat: SeatNo, player: &PlayerId) -> Result<(), TableError> {
        if self.buying_in.contains_key(&seat) {
            return Err(TableError::SeatTaken);
        }
        if self.buying_in.values().any(|p| p == player) {
            return Err(TableError::AlreadySeated);
        }
        self.buying_in.insert(seat, player.clone());
        Ok(())
    }

    /// The buy-in for `seat` has an outcome.
    pub fn buy_in_done(&mut self, seat: SeatNo) {
        self.buying_in.remove(&seat);
    }

    /// Starts a cash-out of `seat`; `false` when one is already in flight
    /// (the same stand-up).
    pub fn start_cash_out(&mut self, seat: SeatNo) -> bool {
        self.cashing_out.insert(seat)
    }

    pub fn is_cashing_out(&self, seat: SeatNo) -> bool {
        self.cashing_out.contains(&seat)
    }

    /// The cash-out of `seat` has an outcome.
    pub fn cash_out_done(&mut self, seat: SeatNo) {
        self.cashing_out.remove(&seat);
    }

    pub fn buy_ins(&self) -> usize {
        self.buying_in.len()
    }

    pub fn cash_outs(&self) -> usize {
        self.cashing_out.len()
    }

    /// Nothing in flight.
    pub fn is_idle(&self) -> bool {
        self.buying_in.is_empty() && self.cashing_out.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(name: &str) -> PlayerId {
        PlayerId(name.into())
    }

    #[test]
    fn a_buy_in_in_flight_holds_its_seat_and_its_player_until_it_has_an_outcome() {
        let mut w = SideWrites::default();
        assert!(w.is_idle());
        w.reserve_buy_in(2, &p("ann")).unwrap();
        assert_eq!(w.reserve_buy_in(2, &p("bob")), Err(TableError::SeatTaken));
        assert_eq!(
            w.reserve_buy_in(3, &p("ann")),
            Err(TableError::AlreadySeated)
        );
        w.reserve_buy_in(3, &p("bob")).unwrap();
        assert_eq!((w.buy_ins(), w.is_idle()), (2, false));
        w.buy_in_done(2);
        w.reserve_buy_in(2, &p("cy")).unwrap();
        w.buy_in_done(2);
        w.buy_in_done(3);
        assert!(w.is_idle());
    }

    #[test]
    fn a_second_stand_up_of_a_seat_being_cashed_out_is_the_same_one() {
        let mut w = SideWrites::default();
        assert!(w.start_cash_out(1));
        assert!(!w.start_cash_out(1));
        assert!(w.is_cashing_out(1) && !w.is_cashing_out(0));
        assert_eq!((w.cash_outs(), w.is_idle()), (1, false));
        w.cash_out_done(1);
        assert!(w.is_idle() && !w.is_cashing_out(1));
    }
}
