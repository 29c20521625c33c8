//! The No-Limit Texas hold'em table state machine.
//!
//! `Game::apply` is the only way to change a table. It works on a copy and
//! commits the copy only when the whole command succeeded, so a refused
//! command leaves the table exactly as it was, whatever step refused it.
//!
//! The state types and the small accessors every stage shares live here;
//! each stage of play (seating, dealing, betting, showdown, views) is an
//! `impl Game` block in a child module. Children see this module's private
//! fields, so the state stays private without widening any visibility; only
//! the steps the stages call on each other are `pub(super)`.

use serde::{Deserialize, Serialize};

use super::cards::Card;
use super::chips::Chips;
use super::pots::Stake;

pub use super::error::RuleError;
pub use super::protocol::*;
pub use super::table::*;

mod betting;
mod dealing;
mod seating;
mod showdown;
mod view;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Occupant {
    player: PlayerId,
    stack: Chips,
    sitting_out: bool,
    /// Asked to leave while dealt into the hand in progress; the seat is
    /// vacated when that hand ends.
    leaving: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Player {
    seat: SeatNo,
    start_stack: Chips,
    hole: [Card; 2],
    /// Chips put in on the current street (antes excluded: they are dead).
    bet: Chips,
    /// Chips put in during the whole hand, antes included.
    committed: Chips,
    folded: bool,
    all_in: bool,
    /// Has acted voluntarily on this street.
    acted: bool,
    /// The street's bet level right after this player last acted. A player
    /// who has acted may raise again only once the level has risen by a full
    /// raise since then, which is what keeps short all-ins from reopening the
    /// betting while several short all-ins adding up to a full raise do.
    matched: Chips,
}

impl Player {
    fn can_act(&self) -> bool {
        !self.folded && !self.all_in
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Hand {
    no: u64,
    /// Button before this hand, restored if the hand is voided.
    prev_button: Option<SeatNo>,
    button: SeatNo,
    deck: Vec<Card>,
    next_card: usize,
    board: Vec<Card>,
    street: Street,
    /// Dealt-in players in seat order.
    players: Vec<Player>,
    to_act: Option<SeatNo>,
    /// Highest bet on this street that the others must match. Pre-flop it
    /// starts at the big blind even if the big blind could not post it all.
    current_bet: Chips,
    /// Size of the last full bet or raise on this street (at least the big
    /// blind): the smallest legal raise increment.
    min_raise: Chips,
    last_aggressor: Option<SeatNo>,
    /// Turns opened so far in this hand; the open one's number.
    decision: u64,
}

impl Hand {
    fn player(&self, seat: SeatNo) -> Option<&Player> {
        self.players.iter().find(|p| p.seat == seat)
    }

    fn player_mut(&mut self, seat: SeatNo) -> Option<&mut Player> {
        self.players.iter_mut().find(|p| p.seat == seat)
    }

    /// The dealt-in seats clockwise from just after `start`.
    fn seats_after(&self, start: SeatNo) -> Vec<SeatNo> {
        let seats: Vec<SeatNo> = self.players.iter().map(|p| p.seat).collect();
        clockwise_after(&seats, start)
    }

    fn live_count(&self) -> usize {
        self.players.iter().filter(|p| !p.folded).count()
    }

    fn needs_action(&self, p: &Player) -> bool {
        p.can_act() && (!p.acted || p.bet < self.current_bet)
    }

    fn round_complete(&self) -> bool {
        let mut actors = self.players.iter().filter(|p| p.can_act());
        let (first, second) = (actors.next(), actors.next());
        match (first, second) {
            (None, _) => true,
            // A lone player who can still act has nobody to bet against: once
            // they have matched every live opponent there is nothing to decide.
            (Some(only), None) => {
                let top_other = self
                    .players
                    .iter()
                    .filter(|p| !p.folded && p.seat != only.seat)
                    .map(|p| p.bet)
                    .max()
                    .unwrap_or(Chips::ZERO);
                only.bet >= top_other
            }
            _ => !self.players.iter().any(|p| self.needs_action(p)),
        }
    }

    /// Someone other than `seat` could still respond to a bet.
    fn opponent_can_respond(&self, seat: SeatNo) -> bool {
        self.players.iter().any(|p| p.seat != seat && p.can_act())
    }

    fn may_raise(&self, p: &Player) -> bool {
        let reopened = !p.acted
            || p.matched
                .checked_add(self.min_raise)
                .is_some_and(|t| self.current_bet >= t);
        reopened && self.opponent_can_respond(p.seat)
    }

    /// Each player's chips in the pots, with or without the bets of the
    /// street in progress (which the view shows per seat instead).
    fn stakes(&self, with_current_bets: bool) -> Vec<Stake> {
        self.players
            .iter()
            .map(|p| Stake {
                seat: p.seat,
                committed: if with_current_bets {
                    p.committed
                } else {
                    p.committed.saturating_sub(p.bet)
                },
                live: !p.folded,
            })
            .collect()
    }

    fn draw(&mut self, n: usize) -> Result<Vec<Card>, RuleError> {
        let end = self.next_card + n;
        let cards = self
            .deck
            .get(self.next_card..end)
            .ok_or_else(|| RuleError::Internal("deck exhausted".into()))?
            .to_vec();
        self.next_card = end;
        Ok(cards)
    }
}

/// Cards of the last hand that ended, kept so that the table can still show
/// them between hands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Reveal {
    board: Vec<Card>,
    holes: Vec<(SeatNo, PlayerId, [Card; 2])>,
    shown: Vec<SeatNo>,
}

/// A table: seats, button, and the hand in progress if any.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Game {
    config: TableConfig,
    hand_no: u64,
    button: Option<SeatNo>,
    seats: Vec<Option<Occupant>>,
    hand: Option<Hand>,
    last_summary: Option<HandSummary>,
    reveal: Option<Reveal>,
}

fn event(kind: EventKind) -> Event {
    Event {
        to: Audience::All,
        kind,
    }
}

/// A seat's action (forced bets included) in hand `hand`, told to everyone.
fn action_event(hand: u64, seat: SeatNo, action: ActionKind, amount: Chips) -> Event {
    event(EventKind::Action {
        hand,
        seat,
        action,
        amount,
    })
}

/// First seat of `sorted` strictly after `after` going clockwise, wrapping
/// round; the lowest seat when there is no `after`.
fn next_after(sorted: &[SeatNo], after: Option<SeatNo>) -> Option<SeatNo> {
    match after {
        Some(a) => sorted
            .iter()
            .copied()
            .find(|&s| s > a)
            .or_else(|| sorted.first().copied()),
        None => sorted.first().copied(),
    }
}

/// `seats` (sorted) reordered clockwise starting just after `start`, so
/// `start` itself, if present, comes last.
fn clockwise_after(seats: &[SeatNo], start: SeatNo) -> Vec<SeatNo> {
    let mut v: Vec<SeatNo> = seats.iter().copied().filter(|&s| s > start).collect();
    v.extend(seats.iter().copied().filter(|&s| s <= start));
    v
}

impl Game {
    pub fn new(config: TableConfig) -> Result<Game, RuleError> {
        config.validate()?;
        let seats = vec![None; usize::from(config.seats)];
        Ok(Game {
            config,
            hand_no: 0,
            button: None,
            seats,
            hand: None,
            last_summary: None,
            reveal: None,
        })
    }

    /// Rebuilds a table at a hand boundary from persisted facts. Every
    /// player comes back sitting in; stacks may be anything (including zero)
    /// as long as the table total fits in a `u64`.
    pub fn resume(
        config: TableConfig,
        hand_no: u64,
        button: Option<SeatNo>,
        seats: Vec<(SeatNo, PlayerId, Chips)>,
    ) -> Result<Game, RuleError> {
        let mut game = Game::new(config)?;
        game.hand_no = hand_no;
        if let Some(b) = button {
            game.check_seat_range(b)?;
        }
        game.button = button;
        for (seat, player, stack) in seats {
            let i = game.free_seat_for(seat, &player)?;
            game.place(i, player, stack)?;
        }
        Ok(game)
    }

    /// Applies one command. On error nothing changes.
    pub fn apply(&mut self, cmd: Command) -> Result<Vec<Event>, RuleError> {
        let mut next = self.clone();
        let mut events = Vec::new();
        next.apply_in_place(cmd, &mut events)?;
        *self = next;
        Ok(events)
    }

    fn apply_in_place(&mut self, cmd: Command, ev: &mut Vec<Event>) -> Result<(), RuleError> {
        match cmd {
            Command::Sit {
                seat,
                player,
                stack,
            } => self.sit(seat, player, stack, ev),
            Command::Leave { seat } => self.leave(seat, ev),
            Command::SitOut { seat } => self.set_sitting_out(seat, true, ev),
            Command::SitIn { seat } => self.set_sitting_out(seat, false, ev),
            Command::StartHand { deck } => self.start_hand(deck, ev),
            Command::Act {
                hand,
                seat,
                decision,
                action,
            } => {
                self.check_decision(hand, decision)?;
                self.check_turn(hand, seat)?;
                self.act(seat, action, ev)
            }
            Command::Timeout { hand, seat } => {
                self.check_turn(hand, seat)?;
                let h = self.hand_ref()?;
                let owes = h.player(seat).is_some_and(|p| p.bet < h.current_bet);
                let action = if owes { Action::Fold } else { Action::Check };
                self.act(seat, action, ev)
            }
            Command::VoidHand { reason } => self.void_hand(reason, ev),
        }
    }

    fn occupied(&self) -> impl Iterator<Item = (SeatNo, &Occupant)> + '_ {
        self.seats
            .iter()
            .enumerate()
            .filter_map(|(i, o)| Some((SeatNo::try_from(i).ok()?, o.as_ref()?)))
    }

    fn total_chips_checked(&self) -> Result<Chips, RuleError> {
        let stacks = Chips::checked_sum(self.occupied().map(|(_, o)| o.stack));
        let committed = Chips::checked_sum(
            self.hand
                .iter()
                .flat_map(|h| h.players.iter().map(|p| p.committed)),
        );
        stacks
            .zip(committed)
            .and_then(|(a, b)| a.checked_add(b))
            .ok_or(RuleError::Overflow)
    }

    fn check_seat_range(&self, seat: SeatNo) -> Result<usize, RuleError> {
        let i = usize::from(seat);
        if i < self.seats.len() {
            Ok(i)
        } else {
            Err(RuleError::SeatOutOfRange)
        }
    }

    fn occupant(&self, seat: SeatNo) -> Result<&Occupant, RuleError> {
        self.seats
            .get(usize::from(seat))
            .and_then(|o| o.as_ref())
            .ok_or(RuleError::NotSeated)
    }

    fn occupant_mut(&mut self, seat: SeatNo) -> Result<&mut Occupant, RuleError> {
        let i = self.check_seat_range(seat)?;
        self.seats[i].as_mut().ok_or(RuleError::NotSeated)
    }

    fn stack(&self, seat: SeatNo) -> Chips {
        self.seats
            .get(usize::from(seat))
            .and_then(|o| o.as_ref())
            .map_or(Chips::ZERO, |o| o.stack)
    }

    /// Seats that would be dealt into a hand starting now.
    fn eligible_seats(&self) -> Vec<SeatNo> {
        self.occupied()
            .filter(|(_, o)| !o.sitting_out && !o.leaving && !o.stack.is_zero())
            .map(|(s, _)| s)
            .collect()
    }

    fn hand_ref(&self) -> Result<&Hand, RuleError> {
        self.hand.as_ref().ok_or(RuleError::NoHandInProgress)
    }

    fn hand_mut(&mut self) -> Result<&mut Hand, RuleError> {
        self.hand.as_mut().ok_or(RuleError::NoHandInProgress)
    }
}
