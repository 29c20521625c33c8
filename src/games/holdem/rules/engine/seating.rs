//! Taking, leaving and sitting out of seats. A player who leaves during a
//! hand is folded at once (out of turn if need be) but keeps the seat until
//! the hand ends, so chips they have in the pot, and any they win, are
//! still settled against it.

use super::*;

impl Game {
    pub(super) fn sit(
        &mut self,
        seat: SeatNo,
        player: PlayerId,
        stack: Chips,
        ev: &mut Vec<Event>,
    ) -> Result<(), RuleError> {
        let i = self.free_seat_for(seat, &player)?;
        if stack < self.config.min_buy_in || stack > self.config.max_buy_in {
            return Err(RuleError::BuyInOutOfRange);
        }
        self.place(i, player.clone(), stack)?;
        ev.push(event(EventKind::Seated {
            seat,
            player,
            stack,
        }));
        Ok(())
    }

    /// Index of `seat` if `player` may take it: the seat exists and is
    /// empty, and the player is not seated elsewhere.
    pub(super) fn free_seat_for(
        &self,
        seat: SeatNo,
        player: &PlayerId,
    ) -> Result<usize, RuleError> {
        let i = self.check_seat_range(seat)?;
        if self.seats[i].is_some() {
            return Err(RuleError::SeatTaken);
        }
        if self.seat_of(player).is_some() {
            return Err(RuleError::AlreadySeated);
        }
        Ok(i)
    }

    /// Seats `player`, sitting in, at seat index `i` unless the new stack
    /// would take the table total past what a `u64` counts.
    pub(super) fn place(
        &mut self,
        i: usize,
        player: PlayerId,
        stack: Chips,
    ) -> Result<(), RuleError> {
        self.total_chips_checked()?
            .checked_add(stack)
            .ok_or(RuleError::Overflow)?;
        self.seats[i] = Some(Occupant {
            player,
            stack,
            sitting_out: false,
            leaving: false,
        });
        Ok(())
    }

    pub(super) fn leave(&mut self, seat: SeatNo, ev: &mut Vec<Event>) -> Result<(), RuleError> {
        let occupant = self.occupant_mut(seat)?;
        if occupant.leaving {
            return Ok(());
        }
        let dealt_in = self.hand.as_ref().and_then(|h| h.player(seat)).cloned();
        let Some(p) = dealt_in else {
            return self.vacate(seat, ev);
        };
        self.occupant_mut(seat)?.leaving = true;
        if !p.can_act() {
            // Folded players have nothing left to decide, and an all-in
            // player's chips are already in the pot: they stay in it and
            // leave with whatever they win when the hand ends.
            return Ok(());
        }
        let actor = self.to_act();
        if actor == Some(seat) {
            return self.act(seat, Action::Fold, ev);
        }
        let legal_before = actor.map(|s| self.legal_for(s));
        let hand = self.hand_mut()?;
        let no = hand.no;
        let player = hand
            .player_mut(seat)
            .ok_or_else(|| RuleError::Internal("dealt-in player missing".into()))?;
        player.folded = true;
        let amount = player.bet;
        ev.push(action_event(no, seat, ActionKind::Fold, amount));
        // Folding out of turn can end the hand or the betting round (e.g. it
        // leaves a single player who can still act, with nothing to call).
        let hand = self.hand_ref()?;
        if hand.live_count() <= 1 || hand.round_complete() {
            let from = hand.to_act.unwrap_or(hand.button);
            return self.advance(from, ev);
        }
        // The player to act may have lost options with this fold (a raise
        // nobody is left to call): that is a new decision, so an act sent
        // for the old one is refused as stale, not judged on options its
        // sender never saw.
        if let (Some(actor), Some(before)) = (actor, legal_before) {
            let legal = self.legal_for(actor);
            if legal != before {
                let hand = self.hand_mut()?;
                hand.decision += 1;
                ev.push(event(EventKind::Turn {
                    hand: no,
                    seat: actor,
                    decision: hand.decision,
                    legal,
                }));
            }
        }
        Ok(())
    }

    fn vacate(&mut self, seat: SeatNo, ev: &mut Vec<Event>) -> Result<(), RuleError> {
        let i = self.check_seat_range(seat)?;
        let o = self.seats[i].take().ok_or(RuleError::NotSeated)?;
        ev.push(event(EventKind::Left {
            seat,
            player: o.player,
            stack: o.stack,
        }));
        Ok(())
    }

    pub(super) fn set_sitting_out(
        &mut self,
        seat: SeatNo,
        out: bool,
        ev: &mut Vec<Event>,
    ) -> Result<(), RuleError> {
        let o = self.occupant_mut(seat)?;
        if o.leaving {
            return Err(RuleError::IllegalAction(
                "the player is leaving this seat".into(),
            ));
        }
        if o.sitting_out == out {
            return Ok(());
        }
        o.sitting_out = out;
        ev.push(event(if out {
            EventKind::SatOut { seat }
        } else {
            EventKind::SatIn { seat }
        }));
        Ok(())
    }

    pub(super) fn vacate_leavers(&mut self, ev: &mut Vec<Event>) -> Result<(), RuleError> {
        let leavers: Vec<SeatNo> = self
            .occupied()
            .filter(|(_, o)| o.leaving)
            .map(|(s, _)| s)
            .collect();
        for seat in leavers {
            self.vacate(seat, ev)?;
        }
        Ok(())
    }
}
