//! The chess game's rules agree with an independent engine: thousands of
//! random games played through the game module (`pitboss::games::chess`,
//! driven as the runtime drives it, through the game trait) are replayed
//! by chess.js (npm, another language's registry) position by position:
//! the legal moves in UCI, check, each move's SAN and the FEN after it,
//! and how each game ended (checkmate, stalemate, insufficient material,
//! threefold repetition, fifty moves). `scripts/test.sh` installs chess.js
//! (`npm ci` in tests/chess_js).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use pitboss::chips::Chips;
use pitboss::games::chess::{Chess, ChessCommand, ChessConfig, ChessEvent};
use pitboss::games::Game;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

/// One random game to its end, as chess.js is given it.
fn random_game(rng: &mut StdRng) -> Value {
    let config = ChessConfig {
        clock_ms: 3_600_000,
        increment_ms: 0,
        stake: Chips(0),
    };
    let mut chess = Chess::new(config).expect("a game");
    chess.sit(0, "white", Chips(0)).expect("white sits");
    chess.sit(1, "black", Chips(0)).expect("black sits");
    let started = chess.start(rng).expect("the game starts");
    // Whether the side to move is in check, as the last `turn` said.
    let mut check = started
        .iter()
        .any(|t| matches!(t.event, ChessEvent::Turn { check: true, .. }));
    let mut moves = Vec::new();
    loop {
        let Some(open) = chess.decision() else {
            panic!("no decision open and no end told: {moves:?}");
        };
        let uci = open.legal[rng.gen_range(0..open.legal.len())].clone();
        let told = chess
            .apply_timed(
                open.seat,
                open.number,
                ChessCommand::Move(uci.clone()),
                Duration::ZERO,
                rng,
            )
            .unwrap_or_else(|e| panic!("{uci} was listed as legal but refused: {e}"));
        let mut played = json!({"uci": uci, "legal": open.legal, "check": check});
        for t in told {
            match t.event {
                ChessEvent::Action { san, fen, .. } => {
                    played["san"] = json!(san);
                    played["fen"] = json!(fen);
                }
                ChessEvent::Turn { check: c, .. } => check = c,
                ChessEvent::GameEnded { reason, .. } => {
                    moves.push(played);
                    return json!({"moves": moves, "end": reason});
                }
                _ => {}
            }
        }
        moves.push(played);
    }
}

#[test]
fn random_games_agree_with_chess_js_position_by_position() {
    let games: usize = std::env::var("PITBOSS_CHESS_GAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let seed: u64 = std::env::var("PITBOSS_CHESS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/chess_js");
    assert!(
        dir.join("node_modules/chess.js").is_dir(),
        "chess.js is not installed: run `npm ci` in tests/chess_js (scripts/test.sh does)"
    );
    let mut rng = StdRng::seed_from_u64(seed);
    let mut lines = String::new();
    for _ in 0..games {
        lines.push_str(&random_game(&mut rng).to_string());
        lines.push('\n');
    }
    let file =
        std::env::temp_dir().join(format!("pitboss-chess-{}-{seed}.jsonl", std::process::id()));
    std::fs::write(&file, lines).expect("games written");
    let out = Command::new("node")
        .arg(dir.join("check.mjs"))
        .arg(&file)
        .output()
        .expect("node runs (it is installed with the OS packages)");
    let _ = std::fs::remove_file(&file);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|_| {
        panic!(
            "chess.js printed no summary: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    println!("{summary}");
    assert_eq!(
        summary["mismatches"],
        json!([]),
        "the game module and chess.js disagree (seed {seed})"
    );
    assert!(out.status.success(), "{summary}");
    assert_eq!(summary["games"], json!(games));
    // Every automatic end was reached, so every one was compared.
    for reason in [
        "checkmate",
        "stalemate",
        "insufficient_material",
        "threefold_repetition",
        "fifty_moves",
    ] {
        assert!(
            summary["ends"][reason].as_u64() > Some(0),
            "no random game ended by {reason}: {summary}"
        );
    }
}
