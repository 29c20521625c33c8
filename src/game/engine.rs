//! The No-Limit Texas hold'em table state machine.
//!
//! `Game::apply` is the only way to change a table. It works on a copy and
//! commits the copy only when the whole command succeeded, so a refused
//! command leaves the table exactly as it was, whatever step refused it.

use serde::{Deserialize, Serialize};

use super::cards::Card;
use super::chips::Chips;
use super::eval::{evaluate7, HandRank};
use super::pots::{self, Stake};

pub use super::error::RuleError;
pub use super::protocol::*;
pub use super::table::*;

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
}

impl Hand {
    fn player(&self, seat: SeatNo) -> Option<&Player> {
        self.players.iter().find(|p| p.seat == seat)
    }

    fn player_mut(&mut self, seat: SeatNo) -> Option<&mut Player> {
        self.players.iter_mut().find(|p| p.seat == seat)
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
            let i = game.check_seat_range(seat)?;
            if game.seats[i].is_some() {
                return Err(RuleError::SeatTaken);
            }
            if game.seat_of(&player).is_some() {
                return Err(RuleError::AlreadySeated);
            }
            game.total_chips_checked()?
                .checked_add(stack)
                .ok_or(RuleError::Overflow)?;
            game.seats[i] = Some(Occupant {
                player,
                stack,
                sitting_out: false,
                leaving: false,
            });
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

    pub fn legal_actions(&self) -> Vec<LegalAction> {
        match self.to_act() {
            Some(seat) => self.legal_for(seat),
            None => Vec::new(),
        }
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
        let legal = match (you, self.to_act()) {
            (Some(y), Some(t)) if y == t => self.legal_for(t),
            _ => Vec::new(),
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
            you,
            seats,
        }
    }

    // ----- internals -------------------------------------------------------

    fn occupied(&self) -> impl Iterator<Item = (SeatNo, &Occupant)> + '_ {
        self.seats
            .iter()
            .enumerate()
            .filter_map(|(i, o)| Some((SeatNo::try_from(i).ok()?, o.as_ref()?)))
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
            Command::Act { hand, seat, action } => {
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
            Command::VoidHand => self.void_hand(ev),
        }
    }

    fn sit(
        &mut self,
        seat: SeatNo,
        player: PlayerId,
        stack: Chips,
        ev: &mut Vec<Event>,
    ) -> Result<(), RuleError> {
        let i = self.check_seat_range(seat)?;
        if self.seats[i].is_some() {
            return Err(RuleError::SeatTaken);
        }
        if self.seat_of(&player).is_some() {
            return Err(RuleError::AlreadySeated);
        }
        if stack < self.config.min_buy_in || stack > self.config.max_buy_in {
            return Err(RuleError::BuyInOutOfRange);
        }
        self.total_chips_checked()?
            .checked_add(stack)
            .ok_or(RuleError::Overflow)?;
        self.seats[i] = Some(Occupant {
            player: player.clone(),
            stack,
            sitting_out: false,
            leaving: false,
        });
        ev.push(event(EventKind::Seated {
            seat,
            player,
            stack,
        }));
        Ok(())
    }

    fn leave(&mut self, seat: SeatNo, ev: &mut Vec<Event>) -> Result<(), RuleError> {
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
        if self.to_act() == Some(seat) {
            return self.act(seat, Action::Fold, ev);
        }
        let hand = self.hand_mut()?;
        let no = hand.no;
        let player = hand
            .player_mut(seat)
            .ok_or_else(|| RuleError::Internal("dealt-in player missing".into()))?;
        player.folded = true;
        let amount = player.bet;
        ev.push(event(EventKind::Action {
            hand: no,
            seat,
            action: ActionKind::Fold,
            amount,
        }));
        // Folding out of turn can end the hand or the betting round (e.g. it
        // leaves a single player who can still act, with nothing to call).
        let hand = self.hand_ref()?;
        if hand.live_count() <= 1 || hand.round_complete() {
            let from = hand.to_act.unwrap_or(hand.button);
            self.advance(from, ev)?;
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

    fn set_sitting_out(
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

    fn start_hand(&mut self, deck: Vec<Card>, ev: &mut Vec<Event>) -> Result<(), RuleError> {
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
                ev.push(event(EventKind::Action {
                    hand: no,
                    seat,
                    action: ActionKind::Ante,
                    amount: paid,
                }));
            }
        }
        for (seat, blind, kind) in [
            (sb, self.config.small_blind, ActionKind::SmallBlind),
            (bb, self.config.big_blind, ActionKind::BigBlind),
        ] {
            // A player already all-in from the ante has nothing left to post.
            if !self.post(seat, blind, true)?.is_zero() {
                let amount = self.hand_ref()?.player(seat).map_or(Chips::ZERO, |p| p.bet);
                ev.push(event(EventKind::Action {
                    hand: no,
                    seat,
                    action: kind,
                    amount,
                }));
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
    fn move_to_pot(
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

    fn check_turn(&self, hand_no: u64, seat: SeatNo) -> Result<(), RuleError> {
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

    fn legal_for(&self, seat: SeatNo) -> Vec<LegalAction> {
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

    fn act(&mut self, seat: SeatNo, action: Action, ev: &mut Vec<Event>) -> Result<(), RuleError> {
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
        ev.push(event(EventKind::Action {
            hand: no,
            seat,
            action: kind,
            amount,
        }));
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
    fn advance(&mut self, from: SeatNo, ev: &mut Vec<Event>) -> Result<(), RuleError> {
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
                let seats: Vec<SeatNo> = hand.players.iter().map(|p| p.seat).collect();
                let next = clockwise_after(&seats, from)
                    .into_iter()
                    .find(|&s| hand.player(s).is_some_and(|p| hand.needs_action(p)))
                    .ok_or_else(|| RuleError::Internal("open round with nobody to act".into()))?;
                hand.to_act = Some(next);
                let legal = self.legal_for(next);
                ev.push(event(EventKind::Turn {
                    hand: no,
                    seat: next,
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

    /// Ends the hand: returns any uncalled bet, shows down if more than one
    /// player is live, awards every pot, and vacates seats of leavers.
    fn finish(&mut self, ev: &mut Vec<Event>) -> Result<(), RuleError> {
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

        let order: Vec<SeatNo> = {
            let seats: Vec<SeatNo> = hand.players.iter().map(|p| p.seat).collect();
            clockwise_after(&seats, hand.button)
        };
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

    fn vacate_leavers(&mut self, ev: &mut Vec<Event>) -> Result<(), RuleError> {
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

    fn void_hand(&mut self, ev: &mut Vec<Event>) -> Result<(), RuleError> {
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
