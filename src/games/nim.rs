//! Nim, the smallest game of another shape than hold'em: two seats take
//! turns removing 1 to 3 stones from one pile, and whoever takes the last
//! stone wins the other's stake. It has no hidden state and no
//! randomness, so it shows what the runtime owes every game and nothing
//! the game owes itself; it is what the trait's own tests play.

use rand::RngCore;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Audience, Decision, Game, Refusal, Settlement, Told};
use crate::game::{Chips, SeatNo};
use crate::types::ErrorCode;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NimConfig {
    /// Stones in the pile at the start of each game.
    pub pile: u32,
    /// What the loser pays the winner.
    pub stake: Chips,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NimCommand {
    Take(u32),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NimEvent {
    Seated {
        seat: SeatNo,
        player: String,
    },
    Left {
        seat: SeatNo,
    },
    Started {
        game: u64,
        pile: u32,
    },
    Took {
        seat: SeatNo,
        stones: u32,
        left: u32,
    },
    Won {
        game: u64,
        seat: SeatNo,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NimView {
    pub pile: u32,
    pub to_act: Option<SeatNo>,
    pub seats: Vec<(SeatNo, String, Chips)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NimResult {
    pub winner: SeatNo,
}

#[derive(Clone, Debug)]
struct Player {
    name: String,
    stack: Chips,
}

#[derive(Clone, Debug)]
pub struct Nim {
    config: NimConfig,
    seats: [Option<Player>; 2],
    /// Stones left in the game in progress; `None` between games.
    pile: Option<u32>,
    to_act: SeatNo,
    game: u64,
    decision: u64,
    settlement: Option<Settlement<NimResult>>,
}

fn bad(code: ErrorCode, message: impl Into<String>) -> Refusal {
    Refusal::new(code, message)
}

impl Nim {
    fn player(&self, seat: SeatNo) -> Option<&Player> {
        self.seats.get(usize::from(seat)).and_then(Option::as_ref)
    }

    fn stacks(&self) -> Vec<(SeatNo, Chips)> {
        (0..2u8)
            .filter_map(|s| self.player(s).map(|p| (s, p.stack)))
            .collect()
    }
}

impl Game for Nim {
    const CONFIG_FIELDS: &'static [&'static str] = &["pile", "stake"];

    type Config = NimConfig;
    type Command = NimCommand;
    type Event = NimEvent;
    type View = NimView;
    type Legal = Vec<u32>;
    type Result = NimResult;

    fn config(body: &Map<String, Value>) -> Result<NimConfig, Refusal> {
        let number = |name: &str| match body.get(name) {
            Some(Value::Number(n)) => n.as_u64().filter(|&v| v > 0).ok_or_else(|| {
                bad(
                    ErrorCode::BadField,
                    format!("{name} must be a whole number above 0"),
                )
            }),
            Some(_) => Err(bad(ErrorCode::BadField, format!("{name} must be a number"))),
            None => Err(bad(ErrorCode::BadField, format!("{name} is required"))),
        };
        let pile = u32::try_from(number("pile")?)
            .map_err(|_| bad(ErrorCode::BadField, "pile is too large"))?;
        Ok(NimConfig {
            pile,
            stake: Chips(number("stake")?),
        })
    }

    fn new(config: NimConfig) -> Result<Nim, Refusal> {
        Ok(Nim {
            config,
            seats: [None, None],
            pile: None,
            to_act: 0,
            game: 0,
            decision: 0,
            settlement: None,
        })
    }

    fn command(fields: &Map<String, Value>) -> Result<NimCommand, Refusal> {
        match fields.get("take").and_then(Value::as_u64) {
            Some(n) => Ok(NimCommand::Take(u32::try_from(n).unwrap_or(u32::MAX))),
            None => Err(bad(
                ErrorCode::BadField,
                "take is required: 1, 2 or 3 stones",
            )),
        }
    }

    fn apply(
        &mut self,
        seat: SeatNo,
        decision: u64,
        command: NimCommand,
        _rng: &mut dyn RngCore,
    ) -> Result<Vec<Told<NimEvent>>, Refusal> {
        let Some(pile) = self.pile else {
            return Err(bad(ErrorCode::NoHandInProgress, "no game in progress"));
        };
        if seat != self.to_act {
            return Err(bad(ErrorCode::NotYourTurn, "it is not your turn"));
        }
        if decision != self.decision {
            return Err(bad(
                ErrorCode::StaleDecision,
                "that decision is no longer open",
            ));
        }
        let NimCommand::Take(stones) = command;
        if !(1..=3).contains(&stones) || stones > pile {
            return Err(bad(
                ErrorCode::IllegalAction,
                format!("you may not take {stones}"),
            ));
        }
        let left = pile - stones;
        let mut told = vec![Told {
            to: Audience::Everyone,
            event: NimEvent::Took { seat, stones, left },
        }];
        if left == 0 {
            let loser = 1 - seat;
            let stake = self.config.stake;
            let paid = self.player(loser).map_or(Chips(0), |p| p.stack.min(stake));
            let winnings = self
                .player(seat)
                .and_then(|p| p.stack.checked_add(paid))
                .ok_or_else(|| bad(ErrorCode::BadAmount, "the winnings do not fit"))?;
            if let Some(p) = self.seats[usize::from(loser)].as_mut() {
                p.stack = p.stack.saturating_sub(paid);
            }
            if let Some(p) = self.seats[usize::from(seat)].as_mut() {
                p.stack = winnings;
            }
            self.pile = None;
            self.settlement = Some(Settlement {
                number: self.game,
                stacks: self.stacks(),
                result: NimResult { winner: seat },
            });
            told.push(Told {
                to: Audience::Everyone,
                event: NimEvent::Won {
                    game: self.game,
                    seat,
                },
            });
        } else {
            self.pile = Some(left);
            self.to_act = 1 - seat;
            self.decision += 1;
        }
        Ok(told)
    }

    fn sit(
        &mut self,
        seat: SeatNo,
        player: &str,
        stack: Chips,
    ) -> Result<Vec<Told<NimEvent>>, Refusal> {
        let slot = self
            .seats
            .get_mut(usize::from(seat))
            .ok_or_else(|| bad(ErrorCode::BadField, "seat is out of range"))?;
        if slot.is_some() {
            return Err(bad(ErrorCode::SeatTaken, "that seat is taken"));
        }
        *slot = Some(Player {
            name: player.to_string(),
            stack,
        });
        Ok(vec![Told {
            to: Audience::Everyone,
            event: NimEvent::Seated {
                seat,
                player: player.to_string(),
            },
        }])
    }

    fn leave(&mut self, seat: SeatNo) -> Result<Vec<Told<NimEvent>>, Refusal> {
        if self.player(seat).is_none() {
            return Err(bad(ErrorCode::NotSeated, "nobody sits there"));
        }
        if self.pile.is_some() {
            return Err(bad(ErrorCode::HandInProgress, "a game is in progress"));
        }
        self.seats[usize::from(seat)] = None;
        Ok(vec![Told {
            to: Audience::Everyone,
            event: NimEvent::Left { seat },
        }])
    }

    fn start(&mut self, _rng: &mut dyn RngCore) -> Option<Vec<Told<NimEvent>>> {
        let ready = self.pile.is_none()
            && self.settlement.is_none()
            && self.seats.iter().flatten().all(|p| !p.stack.is_zero())
            && self.seats.iter().flatten().count() == 2;
        if !ready {
            return None;
        }
        self.game += 1;
        self.decision += 1;
        // The loser of the last game (or seat 0) moves first.
        self.to_act = if self.game == 1 { 0 } else { 1 - self.to_act };
        self.pile = Some(self.config.pile);
        Some(vec![Told {
            to: Audience::Everyone,
            event: NimEvent::Started {
                game: self.game,
                pile: self.config.pile,
            },
        }])
    }

    fn decision(&self) -> Option<Decision<Vec<u32>>> {
        let pile = self.pile?;
        Some(Decision {
            seat: self.to_act,
            number: self.decision,
            legal: (1..=pile.min(3)).collect(),
        })
    }

    fn on_timeout(&self) -> Option<NimCommand> {
        self.pile.map(|_| NimCommand::Take(1))
    }

    fn take_settlement(&mut self) -> Option<Settlement<NimResult>> {
        self.settlement.take()
    }

    fn view(&self, _seat: Option<SeatNo>) -> NimView {
        NimView {
            pile: self.pile.unwrap_or(0),
            to_act: self.pile.map(|_| self.to_act),
            seats: (0..2u8)
                .filter_map(|s| self.player(s).map(|p| (s, p.name.clone(), p.stack)))
                .collect(),
        }
    }
}
