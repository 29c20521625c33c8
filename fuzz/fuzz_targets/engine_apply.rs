//! The rules core over arbitrary command sequences: a table config (sane or
//! not) and commands chosen against the table as it stands (the seat to act,
//! the open decision, amounts at the edges of the legal range) or entirely
//! raw (any seat, hand, decision, amount, a broken deck).
//!
//! The properties are `pitboss::games::holdem::rules::checks::check_sequence`, the ones the
//! command-sequence property tests assert too; this target only turns the
//! fuzzer's bytes into its input, at most `MAX_OPS` commands of it.

#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use pitboss::games::holdem::rules::checks;
use pitboss::games::holdem::rules::{Chips, TableConfig, VoidReason};

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
            // 16-bit inputs keep every total far from overflowing.
            ConfigIn::Shaped {
                small_blind,
                big_blind_extra,
                ante,
                seats,
                min_big_blinds,
                max_extra_big_blinds,
            } => checks::shaped_config(
                small_blind.into(),
                big_blind_extra.into(),
                ante.into(),
                seats,
                min_big_blinds.into(),
                max_extra_big_blinds.into(),
            ),
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
    Min,
    Max,
    Between(u16),
    Raw(u64),
}

#[derive(Arbitrary, Debug, Clone)]
enum DeckIn {
    Shuffled(u64),
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
    Legal {
        pick: u8,
        amount: AmountIn,
    },
}

/// Commands per input, as many as the property tests play (`0..200`):
/// enough for several hands at a full table. Bytes past them are not read,
/// so an input costs at most this many commands (with `-max_len=4096`, few
/// inputs reach it).
const MAX_OPS: usize = 200;

#[derive(Debug)]
struct Input {
    config: ConfigIn,
    ops: Vec<Op>,
}

impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let config = u.arbitrary()?;
        let mut ops = Vec::new();
        while ops.len() < MAX_OPS && !u.is_empty() {
            match u.arbitrary() {
                Ok(op) => ops.push(op),
                Err(_) => break,
            }
        }
        Ok(Input { config, ops })
    }
}

impl From<SeatIn> for checks::SeatIn {
    fn from(s: SeatIn) -> Self {
        match s {
            SeatIn::ToAct => checks::SeatIn::ToAct,
            SeatIn::Raw(s) => checks::SeatIn::Raw(s),
        }
    }
}

impl From<NumberIn> for checks::NumberIn {
    fn from(n: NumberIn) -> Self {
        match n {
            NumberIn::Current => checks::NumberIn::Current,
            NumberIn::Off(d) => checks::NumberIn::Off(d),
            NumberIn::Raw(v) => checks::NumberIn::Raw(v),
        }
    }
}

impl From<AmountIn> for checks::AmountIn {
    fn from(a: AmountIn) -> Self {
        match a {
            AmountIn::Min => checks::AmountIn::Min,
            AmountIn::Max => checks::AmountIn::Max,
            AmountIn::Between(x) => checks::AmountIn::Between(x),
            AmountIn::Raw(v) => checks::AmountIn::Raw(v),
        }
    }
}

impl From<ActionIn> for checks::ActionIn {
    fn from(a: ActionIn) -> Self {
        match a {
            ActionIn::Fold => checks::ActionIn::Fold,
            ActionIn::Check => checks::ActionIn::Check,
            ActionIn::Call => checks::ActionIn::Call,
            ActionIn::AllIn => checks::ActionIn::AllIn,
            ActionIn::Bet(x) => checks::ActionIn::Bet(x.into()),
            ActionIn::Raise(x) => checks::ActionIn::Raise(x.into()),
        }
    }
}

impl From<&Op> for checks::Op {
    fn from(op: &Op) -> Self {
        match op.clone() {
            Op::Sit {
                seat,
                player,
                buy_in,
            } => checks::Op::Sit {
                seat: seat.into(),
                player,
                buy_in: buy_in.into(),
            },
            Op::Leave(s) => checks::Op::Leave(s.into()),
            Op::SitOut(s) => checks::Op::SitOut(s.into()),
            Op::SitIn(s) => checks::Op::SitIn(s.into()),
            Op::StartHand(DeckIn::Shuffled(seed)) => {
                checks::Op::StartHand(checks::DeckIn::Shuffled(seed))
            }
            Op::StartHand(DeckIn::Raw(cards)) => checks::Op::StartHand(checks::DeckIn::Raw(cards)),
            Op::Act {
                seat,
                hand,
                decision,
                action,
            } => checks::Op::Act {
                seat: seat.into(),
                hand: hand.into(),
                decision: decision.into(),
                action: action.into(),
            },
            Op::Timeout { seat, hand } => checks::Op::Timeout {
                seat: seat.into(),
                hand: hand.into(),
            },
            Op::Void { not_recorded } => checks::Op::Void(if not_recorded {
                VoidReason::NotRecorded
            } else {
                VoidReason::Shutdown
            }),
            Op::Legal { pick, amount } => checks::Op::Legal {
                pick,
                amount: amount.into(),
            },
        }
    }
}

fuzz_target!(|input: Input| {
    let ops: Vec<checks::Op> = input.ops.iter().map(checks::Op::from).collect();
    checks::check_sequence(&input.config.config(), &ops);
});
