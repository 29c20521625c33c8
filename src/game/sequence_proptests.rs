//! Arbitrary command sequences against `Game::apply`: a table config, sane
//! or not, and commands chosen against the table as it stands (the seat to
//! act, the open decision, amounts at the edges of the legal range) or
//! entirely raw (any seat, hand, decision or amount, broken decks). The
//! `engine_apply` fuzz target runs the same properties on inputs it grows.
//!
//! After every command: a refusal is a `RuleError` other than `Internal`
//! and leaves the table exactly as it was; chips enter only with a `seated`
//! event and leave only with a `left` event; the stacks, bets and pots a
//! viewer sees add up to the table's chips; a legal action offered to the
//! seat to act is accepted; a finished hand ends with the chips it started
//! with.

use proptest::prelude::*;

use super::*;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

#[derive(Clone, Copy, Debug)]
enum SeatIn {
    ToAct,
    Raw(u8),
}

#[derive(Clone, Copy, Debug)]
enum NumberIn {
    Current,
    Off(i8),
    Raw(u64),
}

#[derive(Clone, Copy, Debug)]
enum AmountIn {
    Min,
    Max,
    /// A point between the minimum and the maximum, in 1/65535ths.
    Between(u16),
    Raw(u64),
}

#[derive(Clone, Copy, Debug)]
enum ActionIn {
    Fold,
    Check,
    Call,
    AllIn,
    Bet(AmountIn),
    Raise(AmountIn),
}

#[derive(Clone, Debug)]
enum Op {
    Sit {
        seat: SeatIn,
        player: u8,
        buy_in: AmountIn,
    },
    Leave(SeatIn),
    SitOut(SeatIn),
    SitIn(SeatIn),
    /// A deck shuffled from a seed, or raw card indices (short, long or
    /// repeated).
    StartHand(Result<u64, Vec<u8>>),
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
    /// One of the legal actions offered to the seat to act.
    Legal {
        pick: u8,
        amount: u16,
    },
}

fn config() -> impl Strategy<Value = TableConfig> {
    let shaped = (
        0u64..=20,
        0u64..=40,
        0u64..=10,
        any::<u8>(),
        0u64..=60,
        0u64..=400,
    )
        .prop_map(|(sb, bb_extra, ante, seats, min_bbs, max_extra_bbs)| {
            let bb = sb + bb_extra;
            let min = bb * (1 + min_bbs);
            TableConfig {
                small_blind: Chips(sb),
                big_blind: Chips(bb),
                ante: Chips(ante),
                seats: TableConfig::MIN_SEATS + seats % 9,
                min_buy_in: Chips(min),
                max_buy_in: Chips(min + bb * max_extra_bbs),
            }
        });
    let raw = (
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        any::<u8>(),
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(|(sb, bb, ante, seats, min, max)| TableConfig {
            small_blind: Chips(sb),
            big_blind: Chips(bb),
            ante: Chips(ante),
            seats,
            min_buy_in: Chips(min),
            max_buy_in: Chips(max),
        });
    // Huge stakes: blinds and buy-ins near the top of what a table may hold.
    let huge = (1u64..=4, 2u8..=10).prop_map(|(k, seats)| {
        let max = u64::MAX / u64::from(seats);
        TableConfig {
            small_blind: Chips(max / 64 / k),
            big_blind: Chips(max / 32 / k),
            ante: Chips(max / 128),
            seats,
            min_buy_in: Chips(max / 2),
            max_buy_in: Chips(max),
        }
    });
    prop_oneof![6 => shaped, 1 => raw, 1 => huge]
}

fn seat_in() -> impl Strategy<Value = SeatIn> {
    prop_oneof![2 => Just(SeatIn::ToAct), 1 => (0u8..12).prop_map(SeatIn::Raw), 1 => any::<u8>().prop_map(SeatIn::Raw)]
}

fn number_in() -> impl Strategy<Value = NumberIn> {
    prop_oneof![
        6 => Just(NumberIn::Current),
        2 => any::<i8>().prop_map(NumberIn::Off),
        1 => any::<u64>().prop_map(NumberIn::Raw),
    ]
}

fn amount_in() -> impl Strategy<Value = AmountIn> {
    prop_oneof![
        Just(AmountIn::Min),
        Just(AmountIn::Max),
        any::<u16>().prop_map(AmountIn::Between),
        any::<u64>().prop_map(AmountIn::Raw),
        (0u64..=500).prop_map(AmountIn::Raw),
    ]
}

fn action_in() -> impl Strategy<Value = ActionIn> {
    prop_oneof![
        Just(ActionIn::Fold),
        Just(ActionIn::Check),
        Just(ActionIn::Call),
        Just(ActionIn::AllIn),
        amount_in().prop_map(ActionIn::Bet),
        amount_in().prop_map(ActionIn::Raise),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (seat_in(), any::<u8>(), amount_in()).prop_map(|(seat, player, buy_in)| Op::Sit { seat, player, buy_in }),
        1 => seat_in().prop_map(Op::Leave),
        1 => seat_in().prop_map(Op::SitOut),
        1 => seat_in().prop_map(Op::SitIn),
        3 => any::<u64>().prop_map(|s| Op::StartHand(Ok(s))),
        1 => prop::collection::vec(any::<u8>(), 0..60).prop_map(|d| Op::StartHand(Err(d))),
        3 => (seat_in(), number_in(), number_in(), action_in())
            .prop_map(|(seat, hand, decision, action)| Op::Act { seat, hand, decision, action }),
        1 => (seat_in(), number_in()).prop_map(|(seat, hand)| Op::Timeout { seat, hand }),
        1 => prop_oneof![Just(VoidReason::Shutdown), Just(VoidReason::NotRecorded)].prop_map(Op::Void),
        12 => (any::<u8>(), any::<u16>()).prop_map(|(pick, amount)| Op::Legal { pick, amount }),
    ]
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

fn deck(d: &Result<u64, Vec<u8>>) -> Vec<Card> {
    match d {
        Ok(seed) => {
            use rand::SeedableRng;
            shuffled_deck(&mut rand_chacha::ChaCha8Rng::seed_from_u64(*seed))
        }
        Err(cards) => cards
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
    let (raise_min, raise_max) = game
        .legal_actions()
        .iter()
        .find_map(|l| match *l {
            LegalAction::Bet { min, max } | LegalAction::Raise { min, max } => Some((min, max)),
            _ => None,
        })
        .unwrap_or((game.config().big_blind, game.config().max_buy_in));
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
                ActionIn::Bet(x) => Action::Bet(amount(raise_min, raise_max, x)),
                ActionIn::Raise(x) => Action::Raise(amount(raise_min, raise_max, x)),
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
            let between = AmountIn::Between(*x);
            let action = match chosen {
                LegalAction::Fold => Action::Fold,
                LegalAction::Check => Action::Check,
                LegalAction::Call { .. } => Action::Call,
                LegalAction::AllIn { .. } => Action::AllIn,
                LegalAction::Bet { min, max } => Action::Bet(amount(min, max, between)),
                LegalAction::Raise { min, max } => Action::Raise(amount(min, max, between)),
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

fn check(game: &mut Game, cmd: Command, legal: bool) -> Result<(), TestCaseError> {
    let before = game.clone();
    match game.apply(cmd.clone()) {
        Err(e) => {
            prop_assert!(
                !matches!(e, RuleError::Internal(_) | RuleError::BadConfig(_)),
                "{:?} refused with {:?}",
                cmd,
                e
            );
            prop_assert!(!legal, "legal {:?} refused: {:?}", cmd, e);
            prop_assert_eq!(&*game, &before, "refused {:?} changed the table", cmd);
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
                        prop_assert_eq!(start, end, "hand {} created or destroyed chips", s.hand);
                    }
                    _ => {}
                }
            }
            let total = game.total_chips();
            prop_assert_eq!(i128::from(total.0), expected, "chips after {:?}", cmd);
            prop_assert_eq!(
                visible_chips(game),
                u128::from(total.0),
                "view after {:?}",
                cmd
            );
            if game.hand_in_progress() {
                prop_assert!(game.to_act().is_some(), "nobody to act after {:?}", cmd);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// No command sequence creates or destroys a chip, and every refusal
    /// is a typed rule error that changes nothing.
    #[test]
    fn arbitrary_command_sequences_conserve_chips_and_refuse_with_typed_errors(
        config in config(),
        ops in prop::collection::vec(op(), 0..200),
    ) {
        let mut game = match Game::new(config.clone()) {
            Ok(game) => game,
            Err(e) => {
                prop_assert!(matches!(e, RuleError::BadConfig(_)), "{:?}: {:?}", config, e);
                return Ok(());
            }
        };
        for op in &ops {
            if let Some((cmd, legal)) = command(&game, op) {
                check(&mut game, cmd, legal)?;
            }
        }
    }
}
