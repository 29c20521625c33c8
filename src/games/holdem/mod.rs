//! No-limit Texas hold'em behind the [`Game`] trait: an adapter over the
//! rules engine in [`rules`], which it leaves as it is. Its frames
//! are the ones hold'em clients have always sent and read: an `act` names
//! its `hand` and `action` (and `amount` for `bet` and `raise`).

/// The properties the `ws_frame` fuzz target and the client-frame property
/// tests assert on hold'em's frames.
#[doc(hidden)]
pub mod frames;
pub mod rules;

use rand::RngCore;
use serde_json::{Map, Value};

use super::{
    Audience, Decision, Game, GameKind, Occupant, Refusal, Role, SeatResult, Settlement, Told,
};
use crate::games::fields::{bad_amount, bad_field, chips_field, required_chips, u64_field};
use crate::types::ErrorCode;
use rules::{
    shuffled_deck, Action, Chips, EventKind, GameView, HandSummary, LegalAction, PlayerId,
    RuleError, SeatChips, SeatNo, TableConfig, VoidReason,
};

/// What a seat sends to hold'em.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HoldemCommand {
    /// An action on the open decision of hand `hand`.
    Act { hand: u64, action: Action },
    /// The action clock ran out: check if that is legal, else fold.
    Timeout { hand: u64 },
}

/// A hold'em table: the engine, and the last hand whose settlement the
/// runtime has taken.
#[derive(Clone, Debug)]
pub struct Holdem {
    engine: rules::Game,
    settled: u64,
}

impl Holdem {
    /// The engine, for what the trait does not say (sitting out, voids,
    /// resuming at a boundary).
    pub fn engine(&self) -> &rules::Game {
        &self.engine
    }

    fn run(&mut self, command: rules::Command) -> Result<Vec<Told<EventKind>>, Refusal> {
        let events = self.engine.apply(command).map_err(refusal)?;
        Ok(events.into_iter().map(told).collect())
    }
}

/// A hand's end as a settlement: each dealt-in seat from its start to its
/// end stack, the hand's summary as the record.
pub fn settlement_of(summary: &HandSummary) -> Settlement<HandSummary> {
    Settlement {
        number: summary.hand,
        seats: summary
            .seats
            .iter()
            .map(|s| SeatResult {
                seat: s.seat,
                player: s.player.clone(),
                start: s.start_stack,
                end: s.end_stack,
            })
            .collect(),
        result: summary.clone(),
    }
}

/// A rule's refusal, with the code clients have always been told.
pub fn refusal(e: RuleError) -> Refusal {
    Refusal::new(e.code(), e.to_string())
}

fn told(e: rules::Event) -> Told<EventKind> {
    Told {
        to: match e.to {
            rules::Audience::All => Audience::Everyone,
            rules::Audience::Seat(s) => Audience::Seat(s),
        },
        event: e.kind,
    }
}

/// The `hand` an `act` frame names.
fn hand_field(obj: &Map<String, Value>) -> Result<u64, Refusal> {
    u64_field(obj, "hand")?.ok_or_else(|| bad_field("hand is required"))
}

/// The `action` (and `amount`) of an `act` frame, with the codes and
/// messages hold'em clients rely on.
fn action_field(obj: &Map<String, Value>) -> Result<Action, Refusal> {
    let name = match obj.get("action") {
        Some(Value::String(s)) => s.as_str(),
        Some(_) => return Err(bad_field("action must be a string")),
        None => return Err(bad_field("action is required")),
    };
    let amount = || {
        chips_field(obj, "amount")?
            .ok_or_else(|| bad_amount("amount is required for bet and raise"))
    };
    Ok(match name {
        "fold" => Action::Fold,
        "check" => Action::Check,
        "call" => Action::Call,
        "all_in" => Action::AllIn,
        "bet" => Action::Bet(amount()?),
        "raise" => Action::Raise(amount()?),
        other => return Err(bad_field(format!("unknown action {other:?}"))),
    })
}

impl Game for Holdem {
    const KIND: GameKind = GameKind::HOLDEM;
    type Config = TableConfig;
    type Command = HoldemCommand;
    type Event = EventKind;
    type View = GameView;
    type Legal = Vec<LegalAction>;
    type Result = HandSummary;

    const CONFIG_FIELDS: &'static [&'static str] = &[
        "small_blind",
        "big_blind",
        "ante",
        "seats",
        "min_buy_in",
        "max_buy_in",
    ];

    fn config(body: &Map<String, Value>) -> Result<TableConfig, Refusal> {
        // An ante may be 0; every other amount is at least 1.
        let ante = match body.get("ante") {
            None | Some(Value::Null) => Chips(0),
            Some(Value::Number(n)) if n.as_u64() == Some(0) => Chips(0),
            Some(_) => required_chips(body, "ante")?,
        };
        let seats = u64_field(body, "seats")?.ok_or_else(|| bad_field("seats is required"))?;
        let config = TableConfig {
            small_blind: required_chips(body, "small_blind")?,
            big_blind: required_chips(body, "big_blind")?,
            ante,
            seats: u8::try_from(seats).unwrap_or(u8::MAX),
            min_buy_in: required_chips(body, "min_buy_in")?,
            max_buy_in: required_chips(body, "max_buy_in")?,
        };
        config
            .validate()
            .map_err(|e| Refusal::new(ErrorCode::BadField, e.to_string()))?;
        Ok(config)
    }

    fn new(config: TableConfig) -> Result<Holdem, Refusal> {
        Ok(Holdem {
            engine: rules::Game::new(config).map_err(refusal)?,
            settled: 0,
        })
    }

    fn resume(
        config: TableConfig,
        number: u64,
        state: &Value,
        seats: Vec<Occupant>,
    ) -> Result<Holdem, Refusal> {
        let button = match state.get("button") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .and_then(|b| SeatNo::try_from(b).ok())
                    .ok_or_else(|| {
                        Refusal::new(ErrorCode::Internal, "a stored button is not a seat")
                    })?,
            ),
        };
        let seats = seats
            .into_iter()
            .map(|o| (o.seat, o.player, o.stack))
            .collect();
        let engine = rules::Game::resume(config, number, button, seats).map_err(refusal)?;
        Ok(Holdem {
            engine,
            settled: number,
        })
    }

    fn settings(&self) -> &TableConfig {
        self.engine.config()
    }

    fn command(fields: &Map<String, Value>) -> Result<HoldemCommand, Refusal> {
        let hand = hand_field(fields)?;
        let action = action_field(fields)?;
        Ok(HoldemCommand::Act { hand, action })
    }

    fn apply(
        &mut self,
        seat: SeatNo,
        decision: u64,
        command: HoldemCommand,
        _rng: &mut dyn RngCore,
    ) -> Result<Vec<Told<EventKind>>, Refusal> {
        match command {
            HoldemCommand::Act { hand, action } => self.run(rules::Command::Act {
                hand,
                seat,
                decision,
                action,
            }),
            HoldemCommand::Timeout { hand } => self.run(rules::Command::Timeout { hand, seat }),
        }
    }

    fn sit(
        &mut self,
        seat: SeatNo,
        player: &str,
        stack: Chips,
    ) -> Result<Vec<Told<EventKind>>, Refusal> {
        if stack.is_zero() {
            return Err(bad_amount("buy_in must be above 0"));
        }
        self.run(rules::Command::Sit {
            seat,
            player: PlayerId(player.to_string()),
            stack,
        })
    }

    fn leave(&mut self, seat: SeatNo) -> Result<Vec<Told<EventKind>>, Refusal> {
        self.run(rules::Command::Leave { seat })
    }

    fn start(&mut self, rng: &mut dyn RngCore) -> Option<Vec<Told<EventKind>>> {
        if !self.engine.can_start_hand() {
            return None;
        }
        let deck = shuffled_deck(rng);
        self.run(rules::Command::StartHand { deck }).ok()
    }

    fn can_start(&self) -> bool {
        self.engine.can_start_hand()
    }

    fn void(&mut self) -> Option<Vec<Told<EventKind>>> {
        if !self.engine.hand_in_progress() {
            return None;
        }
        self.run(rules::Command::VoidHand {
            reason: VoidReason::Operator,
        })
        .ok()
    }

    fn unrecorded(settlement: &Settlement<HandSummary>) -> Told<EventKind> {
        Told {
            to: Audience::Everyone,
            event: EventKind::HandVoided {
                hand: settlement.number,
                stacks: settlement
                    .seats
                    .iter()
                    .map(|s| SeatChips {
                        seat: s.seat,
                        stack: s.start,
                    })
                    .collect(),
                reason: VoidReason::NotRecorded,
            },
        }
    }

    fn number(&self) -> u64 {
        self.engine.hand_no()
    }

    fn in_progress(&self) -> bool {
        self.engine.hand_in_progress()
    }

    fn takes_part(&self, seat: SeatNo) -> bool {
        self.engine.dealt_in(seat)
    }

    fn occupants(&self) -> Vec<Occupant> {
        self.engine
            .seats()
            .into_iter()
            .map(|s| Occupant {
                seat: s.seat,
                player: s.player,
                stack: s.stack,
            })
            .collect()
    }

    fn seat_of(&self, player: &PlayerId) -> Option<SeatNo> {
        self.engine.seat_of(player)
    }

    fn announce(&self) -> Option<Told<EventKind>> {
        self.engine.pending_turn().map(told)
    }

    fn boundary_state(&self) -> Value {
        serde_json::json!({ "button": self.engine.button() })
    }

    fn role(event: &EventKind) -> Role<'_> {
        match event {
            EventKind::Turn { seat, decision, .. } => Role::Decision {
                seat: *seat,
                number: *decision,
            },
            EventKind::Showdown { .. }
            | EventKind::PotAwarded { .. }
            | EventKind::HandEnded { .. } => Role::Result,
            EventKind::Left {
                seat,
                player,
                stack,
            } => Role::Left {
                seat: *seat,
                player,
                stack: *stack,
            },
            _ => Role::Plain,
        }
    }

    fn decision(&self) -> Option<Decision<Vec<LegalAction>>> {
        Some(Decision {
            seat: self.engine.to_act()?,
            number: self.engine.decision()?,
            legal: self.engine.legal_actions(),
        })
    }

    fn on_timeout(&self) -> Option<HoldemCommand> {
        self.decision().map(|_| HoldemCommand::Timeout {
            hand: self.engine.hand_no(),
        })
    }

    fn take_settlement(&mut self) -> Option<Settlement<HandSummary>> {
        let summary = self.engine.last_summary()?;
        if summary.hand <= self.settled {
            return None;
        }
        self.settled = summary.hand;
        Some(settlement_of(summary))
    }

    fn view(&self, seat: Option<SeatNo>) -> GameView {
        let player = seat.and_then(|s| {
            self.engine
                .seats()
                .into_iter()
                .find(|i| i.seat == s)
                .map(|i| i.player)
        });
        self.engine.view_for(player.as_ref())
    }
}
