//! Cards and decks.

use std::fmt;
use std::str::FromStr;

use rand::Rng;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Card ranks, deuce lowest. The discriminant is the rank's index (0..13),
/// which is also its bit position in the evaluator's rank masks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rank {
    Two,
    Three,
    Four,
    Five,
    Six,
    Seven,
    Eight,
    Nine,
    Ten,
    Jack,
    Queen,
    King,
    Ace,
}

impl Rank {
    pub const ALL: [Rank; 13] = [
        Rank::Two,
        Rank::Three,
        Rank::Four,
        Rank::Five,
        Rank::Six,
        Rank::Seven,
        Rank::Eight,
        Rank::Nine,
        Rank::Ten,
        Rank::Jack,
        Rank::Queen,
        Rank::King,
        Rank::Ace,
    ];

    pub fn index(self) -> u8 {
        self as u8
    }

    pub fn from_index(i: u8) -> Option<Rank> {
        Rank::ALL.get(usize::from(i)).copied()
    }

    pub fn to_char(self) -> char {
        char::from(b"23456789TJQKA"[usize::from(self.index())])
    }

    pub fn from_char(c: char) -> Option<Rank> {
        let i = "23456789TJQKA".find(c.to_ascii_uppercase())?;
        Rank::from_index(u8::try_from(i).ok()?)
    }

    pub fn name(self) -> &'static str {
        [
            "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "jack",
            "queen", "king", "ace",
        ][usize::from(self.index())]
    }

    pub fn plural(self) -> &'static str {
        [
            "twos", "threes", "fours", "fives", "sixes", "sevens", "eights", "nines", "tens",
            "jacks", "queens", "kings", "aces",
        ][usize::from(self.index())]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Suit {
    Clubs,
    Diamonds,
    Hearts,
    Spades,
}

impl Suit {
    pub const ALL: [Suit; 4] = [Suit::Clubs, Suit::Diamonds, Suit::Hearts, Suit::Spades];

    pub fn index(self) -> u8 {
        self as u8
    }

    pub fn from_index(i: u8) -> Option<Suit> {
        Suit::ALL.get(usize::from(i)).copied()
    }

    pub fn to_char(self) -> char {
        char::from(b"cdhs"[usize::from(self.index())])
    }

    pub fn from_char(c: char) -> Option<Suit> {
        let i = "cdhs".find(c.to_ascii_lowercase())?;
        Suit::from_index(u8::try_from(i).ok()?)
    }
}

/// A playing card, stored as `rank * 4 + suit` (0..52) so that the evaluator
/// can derive rank and suit with a shift and a mask.
///
/// Serialises as a two-character string such as `"Ah"` or `"Td"`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Card(u8);

impl Card {
    pub fn new(rank: Rank, suit: Suit) -> Card {
        Card(rank.index() * 4 + suit.index())
    }

    /// The card with index `i` in `0..52` (`rank * 4 + suit`).
    pub fn from_index(i: u8) -> Option<Card> {
        (i < 52).then_some(Card(i))
    }

    pub fn index(self) -> u8 {
        self.0
    }

    pub fn rank(self) -> Rank {
        Rank::ALL[usize::from(self.0 >> 2)]
    }

    pub fn suit(self) -> Suit {
        Suit::ALL[usize::from(self.0 & 3)]
    }
}

impl fmt::Display for Card {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.rank().to_char(), self.suit().to_char())
    }
}

impl fmt::Debug for Card {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a card: {0:?} (expected rank 23456789TJQKA then suit cdhs, e.g. \"Ah\")")]
pub struct ParseCardError(pub String);

impl FromStr for Card {
    type Err = ParseCardError;

    fn from_str(s: &str) -> Result<Card, ParseCardError> {
        let mut chars = s.chars();
        match (chars.next(), chars.next(), chars.next()) {
            (Some(r), Some(su), None) => match (Rank::from_char(r), Suit::from_char(su)) {
                (Some(rank), Some(suit)) => Ok(Card::new(rank, suit)),
                _ => Err(ParseCardError(s.to_string())),
            },
            _ => Err(ParseCardError(s.to_string())),
        }
    }
}

impl Serialize for Card {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Card {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Card, D::Error> {
        struct CardVisitor;
        impl serde::de::Visitor<'_> for CardVisitor {
            type Value = Card;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a two-character card such as \"Ah\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Card, E> {
                v.parse().map_err(E::custom)
            }
        }
        deserializer.deserialize_str(CardVisitor)
    }
}

/// The 52 distinct cards in index order (deuces first).
pub fn standard_deck() -> Vec<Card> {
    (0..52).map(Card).collect()
}

/// A uniformly shuffled deck (Fisher–Yates). The engine never draws
/// randomness itself, so the caller decides which RNG and seed are used.
pub fn shuffled_deck<R: Rng + ?Sized>(rng: &mut R) -> Vec<Card> {
    let mut deck = standard_deck();
    for i in (1..deck.len()).rev() {
        let j = rng.gen_range(0..=i);
        deck.swap(i, j);
    }
    deck
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use std::collections::HashSet;

    #[test]
    fn standard_deck_has_52_distinct_cards() {
        let deck = standard_deck();
        assert_eq!(deck.len(), 52);
        assert_eq!(deck.iter().collect::<HashSet<_>>().len(), 52);
    }

    #[test]
    fn shuffled_deck_is_a_permutation_and_depends_on_the_seed() {
        let mut a = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let mut b = rand_chacha::ChaCha8Rng::seed_from_u64(2);
        let da = shuffled_deck(&mut a);
        let db = shuffled_deck(&mut b);
        let mut sorted = da.clone();
        sorted.sort();
        assert_eq!(sorted, standard_deck());
        assert_ne!(da, db);
        let mut a2 = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        assert_eq!(da, shuffled_deck(&mut a2));
    }

    #[test]
    fn shuffle_puts_every_card_in_every_position_about_equally_often() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut counts = vec![[0u32; 52]; 52];
        for _ in 0..5_200 {
            for (pos, card) in shuffled_deck(&mut rng).into_iter().enumerate() {
                counts[pos][usize::from(card.index())] += 1;
            }
        }
        // Expected 100 per (position, card); 6 sigma is 60.
        for row in &counts {
            assert!(row.iter().all(|&c| (40..160).contains(&c)), "{row:?}");
        }
    }

    #[test]
    fn cards_round_trip_through_text_and_json() {
        for card in standard_deck() {
            let s = card.to_string();
            assert_eq!(s.len(), 2);
            assert_eq!(s.parse::<Card>(), Ok(card));
            let json = serde_json::to_string(&card).expect("serialise");
            assert_eq!(json, format!("\"{s}\""));
            assert_eq!(serde_json::from_str::<Card>(&json).expect("parse"), card);
        }
        assert_eq!("Ah".parse::<Card>(), Ok(Card::new(Rank::Ace, Suit::Hearts)));
        assert_eq!(
            "Td".parse::<Card>(),
            Ok(Card::new(Rank::Ten, Suit::Diamonds))
        );
    }

    #[test]
    fn malformed_card_text_is_rejected() {
        for bad in ["", "A", "Ahh", "1h", "Ax", "10h", "hA"] {
            assert!(bad.parse::<Card>().is_err(), "{bad}");
        }
        assert!(serde_json::from_str::<Card>("\"Zz\"").is_err());
        assert!(serde_json::from_str::<Card>("12").is_err());
    }
}
