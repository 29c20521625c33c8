//! The rules core over arbitrary command sequences: a table config (sane or
//! not) and commands chosen against the table as it stands (the seat to act,
//! the open decision, amounts at the edges of the legal range) or entirely
//! raw (any seat, hand, decision, amount, a broken deck).
//!
//! Properties, after every command: no panic; a refusal is a `RuleError`
//! other than `Internal` and leaves the table exactly as it was; chips
//! enter only with a `seated` event and leave only with a `left` event; the
//! stacks, bets and pots a viewer sees add up to the table's chips; a legal
//! action offered to the seat to act is accepted; a finished hand's summary
//! ends with the chips it started with.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use pitboss::game::{
    standard_deck, Action, Card, Chips, Command, EventKind, Game, LegalAction, PlayerId, RuleError,
    SeatNo, TableConfig, VoidReason,
};

#[derive(Arbitrary, Debug)]
enum ConfigIn {
    /// Blinds, ante and buy-ins in the proportions operators use.
    Shaped {
        small_blind: u16,
        big_blind_extra: u16,
        ante: u16,
        seats: u8,
        min_big_blinds: u8,
        max_extra_big_blinds: u16,
    },
    /// Anything at all, overflowing totals included.
    Raw {
        small_blind: u64,
        big_blind: u64,
        ante: u64,
        seats: u8,
        min_buy_in: u64,
        max_buy_in: u64,
    },
}

impl ConfigIn {
    fn config(&self) -> TableConfig {
        match *self {
            ConfigIn::Shaped {
                small_blind,
                big_blind_extra,
                ante,
                seats,
                min_big_blinds,
                max_extra_big_blinds,
            } => {
                let sb = u64::from(small_blind);
                let bb = sb + u64::from(big_blind_extra);
                let min = bb * (1 + u64::from(min_big_blinds));
                TableConfig {
                    small_blind: Chips(sb),
                    big_blind: Chips(bb),
                    ante: Chips(u64::from(ante)),
                    seats: TableConfig::MIN_SEATS + seats % 9,
                    min_buy_in: Chips(min),
                    max_buy_in: Chips(min + bb * u64::from(max_extra_big_blinds)),
                }
            }
            ConfigIn::Raw {
                small_blind,
                big_blind,
                ante,
                seats,
                min_buy_in,
                max_buy_in,
            } => TableConfig {
                small_blind: Chips(small_blind),
                big_blind: Chips(big_blind),
                ante: Chips(ante),
                seats,
                min_buy_in: Chips(min_buy_in),
                max_buy_in: Chips(max_buy_in),
            },
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum SeatIn {
    ToAct,
    Raw(u8),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum NumberIn {
    Current,
    Off(i8),
    Raw(u64),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum AmountIn {
    /// The legal minimum (of a bet or raise), or the buy-in minimum.
    Min,
    Max,
    /// A point between the minimum and the maximum.
    Between(u16),
    Raw(u64),
}

#[derive(Arbitrary, Debug, Clone)]
enum DeckIn {
    Shuffled(u64),
    /// Card indices: short, long or repeated decks included.
    Raw(Vec<u8>),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum ActionIn {
    Fold,
    Check,
    Call,
    AllIn,
    Bet(AmountIn),
    Raise(AmountIn),
}

#[derive(Arbitrary, Debug, Clone)]
enum Op {
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
    Void {
        not_recorded: bool,
    },
    /// One of the legal actions offered to the seat to act, keeping hands
    /// going deep.
    Legal {
        pick: u8,
        amount: AmountIn,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    config: ConfigIn,
    ops: Vec<Op>,
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

/// The raise (or bet) range offered to the seat to act, or a made-up one.
fn raise_range(game: &Game) -> (Chips, Chips) {
    game.legal_actions()
        .iter()
        .find_map(|l| match *l {
            LegalAction::Bet { min, max } | LegalAction::Raise { min, max } => Some((min, max)),
            _ => None,
        })
        .unwrap_or((game.config().big_blind, game.config().max_buy_in))
}

fn deck(d: &DeckIn) -> Vec<Card> {
    match d {
        DeckIn::Shuffled(seed) => {
            let mut deck = standard_deck();
            let mut x = seed | 1;
            for i in (1..deck.len()).rev() {
                // xorshift64: the engine takes any deck; the fuzzer's
                // seed decides the order.
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let j = (x % (i as u64 + 1)) as usize;
                deck.swap(i, j);
            }
            deck
        }
        DeckIn::Raw(cards) => cards
            .iter()
            .filter_map(|&i| Card::from_index(i % 52))
            .collect(),
    }
}

fn action(game: &Game, a: ActionIn) -> Action {
    let (min, max) = raise_range(game);
    match a {
        ActionIn::Fold => Action::Fold,
        ActionIn::Check => Action::Check,
        ActionIn::Call => Action::Call,
        ActionIn::AllIn => Action::AllIn,
        ActionIn::Bet(x) => Action::Bet(amount(min, max, x)),
        ActionIn::Raise(x) => Action::Raise(amount(min, max, x)),
    }
}

/// The command `op` stands for at this table; `None` when it needs a seat
/// to act and there is none. The flag marks a legal action.
fn command(game: &Game, op: &Op) -> Option<(Command, bool)> {
    let hand_no = game.hand_no();
    let decision_no = game.decision().unwrap_or(0);
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
            action: a,
        } => Command::Act {
            hand: number(hand_no, *hand),
            seat: seat(game, *s),
            decision: number(decision_no, *decision),
            action: action(game, *a),
        },
        Op::Timeout { seat: s, hand } => Command::Timeout {
            hand: number(hand_no, *hand),
            seat: seat(game, *s),
        },
        Op::Void { not_recorded } => Command::VoidHand {
            reason: if *not_recorded {
                VoidReason::NotRecorded
            } else {
                VoidReason::Shutdown
            },
        },
        Op::Legal { pick, amount: a } => {
            let to_act = game.to_act()?;
            let legal = game.legal_actions();
            let chosen = *legal.get(usize::from(*pick) % legal.len().max(1))?;
            let action = match chosen {
                LegalAction::Fold => Action::Fold,
                LegalAction::Check => Action::Check,
                LegalAction::Call { .. } => Action::Call,
                LegalAction::AllIn { .. } => Action::AllIn,
                LegalAction::Bet { min, max } => Action::Bet(amount(min, max, clamp(*a))),
                LegalAction::Raise { min, max } => Action::Raise(amount(min, max, clamp(*a))),
            };
            return Some((
                Command::Act {
                    hand: hand_no,
                    seat: to_act,
                    decision: decision_no,
                    action,
                },
                true,
            ));
        }
    };
    Some((cmd, false))
}

/// A raw amount would leave the legal range; keep a legal pick legal.
fn clamp(a: AmountIn) -> AmountIn {
    match a {
        AmountIn::Raw(v) => AmountIn::Between(v as u16),
        other => other,
    }
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

fn check(game: &mut Game, cmd: Command, legal: bool) {
    let before = game.clone();
    match game.apply(cmd.clone()) {
        Err(e) => {
            assert!(
                !matches!(e, RuleError::Internal(_) | RuleError::BadConfig(_)),
                "{cmd:?} refused with {e:?}"
            );
            assert!(!legal, "legal {cmd:?} refused: {e:?}");
            assert_eq!(*game, before, "refused {cmd:?} changed the table");
        }
        Ok(events) => {
            let mut expected = i128::from(before.total_chips().0);
            for e in &events {
                match &e.kind {
                    EventKind::Seated { stack, .. } => expected += i128::from(stack.0),
                    EventKind::Left { stack, .. } => expected -= i128::from(stack.0),
                    EventKind::HandEnded { .. } => {
                        let s = game.last_summary().expect("a summary at hand end");
                        let start: u128 = s.seats.iter().map(|r| u128::from(r.start_stack.0)).sum();
                        let end: u128 = s.seats.iter().map(|r| u128::from(r.end_stack.0)).sum();
                        assert_eq!(start, end, "hand {} created or destroyed chips", s.hand);
                    }
                    _ => {}
                }
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
        }
    }
}

fuzz_target!(|input: Input| {
    let config = input.config.config();
    let mut game = match Game::new(config.clone()) {
        Ok(game) => game,
        Err(e) => {
            assert!(matches!(e, RuleError::BadConfig(_)), "{config:?}: {e:?}");
            assert!(config.validate().is_err());
            return;
        }
    };
    for op in &input.ops {
        if let Some((cmd, legal)) = command(&game, op) {
            check(&mut game, cmd, legal);
        }
    }
});
