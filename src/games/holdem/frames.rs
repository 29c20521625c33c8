//! The properties the `ws_frame` fuzz target and the client-frame property
//! tests both assert, kept in one place so that the two check exactly the
//! same thing on the inputs each of them grows.
//!
//! A client's text is parsed into a frame holding only values the protocol
//! allows, or refused with a frame code and a message. A parsed `sit`,
//! `act` or `leave`, turned into the rules command the table applies for
//! the player who sent it (the seat comes from who the player is, never
//! from the frame), is refused only with codes clients are told about,
//! never changes a table it is refused by, and creates no chips when it is
//! accepted: at a table between hands and one in the middle of a hand, for
//! the player to act, a seated player waiting, and a watcher.

use std::sync::OnceLock;

use super::{Holdem, HoldemCommand};
use crate::games::holdem::rules::checks::chips_brought;
use crate::games::holdem::rules::{
    standard_deck, Action, Chips, Command, Game, PlayerId, TableConfig,
};
use crate::games::Game as _;
use crate::protocol::{parse, ClientFrame};
use crate::types::{ErrorCode, TableId};

/// What `parse` answers when it refuses a frame.
pub const PARSE_CODES: &[ErrorCode] = &[
    ErrorCode::BadJson,
    ErrorCode::UnknownType,
    ErrorCode::BadField,
    ErrorCode::BadAmount,
    ErrorCode::TableNotFound,
];

/// Rule refusals a client may get beside the stable codes (documented per
/// frame in docs/protocol.md).
pub const DOCUMENTED_RULE_CODES: &[ErrorCode] =
    &[ErrorCode::NoHandInProgress, ErrorCode::BuyInOutOfRange];

/// The largest amount a frame may carry: what Postgres holds.
pub const MAX_AMOUNT: u64 = i64::MAX as u64;

/// Parses `text` as a client frame and checks what comes back.
///
/// # Panics
///
/// When a property does not hold, naming the text or the command.
pub fn check_text(text: &str) {
    match parse(text) {
        Ok(frame) => check_frame(&frame),
        Err(e) => {
            assert!(PARSE_CODES.contains(&e.code), "{text:?}: {e:?}");
            assert!(!e.message.is_empty(), "{text:?}: {e:?}");
        }
    }
}

/// Checks a parsed frame's values, then applies it for every player at
/// both fixture tables.
///
/// # Panics
///
/// When a property does not hold, naming the frame or the command.
pub fn check_frame(frame: &ClientFrame) {
    if let Some(table) = frame.table() {
        assert_eq!(TableId::parse(table.as_str()).as_ref(), Some(table));
    }
    let allowed = |c: Chips| (1..=MAX_AMOUNT).contains(&c.0);
    match frame {
        ClientFrame::Sit { buy_in, .. } => assert!(allowed(*buy_in), "{frame:?}"),
        // An act's game fields are hold'em's to read: refused only with a
        // code `parse` may answer, else an amount within what Postgres
        // holds.
        ClientFrame::Act { fields, .. } => match Holdem::command(fields) {
            Ok(HoldemCommand::Act {
                action: Action::Bet(a) | Action::Raise(a),
                ..
            }) => assert!(allowed(a), "{frame:?}"),
            Ok(_) => {}
            Err(e) => {
                assert!(PARSE_CODES.contains(&e.code), "{frame:?}: {e:?}");
                assert!(!e.message.is_empty(), "{frame:?}: {e:?}");
                return;
            }
        },
        _ => {}
    }
    apply_everywhere(frame);
}

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

/// Three players seated between hands, and the same table one hand in.
/// Built once: every frame is applied to fresh clones.
fn tables() -> &'static (Game, Game) {
    static TABLES: OnceLock<(Game, Game)> = OnceLock::new();
    TABLES.get_or_init(|| {
        let seats = (0..3u8)
            .map(|s| (s, PlayerId(format!("p{s}")), Chips(100)))
            .collect();
        let idle = match Game::resume(config(), 4, Some(2), seats) {
            Ok(game) => game,
            Err(e) => panic!("fixture table: {e}"),
        };
        let mut playing = idle.clone();
        if let Err(e) = playing.apply(Command::StartHand {
            deck: standard_deck(),
        }) {
            panic!("fixture hand: {e}");
        }
        (idle, playing)
    })
}

/// The command a table applies for `player`'s frame, as the table actor
/// builds it (the seat is the player's own), or `None` when the frame is
/// not for the rules or the player has no seat (`not_seated`).
fn command(frame: &ClientFrame, game: &Game, player: &PlayerId) -> Option<Command> {
    let seat = game.seat_of(player);
    match frame.clone() {
        ClientFrame::Sit { seat, buy_in, .. } => Some(Command::Sit {
            seat,
            player: player.clone(),
            stack: buy_in,
        }),
        ClientFrame::Act {
            decision, fields, ..
        } => match Holdem::command(&fields) {
            Ok(HoldemCommand::Act { hand, action }) => seat.map(|seat| Command::Act {
                hand,
                seat,
                decision,
                action,
            }),
            _ => None,
        },
        ClientFrame::Leave { .. } => seat.map(|seat| Command::Leave { seat }),
        ClientFrame::Join { .. } | ClientFrame::Ping => None,
    }
}

/// Applies `frame` for the player to act, a seated player waiting and a
/// watcher, at a table between hands and one in a hand.
fn apply_everywhere(frame: &ClientFrame) {
    let (idle, playing) = tables();
    let Some(to_act) = playing.to_act().map(|s| PlayerId(format!("p{s}"))) else {
        panic!("fixture hand: nobody to act");
    };
    let Some(waiting) = (0..3)
        .map(|s| PlayerId(format!("p{s}")))
        .find(|p| *p != to_act)
    else {
        panic!("fixture table: no second player");
    };
    for game in [idle, playing] {
        for player in [&to_act, &waiting, &PlayerId("watcher".into())] {
            let Some(cmd) = command(frame, game, player) else {
                continue;
            };
            let mut after = game.clone();
            match after.apply(cmd.clone()) {
                Err(e) => {
                    let code = e.code();
                    assert!(
                        ErrorCode::STABLE.contains(&code) || DOCUMENTED_RULE_CODES.contains(&code),
                        "{cmd:?} refused with {code}: {e}"
                    );
                    assert_eq!(&after, game, "refused {cmd:?} changed the table");
                }
                Ok(events) => {
                    let expected = i128::from(game.total_chips().0) + chips_brought(&events);
                    assert_eq!(i128::from(after.total_chips().0), expected, "{cmd:?}");
                }
            }
        }
    }
}
