//! Betting: turn checks, the legal action list, validating and applying an
//! action, and closing streets until the hand ends. `legal_for` (what is
//! offered) and `resolve` (what is accepted) state the same rules from two
//! sides and must stay in step.

use super::*;

enum Resolved {
    Fold,
    Check,
    /// Put chips in until the street total is `to`.
    Put {
        kind: ActionKind,
        to: Chips,
    },
}

impl Game {
    pub(super) fn check_turn(&self, hand_no: u64, seat: SeatNo) -> Result<(), RuleError> {
        let hand = self.hand_ref()?;
        if hand.no != hand_no {
            return Err(RuleError::StaleHand {
                expected: hand.no,
                got: hand_no,
            });
        }
        self.check_seat_range(seat)?;
        if hand.to_act != Some(seat) {
            return Err(RuleError::NotYourTurn);
        }
        Ok(())
    }

    /// An action answers exactly the open decision of its hand: a late,
    /// repeated or clock-beaten action is refused and changes nothing.
    pub(super) fn check_decision(&self, hand_no: u64, decision: u64) -> Result<(), RuleError> {
        let hand = self.hand_ref()?;
        if hand.no == hand_no && hand.decision != decision {
            return Err(RuleError::StaleDecision {
                expected: hand.decision,
                got: decision,
            });
        }
        Ok(())
    }

    pub(super) fn legal_for(&self, seat: SeatNo) -> Vec<LegalAction> {
        let Some(hand) = self.hand.as_ref() else {
            return Vec::new();
        };
        let Some(p) = hand.player(seat) else {
            return Vec::new();
        };
        if !p.can_act() {
            return Vec::new();
        }
        let stack = self.stack(seat);
        let to_call = hand.current_bet.saturating_sub(p.bet);
        let Some(all_in) = p.bet.checked_add(stack) else {
            return vec![LegalAction::Fold];
        };
        let mut v = vec![LegalAction::Fold];
        if to_call.is_zero() {
            v.push(LegalAction::Check);
        } else if stack > to_call {
            v.push(LegalAction::Call { amount: to_call });
        }
        if stack > to_call && hand.may_raise(p) {
            if hand.current_bet.is_zero() {
                let min = self.config.big_blind;
                if all_in >= min {
                    v.push(LegalAction::Bet { min, max: all_in });
                }
            } else if let Some(min) = hand.current_bet.checked_add(hand.min_raise) {
                if all_in >= min {
                    v.push(LegalAction::Raise { min, max: all_in });
                }
            }
            v.push(LegalAction::AllIn { amount: all_in });
        } else if stack <= to_call {
            v.push(LegalAction::AllIn { amount: all_in });
        }
        v
    }

    /// Checks `action` against the rules without changing anything.
    fn resolve(&self, seat: SeatNo, action: Action) -> Result<Resolved, RuleError> {
        let hand = self.hand_ref()?;
        let p = hand.player(seat).ok_or(RuleError::NotYourTurn)?;
        let stack = self.stack(seat);
        let current = hand.current_bet;
        let to_call = current.saturating_sub(p.bet);
        let all_in = p.bet.checked_add(stack).ok_or(RuleError::Overflow)?;
        let raise_closed = || {
            if hand.opponent_can_respond(seat) {
                RuleError::IllegalAction(
                    "betting has not been reopened by a full raise; call or fold".into(),
                )
            } else {
                RuleError::IllegalAction("no opponent can call a raise; call or fold".into())
            }
        };
        Ok(match action {
            Action::Fold => Resolved::Fold,
            Action::Check => {
                if !to_call.is_zero() {
                    return Err(RuleError::IllegalAction(format!(
                        "cannot check facing a bet: {to_call} to call"
                    )));
                }
                Resolved::Check
            }
            Action::Call => {
                if to_call.is_zero() {
                    return Err(RuleError::IllegalAction(
                        "nothing to call; check instead".into(),
                    ));
                }
                // A player who cannot cover the call calls all-in.
                Resolved::Put {
                    kind: ActionKind::Call,
                    to: current.min(all_in),
                }
            }
            Action::Bet(x) => {
                if !current.is_zero() {
                    return Err(RuleError::IllegalAction(
                        "there is already a bet on this street; raise instead".into(),
                    ));
                }
                if !hand.may_raise(p) {
                    return Err(raise_closed());
                }
                if x > all_in {
                    return Err(RuleError::InsufficientChips);
                }
                if x < self.config.big_blind && x != all_in {
                    return Err(RuleError::BadAmount(format!(
                        "the minimum bet is {}",
                        self.config.big_blind
                    )));
                }
                Resolved::Put {
                    kind: ActionKind::Bet,
                    to: x,
                }
            }
            Action::Raise(x) => {
                if current.is_zero() {
                    return Err(RuleError::IllegalAction(
                        "there is no bet to raise; bet instead".into(),
                    ));
                }
                if !hand.may_raise(p) {
                    return Err(raise_closed());
                }
                if x > all_in {
                    return Err(RuleError::InsufficientChips);
                }
                let min = current
                    .checked_add(hand.min_raise)
                    .ok_or(RuleError::Overflow)?;
                // Raising to exactly one's whole stack is an all-in, which
                // may be a short raise.
                let short_all_in = x == all_in && x > current;
                if x < min && !short_all_in {
                    return Err(RuleError::BadAmount(format!(
                        "the minimum raise is to {min}"
                    )));
                }
                Resolved::Put {
                    kind: ActionKind::Raise,
                    to: x,
                }
            }
            Action::AllIn => {
                if all_in > current && !hand.may_raise(p) {
                    return Err(raise_closed());
                }
                Resolved::Put {
                    kind: ActionKind::AllIn,
                    to: all_in,
                }
            }
        })
    }

    pub(super) fn act(
        &mut self,
        seat: SeatNo,
        action: Action,
        ev: &mut Vec<Event>,
    ) -> Result<(), RuleError> {
        let resolved = self.resolve(seat, action)?;
        let no = self.hand_ref()?.no;
        let kind = match resolved {
            Resolved::Fold => {
                self.player_mut(seat)?.folded = true;
                ActionKind::Fold
            }
            Resolved::Check => ActionKind::Check,
            Resolved::Put { kind, to } => {
                let bet = self.hand_ref()?.player(seat).map_or(Chips::ZERO, |p| p.bet);
                let pay = to.checked_sub(bet).ok_or(RuleError::Overflow)?;
                self.move_to_pot(seat, pay, true)?;
                let hand = self.hand_mut()?;
                if to > hand.current_bet {
                    let raise = to.saturating_sub(hand.current_bet);
                    if raise >= hand.min_raise {
                        hand.min_raise = raise;
                    }
                    hand.current_bet = to;
                    hand.last_aggressor = Some(seat);
                }
                if self.stack(seat).is_zero() {
                    ActionKind::AllIn
                } else {
                    kind
                }
            }
        };
        let hand = self.hand_mut()?;
        let current = hand.current_bet;
        let p = hand
            .player_mut(seat)
            .ok_or_else(|| RuleError::Internal("actor missing".into()))?;
        p.acted = true;
        p.matched = current;
        let amount = p.bet;
        ev.push(action_event(no, seat, kind, amount));
        self.advance(seat, ev)
    }

    fn player_mut(&mut self, seat: SeatNo) -> Result<&mut Player, RuleError> {
        self.hand_mut()?
            .player_mut(seat)
            .ok_or_else(|| RuleError::Internal("player missing".into()))
    }

    /// Moves the hand forward after something changed: hands the turn to the
    /// next player who owes an action after `from`, or closes the street,
    /// deals the next one, runs the board out, or ends the hand.
    pub(super) fn advance(&mut self, from: SeatNo, ev: &mut Vec<Event>) -> Result<(), RuleError> {
        let mut from = from;
        let big_blind = self.config.big_blind;
        loop {
            let hand = self.hand_mut()?;
            let no = hand.no;
            if hand.live_count() <= 1 {
                hand.to_act = None;
                return self.finish(ev);
            }
            if !hand.round_complete() {
                let next = hand
                    .seats_after(from)
                    .into_iter()
                    .find(|&s| hand.player(s).is_some_and(|p| hand.needs_action(p)))
                    .ok_or_else(|| RuleError::Internal("open round with nobody to act".into()))?;
                hand.to_act = Some(next);
                hand.decision += 1;
                let decision = hand.decision;
                let legal = self.legal_for(next);
                ev.push(event(EventKind::Turn {
                    hand: no,
                    seat: next,
                    decision,
                    legal,
                }));
                return Ok(());
            }
            hand.to_act = None;
            let Some(street) = hand.street.next() else {
                return self.finish(ev);
            };
            let n = street.board_len().saturating_sub(hand.board.len());
            let cards = hand.draw(n)?;
            hand.board.extend(cards);
            hand.street = street;
            hand.current_bet = Chips::ZERO;
            hand.min_raise = big_blind;
            hand.last_aggressor = None;
            for p in &mut hand.players {
                p.bet = Chips::ZERO;
                p.acted = false;
                p.matched = Chips::ZERO;
            }
            from = hand.button;
            ev.push(event(EventKind::Street {
                hand: no,
                street,
                board: hand.board.clone(),
            }));
            // When at most one player can still bet, every later round is
            // complete at once, so the loop keeps dealing streets until the
            // river is out and the hand is finished.
        }
    }
}
