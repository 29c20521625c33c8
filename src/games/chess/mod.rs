//! Chess behind the [`Game`] trait: two seats (0 white, 1 black), a clock
//! per side with an increment, an optional stake, and every way a game
//! ends. The rules (move generation, check, mate, SAN) are `cozy-chess`'s;
//! this module only keeps the game around them: whose clock runs, the draw
//! offer, repetitions, and what each end settles.
//!
//! A game's time is the runtime's to measure: each command comes with how
//! long its decision was open ([`Game::apply_timed`]), which the runtime
//! journals, so a replay charges each side exactly what it was charged.

mod end;
mod wire;

use std::time::Duration;

use cozy_chess::util::{display_san_move, display_uci_move, parse_uci_move};
use cozy_chess::{Board, Color, Move};
use rand::RngCore;
use serde_json::{Map, Value};

use super::fields::{bad_field, u64_field};
use super::{
    Audience, Decision, Game, GameKind, Occupant, Refusal, Role, SeatResult, Settlement, Told,
};
use crate::chips::{Chips, PlayerId, SeatNo};
use crate::types::ErrorCode;
pub use end::{EndReason, Outcome};
pub use wire::{
    ChessCommand, ChessConfig, ChessEvent, ChessResult, ChessView, SeatStack, MAX_CLOCK_MS,
};

#[derive(Clone, Debug)]
struct Player {
    name: PlayerId,
    stack: Chips,
    /// Its stack when the game in progress started.
    start: Chips,
}

/// A game in progress.
#[derive(Clone, Debug)]
struct Play {
    board: Board,
    /// Every position reached, the start's first, for repetitions.
    positions: Vec<Board>,
    moves: Vec<String>,
    san: Vec<String>,
    clocks: [u64; 2],
    draw_offer: Option<SeatNo>,
}

/// The last game's end, for the view between games.
#[derive(Clone, Debug)]
struct Ended {
    outcome: Outcome,
    moves: Vec<String>,
    san: Vec<String>,
    fen: String,
    clocks: [u64; 2],
}

#[derive(Clone, Debug)]
pub struct Chess {
    config: ChessConfig,
    seats: [Option<Player>; 2],
    game: u64,
    decision: u64,
    play: Option<Play>,
    ended: Option<Ended>,
    settlement: Option<Settlement<ChessResult>>,
}

fn refuse(code: ErrorCode, message: impl Into<String>) -> Refusal {
    Refusal::new(code, message)
}

fn illegal(message: impl Into<String>) -> Refusal {
    refuse(ErrorCode::IllegalAction, message)
}

/// The seat that plays `color`.
fn seat_of(color: Color) -> SeatNo {
    match color {
        Color::White => 0,
        Color::Black => 1,
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Every legal move of `board` in UCI, sorted.
pub fn legal_moves(board: &Board) -> Vec<String> {
    let mut moves = Vec::new();
    board.generate_moves(|piece_moves| {
        for mv in piece_moves {
            moves.push(display_uci_move(board, mv).to_string());
        }
        false
    });
    moves.sort();
    moves
}

impl Chess {
    fn player(&self, seat: SeatNo) -> Option<&Player> {
        self.seats.get(usize::from(seat)).and_then(Option::as_ref)
    }

    fn stacks(&self) -> Vec<SeatStack> {
        (0..2u8)
            .filter_map(|seat| {
                self.player(seat).map(|p| SeatStack {
                    seat,
                    player: p.name.clone(),
                    stack: p.stack,
                })
            })
            .collect()
    }

    fn everyone(event: ChessEvent) -> Told<ChessEvent> {
        Told {
            to: Audience::Everyone,
            event,
        }
    }

    fn turn(&self) -> Option<Told<ChessEvent>> {
        let play = self.play.as_ref()?;
        Some(Self::everyone(ChessEvent::Turn {
            game: self.game,
            seat: seat_of(play.board.side_to_move()),
            decision: self.decision,
            legal: legal_moves(&play.board),
            clocks_ms: play.clocks,
            check: !play.board.checkers().is_empty(),
        }))
    }

    /// Ends the game in progress: the stake moves to the winner, and the
    /// settlement waits for the runtime to take it.
    fn finish(&mut self, outcome: Outcome) -> Result<Told<ChessEvent>, Refusal> {
        let play = self
            .play
            .take()
            .ok_or_else(|| refuse(ErrorCode::Internal, "no game to end"))?;
        if let Some(winner) = outcome.winner() {
            let loser = 1 - winner;
            let paid = self
                .player(loser)
                .map_or(Chips(0), |p| p.stack.min(self.config.stake));
            let won = self
                .player(winner)
                .and_then(|p| p.stack.checked_add(paid))
                .ok_or_else(|| refuse(ErrorCode::Overflow, "the winnings do not fit"))?;
            if let Some(p) = self.seats[usize::from(loser)].as_mut() {
                p.stack = p.stack.saturating_sub(paid);
            }
            if let Some(p) = self.seats[usize::from(winner)].as_mut() {
                p.stack = won;
            }
        }
        let seats = (0..2u8)
            .filter_map(|seat| {
                self.player(seat).map(|p| SeatResult {
                    seat,
                    player: p.name.clone(),
                    start: p.start,
                    end: p.stack,
                })
            })
            .collect();
        self.settlement = Some(Settlement {
            number: self.game,
            seats,
            result: ChessResult {
                game: self.game,
                result: outcome.score(),
                reason: outcome.reason,
                moves: play.moves.clone(),
                clocks_ms: play.clocks,
            },
        });
        let event = ChessEvent::GameEnded {
            game: self.game,
            result: outcome.score(),
            reason: outcome.reason,
            moves: play.moves.clone(),
            clocks_ms: play.clocks,
            stacks: self.stacks(),
        };
        self.ended = Some(Ended {
            outcome,
            fen: play.board.to_string(),
            moves: play.moves,
            san: play.san,
            clocks: play.clocks,
        });
        Ok(Self::everyone(event))
    }

    /// Plays `uci` for the side to move, which spent `spent` on it.
    fn play_move(
        &mut self,
        seat: SeatNo,
        uci: &str,
        spent: u64,
    ) -> Result<Vec<Told<ChessEvent>>, Refusal> {
        let increment = self.config.increment_ms;
        let game = self.game;
        let play = self.play.as_mut().ok_or_else(no_game)?;
        let mv: Move = parse_uci_move(&play.board, uci)
            .ok()
            .filter(|mv| play.board.is_legal(*mv))
            .ok_or_else(|| illegal(format!("{uci} is not a legal move here")))?;
        let side = usize::from(seat);
        if spent >= play.clocks[side] {
            // It came after the flag fell: the clock's end stands.
            return self.flag(seat).map(|t| vec![t]);
        }
        play.clocks[side] = (play.clocks[side] - spent).saturating_add(increment);
        let san = display_san_move(&play.board, mv).to_string();
        let uci = display_uci_move(&play.board, mv).to_string();
        play.board.play(mv);
        play.positions.push(play.board.clone());
        play.moves.push(uci.clone());
        play.san.push(san.clone());
        // An offer stands until the offering side's opponent moves.
        if play.draw_offer.is_some_and(|s| s != seat) {
            play.draw_offer = None;
        }
        let told = Self::everyone(ChessEvent::Action {
            game,
            seat,
            action: "move",
            uci,
            san,
            fen: play.board.to_string(),
            clocks_ms: play.clocks,
        });
        let ends = end::by_position(&play.board, &play.positions);
        self.decision += 1;
        let mut events = vec![told];
        match ends {
            Some(outcome) => events.push(self.finish(outcome)?),
            None => events.extend(self.turn()),
        }
        Ok(events)
    }

    /// The side to move (`seat`) ran out of time.
    fn flag(&mut self, seat: SeatNo) -> Result<Told<ChessEvent>, Refusal> {
        let play = self.play.as_mut().ok_or_else(no_game)?;
        play.clocks[usize::from(seat)] = 0;
        let outcome = end::on_time(&play.board, seat);
        self.decision += 1;
        self.finish(outcome)
    }
}

fn no_game() -> Refusal {
    refuse(ErrorCode::NoHandInProgress, "no game in progress")
}

impl Game for Chess {
    const KIND: GameKind = GameKind::named("chess");
    const CONFIG_FIELDS: &'static [&'static str] = &["clock_ms", "increment_ms", "stake"];

    type Config = ChessConfig;
    type Command = ChessCommand;
    type Event = ChessEvent;
    type View = ChessView;
    type Legal = Vec<String>;
    type Result = ChessResult;

    fn config(body: &Map<String, Value>) -> Result<ChessConfig, Refusal> {
        let clock_ms =
            u64_field(body, "clock_ms")?.ok_or_else(|| bad_field("clock_ms is required"))?;
        if !(1000..=MAX_CLOCK_MS).contains(&clock_ms) {
            return Err(bad_field(format!(
                "clock_ms must be from 1000 to {MAX_CLOCK_MS}"
            )));
        }
        let increment_ms = u64_field(body, "increment_ms")?.unwrap_or(0);
        if increment_ms > MAX_CLOCK_MS {
            return Err(bad_field(format!(
                "increment_ms must be at most {MAX_CLOCK_MS}"
            )));
        }
        let stake = match u64_field(body, "stake")?.unwrap_or(0) {
            s if s <= i64::MAX as u64 / 2 => Chips(s),
            _ => {
                return Err(refuse(
                    ErrorCode::BadAmount,
                    format!("stake must be at most {}", i64::MAX / 2),
                ))
            }
        };
        Ok(ChessConfig {
            clock_ms,
            increment_ms,
            stake,
        })
    }

    fn new(config: ChessConfig) -> Result<Chess, Refusal> {
        Ok(Chess {
            config,
            seats: [None, None],
            game: 0,
            decision: 0,
            play: None,
            ended: None,
            settlement: None,
        })
    }

    fn resume(
        config: ChessConfig,
        number: u64,
        _state: &Value,
        seats: Vec<Occupant>,
    ) -> Result<Chess, Refusal> {
        let mut chess = Chess::new(config)?;
        chess.game = number;
        for o in seats {
            let slot = chess
                .seats
                .get_mut(usize::from(o.seat))
                .ok_or_else(|| refuse(ErrorCode::Internal, "a stored seat is out of range"))?;
            *slot = Some(Player {
                name: o.player,
                stack: o.stack,
                start: o.stack,
            });
        }
        Ok(chess)
    }

    fn settings(&self) -> &ChessConfig {
        &self.config
    }

    fn command(fields: &Map<String, Value>) -> Result<ChessCommand, Refusal> {
        let action = match fields.get("action") {
            Some(Value::String(a)) => a.as_str(),
            Some(_) => return Err(bad_field("action must be a string")),
            None => return Err(bad_field("action is required")),
        };
        let allowed: &[&str] = match action {
            "move" => &["action", "move"],
            _ => &["action"],
        };
        super::fields::only_fields(fields, allowed)?;
        Ok(match action {
            "move" => match fields.get("move") {
                Some(Value::String(m)) if (4..=5).contains(&m.len()) => {
                    ChessCommand::Move(m.clone())
                }
                Some(Value::String(_)) => {
                    return Err(bad_field(
                        "move must be UCI: from, to and a promotion letter",
                    ))
                }
                _ => return Err(bad_field("move is required: a move in UCI, e.g. e2e4")),
            },
            "resign" => ChessCommand::Resign,
            "offer_draw" => ChessCommand::OfferDraw,
            "accept_draw" => ChessCommand::AcceptDraw,
            other => {
                return Err(bad_field(format!(
                    "unknown action {other:?}; expected move, resign, offer_draw or accept_draw"
                )))
            }
        })
    }

    fn apply(
        &mut self,
        seat: SeatNo,
        decision: u64,
        command: ChessCommand,
        rng: &mut dyn RngCore,
    ) -> Result<Vec<Told<ChessEvent>>, Refusal> {
        self.apply_timed(seat, decision, command, Duration::ZERO, rng)
    }

    fn apply_timed(
        &mut self,
        seat: SeatNo,
        decision: u64,
        command: ChessCommand,
        spent: Duration,
        _rng: &mut dyn RngCore,
    ) -> Result<Vec<Told<ChessEvent>>, Refusal> {
        let play = self.play.as_ref().ok_or_else(no_game)?;
        if self.player(seat).is_none() {
            return Err(refuse(ErrorCode::NotSeated, "nobody sits there"));
        }
        if decision != self.decision {
            return Err(refuse(
                ErrorCode::StaleDecision,
                "that decision is no longer open",
            ));
        }
        let to_move = seat_of(play.board.side_to_move());
        match command {
            ChessCommand::Move(uci) => {
                if seat != to_move {
                    return Err(refuse(ErrorCode::NotYourTurn, "it is not your move"));
                }
                self.play_move(seat, &uci, millis(spent))
            }
            ChessCommand::Flag => {
                if seat != to_move {
                    return Err(refuse(ErrorCode::NotYourTurn, "it is not your clock"));
                }
                self.flag(seat).map(|t| vec![t])
            }
            ChessCommand::Resign => {
                let outcome = Outcome::won(1 - seat, EndReason::Resignation);
                self.decision += 1;
                self.finish(outcome).map(|t| vec![t])
            }
            ChessCommand::OfferDraw => match play.draw_offer {
                Some(s) if s == seat => Err(illegal("your draw offer stands")),
                // Both sides want a draw.
                Some(_) => {
                    self.decision += 1;
                    self.finish(Outcome::drawn(EndReason::Agreement))
                        .map(|t| vec![t])
                }
                None => {
                    if let Some(p) = self.play.as_mut() {
                        p.draw_offer = Some(seat);
                    }
                    Ok(vec![Self::everyone(ChessEvent::DrawOffered {
                        game: self.game,
                        seat,
                    })])
                }
            },
            ChessCommand::AcceptDraw => match play.draw_offer {
                Some(s) if s != seat => {
                    self.decision += 1;
                    self.finish(Outcome::drawn(EndReason::Agreement))
                        .map(|t| vec![t])
                }
                _ => Err(illegal(
                    "there is no draw offer of your opponent's to accept",
                )),
            },
        }
    }

    fn sit(
        &mut self,
        seat: SeatNo,
        player: &str,
        stack: Chips,
    ) -> Result<Vec<Told<ChessEvent>>, Refusal> {
        if stack != self.config.stake {
            return Err(refuse(
                ErrorCode::BuyInOutOfRange,
                format!(
                    "the buy-in at this table is its stake, {}",
                    self.config.stake
                ),
            ));
        }
        let slot = self
            .seats
            .get_mut(usize::from(seat))
            .ok_or_else(|| bad_field("seat must be 0 (white) or 1 (black)"))?;
        if slot.is_some() {
            return Err(refuse(ErrorCode::SeatTaken, "that seat is taken"));
        }
        let name = PlayerId(player.to_string());
        *slot = Some(Player {
            name: name.clone(),
            stack,
            start: stack,
        });
        Ok(vec![Self::everyone(ChessEvent::Seated {
            seat,
            player: name,
            stack,
        })])
    }

    fn leave(&mut self, seat: SeatNo) -> Result<Vec<Told<ChessEvent>>, Refusal> {
        if self.player(seat).is_none() {
            return Err(refuse(ErrorCode::NotSeated, "nobody sits there"));
        }
        // Leaving a game in progress resigns it; the seat is vacated by the
        // game's result.
        let mut told = Vec::new();
        if self.play.is_some() {
            self.decision += 1;
            told.push(self.finish(Outcome::won(1 - seat, EndReason::Resignation))?);
        }
        let gone = self.seats[usize::from(seat)]
            .take()
            .ok_or_else(|| refuse(ErrorCode::NotSeated, "nobody sits there"))?;
        told.push(Self::everyone(ChessEvent::Left {
            seat,
            player: gone.name,
            stack: gone.stack,
        }));
        Ok(told)
    }

    fn start(&mut self, _rng: &mut dyn RngCore) -> Option<Vec<Told<ChessEvent>>> {
        if !self.can_start() {
            return None;
        }
        for p in self.seats.iter_mut().flatten() {
            p.start = p.stack;
        }
        self.game += 1;
        self.decision += 1;
        let board = Board::default();
        let clocks = [self.config.clock_ms; 2];
        let started = ChessEvent::GameStarted {
            game: self.game,
            white: self.player(0)?.name.clone(),
            black: self.player(1)?.name.clone(),
            fen: board.to_string(),
            clocks_ms: clocks,
        };
        self.play = Some(Play {
            positions: vec![board.clone()],
            board,
            moves: Vec::new(),
            san: Vec::new(),
            clocks,
            draw_offer: None,
        });
        let mut told = vec![Self::everyone(started)];
        told.extend(self.turn());
        Some(told)
    }

    fn can_start(&self) -> bool {
        self.play.is_none()
            && self.settlement.is_none()
            && self
                .seats
                .iter()
                .all(|s| s.as_ref().is_some_and(|p| p.stack >= self.config.stake))
    }

    fn void(&mut self) -> Option<Vec<Told<ChessEvent>>> {
        self.play.take()?;
        for p in self.seats.iter_mut().flatten() {
            p.stack = p.start;
        }
        Some(vec![Self::everyone(ChessEvent::GameVoided {
            game: self.game,
            stacks: self.stacks(),
        })])
    }

    fn unrecorded(settlement: &Settlement<ChessResult>) -> Told<ChessEvent> {
        Self::everyone(ChessEvent::GameVoided {
            game: settlement.number,
            stacks: settlement
                .seats
                .iter()
                .map(|s| SeatStack {
                    seat: s.seat,
                    player: s.player.clone(),
                    stack: s.start,
                })
                .collect(),
        })
    }

    fn number(&self) -> u64 {
        self.game
    }

    fn in_progress(&self) -> bool {
        self.play.is_some()
    }

    fn takes_part(&self, seat: SeatNo) -> bool {
        self.play.is_some() && self.player(seat).is_some()
    }

    fn occupants(&self) -> Vec<Occupant> {
        (0..2u8)
            .filter_map(|seat| {
                self.player(seat).map(|p| Occupant {
                    seat,
                    player: p.name.clone(),
                    stack: p.stack,
                })
            })
            .collect()
    }

    fn decision(&self) -> Option<Decision<Vec<String>>> {
        let play = self.play.as_ref()?;
        Some(Decision {
            seat: seat_of(play.board.side_to_move()),
            number: self.decision,
            legal: legal_moves(&play.board),
        })
    }

    fn announce(&self) -> Option<Told<ChessEvent>> {
        self.turn()
    }

    fn on_timeout(&self) -> Option<ChessCommand> {
        self.play.as_ref().map(|_| ChessCommand::Flag)
    }

    fn clock(&self) -> Option<Duration> {
        let play = self.play.as_ref()?;
        let side = usize::from(seat_of(play.board.side_to_move()));
        Some(Duration::from_millis(play.clocks[side]))
    }

    fn take_settlement(&mut self) -> Option<Settlement<ChessResult>> {
        let settlement = self.settlement.take()?;
        for p in self.seats.iter_mut().flatten() {
            p.start = p.stack;
        }
        Some(settlement)
    }

    fn boundary_state(&self) -> Value {
        Value::Null
    }

    fn role(event: &ChessEvent) -> Role<'_> {
        match event {
            ChessEvent::Turn { seat, decision, .. } => Role::Decision {
                seat: *seat,
                number: *decision,
            },
            ChessEvent::GameEnded { .. } => Role::Result,
            ChessEvent::Left {
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

    fn view(&self, _seat: Option<SeatNo>) -> ChessView {
        let seats = self.stacks();
        match (&self.play, &self.ended) {
            (Some(play), _) => ChessView {
                game: self.game,
                fen: play.board.to_string(),
                moves: play.moves.clone(),
                san: play.san.clone(),
                to_act: Some(seat_of(play.board.side_to_move())),
                decision: Some(self.decision),
                legal: legal_moves(&play.board),
                check: !play.board.checkers().is_empty(),
                clocks_ms: play.clocks,
                draw_offer: play.draw_offer,
                result: None,
                reason: None,
                seats,
            },
            (None, Some(ended)) => ChessView {
                game: self.game,
                fen: ended.fen.clone(),
                moves: ended.moves.clone(),
                san: ended.san.clone(),
                to_act: None,
                decision: None,
                legal: Vec::new(),
                check: false,
                clocks_ms: ended.clocks,
                draw_offer: None,
                result: Some(ended.outcome.score()),
                reason: Some(ended.outcome.reason),
                seats,
            },
            (None, None) => ChessView {
                game: self.game,
                fen: Board::default().to_string(),
                moves: Vec::new(),
                san: Vec::new(),
                to_act: None,
                decision: None,
                legal: Vec::new(),
                check: false,
                clocks_ms: [self.config.clock_ms; 2],
                draw_offer: None,
                result: None,
                reason: None,
                seats,
            },
        }
    }
}

#[cfg(test)]
mod tests;
