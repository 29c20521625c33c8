//! How a chess game ends: by the position after a move (checkmate,
//! stalemate, insufficient material, threefold repetition, the fifty-move
//! rule), by a flag fall, by resignation or agreement.

use cozy_chess::{BitBoard, Board, Color, GameStatus, Piece};
use serde::Serialize;

use crate::chips::SeatNo;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    Checkmate,
    Stalemate,
    InsufficientMaterial,
    ThreefoldRepetition,
    FiftyMoves,
    Resignation,
    Agreement,
    Timeout,
}

/// A game's end: who won (`None`: a draw) and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub winner: Option<SeatNo>,
    pub reason: EndReason,
}

impl Outcome {
    pub fn won(seat: SeatNo, reason: EndReason) -> Outcome {
        Outcome {
            winner: Some(seat),
            reason,
        }
    }

    pub fn drawn(reason: EndReason) -> Outcome {
        Outcome {
            winner: None,
            reason,
        }
    }

    pub fn winner(&self) -> Option<SeatNo> {
        self.winner
    }

    /// The result as chess writes it.
    pub fn score(&self) -> &'static str {
        match self.winner {
            Some(0) => "1-0",
            Some(_) => "0-1",
            None => "1/2-1/2",
        }
    }
}

/// The seat that moved last in `board`.
fn last_mover(board: &Board) -> SeatNo {
    match board.side_to_move() {
        Color::White => 1,
        Color::Black => 0,
    }
}

/// Whether neither side can ever mate: kings alone, a king and one minor
/// piece against a king, or kings and bishops all on squares of one
/// colour.
pub fn insufficient_material(board: &Board) -> bool {
    let heavy = board.pieces(Piece::Pawn) | board.pieces(Piece::Rook) | board.pieces(Piece::Queen);
    if !heavy.is_empty() {
        return false;
    }
    let knights = board.pieces(Piece::Knight);
    let bishops = board.pieces(Piece::Bishop);
    let minors = knights.len() + bishops.len();
    if minors <= 1 {
        return true;
    }
    if !knights.is_empty() {
        return false;
    }
    let dark = BitBoard::DARK_SQUARES;
    (bishops & dark).is_empty() || (bishops & !dark).is_empty()
}

/// Whether `color` has nothing left that could ever mate: a lone king, or
/// a king and a single knight or bishop.
pub fn cannot_mate(board: &Board, color: Color) -> bool {
    let ours = board.colors(color);
    let heavy = board.pieces(Piece::Pawn) | board.pieces(Piece::Rook) | board.pieces(Piece::Queen);
    if !(ours & heavy).is_empty() {
        return false;
    }
    let minors = ours & (board.pieces(Piece::Knight) | board.pieces(Piece::Bishop));
    minors.len() <= 1
}

/// How many times the position of `board` has stood in `positions` (which
/// holds every position of the game, the current one included).
pub fn repetitions(board: &Board, positions: &[Board]) -> usize {
    positions.iter().filter(|p| p.same_position(board)).count()
}

/// The end the position after a move makes, if any: checkmate first, then
/// stalemate, insufficient material, threefold repetition, fifty moves.
pub fn by_position(board: &Board, positions: &[Board]) -> Option<Outcome> {
    let has_moves = board.generate_moves(|_| true);
    if !has_moves {
        return Some(match board.status() {
            GameStatus::Won => Outcome::won(last_mover(board), EndReason::Checkmate),
            _ => Outcome::drawn(EndReason::Stalemate),
        });
    }
    if insufficient_material(board) {
        return Some(Outcome::drawn(EndReason::InsufficientMaterial));
    }
    if repetitions(board, positions) >= 3 {
        return Some(Outcome::drawn(EndReason::ThreefoldRepetition));
    }
    if board.halfmove_clock() >= 100 {
        return Some(Outcome::drawn(EndReason::FiftyMoves));
    }
    None
}

/// The end of a flag fall of `seat` (the side to move in `board`): a loss,
/// or a draw when its opponent could never mate.
pub fn on_time(board: &Board, seat: SeatNo) -> Outcome {
    let opponent = if seat == 0 {
        Color::Black
    } else {
        Color::White
    };
    if cannot_mate(board, opponent) {
        Outcome::drawn(EndReason::Timeout)
    } else {
        Outcome::won(1 - seat, EndReason::Timeout)
    }
}
