//! How a hand ends: uncalled bets back, showdown and the order hands are
//! shown in, pot awards and the summary. Voiding is here too, as the other
//! way a hand ends: every stack and the button go back as they were.

use super::*;
use crate::games::holdem::rules::eval::{evaluate7, HandRank};
use crate::games::holdem::rules::pots;

impl Game {
    /// Ends the hand: returns any uncalled bet, shows down if more than one
    /// player is live, awards every pot, and vacates seats of leavers.
    pub(super) fn finish(&mut self, ev: &mut Vec<Event>) -> Result<(), RuleError> {
        let hand = self.hand.take().ok_or(RuleError::NoHandInProgress)?;
        let no = hand.no;
        let mut stakes = hand.stakes(true);

        if let Some((seat, excess)) = pots::uncalled(&stakes) {
            for s in stakes.iter_mut().filter(|s| s.seat == seat) {
                s.committed = s.committed.saturating_sub(excess);
            }
            self.credit(seat, excess)?;
        }

        let live: Vec<&Player> = hand.players.iter().filter(|p| !p.folded).collect();
        let mut ranks: Vec<(SeatNo, HandRank)> = Vec::new();
        let mut shown: Vec<SeatNo> = Vec::new();
        if live.len() > 1 {
            let b = &hand.board;
            if b.len() != 5 {
                return Err(RuleError::Internal("showdown without a full board".into()));
            }
            for p in &live {
                let seven = [p.hole[0], p.hole[1], b[0], b[1], b[2], b[3], b[4]];
                ranks.push((p.seat, evaluate7(&seven)));
            }
            shown = show_order(&hand, &ranks);
            ev.push(event(EventKind::Showdown {
                hand: no,
                hands: shown
                    .iter()
                    .filter_map(|&s| {
                        let p = hand.player(s)?;
                        let r = ranks.iter().find(|(rs, _)| *rs == s)?.1;
                        Some(ShownHand {
                            seat: s,
                            cards: p.hole,
                            rank: r.describe(),
                        })
                    })
                    .collect(),
            }));
        }

        let order = hand.seats_after(hand.button);
        let mut awards = Vec::new();
        for pot in pots::build_pots(&stakes)? {
            let best = ranks
                .iter()
                .filter(|(s, _)| pot.eligible.contains(s))
                .map(|(_, r)| *r)
                .max();
            let winners: Vec<SeatNo> = order
                .iter()
                .copied()
                .filter(|s| pot.eligible.contains(s))
                .filter(|s| match best {
                    // Without a showdown the only live player takes it all.
                    None => true,
                    Some(best) => ranks.iter().any(|(rs, r)| rs == s && *r == best),
                })
                .collect();
            if winners.is_empty() {
                return Err(RuleError::Internal("pot without a winner".into()));
            }
            let shares = pots::split(pot.amount, &winners);
            for &(seat, share) in &shares {
                self.credit(seat, share)?;
            }
            ev.push(event(EventKind::PotAwarded {
                hand: no,
                amount: pot.amount,
                seats: winners,
            }));
            awards.push(PotAward {
                amount: pot.amount,
                winners: shares,
            });
        }

        let mut results = Vec::new();
        let mut stacks = Vec::new();
        let mut holes = Vec::new();
        for p in &hand.players {
            let o = self.occupant(p.seat)?;
            results.push(SeatResult {
                seat: p.seat,
                player: o.player.clone(),
                start_stack: p.start_stack,
                end_stack: o.stack,
            });
            stacks.push(SeatChips {
                seat: p.seat,
                stack: o.stack,
            });
            holes.push((p.seat, o.player.clone(), p.hole));
        }
        ev.push(event(EventKind::HandEnded { hand: no, stacks }));
        self.last_summary = Some(HandSummary {
            hand: no,
            seats: results,
            pots: awards,
        });
        self.reveal = Some(Reveal {
            board: hand.board.clone(),
            holes,
            shown,
        });
        self.vacate_leavers(ev)
    }

    fn credit(&mut self, seat: SeatNo, amount: Chips) -> Result<(), RuleError> {
        let o = self
            .seats
            .get_mut(usize::from(seat))
            .and_then(|o| o.as_mut())
            .ok_or(RuleError::NotSeated)?;
        o.stack = o.stack.checked_add(amount).ok_or(RuleError::Overflow)?;
        Ok(())
    }

    pub(super) fn void_hand(
        &mut self,
        reason: VoidReason,
        ev: &mut Vec<Event>,
    ) -> Result<(), RuleError> {
        let hand = self.hand.take().ok_or(RuleError::NoHandInProgress)?;
        let mut stacks = Vec::new();
        for p in &hand.players {
            let o = self.occupant_mut(p.seat)?;
            o.stack = p.start_stack;
            stacks.push(SeatChips {
                seat: p.seat,
                stack: p.start_stack,
            });
        }
        // The voided hand never happened as far as positions go, so the
        // replacement hand gets the same button.
        self.button = hand.prev_button;
        self.reveal = None;
        ev.push(event(EventKind::HandVoided {
            hand: hand.no,
            stacks,
            reason,
        }));
        self.vacate_leavers(ev)
    }
}

/// Which live hands are turned face up, in the order they are shown.
///
/// If anyone is all-in every live hand is tabled (there is no more betting
/// to protect, and side pots make "beats what was shown" ambiguous).
/// Otherwise the last aggressor on the river shows first, or the first live
/// player after the button if the river was checked through; each later
/// player clockwise shows only a hand at least as good as the best shown so
/// far and mucks anything worse.
fn show_order(hand: &Hand, ranks: &[(SeatNo, HandRank)]) -> Vec<SeatNo> {
    let live: Vec<SeatNo> = ranks.iter().map(|(s, _)| *s).collect();
    let any_all_in = hand.players.iter().any(|p| !p.folded && p.all_in);
    let first = hand
        .last_aggressor
        .filter(|s| live.contains(s))
        .or_else(|| clockwise_after(&live, hand.button).first().copied());
    let Some(first) = first else {
        return Vec::new();
    };
    // `clockwise_after` puts `first` last; it belongs in front.
    let mut order = vec![first];
    order.extend(
        clockwise_after(&live, first)
            .into_iter()
            .filter(|&s| s != first),
    );
    if any_all_in {
        return order;
    }
    let rank_of = |s: SeatNo| ranks.iter().find(|(rs, _)| *rs == s).map(|(_, r)| *r);
    let mut best: Option<HandRank> = None;
    let mut shown = Vec::new();
    for s in order {
        let r = rank_of(s);
        if best.is_none() || r >= best {
            best = best.max(r);
            shown.push(s);
        }
    }
    shown
}
