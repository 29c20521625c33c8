//! Poker hand evaluation.
//!
//! The fast path works on four 13-bit rank masks, one per suit, and never
//! sorts: rank multiplicities fall out of a few AND/OR/XOR operations across
//! the suit masks, and straights out of a shifted AND. The result packs the
//! category and up to five significant ranks into a `u32`, so comparing two
//! hands is one integer comparison and equal hands compare equal exactly.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::cards::{Card, Rank};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    HighCard,
    OnePair,
    TwoPair,
    ThreeOfAKind,
    Straight,
    Flush,
    FullHouse,
    FourOfAKind,
    StraightFlush,
}

impl Category {
    pub const ALL: [Category; 9] = [
        Category::HighCard,
        Category::OnePair,
        Category::TwoPair,
        Category::ThreeOfAKind,
        Category::Straight,
        Category::Flush,
        Category::FullHouse,
        Category::FourOfAKind,
        Category::StraightFlush,
    ];

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            Category::HighCard => "high card",
            Category::OnePair => "one pair",
            Category::TwoPair => "two pair",
            Category::ThreeOfAKind => "three of a kind",
            Category::Straight => "straight",
            Category::Flush => "flush",
            Category::FullHouse => "full house",
            Category::FourOfAKind => "four of a kind",
            Category::StraightFlush => "straight flush",
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The strength of the best five-card hand. Higher is better; two hands that
/// split a pot have equal `HandRank`s.
///
/// Layout: bits 20..24 hold the category, bits 0..20 hold five 4-bit rank
/// indices in order of significance (e.g. a full house stores the trips
/// rank, then the pair rank, then zeros).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct HandRank(u32);

const CAT_SHIFT: u32 = 20;

impl HandRank {
    fn from_parts(cat: Category, ranks: &[u32]) -> HandRank {
        let mut v = (cat as u32) << CAT_SHIFT;
        for (i, r) in ranks.iter().take(5).enumerate() {
            v |= (r & 0xF) << (16 - 4 * i as u32);
        }
        HandRank(v)
    }

    /// The packed value; only meaningful for ordering and equality.
    pub fn value(&self) -> u32 {
        self.0
    }

    pub fn category(&self) -> Category {
        let i = (self.0 >> CAT_SHIFT) as usize;
        Category::ALL
            .get(i)
            .copied()
            .unwrap_or(Category::StraightFlush)
    }

    /// The `i`-th significant rank (0 = most significant).
    fn rank_at(&self, i: u32) -> Rank {
        let idx = (self.0 >> (16 - 4 * i)) & 0xF;
        Rank::from_index(idx as u8).unwrap_or(Rank::Two)
    }

    /// Human-readable description, e.g. "full house, kings over sevens".
    pub fn describe(&self) -> String {
        let r = |i| self.rank_at(i);
        match self.category() {
            Category::HighCard => format!("high card, {}", r(0).name()),
            Category::OnePair => format!("one pair, {}", r(0).plural()),
            Category::TwoPair => {
                format!("two pair, {} and {}", r(0).plural(), r(1).plural())
            }
            Category::ThreeOfAKind => format!("three of a kind, {}", r(0).plural()),
            Category::Straight => format!("straight, {} high", r(0).name()),
            Category::Flush => format!("flush, {} high", r(0).name()),
            Category::FullHouse => {
                format!("full house, {} over {}", r(0).plural(), r(1).plural())
            }
            Category::FourOfAKind => format!("four of a kind, {}", r(0).plural()),
            Category::StraightFlush if r(0) == Rank::Ace => "royal flush".to_string(),
            Category::StraightFlush => format!("straight flush, {} high", r(0).name()),
        }
    }
}

impl fmt::Display for HandRank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl fmt::Debug for HandRank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HandRank({:#08x}: {})", self.0, self.describe())
    }
}

/// Bit `rank` of lane `suit` (16 bits per lane) for each card index, so that
/// building the four suit masks is one table load and one OR per card.
const CARD_BITS: [u64; 52] = {
    let mut t = [0u64; 52];
    let mut i = 0;
    while i < 52 {
        t[i] = 1u64 << ((i & 3) * 16 + (i >> 2));
        i += 1;
    }
    t
};

/// For every 13-bit rank mask, the indices of its five highest ranks packed
/// as nibbles, highest at bits 16..20: exactly the kicker layout of
/// `HandRank`, so kickers cost a load and a shift instead of a loop.
static TOP5: [u32; 8192] = {
    let mut t = [0u32; 8192];
    let mut m = 0;
    while m < 8192 {
        let mut v = 0u32;
        let mut k = 0;
        let mut r = 13;
        while r > 0 && k < 5 {
            r -= 1;
            if m & (1 << r) != 0 {
                v |= (r as u32) << (16 - 4 * k);
                k += 1;
            }
        }
        t[m] = v;
        m += 1;
    }
    t
};

const WHEEL: u32 = 0b1_0000_0000_1111;

/// Top card index of the best straight in `m`, if any.
#[inline]
fn straight_top(m: u32) -> Option<u32> {
    let s = m & (m << 1) & (m << 2) & (m << 3) & (m << 4);
    if s != 0 {
        Some(31 - s.leading_zeros())
    } else if m & WHEEL == WHEEL {
        Some(Rank::Five.index() as u32)
    } else {
        None
    }
}

#[inline]
fn high_bit(m: u32) -> u32 {
    31 - m.leading_zeros()
}

/// More than one bit set.
#[inline]
fn several(m: u32) -> bool {
    m & m.wrapping_sub(1) != 0
}

/// The `n` highest ranks of `m` as kicker nibbles placed after `lead`
/// already-used nibbles.
#[inline]
fn kickers(m: u32, lead: u32, n: u32) -> u32 {
    let packed = TOP5[(m & 0x1FFF) as usize] >> (4 * lead);
    let hi = 20 - 4 * lead;
    let lo = 20 - 4 * (lead + n);
    packed & ((1 << hi) - (1 << lo))
}

#[inline]
fn packed(cat: Category, ranks: u32) -> HandRank {
    HandRank(((cat as u32) << CAT_SHIFT) | ranks)
}

#[inline]
fn flush_rank(m: u32) -> HandRank {
    match straight_top(m) {
        Some(top) => packed(Category::StraightFlush, top << 16),
        None => packed(Category::Flush, TOP5[(m & 0x1FFF) as usize]),
    }
}

/// Best non-flush hand from the four suit masks.
#[inline]
fn rank_suits(c: u32, d: u32, h: u32, s: u32) -> HandRank {
    let ranks = c | d | h | s;
    let four = c & d & h & s;
    // A rank is held at least three times exactly when it is in at least
    // three suits, which these two pairwise tests capture together.
    let three_plus = ((c & d) | (h & s)) & ((c & h) | (d & s));
    let odd = c ^ d ^ h ^ s;
    let three = three_plus & !four;
    let two = ranks & !odd & !four;

    if four != 0 {
        let q = high_bit(four);
        packed(
            Category::FourOfAKind,
            (q << 16) | kickers(ranks & !(1 << q), 1, 1),
        )
    } else if three != 0 && (two != 0 || several(three)) {
        let t = high_bit(three);
        let p = high_bit((three & !(1 << t)) | two);
        packed(Category::FullHouse, (t << 16) | (p << 12))
    } else if let Some(top) = straight_top(ranks) {
        packed(Category::Straight, top << 16)
    } else if three != 0 {
        let t = high_bit(three);
        packed(
            Category::ThreeOfAKind,
            (t << 16) | kickers(ranks & !(1 << t), 1, 2),
        )
    } else if several(two) {
        let p1 = high_bit(two);
        let p2 = high_bit(two & !(1 << p1));
        let rest = ranks & !(1 << p1) & !(1 << p2);
        packed(
            Category::TwoPair,
            (p1 << 16) | (p2 << 12) | kickers(rest, 2, 1),
        )
    } else if two != 0 {
        let p = high_bit(two);
        packed(
            Category::OnePair,
            (p << 16) | kickers(ranks & !(1 << p), 1, 3),
        )
    } else {
        packed(Category::HighCard, TOP5[(ranks & 0x1FFF) as usize])
    }
}

#[inline]
fn lanes(bits: u64) -> [u32; 4] {
    [0, 16, 32, 48].map(|shift| ((bits >> shift) & 0x1FFF) as u32)
}

/// Seven cards or fewer: at most one suit can hold five, and a flush rules
/// out quads and full houses (they would need at least eight cards), so a
/// flush is the answer as soon as it is seen. `suit_counts` holds one 4-bit
/// count per suit.
#[inline]
fn eval_up_to_seven(bits: u64, suit_counts: u32) -> HandRank {
    let [c, d, h, s] = lanes(bits);
    // Adding 3 to each count (at most 7) sets a nibble's top bit exactly
    // when that suit has five or more cards.
    let flush = (suit_counts + 0x3333) & 0x8888;
    if flush != 0 {
        let shift = (flush.trailing_zeros() / 4) * 16;
        return flush_rank(((bits >> shift) & 0x1FFF) as u32);
    }
    rank_suits(c, d, h, s)
}

/// Any number of cards: flushes in several suits and quads or full houses
/// next to a flush are possible, so every candidate is ranked.
fn eval_many(bits: u64) -> HandRank {
    let [c, d, h, s] = lanes(bits);
    [c, d, h, s]
        .into_iter()
        .filter(|m| m.count_ones() >= 5)
        .map(flush_rank)
        .fold(rank_suits(c, d, h, s), HandRank::max)
}

#[inline]
fn suit_count(c: Card) -> u32 {
    1 << ((c.index() & 3) * 4)
}

/// Best five-card hand out of seven cards. The cards must be distinct.
#[inline]
pub fn evaluate7(cards: &[Card; 7]) -> HandRank {
    let mut bits = 0u64;
    let mut counts = 0u32;
    for &c in cards {
        bits |= CARD_BITS[usize::from(c.index())];
        counts += suit_count(c);
    }
    eval_up_to_seven(bits, counts)
}

/// Best five-card hand out of the given distinct cards. Meant for 5..=7
/// cards; fewer cards are ranked by what is there (no straights or flushes
/// possible) and more are still ranked correctly, just via a slower path.
pub fn evaluate(cards: &[Card]) -> HandRank {
    let mut bits = 0u64;
    for c in cards {
        bits |= CARD_BITS[usize::from(c.index())];
    }
    if cards.len() <= 7 {
        let counts = cards.iter().map(|&c| suit_count(c)).sum();
        eval_up_to_seven(bits, counts)
    } else {
        eval_many(bits)
    }
}

/// Slow, obviously correct reference evaluator: ranks every five-card subset
/// by sorting and grouping, and keeps the best. Returns exactly the same
/// encoding as [`evaluate`]; it exists to cross-check the fast path in tests
/// and as the baseline in `examples/game_bench.rs`.
pub fn evaluate_reference(cards: &[Card]) -> HandRank {
    let n = cards.len();
    if n < 5 {
        return evaluate(cards);
    }
    let mut best: Option<HandRank> = None;
    let mut idx = [0usize, 1, 2, 3, 4];
    loop {
        let five = idx.map(|i| cards[i]);
        best = best.max(Some(rank_five_by_sorting(&five)));
        // Advance to the next 5-combination in lexicographic order.
        let mut i = 5;
        loop {
            if i == 0 {
                return best.unwrap_or(HandRank(0));
            }
            i -= 1;
            if idx[i] < n - 5 + i {
                break;
            }
        }
        idx[i] += 1;
        for j in i + 1..5 {
            idx[j] = idx[j - 1] + 1;
        }
    }
}

fn rank_five_by_sorting(cards: &[Card; 5]) -> HandRank {
    let mut ranks = cards.map(|c| u32::from(c.rank().index()));
    ranks.sort_unstable_by(|a, b| b.cmp(a));
    let flush = cards.iter().all(|c| c.suit() == cards[0].suit());
    let distinct = ranks.windows(2).all(|w| w[0] != w[1]);
    let straight_top = if distinct && ranks[0] - ranks[4] == 4 {
        Some(ranks[0])
    } else if ranks == [12, 3, 2, 1, 0] {
        Some(3)
    } else {
        None
    };
    // (count, rank) groups, biggest group first, then highest rank.
    let mut groups = [(0u32, 0u32); 5];
    let mut n = 0;
    for &r in &ranks {
        match groups[..n].iter_mut().find(|g| g.1 == r) {
            Some(g) => g.0 += 1,
            None => {
                groups[n] = (1, r);
                n += 1;
            }
        }
    }
    let groups = &mut groups[..n];
    groups.sort_unstable_by(|a, b| b.cmp(a));
    let mut shape = [0u32; 5];
    let mut lead = [0u32; 5];
    for (i, g) in groups.iter().enumerate() {
        shape[i] = g.0;
        lead[i] = g.1;
    }
    let cat = match (straight_top, flush, &shape[..n]) {
        (Some(_), true, _) => Category::StraightFlush,
        (_, _, [4, 1]) => Category::FourOfAKind,
        (_, _, [3, 2]) => Category::FullHouse,
        (_, true, _) => Category::Flush,
        (Some(_), false, _) => Category::Straight,
        (_, _, [3, 1, 1]) => Category::ThreeOfAKind,
        (_, _, [2, 2, 1]) => Category::TwoPair,
        (_, _, [2, 1, 1, 1]) => Category::OnePair,
        _ => Category::HighCard,
    };
    match (cat, straight_top) {
        (Category::StraightFlush | Category::Straight, Some(top)) => {
            HandRank::from_parts(cat, &[top])
        }
        _ => HandRank::from_parts(cat, &lead[..n]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::games::holdem::rules::cards::standard_deck;
    use rand::seq::SliceRandom;
    use rand::SeedableRng;

    fn cards(s: &str) -> Vec<Card> {
        s.split_whitespace()
            .map(|c| c.parse().expect("card"))
            .collect()
    }

    fn rank(s: &str) -> HandRank {
        evaluate(&cards(s))
    }

    #[test]
    fn categories_are_recognised_and_described() {
        let cases = [
            (
                "Ah Kh Qh Jh Th 2c 3d",
                Category::StraightFlush,
                "royal flush",
            ),
            (
                "9s 8s 7s 6s 5s As Ad",
                Category::StraightFlush,
                "straight flush, nine high",
            ),
            (
                "5d 4d 3d 2d Ad Kc Kh",
                Category::StraightFlush,
                "straight flush, five high",
            ),
            (
                "9c 9d 9h 9s Kd 2c 3c",
                Category::FourOfAKind,
                "four of a kind, nines",
            ),
            (
                "Kc Kd Kh 7s 7d 2c 3c",
                Category::FullHouse,
                "full house, kings over sevens",
            ),
            (
                "Kc Kd Kh 7s 7d 7c 3c",
                Category::FullHouse,
                "full house, kings over sevens",
            ),
            ("Ac Tc 7c 5c 2c Kd Kh", Category::Flush, "flush, ace high"),
            (
                "Tc 9d 8h 7s 6c 2d 2h",
                Category::Straight,
                "straight, ten high",
            ),
            (
                "Ac 2d 3h 4s 5c Kd Kh",
                Category::Straight,
                "straight, five high",
            ),
            (
                "Qc Qd Qh 7s 5d 2c 3h",
                Category::ThreeOfAKind,
                "three of a kind, queens",
            ),
            (
                "Jc Jd 6h 6s 5d 2c 3h",
                Category::TwoPair,
                "two pair, jacks and sixes",
            ),
            ("Ac Ad 9h 6s 5d 2c 3h", Category::OnePair, "one pair, aces"),
            ("Ac Jd 9h 6s 5d 2c 3h", Category::HighCard, "high card, ace"),
        ];
        for (hand, cat, text) in cases {
            let r = rank(hand);
            assert_eq!(r.category(), cat, "{hand}");
            assert_eq!(r.describe(), text, "{hand}");
        }
    }

    #[test]
    fn higher_categories_and_kickers_win_and_equal_hands_tie() {
        assert!(rank("Ac Ad 9h 6s 5d") < rank("2c 2d 3h 3s 5d"));
        // Best kicker decides between equal pairs.
        assert!(rank("Ac Ad Kh 6s 5d 3c 2h") > rank("Ac Ad Qh Js 9d 3c 2h"));
        // Only five cards play: the sixth and seventh best cards do not count.
        assert_eq!(rank("Ac Kd Qh Js 9d 3c 2h"), rank("Ac Kd Qh Js 9d 4c 2h"));
        // Wheel is the lowest straight.
        assert!(rank("Ac 2d 3h 4s 5c") < rank("2d 3h 4s 5c 6d"));
        // A third pair never plays as a kicker over a higher single card.
        assert_eq!(rank("Kc Kd Qh Qs 2c 2d Ah"), rank("Kc Kd Qh Qs 3c 4d Ah"));
        // Two sets of trips make a full house with the lower trips as the pair.
        assert!(rank("Kc Kd Kh 7s 7d 7c 3c") > rank("Kc Kd Kh 6s 6d Ac 3c"));
        // A straight flush, even the lowest, beats four of a kind.
        assert!(rank("5d 4d 3d 2d Ad") > rank("9c 9d 9h 9s Kd"));
    }

    #[test]
    fn suits_never_break_ties() {
        assert_eq!(rank("Ac Kd Qh Js 9d"), rank("As Kh Qd Jc 9h"));
        assert_eq!(rank("Ac 8c 6c 4c 2c"), rank("Ah 8h 6h 4h 2h"));
    }

    #[test]
    fn fast_evaluator_matches_reference_on_random_hands_of_five_to_seven_cards() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(42);
        let mut deck = standard_deck();
        for i in 0..10_000 {
            deck.shuffle(&mut rng);
            let n = 5 + i % 3;
            let hand = &deck[..n];
            assert_eq!(evaluate(hand), evaluate_reference(hand), "{hand:?}");
            if n == 7 {
                let arr: [Card; 7] = [
                    hand[0], hand[1], hand[2], hand[3], hand[4], hand[5], hand[6],
                ];
                assert_eq!(evaluate7(&arr), evaluate(hand));
            }
        }
    }

    #[test]
    fn more_than_seven_cards_still_find_the_best_five() {
        // Eight cards can hold both quads and a flush; quads must win.
        let hand = cards("9c 9d 9h 9s 2s 4s 6s Ks");
        assert_eq!(evaluate(&hand).category(), Category::FourOfAKind);
        assert_eq!(evaluate(&hand), evaluate_reference(&hand));
    }

    /// All C(52,5) five-card hands against their well-known category counts.
    #[test]
    fn all_five_card_hands_have_the_known_category_counts() {
        let deck = standard_deck();
        let mut counts = [0u64; 9];
        for a in 0..52 {
            for b in a + 1..52 {
                for c in b + 1..52 {
                    for d in c + 1..52 {
                        for e in d + 1..52 {
                            let r = evaluate(&[deck[a], deck[b], deck[c], deck[d], deck[e]]);
                            counts[r.category().index()] += 1;
                        }
                    }
                }
            }
        }
        assert_eq!(
            counts,
            [1_302_540, 1_098_240, 123_552, 54_912, 10_200, 5_108, 3_744, 624, 40]
        );
    }

    #[test]
    fn hand_rank_serialises_as_its_packed_value() {
        let r = rank("Kc Kd Kh 7s 7d");
        let json = serde_json::to_string(&r).expect("json");
        assert_eq!(serde_json::from_str::<HandRank>(&json).expect("json"), r);
    }
}
