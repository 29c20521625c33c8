//! Generators for arbitrary command sequences against `Game::apply`: a
//! table config (shaped, raw or at huge stakes) and ops chosen against the
//! table as it stands or entirely raw. The properties themselves live in
//! `checks`, which the `engine_apply` fuzz target asserts too.

use proptest::prelude::*;

use super::checks::{self, ActionIn, AmountIn, DeckIn, NumberIn, Op, SeatIn};
use super::*;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
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
            checks::shaped_config(sb, bb_extra, ante, seats, min_bbs, max_extra_bbs)
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
        3 => any::<u64>().prop_map(|s| Op::StartHand(DeckIn::Shuffled(s))),
        1 => prop::collection::vec(any::<u8>(), 0..60).prop_map(|d| Op::StartHand(DeckIn::Raw(d))),
        3 => (seat_in(), number_in(), number_in(), action_in())
            .prop_map(|(seat, hand, decision, action)| Op::Act { seat, hand, decision, action }),
        1 => (seat_in(), number_in()).prop_map(|(seat, hand)| Op::Timeout { seat, hand }),
        1 => prop_oneof![Just(VoidReason::Shutdown), Just(VoidReason::NotRecorded)].prop_map(Op::Void),
        12 => (any::<u8>(), any::<u16>()).prop_map(|(pick, x)| Op::Legal { pick, amount: AmountIn::Between(x) }),
    ]
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
        checks::check_sequence(&config, &ops);
    }
}
