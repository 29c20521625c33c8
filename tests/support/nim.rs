//! Nim, the smallest game of another shape than hold'em: two seats take
//! turns removing 1 to 3 stones from one pile, and whoever takes the last
//! stone wins the other's stake. It has no hidden state and no
//! randomness, so it shows what the runtime owes every game and nothing
//! the game owes itself. It lives in the tests, not in the product: the
//! trait's tests play it (`tests/games_trait.rs`), and the test server
//! (`tests/support/test_server.rs`) hosts it beside hold'em through the
//! same runtime (`tests/hosted_game.rs`).

use rand::RngCore;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use pitboss::games::holdem::rules::{Chips, PlayerId, SeatNo};
use pitboss::games::{
    Audience, Decision, Game, GameKind, Occupant, Refusal, Role, SeatResult, Settlement, Told,
};
use pitboss::types::ErrorCode;

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
        player: PlayerId,
    },
    Left {
        seat: SeatNo,
        player: PlayerId,
        stack: Chips,
    },
    Started {
        game: u64,
        pile: u32,
    },
    Turn {
        seat: SeatNo,
        decision: u64,
        legal: Vec<u32>,
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
    /// The game was abandoned; every stack is as it was before it.
    Voided {
        game: u64,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NimView {
    pub pile: u32,
    pub to_act: Option<SeatNo>,
    pub seats: Vec<(SeatNo, PlayerId, Chips)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NimResult {
    pub winner: SeatNo,
}

#[derive(Clone, Debug)]
struct Player {
    name: PlayerId,
    stack: Chips,
    /// Its stack when the game in progress started.
    start: Chips,
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

    fn results(&self) -> Vec<SeatResult> {
        (0..2u8)
            .filter_map(|s| {
                self.player(s).map(|p| SeatResult {
                    seat: s,
                    player: p.name.clone(),
                    start: p.start,
                    end: p.stack,
                })
            })
            .collect()
    }

    /// `winner` takes the stake from the other seat; the game is over.
    fn settle(&mut self, winner: SeatNo) -> Result<Told<NimEvent>, Refusal> {
        let loser = 1 - winner;
        let stake = self.config.stake;
        let paid = self.player(loser).map_or(Chips(0), |p| p.stack.min(stake));
        let winnings = self
            .player(winner)
            .and_then(|p| p.stack.checked_add(paid))
            .ok_or_else(|| bad(ErrorCode::BadAmount, "the winnings do not fit"))?;
        if let Some(p) = self.seats[usize::from(loser)].as_mut() {
            p.stack = p.stack.saturating_sub(paid);
        }
        if let Some(p) = self.seats[usize::from(winner)].as_mut() {
            p.stack = winnings;
        }
        self.pile = None;
        self.settlement = Some(Settlement {
            number: self.game,
            seats: self.results(),
            result: NimResult { winner },
        });
        Ok(Told {
            to: Audience::Everyone,
            event: NimEvent::Won {
                game: self.game,
                seat: winner,
            },
        })
    }

    fn turn(&self) -> Option<Told<NimEvent>> {
        let open = self.decision()?;
        Some(Told {
            to: Audience::Everyone,
            event: NimEvent::Turn {
                seat: open.seat,
                decision: open.number,
                legal: open.legal,
            },
        })
    }
}

impl Game for Nim {
    const KIND: GameKind = GameKind::named("nim");
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

    fn resume(
        config: NimConfig,
        number: u64,
        state: &Value,
        seats: Vec<Occupant>,
    ) -> Result<Nim, Refusal> {
        let mut nim = Nim::new(config)?;
        nim.game = number;
        // Who moved last (the next game's loser moves first).
        if let Some(seat) = state.get("to_act").and_then(Value::as_u64) {
            nim.to_act = SeatNo::try_from(seat.min(1)).unwrap_or(0);
        }
        for o in seats {
            let slot = nim
                .seats
                .get_mut(usize::from(o.seat))
                .ok_or_else(|| bad(ErrorCode::Internal, "a stored seat is out of range"))?;
            *slot = Some(Player {
                name: o.player,
                stack: o.stack,
                start: o.stack,
            });
        }
        Ok(nim)
    }

    fn settings(&self) -> &NimConfig {
        &self.config
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
            told.push(self.settle(seat)?);
        } else {
            self.pile = Some(left);
            self.to_act = 1 - seat;
            self.decision += 1;
            told.extend(self.turn());
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
            name: PlayerId(player.to_string()),
            stack,
            start: stack,
        });
        Ok(vec![Told {
            to: Audience::Everyone,
            event: NimEvent::Seated {
                seat,
                player: PlayerId(player.to_string()),
            },
        }])
    }

    fn leave(&mut self, seat: SeatNo) -> Result<Vec<Told<NimEvent>>, Refusal> {
        if self.player(seat).is_none() {
            return Err(bad(ErrorCode::NotSeated, "nobody sits there"));
        }
        // Leaving a game in progress forfeits it: the other seat wins, and
        // the seat is vacated by the game's result.
        let mut told = Vec::new();
        if self.pile.is_some() {
            told.push(self.settle(1 - seat)?);
        }
        let Some(gone) = self.seats.get_mut(usize::from(seat)).and_then(Option::take) else {
            return Err(bad(ErrorCode::NotSeated, "nobody sits there"));
        };
        told.push(Told {
            to: Audience::Everyone,
            event: NimEvent::Left {
                seat,
                player: gone.name,
                stack: gone.stack,
            },
        });
        Ok(told)
    }

    fn start(&mut self, _rng: &mut dyn RngCore) -> Option<Vec<Told<NimEvent>>> {
        if !self.can_start() {
            return None;
        }
        for p in self.seats.iter_mut().flatten() {
            p.start = p.stack;
        }
        self.game += 1;
        self.decision += 1;
        // The loser of the last game (or seat 0) moves first.
        self.to_act = if self.game == 1 { 0 } else { 1 - self.to_act };
        self.pile = Some(self.config.pile);
        let mut told = vec![Told {
            to: Audience::Everyone,
            event: NimEvent::Started {
                game: self.game,
                pile: self.config.pile,
            },
        }];
        told.extend(self.turn());
        Some(told)
    }

    fn can_start(&self) -> bool {
        self.pile.is_none()
            && self.settlement.is_none()
            && self.seats.iter().flatten().all(|p| !p.stack.is_zero())
            && self.seats.iter().flatten().count() == 2
    }

    fn void(&mut self) -> Option<Vec<Told<NimEvent>>> {
        self.pile.take()?;
        Some(vec![Told {
            to: Audience::Everyone,
            event: NimEvent::Voided { game: self.game },
        }])
    }

    fn unrecorded(settlement: &Settlement<NimResult>) -> Told<NimEvent> {
        Told {
            to: Audience::Everyone,
            event: NimEvent::Voided {
                game: settlement.number,
            },
        }
    }

    fn number(&self) -> u64 {
        self.game
    }

    fn in_progress(&self) -> bool {
        self.pile.is_some()
    }

    fn takes_part(&self, seat: SeatNo) -> bool {
        self.pile.is_some() && self.player(seat).is_some()
    }

    fn occupants(&self) -> Vec<Occupant> {
        (0..2u8)
            .filter_map(|s| {
                self.player(s).map(|p| Occupant {
                    seat: s,
                    player: p.name.clone(),
                    stack: p.stack,
                })
            })
            .collect()
    }

    fn announce(&self) -> Option<Told<NimEvent>> {
        self.turn()
    }

    fn boundary_state(&self) -> Value {
        serde_json::json!({ "to_act": self.to_act })
    }

    fn role(event: &NimEvent) -> Role<'_> {
        match event {
            NimEvent::Turn { seat, decision, .. } => Role::Decision {
                seat: *seat,
                number: *decision,
            },
            NimEvent::Won { .. } => Role::Result,
            NimEvent::Left {
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
