//! The properties the `engine_apply` fuzz target and the command-sequence
//! property tests both assert, kept in one place so that the two check
//! exactly the same thing on the inputs each of them grows.
//!
//! An input is a table config (sane or not) and a sequence of [`Op`]s:
//! commands chosen against the table as it stands (the seat to act, the
//! open decision, amounts at the edges of the legal range) or entirely raw
//! (any seat, hand, decision, amount, a broken deck).
//!
//! After every command: no panic; a refusal is a `RuleError` other than
//! `Internal` and leaves the table exactly as it was; chips enter only with
//! a `seated` event and leave only with a `left` event; the stacks, bets
//! and pots a viewer sees add up to the table's chips; a legal action
//! offered to the seat to act is accepted; a finished hand's summary ends
//! with the chips it started with; a hand in progress has a seat to act.

use rand::SeedableRng;

use crate::games::holdem::rules::{
    shuffled_deck, Action, Card, Chips, Command, Event, EventKind, Game, LegalAction, PlayerId,
    RuleError, SeatNo, TableConfig, VoidReason,
};

#[derive(Clone, Copy, Debug)]
pub enum SeatIn {
    ToAct,
    Raw(u8),
}

/// A hand or decision number: the table's own, one near it, or any.
#[derive(Clone, Copy, Debug)]
pub enum NumberIn {
    Current,
    Off(i8),
    Raw(u64),
}

#[derive(Clone, Copy, Debug)]
pub enum AmountIn {
    /// The legal minimum (of a bet or raise), or the buy-in minimum.
    Min,
    Max,
    /// A point between the minimum and the maximum, in 1/65535ths.
    Between(u16),
    Raw(u64),
}

#[derive(Clone, Debug)]
pub enum DeckIn {
    /// A full deck shuffled from a seed.
    Shuffled(u64),
    /// Card indices: short, long or repeated decks included.
    Raw(Vec<u8>),
}

#[derive(Clone, Copy, Debug)]
pub enum ActionIn {
    Fold,
    Check,
    Call,
    AllIn,
    Bet(AmountIn),
    Raise(AmountIn),
}

#[derive(Clone, Debug)]
pub enum Op {
    Sit {
        seat: SeatIn,
        player: u8,
        buy_in: AmountIn,
    },
    Leave(SeatIn),
    SitOut(SeatIn),
    SitIn(SeatIn),
    StartHand(DeckIn),
    Act {
        seat: SeatIn,
        hand: NumberIn,
        decision: NumberIn,
        action: ActionIn,
    },
    Timeout {
        seat: SeatIn,
        hand: NumberIn,
    },
    Void(VoidReason),
    /// One of the legal actions offered to the seat to act, which keeps
    /// hands going deep; a raw amount is taken as a point in the range.
    Legal {
        pick: u8,
        amount: AmountIn,
    },
}

/// Blinds, ante and buy-ins in the proportions operators use: the big
/// blind is the small one plus `big_blind_extra`, and the buy-in range
/// starts `min_big_blinds` big blinds above one. The callers keep the
/// inputs small enough that no total overflows.
pub fn shaped_config(
    small_blind: u64,
    big_blind_extra: u64,
    ante: u64,
    seats: u8,
    min_big_blinds: u64,
    max_extra_big_blinds: u64,
) -> TableConfig {
    let big_blind = small_blind + big_blind_extra;
    let min = big_blind * (1 + min_big_blinds);
    TableConfig {
        small_blind: Chips(small_blind),
        big_blind: Chips(big_blind),
        ante: Chips(ante),
        seats: TableConfig::MIN_SEATS + seats % 9,
        min_buy_in: Chips(min),
        max_buy_in: Chips(min + big_blind * max_extra_big_blinds),
    }
}

/// Opens a table with `config` and applies every op to it, checking the
/// properties in the module docs after each one.
///
/// # Panics
///
/// When a property does not hold, naming the config or the command.
pub fn check_sequence(config: &TableConfig, ops: &[Op]) {
    let mut game = match Game::new(config.clone()) {
        Ok(game) => game,
        Err(e) => {
            assert!(matches!(e, RuleError::BadConfig(_)), "{config:?}: {e:?}");
            assert!(config.validate().is_err(), "{config:?} refused: {e:?}");
            return;
        }
    };
    // The table as it stood before the command under check. It is copied
    // again only after a command is accepted: a refused one must leave the
    // table exactly as it was, so the copy still holds for the next one,
    // and the many refused commands cost no copy at all.
    let mut before = game.clone();
    for op in ops {
        if let Some((cmd, legal)) = command(&game, op) {
            if check_command(&mut game, &before, cmd, legal) {
                before = game.clone();
            }
        }
    }
}

fn seat(game: &Game, s: SeatIn) -> SeatNo {
    match s {
        SeatIn::ToAct => game.to_act().unwrap_or(0),
        SeatIn::Raw(s) => s,
    }
}

fn number(current: u64, n: NumberIn) -> u64 {
    match n {
        NumberIn::Current => current,
        NumberIn::Off(d) => current.wrapping_add_signed(i64::from(d)),
        NumberIn::Raw(v) => v,
    }
}

fn amount(min: Chips, max: Chips, a: AmountIn) -> Chips {
    match a {
        AmountIn::Min => min,
        AmountIn::Max => max,
        AmountIn::Between(x) => {
            let span = u128::from(max.0.saturating_sub(min.0));
            let step = span * u128::from(x) / u128::from(u16::MAX);
            Chips(
                min.0
                    .saturating_add(u64::try_from(step).unwrap_or(u64::MAX)),
            )
        }
        AmountIn::Raw(v) => Chips(v),
    }
}

fn deck(d: &DeckIn) -> Vec<Card> {
    match d {
        DeckIn::Shuffled(seed) => shuffled_deck(&mut rand::rngs::StdRng::seed_from_u64(*seed)),
        DeckIn::Raw(cards) => cards
            .iter()
            .filter_map(|&i| Card::from_index(i % 52))
            .collect(),
    }
}

/// The command `op` stands for at this table, and whether it is a legal
/// action offered to the seat to act; `None` when it needs a seat to act
/// and there is none.
fn command(game: &Game, op: &Op) -> Option<(Command, bool)> {
    let hand_no = game.hand_no();
    let decision_no = game.decision().unwrap_or(0);
    // Worked out only for the bets and raises that need it.
    let raise_range = || {
        game.legal_actions()
            .iter()
            .find_map(|l| match *l {
                LegalAction::Bet { min, max } | LegalAction::Raise { min, max } => Some((min, max)),
                _ => None,
            })
            .unwrap_or((game.config().big_blind, game.config().max_buy_in))
    };
    let cmd = match op {
        Op::Sit {
            seat: s,
            player,
            buy_in,
        } => {
            let cfg = game.config();
            Command::Sit {
                seat: seat(game, *s),
                player: PlayerId(format!("p{}", player % 16)),
                stack: amount(cfg.min_buy_in, cfg.max_buy_in, *buy_in),
            }
        }
        Op::Leave(s) => Command::Leave {
            seat: seat(game, *s),
        },
        Op::SitOut(s) => Command::SitOut {
            seat: seat(game, *s),
        },
        Op::SitIn(s) => Command::SitIn {
            seat: seat(game, *s),
        },
        Op::StartHand(d) => Command::StartHand { deck: deck(d) },
        Op::Act {
            seat: s,
            hand,
            decision,
            action,
        } => {
            let action = match *action {
                ActionIn::Fold => Action::Fold,
                ActionIn::Check => Action::Check,
                ActionIn::Call => Action::Call,
                ActionIn::AllIn => Action::AllIn,
                ActionIn::Bet(x) => {
                    let (min, max) = raise_range();
                    Action::Bet(amount(min, max, x))
                }
                ActionIn::Raise(x) => {
                    let (min, max) = raise_range();
                    Action::Raise(amount(min, max, x))
                }
            };
            Command::Act {
                hand: number(hand_no, *hand),
                seat: seat(game, *s),
                decision: number(decision_no, *decision),
                action,
            }
        }
        Op::Timeout { seat: s, hand } => Command::Timeout {
            hand: number(hand_no, *hand),
            seat: seat(game, *s),
        },
        Op::Void(reason) => Command::VoidHand { reason: *reason },
        Op::Legal { pick, amount: x } => {
            let to_act = game.to_act()?;
            let legal = game.legal_actions();
            let chosen = *legal.get(usize::from(*pick) % legal.len().max(1))?;
            // A raw amount would leave the legal range; keep a legal pick legal.
            let x = match *x {
                AmountIn::Raw(v) => AmountIn::Between(v as u16),
                other => other,
            };
            let action = match chosen {
                LegalAction::Fold => Action::Fold,
                LegalAction::Check => Action::Check,
                LegalAction::Call { .. } => Action::Call,
                LegalAction::AllIn { .. } => Action::AllIn,
                LegalAction::Bet { min, max } => Action::Bet(amount(min, max, x)),
                LegalAction::Raise { min, max } => Action::Raise(amount(min, max, x)),
            };
            let cmd = Command::Act {
                hand: hand_no,
                seat: to_act,
                decision: decision_no,
                action,
            };
            return Some((cmd, true));
        }
    };
    Some((cmd, false))
}

/// The chips `events` bring to the table: a seated player's stack comes
/// in, a leaving player's goes out, and nothing else may move the total.
pub fn chips_brought(events: &[Event]) -> i128 {
    events
        .iter()
        .map(|e| match &e.kind {
            EventKind::Seated { stack, .. } => i128::from(stack.0),
            EventKind::Left { stack, .. } => -i128::from(stack.0),
            _ => 0,
        })
        .sum()
}

/// Stacks, current bets and pots as a viewer sees them.
fn visible_chips(game: &Game) -> u128 {
    let view = game.view_for(None);
    let seats: u128 = view
        .seats
        .iter()
        .map(|s| u128::from(s.stack.0) + u128::from(s.bet.0))
        .sum();
    let pots: u128 = view.pots.iter().map(|p| u128::from(p.amount.0)).sum();
    seats + pots
}

/// Applies `cmd` to `game`, which stands as `before` does, and checks the
/// answer; true when the command was accepted.
fn check_command(game: &mut Game, before: &Game, cmd: Command, legal: bool) -> bool {
    match game.apply(cmd.clone()) {
        Err(e) => {
            assert!(
                !matches!(e, RuleError::Internal(_) | RuleError::BadConfig(_)),
                "{cmd:?} refused with {e:?}"
            );
            assert!(!legal, "legal {cmd:?} refused: {e:?}");
            assert_eq!(&*game, before, "refused {cmd:?} changed the table");
            false
        }
        Ok(events) => {
            let expected = i128::from(before.total_chips().0) + chips_brought(&events);
            if events
                .iter()
                .any(|e| matches!(e.kind, EventKind::HandEnded { .. }))
            {
                let Some(s) = game.last_summary() else {
                    panic!("no summary after the hand ended by {cmd:?}");
                };
                let start: u128 = s.seats.iter().map(|r| u128::from(r.start_stack.0)).sum();
                let end: u128 = s.seats.iter().map(|r| u128::from(r.end_stack.0)).sum();
                assert_eq!(start, end, "hand {} created or destroyed chips", s.hand);
            }
            let total = game.total_chips();
            assert_eq!(i128::from(total.0), expected, "chips after {cmd:?}");
            assert_eq!(
                visible_chips(game),
                u128::from(total.0),
                "view after {cmd:?}"
            );
            if game.hand_in_progress() {
                assert!(
                    game.to_act().is_some(),
                    "a hand with nobody to act after {cmd:?}"
                );
            }
            true
        }
    }
}
