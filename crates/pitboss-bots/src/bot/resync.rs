//! The snapshots a bot re-syncs to: the turn and the bust a snapshot
//! shows, and where it leaves the bot's seat, sit and leave.

use std::sync::atomic::Ordering;

use serde_json::{json, Value};

use crate::actions::{parse_legal, Legal};

use super::{Bot, Fatal, SitKind, SNAPSHOT};

/// The turn a snapshot shows open for the viewer's seat.
#[derive(Debug, PartialEq)]
struct SnapshotTurn {
    hand: u64,
    decision: u64,
    legal: Vec<Legal>,
}

/// Whether a snapshot's game shows `seat` with no chips between hands.
fn busted_in(game: &Value, seat: u64) -> bool {
    game["hand_in_progress"] == false
        && game["seats"].as_array().is_some_and(|seats| {
            seats
                .iter()
                .any(|s| s["seat"].as_u64() == Some(seat) && s["stack"].as_u64() == Some(0))
        })
}

/// Our turn as a snapshot carries it (`state.game`): our seat is `you` and
/// `to_act`, and `decision` and `legal` are set (they are only for the
/// viewer whose turn it is).
fn snapshot_turn(game: &Value, seat: u64) -> Option<SnapshotTurn> {
    if game["you"].as_u64() != Some(seat)
        || game["to_act"].as_u64() != Some(seat)
        || game["hand_in_progress"] != Value::Bool(true)
    {
        return None;
    }
    Some(SnapshotTurn {
        hand: game["hand"].as_u64()?,
        decision: game["decision"].as_u64()?,
        legal: parse_legal(&game["legal"]).filter(|l| !l.is_empty())?,
    })
}

impl Bot {
    /// Every snapshot but the first re-syncs the bot: the table's new
    /// hosting after a drain, crash or move, a rejoin, or the table's state
    /// after a pause.
    pub(super) async fn on_snapshot(&mut self, v: &Value) -> Result<(), Fatal> {
        let Some(seq) = v["seq"].as_u64() else {
            self.protocol_error(format!("snapshot without a seq: {v:.300}"));
            return Ok(());
        };
        if self.synced {
            self.stats().resyncs.fetch_add(1, Ordering::Relaxed);
        }
        self.synced = true;
        // A snapshot shows the table as of its `seq`: never older than
        // what this connection was told (a new hosting numbers from a
        // higher epoch). Across connections a stale copy may still answer
        // a join before the fence check stops it.
        if let Some(told) = self.conn_seq.filter(|&told| seq < told) {
            self.out_of_order(format!("snapshot seq {seq} after {told}"));
        }
        self.conn_seq = Some(self.conn_seq.map_or(seq, |c| c.max(seq)));
        // The new baseline: events go on from here.
        self.last_seq = seq;
        self.heard();
        // If the table is still paused, `paused` follows the snapshot.
        self.paused = false;
        self.retry_at = None;
        if matches!(self.expect, Some((_, SNAPSHOT))) {
            self.expect = None;
        }
        let game = &v["state"]["game"];
        self.check_told(game);
        let pending = snapshot_turn(game, self.cfg.seat);
        let unanswered = self.turns.unanswered();
        let (fx, in_flight) = self
            .turns
            .rebase(pending.as_ref().map(|t| (t.hand, t.decision)));
        self.apply(fx);
        match game["you"].as_u64() {
            Some(seat) if seat == self.cfg.seat => {
                self.mark_seated();
                if self.sit.take().is_some() {
                    self.expect = None;
                    self.asked_snapshot = false;
                }
                if self.leave_pending || self.stopping {
                    return self.send_leave().await;
                }
                if busted_in(game, self.cfg.seat) {
                    // Busted in a hand whose end this connection never saw
                    // (told by an owner that went away right after): the
                    // seat is never dealt in again, so rebuy as usual.
                    self.rebuy = true;
                    return self.send_leave().await;
                }
                if let Some(turn) = pending.filter(|_| !in_flight) {
                    let left = self
                        .shared
                        .snapshot_time_left(v["state"]["action_deadline_ms"].as_i64());
                    let decision = json!(turn.decision);
                    self.answer(turn.hand, turn.decision, decision, &turn.legal, left)
                        .await?;
                }
                Ok(())
            }
            Some(seat) => {
                self.protocol_error(format!(
                    "snapshot seats us at {seat}, not {}",
                    self.cfg.seat
                ));
                Ok(())
            }
            None => {
                if self.seated {
                    // Stood up meanwhile: see `echo_not_seated`.
                    self.echo_not_seated += unanswered;
                }
                self.resync_unseated().await
            }
        }
    }

    /// A snapshot shows no seat for us. By then the table has written any
    /// cash-out: it answers a join only between writes, and a new hosting
    /// starts from what was written.
    async fn resync_unseated(&mut self) -> Result<(), Fatal> {
        let believed_seated = std::mem::replace(&mut self.seated, false);
        if self.leave_pending {
            return self.leave_done().await;
        }
        if let Some((chips, _)) = self.sit {
            // Lost on the way, refused while the owner changed, or still on
            // its way. Should the first one land after all, this one is
            // refused (see `echo_sits`); no sit is ever paid for twice.
            return self.send_sit(chips, SitKind::Again).await;
        }
        if self.stopping {
            self.done = true;
            return Ok(());
        }
        if self.benched {
            return Ok(());
        }
        if believed_seated || self.has_sat {
            // Stood up while away (the reconnect window passed).
            return self.sit_from_wallet(0).await;
        }
        self.send_sit(self.cfg.buy_in, SitKind::Granted).await
    }
}

/// A hand in progress as one bot was told it.
pub(super) struct HandTold {
    hand: u64,
    /// Its own hole cards, once told.
    cards: Option<Value>,
    /// The board as last told (every street's event carries all of it).
    board: Vec<Value>,
}

impl Bot {
    /// Keeps what the events of the hand in progress told this bot.
    pub(super) fn note_told(&mut self, v: &Value) {
        let Some(hand) = v["hand"].as_u64() else {
            return;
        };
        if v["kind"] == "hand_started" || self.told.as_ref().is_none_or(|t| t.hand != hand) {
            self.told = Some(HandTold {
                hand,
                cards: None,
                board: Vec::new(),
            });
        }
        let Some(told) = &mut self.told else { return };
        match v["kind"].as_str() {
            Some("hole_cards") if v["seat"].as_u64() == Some(self.cfg.seat) => {
                told.cards = Some(v["cards"].clone());
            }
            Some("street") => {
                told.board = v["board"].as_array().cloned().unwrap_or_default();
            }
            _ => {}
        }
    }

    /// A snapshot of the hand this bot was told about (after an owner
    /// change, a pause or a rejoin) shows the same hand: its own cards as
    /// dealt, and the board told so far (perhaps more, for streets dealt
    /// while it was away). Anything else is a protocol error: a hand that
    /// changed under the player.
    fn check_told(&mut self, game: &Value) {
        let Some(told) = &self.told else { return };
        if game["hand"].as_u64() != Some(told.hand) || game["hand_in_progress"] != true {
            return;
        }
        self.stats().resumed.fetch_add(1, Ordering::Relaxed);
        let mine = game["seats"].as_array().and_then(|seats| {
            seats
                .iter()
                .find(|s| s["seat"].as_u64() == Some(self.cfg.seat))
        });
        let shown = mine.map(|s| s["cards"].clone()).unwrap_or(Value::Null);
        let board = game["board"].as_array().cloned().unwrap_or_default();
        let mut wrong = Vec::new();
        if let Some(cards) = &told.cards {
            if !shown.is_null() && shown != *cards {
                wrong.push(format!("hole cards {cards} told, {shown} shown"));
            }
        }
        if !board.starts_with(&told.board) {
            wrong.push(format!("board {:?} told, {board:?} shown", told.board));
        }
        if !wrong.is_empty() {
            let hand = told.hand;
            self.protocol_error(format!(
                "hand {hand} changed across a re-sync: {}",
                wrong.join("; ")
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `state.game` as the server shapes it (`GameView`), for the viewer in
    /// seat 1.
    fn game(to_act: Option<u64>, decision: Option<u64>, legal: Value) -> Value {
        json!({
            "hand": 12, "hand_in_progress": true, "button": 0, "street": "flop",
            "board": [], "pots": [], "to_act": to_act, "legal": legal,
            "decision": decision, "you": 1, "seats": []
        })
    }

    #[test]
    fn a_snapshot_taken_during_our_turn_carries_it() {
        let legal = json!([{"action": "fold"}, {"action": "call", "amount": 4}]);
        assert_eq!(
            snapshot_turn(&game(Some(1), Some(7), legal.clone()), 1),
            Some(SnapshotTurn {
                hand: 12,
                decision: 7,
                legal: vec![Legal::Fold, Legal::Call],
            })
        );
        // Another seat's turn, another viewer, or no decision: not ours.
        assert_eq!(snapshot_turn(&game(Some(0), None, json!([])), 1), None);
        assert_eq!(
            snapshot_turn(&game(Some(1), Some(7), legal.clone()), 2),
            None
        );
        assert_eq!(snapshot_turn(&game(Some(1), None, legal), 1), None);
        let mut between_hands = game(None, None, json!([]));
        between_hands["hand_in_progress"] = json!(false);
        assert_eq!(snapshot_turn(&between_hands, 1), None);
    }

    #[test]
    fn a_snapshot_between_hands_with_our_stack_at_zero_means_busted() {
        let game = |in_progress: bool, stack: u64| {
            json!({"hand_in_progress": in_progress, "seats": [
                {"seat": 0, "stack": stack}, {"seat": 1, "stack": 400}
            ]})
        };
        assert!(busted_in(&game(false, 0), 0));
        assert!(!busted_in(&game(false, 1), 0));
        assert!(!busted_in(&game(false, 0), 1));
        // All-in during a hand: not busted yet.
        assert!(!busted_in(&game(true, 0), 0));
    }
}
