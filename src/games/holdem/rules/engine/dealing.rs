//! Starting a hand: button, hole cards, antes and blinds. `move_to_pot`
//! lives here as the one place chips leave a stack, forced and voluntary
//! bets alike, so the all-in mark is set in one place.

use super::*;

impl Game {
    pub(super) fn start_hand(
        &mut self,
        deck: Vec<Card>,
        ev: &mut Vec<Event>,
    ) -> Result<(), RuleError> {
        if self.hand.is_some() {
            return Err(RuleError::HandInProgress);
        }
        let mut seen = 0u64;
        for c in &deck {
            seen |= 1u64 << c.index();
        }
        if deck.len() != 52 || seen.count_ones() != 52 {
            return Err(RuleError::BadDeck);
        }
        let dealt = self.eligible_seats();
        if dealt.len() < 2 {
            return Err(RuleError::NotEnoughPlayers);
        }
        let no = self.hand_no.checked_add(1).ok_or(RuleError::Overflow)?;
        let missing = || RuleError::Internal("no seat for a position".into());
        let button = next_after(&dealt, self.button).ok_or_else(missing)?;
        // Heads-up the button is the small blind; otherwise the two seats
        // after it post. Either way the big blind is the seat after the small
        // blind, and pre-flop action starts after the big blind.
        let sb = if dealt.len() == 2 {
            button
        } else {
            next_after(&dealt, Some(button)).ok_or_else(missing)?
        };
        let bb = next_after(&dealt, Some(sb)).ok_or_else(missing)?;

        // Hole cards are dealt as consecutive pairs, starting with the seat
        // after the button; with a uniformly shuffled deck this is as fair as
        // dealing one card at a time and easier to audit.
        let order = clockwise_after(&dealt, button);
        let mut players = Vec::with_capacity(dealt.len());
        for (k, &seat) in order.iter().enumerate() {
            players.push(Player {
                seat,
                start_stack: self.stack(seat),
                hole: [deck[2 * k], deck[2 * k + 1]],
                bet: Chips::ZERO,
                committed: Chips::ZERO,
                folded: false,
                all_in: false,
                acted: false,
                matched: Chips::ZERO,
            });
        }
        players.sort_by_key(|p| p.seat);
        let next_card = 2 * players.len();
        let seat_stacks = players
            .iter()
            .map(|p| {
                let player = self.occupant(p.seat)?.player.clone();
                Ok(SeatStack {
                    seat: p.seat,
                    player,
                    stack: p.start_stack,
                })
            })
            .collect::<Result<Vec<_>, RuleError>>()?;
        self.hand = Some(Hand {
            no,
            prev_button: self.button,
            button,
            deck,
            next_card,
            board: Vec::new(),
            street: Street::Preflop,
            players,
            to_act: None,
            current_bet: self.config.big_blind,
            min_raise: self.config.big_blind,
            last_aggressor: None,
            decision: 0,
        });
        self.hand_no = no;
        self.button = Some(button);
        self.reveal = None;
        ev.push(event(EventKind::HandStarted {
            hand: no,
            button,
            seats: seat_stacks,
        }));

        if !self.config.ante.is_zero() {
            for &seat in &order {
                let paid = self.post(seat, self.config.ante, false)?;
                ev.push(action_event(no, seat, ActionKind::Ante, paid));
            }
        }
        for (seat, blind, kind) in [
            (sb, self.config.small_blind, ActionKind::SmallBlind),
            (bb, self.config.big_blind, ActionKind::BigBlind),
        ] {
            // A player already all-in from the ante has nothing left to post.
            if !self.post(seat, blind, true)?.is_zero() {
                let amount = self.hand_ref()?.player(seat).map_or(Chips::ZERO, |p| p.bet);
                ev.push(action_event(no, seat, kind, amount));
            }
        }
        for p in &self.hand_ref()?.players {
            ev.push(Event {
                to: Audience::Seat(p.seat),
                kind: EventKind::HoleCards {
                    hand: no,
                    seat: p.seat,
                    cards: p.hole,
                },
            });
        }
        self.advance(bb, ev)
    }

    /// Forced bet: puts in up to `amount` (all-in if short) and returns what
    /// was actually paid. Antes are dead money and do not count as a bet.
    fn post(&mut self, seat: SeatNo, amount: Chips, live: bool) -> Result<Chips, RuleError> {
        let paid = amount.min(self.stack(seat));
        self.move_to_pot(seat, paid, live)?;
        Ok(paid)
    }

    /// Moves `amount` from the seat's stack into the hand, marking the player
    /// all-in when the stack runs out.
    pub(super) fn move_to_pot(
        &mut self,
        seat: SeatNo,
        amount: Chips,
        live_bet: bool,
    ) -> Result<(), RuleError> {
        let i = self.check_seat_range(seat)?;
        let o = self.seats[i].as_mut().ok_or(RuleError::NotSeated)?;
        let hand = self.hand.as_mut().ok_or(RuleError::NoHandInProgress)?;
        let p = hand
            .players
            .iter_mut()
            .find(|p| p.seat == seat)
            .ok_or(RuleError::NotSeated)?;
        o.stack = o
            .stack
            .checked_sub(amount)
            .ok_or(RuleError::InsufficientChips)?;
        p.committed = p.committed.checked_add(amount).ok_or(RuleError::Overflow)?;
        if live_bet {
            p.bet = p.bet.checked_add(amount).ok_or(RuleError::Overflow)?;
        }
        if o.stack.is_zero() {
            p.all_in = true;
        }
        Ok(())
    }
}
