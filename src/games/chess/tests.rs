use std::time::Duration;

use rand::rngs::mock::StepRng;
use serde_json::json;

use super::*;

fn config(stake: u64) -> ChessConfig {
    ChessConfig {
        clock_ms: 60_000,
        increment_ms: 1_000,
        stake: Chips(stake),
    }
}

/// A game in progress between alice (white) and bob (black).
fn started(stake: u64) -> Chess {
    let mut chess = Chess::new(config(stake)).unwrap();
    chess.sit(0, "alice", Chips(stake)).unwrap();
    chess.sit(1, "bob", Chips(stake)).unwrap();
    assert!(chess.can_start());
    let told = chess.start(&mut StepRng::new(0, 1)).unwrap();
    assert!(matches!(
        told[0].event,
        ChessEvent::GameStarted { game: 1, .. }
    ));
    assert!(matches!(told[1].event, ChessEvent::Turn { seat: 0, .. }));
    chess
}

fn act(
    chess: &mut Chess,
    seat: SeatNo,
    command: ChessCommand,
    spent_ms: u64,
) -> Result<Vec<ChessEvent>, Refusal> {
    let decision = chess.decision().map_or(0, |d| d.number);
    chess
        .apply_timed(
            seat,
            decision,
            command,
            Duration::from_millis(spent_ms),
            &mut StepRng::new(0, 1),
        )
        .map(|told| told.into_iter().map(|t| t.event).collect())
}

/// Plays `moves` (UCI) alternately from white, each taking `spent_ms`.
fn play(chess: &mut Chess, moves: &[&str], spent_ms: u64) -> Vec<ChessEvent> {
    let mut last = Vec::new();
    for mv in moves {
        let seat = chess.decision().expect("a decision open").seat;
        last = act(chess, seat, ChessCommand::Move((*mv).into()), spent_ms)
            .unwrap_or_else(|e| panic!("{mv}: {e}"));
    }
    last
}

fn ended(events: &[ChessEvent]) -> Option<(&'static str, EndReason)> {
    events.iter().find_map(|e| match e {
        ChessEvent::GameEnded { result, reason, .. } => Some((*result, *reason)),
        _ => None,
    })
}

#[test]
fn fools_mate_ends_the_game_and_the_winner_takes_both_stakes() {
    let mut chess = started(50);
    let events = play(&mut chess, &["f2f3", "e7e5", "g2g4", "d8h4"], 10);
    assert_eq!(ended(&events), Some(("0-1", EndReason::Checkmate)));
    let ChessEvent::Action { san, .. } = &events[0] else {
        panic!("{events:?}")
    };
    assert_eq!(san, "Qh4#");
    let settled = chess.take_settlement().expect("a settlement");
    let stacks: Vec<_> = settled
        .seats
        .iter()
        .map(|s| (s.seat, s.start, s.end))
        .collect();
    assert_eq!(
        stacks,
        vec![(0, Chips(50), Chips(0)), (1, Chips(50), Chips(100))]
    );
    assert_eq!(settled.result.moves, ["f2f3", "e7e5", "g2g4", "d8h4"]);
    assert!(!chess.in_progress());
    // The loser has nothing left to stake: no next game.
    assert!(!chess.can_start());
    let view = chess.view(None);
    assert_eq!(view.result, Some("0-1"));
    assert_eq!(view.reason, Some(EndReason::Checkmate));
}

#[test]
fn an_illegal_move_or_a_move_out_of_turn_is_refused_and_changes_nothing() {
    let mut chess = started(0);
    let before = serde_json::to_value(chess.view(None)).unwrap();
    for (seat, mv, code) in [
        (0, "e2e5", ErrorCode::IllegalAction),
        (0, "e7e5", ErrorCode::IllegalAction),
        (0, "zz99", ErrorCode::IllegalAction),
        (1, "e7e5", ErrorCode::NotYourTurn),
    ] {
        let e = act(&mut chess, seat, ChessCommand::Move(mv.into()), 5).unwrap_err();
        assert_eq!(e.code, code, "{mv}");
    }
    let stale = chess.apply_timed(
        0,
        99,
        ChessCommand::Move("e2e4".into()),
        Duration::ZERO,
        &mut StepRng::new(0, 1),
    );
    assert_eq!(stale.unwrap_err().code, ErrorCode::StaleDecision);
    assert_eq!(serde_json::to_value(chess.view(None)).unwrap(), before);
}

#[test]
fn the_mover_is_charged_its_time_and_given_the_increment() {
    let mut chess = started(0);
    let events = play(&mut chess, &["e2e4"], 4_000);
    let ChessEvent::Turn {
        clocks_ms, seat, ..
    } = &events[1]
    else {
        panic!("{events:?}")
    };
    assert_eq!((*seat, *clocks_ms), (1, [57_000, 60_000]));
    assert_eq!(chess.clock(), Some(Duration::from_millis(60_000)));
    play(&mut chess, &["e7e5"], 60_000 - 1);
    // Black had 60 s and spent all but 1 ms: 1 ms plus the increment.
    assert_eq!(chess.view(None).clocks_ms, [57_000, 1_001]);
}

#[test]
fn a_flag_fall_loses_unless_the_opponent_could_never_mate() {
    let mut chess = started(10);
    play(&mut chess, &["e2e4"], 10);
    let events = act(&mut chess, 1, ChessCommand::Flag, 60_000).unwrap();
    assert_eq!(ended(&events), Some(("1-0", EndReason::Timeout)));
    assert_eq!(chess.view(None).clocks_ms[1], 0);

    // A move that comes after its side's time ran out is the flag's.
    let mut chess = started(0);
    let events = act(&mut chess, 0, ChessCommand::Move("e2e4".into()), 60_000).unwrap();
    assert_eq!(ended(&events), Some(("0-1", EndReason::Timeout)));

    // Against a lone king (or a king and one minor piece), a flag fall
    // draws; against a side with a pawn, it loses.
    let board: Board = "4k3/8/8/8/8/8/4P3/4K2N w - - 0 1".parse().unwrap();
    assert_eq!(end::on_time(&board, 0), Outcome::drawn(EndReason::Timeout));
    assert_eq!(end::on_time(&board, 1), Outcome::won(0, EndReason::Timeout));
    let board: Board = "4k1b1/8/8/8/8/8/8/4K3 b - - 0 1".parse().unwrap();
    assert_eq!(end::on_time(&board, 1), Outcome::drawn(EndReason::Timeout));
}

#[test]
fn a_draw_offer_stands_until_the_opponent_moves_and_can_be_accepted() {
    let mut chess = started(20);
    // White offers on its own move, then moves: the offer stands.
    let events = act(&mut chess, 0, ChessCommand::OfferDraw, 0).unwrap();
    assert_eq!(events, vec![ChessEvent::DrawOffered { game: 1, seat: 0 }]);
    assert_eq!(
        act(&mut chess, 0, ChessCommand::OfferDraw, 0)
            .unwrap_err()
            .code,
        ErrorCode::IllegalAction
    );
    assert_eq!(
        act(&mut chess, 0, ChessCommand::AcceptDraw, 0)
            .unwrap_err()
            .code,
        ErrorCode::IllegalAction
    );
    play(&mut chess, &["e2e4"], 0);
    assert_eq!(chess.view(None).draw_offer, Some(0));
    // Black moves: the offer lapses.
    play(&mut chess, &["e7e5"], 0);
    assert_eq!(chess.view(None).draw_offer, None);
    assert_eq!(
        act(&mut chess, 1, ChessCommand::AcceptDraw, 0)
            .unwrap_err()
            .code,
        ErrorCode::IllegalAction
    );
    // Black offers while white is to move; white accepts.
    act(&mut chess, 1, ChessCommand::OfferDraw, 0).unwrap();
    let events = act(&mut chess, 0, ChessCommand::AcceptDraw, 0).unwrap();
    assert_eq!(ended(&events), Some(("1/2-1/2", EndReason::Agreement)));
    let settled = chess.take_settlement().unwrap();
    assert!(settled
        .seats
        .iter()
        .all(|s| s.start == s.end && s.end == Chips(20)));
    // Both still have their stake: the next game can start.
    assert!(chess.can_start());
}

#[test]
fn resignation_by_either_side_at_any_moment_ends_the_game() {
    let mut chess = started(5);
    play(&mut chess, &["d2d4"], 0);
    // White resigns while black is to move.
    let events = act(&mut chess, 0, ChessCommand::Resign, 0).unwrap();
    assert_eq!(ended(&events), Some(("0-1", EndReason::Resignation)));
}

#[test]
fn threefold_repetition_ends_the_game() {
    let mut chess = started(0);
    let events = play(
        &mut chess,
        &["g1f3", "g8f6", "f3g1", "f6g8", "g1f3", "g8f6", "f3g1"],
        0,
    );
    assert_eq!(ended(&events), None, "the start position stood twice");
    let events = play(&mut chess, &["f6g8"], 0);
    assert_eq!(
        ended(&events),
        Some(("1/2-1/2", EndReason::ThreefoldRepetition))
    );
}

#[test]
fn the_position_after_a_move_decides_the_automatic_ends() {
    let cases = [
        // Stalemate: black to move, no moves, not in check.
        ("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1", Some(EndReason::Stalemate)),
        // Kings alone; a king and a knight; bishops on one colour.
        (
            "7k/8/8/8/8/8/8/K7 w - - 0 1",
            Some(EndReason::InsufficientMaterial),
        ),
        (
            "7k/8/8/8/8/8/8/KN6 w - - 0 1",
            Some(EndReason::InsufficientMaterial),
        ),
        (
            "7k/8/8/3b4/8/8/8/KB6 b - - 0 1",
            Some(EndReason::InsufficientMaterial),
        ),
        // Bishops on both colours, or two knights: play on.
        ("7k/8/8/2b5/8/8/8/KB6 b - - 0 1", None),
        ("7k/8/8/8/8/8/8/KNN5 w - - 0 1", None),
        // The hundredth half-move without a capture or a pawn move.
        (
            "7k/8/8/8/8/8/8/KR6 w - - 100 80",
            Some(EndReason::FiftyMoves),
        ),
        ("7k/8/8/8/8/8/8/KR6 w - - 99 80", None),
        // Mate on the hundredth half-move is mate.
        (
            "R5k1/5ppp/8/8/8/8/8/K7 b - - 100 80",
            Some(EndReason::Checkmate),
        ),
    ];
    for (fen, want) in cases {
        let board: Board = fen.parse().unwrap();
        let got = end::by_position(&board, std::slice::from_ref(&board)).map(|o| o.reason);
        assert_eq!(got, want, "{fen}");
    }
}

#[test]
fn castling_and_promotion_travel_in_standard_uci() {
    let mut chess = started(0);
    play(
        &mut chess,
        &["e2e4", "e7e5", "g1f3", "b8c6", "f1c4", "g8f6"],
        0,
    );
    let legal = chess.decision().unwrap().legal;
    assert!(legal.contains(&"e1g1".to_string()), "{legal:?}");
    let events = play(&mut chess, &["e1g1"], 0);
    let ChessEvent::Action { uci, san, .. } = &events[0] else {
        panic!()
    };
    assert_eq!((uci.as_str(), san.as_str()), ("e1g1", "O-O"));

    let board: Board = "8/P6k/8/8/8/8/8/K7 w - - 0 1".parse().unwrap();
    let moves = legal_moves(&board);
    for promo in ["a7a8q", "a7a8r", "a7a8b", "a7a8n"] {
        assert!(moves.contains(&promo.to_string()), "{moves:?}");
    }
}

#[test]
fn a_command_parses_from_an_act_frame_and_bad_fields_are_refused() {
    let parse = |v: Value| Chess::command(v.as_object().unwrap());
    assert_eq!(
        parse(json!({"action": "move", "move": "e7e8q"})),
        Ok(ChessCommand::Move("e7e8q".into()))
    );
    assert_eq!(parse(json!({"action": "resign"})), Ok(ChessCommand::Resign));
    for bad in [
        json!({}),
        json!({"action": "flag"}),
        json!({"action": "move"}),
        json!({"action": "move", "move": 4}),
        json!({"action": "move", "move": "e2e4e5"}),
        json!({"action": "resign", "move": "e2e4"}),
        json!({"action": 7}),
    ] {
        assert_eq!(
            parse(bad.clone()).unwrap_err().code,
            ErrorCode::BadField,
            "{bad}"
        );
    }
}

#[test]
fn a_config_is_checked_field_by_field() {
    let parse = |v: Value| Chess::config(v.as_object().unwrap());
    assert_eq!(
        parse(json!({"clock_ms": 300000, "increment_ms": 2000, "stake": 0})),
        Ok(ChessConfig {
            clock_ms: 300_000,
            increment_ms: 2_000,
            stake: Chips(0)
        })
    );
    for bad in [
        json!({}),
        json!({"clock_ms": 10}),
        json!({"clock_ms": -1}),
        json!({"clock_ms": 300000, "increment_ms": "2"}),
        json!({"clock_ms": 300000, "stake": 1.5}),
    ] {
        assert_eq!(
            parse(bad.clone()).unwrap_err().code,
            ErrorCode::BadField,
            "{bad}"
        );
    }
}

#[test]
fn a_sit_must_put_up_exactly_the_stake() {
    let mut chess = Chess::new(config(100)).unwrap();
    assert_eq!(
        chess.sit(0, "alice", Chips(99)).unwrap_err().code,
        ErrorCode::BuyInOutOfRange
    );
    assert_eq!(
        chess.sit(2, "alice", Chips(100)).unwrap_err().code,
        ErrorCode::BadField
    );
    chess.sit(0, "alice", Chips(100)).unwrap();
    assert_eq!(
        chess.sit(0, "bob", Chips(100)).unwrap_err().code,
        ErrorCode::SeatTaken
    );
}

#[test]
fn leaving_mid_game_resigns_it_and_a_void_returns_every_stake() {
    let mut chess = started(30);
    play(&mut chess, &["e2e4"], 0);
    let told = chess.leave(1).unwrap();
    let events: Vec<_> = told.into_iter().map(|t| t.event).collect();
    assert_eq!(ended(&events), Some(("1-0", EndReason::Resignation)));
    assert!(matches!(
        events.last(),
        Some(ChessEvent::Left {
            seat: 1,
            stack: Chips(0),
            ..
        })
    ));

    let mut chess = started(30);
    play(&mut chess, &["e2e4"], 0);
    let voided = chess.void().unwrap();
    assert!(matches!(
        voided[0].event,
        ChessEvent::GameVoided { game: 1, .. }
    ));
    assert!(chess.occupants().iter().all(|o| o.stack == Chips(30)));
    assert!(chess.void().is_none());
}

#[test]
fn random_games_keep_what_the_runtime_relies_on() {
    use rand::{Rng, SeedableRng};
    let mut pick = rand::rngs::StdRng::seed_from_u64(3);
    let mut chess = Chess::new(config(0)).unwrap();
    let players = [(0, "alice", 0), (1, "bob", 0)];
    let settled = crate::games::check::play(&mut chess, &players, 0, 30, 11, |_, _, legal| {
        Some(ChessCommand::Move(
            legal[pick.gen_range(0..legal.len())].clone(),
        ))
    });
    assert_eq!(settled.len(), 30);
    // With a stake, the chips on the table are conserved whoever wins.
    let mut chess = Chess::new(config(10)).unwrap();
    let players = [(0, "alice", 10), (1, "bob", 10)];
    let settled = crate::games::check::play(&mut chess, &players, 20, 1, 5, |_, _, legal| {
        Some(ChessCommand::Move(
            legal[pick.gen_range(0..legal.len())].clone(),
        ))
    });
    assert_eq!(settled.len(), 1);
}
