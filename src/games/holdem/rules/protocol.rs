//! What goes into and comes out of the engine: commands, events, summaries
//! and per-viewer snapshots. All of it is plain serialisable data.

use serde::{Deserialize, Serialize};

use super::cards::Card;
use super::chips::Chips;
use super::table::{PlayerId, SeatNo, TableConfig};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Take an empty seat with a buy-in in `[min_buy_in, max_buy_in]`.
    /// Allowed during a hand; the player is dealt in from the next hand.
    Sit {
        seat: SeatNo,
        player: PlayerId,
        stack: Chips,
    },
    /// Leave the table. Between hands, or when not dealt into the current
    /// hand, the seat is vacated at once. A player dealt into the current
    /// hand is folded at once if they still hold live cards and are not
    /// all-in, and the seat is vacated when the hand ends (an all-in player
    /// stays in the pot and leaves with whatever they win).
    Leave { seat: SeatNo },
    /// Stop being dealt in, from the next hand on.
    SitOut { seat: SeatNo },
    /// Be dealt in again, from the next hand on.
    SitIn { seat: SeatNo },
    /// Start the next hand with a deck the caller has shuffled.
    StartHand { deck: Vec<Card> },
    /// `decision` is the number of the `turn` the action answers.
    Act {
        hand: u64,
        seat: SeatNo,
        decision: u64,
        action: Action,
    },
    /// The clock ran out for the seat to act: check if that is legal, else fold.
    Timeout { hand: u64, seat: SeatNo },
    /// Abandon the hand in progress and give every dealt-in player back the
    /// stack they started it with.
    VoidHand { reason: VoidReason },
}

/// A player's decision. `Bet` and `Raise` name the total the player's bet
/// reaches on this street ("raise to"), not the increment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    Fold,
    Check,
    Call,
    Bet(Chips),
    Raise(Chips),
    AllIn,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub to: Audience,
    #[serde(flatten)]
    pub kind: EventKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Audience {
    All,
    /// Only the player in this seat may see the event.
    Seat(SeatNo),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventKind {
    Seated {
        seat: SeatNo,
        player: PlayerId,
        stack: Chips,
    },
    Left {
        seat: SeatNo,
        player: PlayerId,
        stack: Chips,
    },
    SatOut {
        seat: SeatNo,
    },
    SatIn {
        seat: SeatNo,
    },
    HandStarted {
        hand: u64,
        button: SeatNo,
        seats: Vec<SeatStack>,
    },
    HoleCards {
        hand: u64,
        seat: SeatNo,
        cards: [Card; 2],
    },
    /// `amount`: for antes, the ante paid; for everything else (blinds
    /// included), the player's total bet on this street after the action.
    Action {
        hand: u64,
        seat: SeatNo,
        action: ActionKind,
        amount: Chips,
    },
    /// `decision` numbers the turns of a hand from 1; an action must name
    /// the decision it answers.
    Turn {
        hand: u64,
        seat: SeatNo,
        decision: u64,
        legal: Vec<LegalAction>,
    },
    Street {
        hand: u64,
        street: Street,
        board: Vec<Card>,
    },
    Showdown {
        hand: u64,
        hands: Vec<ShownHand>,
    },
    PotAwarded {
        hand: u64,
        amount: Chips,
        seats: Vec<SeatNo>,
    },
    HandEnded {
        hand: u64,
        stacks: Vec<SeatChips>,
    },
    HandVoided {
        hand: u64,
        stacks: Vec<SeatChips>,
        reason: VoidReason,
    },
}

/// Why a hand was called off: its stacks go back to where it started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VoidReason {
    /// The drain deadline passed with the hand still in progress (before
    /// hands were journalled; no longer sent, kept for old clients' sake).
    Shutdown,
    /// An operator froze the table during the hand.
    Operator,
    /// The hand ended but its result could not be recorded (the write was
    /// refused or failed), so it never happened.
    NotRecorded,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    Fold,
    Check,
    Call,
    Bet,
    Raise,
    /// Any voluntary action that left the player with no chips behind.
    AllIn,
    SmallBlind,
    BigBlind,
    Ante,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Street {
    Preflop,
    Flop,
    Turn,
    River,
}

impl Street {
    pub fn next(self) -> Option<Street> {
        match self {
            Street::Preflop => Some(Street::Flop),
            Street::Flop => Some(Street::Turn),
            Street::Turn => Some(Street::River),
            Street::River => None,
        }
    }

    /// Board cards showing once this street is dealt.
    pub fn board_len(self) -> usize {
        match self {
            Street::Preflop => 0,
            Street::Flop => 3,
            Street::Turn => 4,
            Street::River => 5,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeatStack {
    pub seat: SeatNo,
    pub player: PlayerId,
    pub stack: Chips,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeatChips {
    pub seat: SeatNo,
    pub stack: Chips,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShownHand {
    pub seat: SeatNo,
    pub cards: [Card; 2],
    /// `HandRank::describe()` of the best five cards.
    pub rank: String,
}

/// One thing the seat to act may do. Serialises as e.g. `{"action":"fold"}`,
/// `{"action":"call","amount":4}`, `{"action":"raise","min":8,"max":200}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum LegalAction {
    Fold,
    Check,
    /// `amount`: chips the call adds.
    Call {
        amount: Chips,
    },
    /// Street totals ("bet to").
    Bet {
        min: Chips,
        max: Chips,
    },
    /// Street totals ("raise to").
    Raise {
        min: Chips,
        max: Chips,
    },
    /// `amount`: the player's street total once all-in.
    AllIn {
        amount: Chips,
    },
}

/// The facts of an ended hand, for the caller to record as one ledger
/// transaction. `pots` lists every pot that was contested (main pot first);
/// an uncalled bet returned to its bettor never entered a pot and only shows
/// up in that player's `end_stack`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandSummary {
    pub hand: u64,
    pub seats: Vec<SeatResult>,
    pub pots: Vec<PotAward>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeatResult {
    pub seat: SeatNo,
    pub player: PlayerId,
    pub start_stack: Chips,
    pub end_stack: Chips,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PotAward {
    pub amount: Chips,
    /// Winners clockwise from the button, with their shares (which sum to
    /// `amount`; any odd chips go to the first winner listed).
    pub winners: Vec<(SeatNo, Chips)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeatInfo {
    pub seat: SeatNo,
    pub player: PlayerId,
    pub stack: Chips,
    pub sitting_out: bool,
    /// Dealt into the hand in progress and not folded.
    pub in_hand: bool,
}

/// What one viewer may see of the table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GameView {
    pub config: TableConfig,
    /// The current hand's number, or the last one's between hands.
    pub hand: u64,
    pub hand_in_progress: bool,
    pub button: Option<SeatNo>,
    /// `None` between hands.
    pub street: Option<Street>,
    /// The current board; between hands, the final board of the last hand
    /// that reached a showdown or a fold (empty after a void).
    pub board: Vec<Card>,
    /// Chips collected from earlier streets (main pot first). Bets on the
    /// current street are in each seat's `bet` until the street ends.
    pub pots: Vec<PotView>,
    pub to_act: Option<SeatNo>,
    /// The viewer's legal actions; empty unless it is the viewer's turn.
    pub legal: Vec<LegalAction>,
    /// The open decision the viewer's action must name; `None` unless it is
    /// the viewer's turn.
    pub decision: Option<u64>,
    /// The viewer's own seat, if seated.
    pub you: Option<SeatNo>,
    pub seats: Vec<SeatView>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PotView {
    pub amount: Chips,
    pub eligible: Vec<SeatNo>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeatView {
    pub seat: SeatNo,
    pub player: PlayerId,
    pub stack: Chips,
    /// Chips bet on the current street.
    pub bet: Chips,
    pub folded: bool,
    pub all_in: bool,
    pub sitting_out: bool,
    /// Dealt into the hand in progress and not folded.
    pub in_hand: bool,
    /// The viewer's own hole cards, or cards shown at the last showdown.
    pub cards: Option<[Card; 2]>,
}
