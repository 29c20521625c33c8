//! Read-only queries and the per-viewer `GameView`. Hole cards are hidden
//! here unless they are the viewer's own or were shown at the showdown.

use super::*;
use crate::games::holdem::rules::pots;

impl Game {
    pub fn config(&self) -> &TableConfig {
        &self.config
    }

    pub fn hand_no(&self) -> u64 {
        self.hand_no
    }

    pub fn button(&self) -> Option<SeatNo> {
        self.button
    }

    pub fn hand_in_progress(&self) -> bool {
        self.hand.is_some()
    }

    /// Whether `seat` was dealt into the hand in progress (folded or not):
    /// such a seat is vacated only when the hand ends.
    pub fn dealt_in(&self, seat: SeatNo) -> bool {
        self.hand.as_ref().is_some_and(|h| h.player(seat).is_some())
    }

    pub fn to_act(&self) -> Option<SeatNo> {
        self.hand.as_ref().and_then(|h| h.to_act)
    }

    /// The current street, if a hand is in progress.
    pub fn street(&self) -> Option<Street> {
        self.hand.as_ref().map(|h| h.street)
    }

    /// The board of the hand in progress (empty between hands).
    pub fn board(&self) -> Vec<Card> {
        self.hand
            .as_ref()
            .map(|h| h.board.clone())
            .unwrap_or_default()
    }

    /// The open decision's number while a hand waits for an action.
    pub fn decision(&self) -> Option<u64> {
        self.hand
            .as_ref()
            .filter(|h| h.to_act.is_some())
            .map(|h| h.decision)
    }

    pub fn legal_actions(&self) -> Vec<LegalAction> {
        match self.to_act() {
            Some(seat) => self.legal_for(seat),
            None => Vec::new(),
        }
    }

    /// The `turn` of the decision waiting now, told again (same decision
    /// number) when its action clock starts over after a pause.
    pub fn pending_turn(&self) -> Option<Event> {
        let (seat, decision) = (self.to_act()?, self.decision()?);
        Some(event(EventKind::Turn {
            hand: self.hand_no,
            seat,
            decision,
            legal: self.legal_for(seat),
        }))
    }

    pub fn seat_of(&self, player: &PlayerId) -> Option<SeatNo> {
        self.occupied()
            .find(|(_, o)| &o.player == player)
            .map(|(s, _)| s)
    }

    pub fn seats(&self) -> Vec<SeatInfo> {
        self.occupied()
            .map(|(seat, o)| SeatInfo {
                seat,
                player: o.player.clone(),
                stack: o.stack,
                sitting_out: o.sitting_out,
                in_hand: self.in_hand(seat),
            })
            .collect()
    }

    pub fn can_start_hand(&self) -> bool {
        self.hand.is_none() && self.eligible_seats().len() >= 2
    }

    pub fn last_summary(&self) -> Option<&HandSummary> {
        self.last_summary.as_ref()
    }

    /// Every chip on the table: stacks plus everything put in during the hand
    /// in progress. Constant within a hand except that `Sit` adds the new
    /// stack and a `Left` event removes the stack it carries.
    pub fn total_chips(&self) -> Chips {
        // Cannot overflow: `Sit` and `resume` refuse any stack that would
        // take the total past u64, and play only moves chips around.
        self.total_chips_checked().unwrap_or(Chips(u64::MAX))
    }

    pub fn view_for(&self, viewer: Option<&PlayerId>) -> GameView {
        let you = viewer.and_then(|v| self.seat_of(v));
        let hand = self.hand.as_ref();
        let seats = self
            .occupied()
            .map(|(seat, o)| {
                let p = hand.and_then(|h| h.player(seat));
                let cards = match (hand, p) {
                    (Some(_), Some(p)) if you == Some(seat) => Some(p.hole),
                    (Some(_), _) => None,
                    (None, _) => self.revealed_cards(seat, &o.player, you),
                };
                SeatView {
                    seat,
                    player: o.player.clone(),
                    stack: o.stack,
                    bet: p.map_or(Chips::ZERO, |p| p.bet),
                    folded: p.is_some_and(|p| p.folded),
                    all_in: p.is_some_and(|p| p.all_in),
                    sitting_out: o.sitting_out,
                    in_hand: p.is_some_and(|p| !p.folded),
                    cards,
                }
            })
            .collect();
        let pots = hand
            .and_then(|h| pots::build_pots(&h.stakes(false)).ok())
            .unwrap_or_default()
            .into_iter()
            .map(|p| PotView {
                amount: p.amount,
                eligible: p.eligible,
            })
            .collect();
        let (legal, decision) = match (you, self.to_act(), hand) {
            (Some(y), Some(t), Some(h)) if y == t => (self.legal_for(t), Some(h.decision)),
            _ => (Vec::new(), None),
        };
        let board = match (hand, &self.reveal) {
            (Some(h), _) => h.board.clone(),
            (None, Some(r)) => r.board.clone(),
            (None, None) => Vec::new(),
        };
        GameView {
            config: self.config.clone(),
            hand: self.hand_no,
            hand_in_progress: hand.is_some(),
            button: self.button,
            street: hand.map(|h| h.street),
            board,
            pots,
            to_act: self.to_act(),
            legal,
            decision,
            you,
            seats,
        }
    }

    fn in_hand(&self, seat: SeatNo) -> bool {
        self.hand
            .as_ref()
            .and_then(|h| h.player(seat))
            .is_some_and(|p| !p.folded)
    }

    fn revealed_cards(
        &self,
        seat: SeatNo,
        player: &PlayerId,
        you: Option<SeatNo>,
    ) -> Option<[Card; 2]> {
        let r = self.reveal.as_ref()?;
        let (_, _, cards) = r.holes.iter().find(|(s, p, _)| *s == seat && p == player)?;
        (you == Some(seat) || r.shown.contains(&seat)).then_some(*cards)
    }
}
