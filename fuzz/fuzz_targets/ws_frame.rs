//! A WebSocket text frame from a client, as the session handles it: parsed
//! by `protocol::parse`, then, for `sit`, `act` and `leave`, turned into the
//! rules command the table applies (the seat comes from who the player is,
//! never from the frame), at a table between hands and at one in the middle
//! of a hand, for the player to act, a seated player waiting, and a watcher.
//!
//! Properties: no panic; every refusal carries a code a client is told
//! about; a parsed frame holds only values the protocol allows; a refused
//! command changes nothing and an accepted one creates no chips.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use pitboss::game::{Action, Chips, Command, EventKind, Game, PlayerId, TableConfig};
use pitboss::protocol::{self, ClientFrame, STABLE_CODES};
use pitboss::types::TableId;

/// What `parse` may answer: a frame-level refusal.
const PARSE_CODES: &[&str] = &[
    "bad_json",
    "unknown_type",
    "bad_field",
    "bad_amount",
    "table_not_found",
];

/// Rule refusals a client may get beside the stable codes (documented per
/// frame in docs/protocol.md).
const DOCUMENTED_RULE_CODES: &[&str] = &["no_hand_in_progress", "buy_in_out_of_range"];

fn config() -> TableConfig {
    TableConfig {
        small_blind: Chips(1),
        big_blind: Chips(2),
        ante: Chips(1),
        seats: 6,
        min_buy_in: Chips(40),
        max_buy_in: Chips(200),
    }
}

/// Two tables: three players seated between hands, and the same table one
/// hand in.
fn tables() -> &'static (Game, Game) {
    static TABLES: OnceLock<(Game, Game)> = OnceLock::new();
    TABLES.get_or_init(|| {
        let seats = (0..3u8)
            .map(|s| (s, PlayerId(format!("p{s}")), Chips(100)))
            .collect();
        let idle = match Game::resume(config(), 4, Some(2), seats) {
            Ok(g) => g,
            Err(e) => panic!("fixture: {e}"),
        };
        let mut playing = idle.clone();
        if let Err(e) = playing.apply(Command::StartHand {
            deck: pitboss::game::standard_deck(),
        }) {
            panic!("fixture: {e}");
        }
        (idle, playing)
    })
}

fn check_frame(frame: &ClientFrame) {
    if let Some(table) = frame.table() {
        assert_eq!(TableId::parse(table.as_str()).as_ref(), Some(table));
    }
    let amount_ok = |c: Chips| (1..=i64::MAX as u64).contains(&c.0);
    match frame {
        ClientFrame::Sit { buy_in, .. } => assert!(amount_ok(*buy_in), "{frame:?}"),
        ClientFrame::Act {
            action: Action::Bet(a) | Action::Raise(a),
            ..
        } => assert!(amount_ok(*a), "{frame:?}"),
        _ => {}
    }
}

/// What the table does with the frame for `player`: the command, or the
/// refusal a player with no seat gets.
fn command(
    frame: &ClientFrame,
    game: &Game,
    player: &PlayerId,
) -> Option<Result<Command, &'static str>> {
    let seat = game.seat_of(player).ok_or("not_seated");
    Some(match frame.clone() {
        ClientFrame::Sit { seat, buy_in, .. } => Ok(Command::Sit {
            seat,
            player: player.clone(),
            stack: buy_in,
        }),
        ClientFrame::Act {
            hand,
            decision,
            action,
            ..
        } => seat.map(|seat| Command::Act {
            hand,
            seat,
            decision,
            action,
        }),
        ClientFrame::Leave { .. } => seat.map(|seat| Command::Leave { seat }),
        ClientFrame::Join { .. } | ClientFrame::Ping => return None,
    })
}

fn apply(frame: &ClientFrame, game: &Game, player: &PlayerId) {
    let cmd = match command(frame, game, player) {
        None | Some(Err(_)) => return,
        Some(Ok(cmd)) => cmd,
    };
    let mut after = game.clone();
    match after.apply(cmd.clone()) {
        Err(e) => {
            let code = e.code();
            assert!(
                STABLE_CODES.contains(&code) || DOCUMENTED_RULE_CODES.contains(&code),
                "{cmd:?} refused with {code}: {e}"
            );
            assert_eq!(&after, game, "refused {cmd:?} changed the table");
        }
        Ok(events) => {
            let mut expected = i128::from(game.total_chips().0);
            for e in &events {
                match &e.kind {
                    EventKind::Seated { stack, .. } => expected += i128::from(stack.0),
                    EventKind::Left { stack, .. } => expected -= i128::from(stack.0),
                    _ => {}
                }
            }
            assert_eq!(i128::from(after.total_chips().0), expected, "{cmd:?}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    // The session closes a text frame that is not UTF-8 (1007) before any
    // parsing; only text reaches `parse`.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let frame = match protocol::parse(text) {
        Ok(frame) => frame,
        Err(e) => {
            assert!(PARSE_CODES.contains(&e.code), "{text:?}: {e:?}");
            assert!(!e.message.is_empty());
            return;
        }
    };
    check_frame(&frame);
    let (idle, playing) = tables();
    let to_act = playing
        .to_act()
        .map(|s| PlayerId(format!("p{s}")))
        .unwrap_or_else(|| PlayerId("p0".into()));
    let waiting = (0..3)
        .map(|s| PlayerId(format!("p{s}")))
        .find(|p| *p != to_act)
        .unwrap_or_else(|| PlayerId("p1".into()));
    let watcher = PlayerId("watcher".into());
    for game in [idle, playing] {
        for player in [&to_act, &waiting, &watcher] {
            apply(&frame, game, player);
        }
    }
});
