//! Property tests: random tables driven by random legal and illegal
//! commands, with the table's invariants checked after every command.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;

#[derive(Clone, Debug)]
struct Setup {
    seats: u8,
    small_blind: u64,
    big_blind: u64,
    ante: u64,
    /// Stack per seat; `None` for an empty seat.
    stacks: Vec<Option<u64>>,
    button: Option<SeatNo>,
    seed: u64,
}

impl Setup {
    fn config(&self) -> TableConfig {
        TableConfig {
            small_blind: Chips(self.small_blind),
            big_blind: Chips(self.big_blind),
            ante: Chips(self.ante),
            seats: self.seats,
            min_buy_in: Chips(self.big_blind * 10),
            max_buy_in: Chips(self.big_blind * 200),
        }
    }

    fn game(&self) -> Game {
        let seats = self
            .stacks
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let seat = SeatNo::try_from(i).ok()?;
                Some((seat, PlayerId(format!("p{i}")), Chips((*s)?)))
            })
            .collect();
        Game::resume(self.config(), 7, self.button, seats).expect("valid setup")
    }
}

fn setup() -> impl Strategy<Value = Setup> {
    (2u8..=10)
        .prop_flat_map(|seats| {
            let stack = prop_oneof![
                2 => Just(None),
                3 => (0u64..=60).prop_map(Some),
                3 => (60u64..=3_000).prop_map(Some),
            ];
            (
                Just(seats),
                1u64..=5,
                0u64..=3,
                0u64..=3,
                proptest::collection::vec(stack, usize::from(seats)),
                proptest::option::of(0..seats),
                any::<u64>(),
            )
        })
        .prop_map(|(seats, sb, extra, ante, stacks, button, seed)| Setup {
            seats,
            small_blind: sb,
            big_blind: sb + extra * sb,
            ante: if ante == 0 { 0 } else { ante * sb / 2 },
            stacks,
            button,
            seed,
        })
}

/// What the events of the current hand say happened, rebuilt independently
/// of the engine's own bookkeeping.
#[derive(Default)]
struct Ledger {
    hand: u64,
    start: BTreeMap<SeatNo, u64>,
    put_in: BTreeMap<SeatNo, u64>,
    street_bet: BTreeMap<SeatNo, u64>,
    folded: BTreeSet<SeatNo>,
    actions: u64,
    bound: u64,
}

/// Cards visible to everyone between hands: those shown at the last showdown.
#[derive(Default)]
struct Shown {
    hand: Option<u64>,
    seats: BTreeSet<SeatNo>,
}

struct Harness {
    game: Game,
    rng: ChaCha8Rng,
    ledger: Ledger,
    shown: Shown,
    hands_finished: u32,
    next_player: u32,
}

impl Harness {
    fn new(setup: &Setup) -> Harness {
        Harness {
            game: setup.game(),
            rng: ChaCha8Rng::seed_from_u64(setup.seed),
            ledger: Ledger::default(),
            shown: Shown::default(),
            hands_finished: 0,
            next_player: 0,
        }
    }

    /// Applies `cmd` and checks every invariant that must hold afterwards.
    fn apply(&mut self, cmd: Command) -> Result<Vec<Event>, RuleError> {
        let before = self.game.clone();
        let before_json = serde_json::to_string(&before).expect("json");
        let result = self.game.apply(cmd.clone());
        match &result {
            Err(_) => {
                assert_eq!(self.game, before, "refused {cmd:?} changed the game");
                let after = serde_json::to_string(&self.game).expect("json");
                assert_eq!(after, before_json);
            }
            Ok(events) => self.check_events(&before, &cmd, events),
        }
        self.check_views();
        result
    }

    fn check_events(&mut self, before: &Game, cmd: &Command, events: &[Event]) {
        // Chips only enter with a buy-in and leave with a departing stack.
        let mut expected = i128::from(before.total_chips().0);
        for e in events {
            match &e.kind {
                EventKind::Seated { stack, .. } => expected += i128::from(stack.0),
                EventKind::Left { stack, .. } => expected -= i128::from(stack.0),
                _ => {}
            }
        }
        assert_eq!(
            i128::from(self.game.total_chips().0),
            expected,
            "chips after {cmd:?}"
        );

        if matches!(cmd, Command::Act { .. } | Command::Timeout { .. }) {
            self.ledger.actions += 1;
            assert!(
                self.ledger.actions <= self.ledger.bound,
                "hand {} still running after {} actions",
                self.ledger.hand,
                self.ledger.actions
            );
        }
        let mut stacks_at_end = None;
        for e in events {
            match &e.kind {
                EventKind::HoleCards { seat, .. } => assert_eq!(e.to, Audience::Seat(*seat)),
                _ => assert_eq!(e.to, Audience::All, "{e:?}"),
            }
            match &e.kind {
                EventKind::HandStarted { hand, seats, .. } => {
                    let n = seats.len() as u64;
                    let total: u64 = seats.iter().map(|s| s.stack.0).sum();
                    let bb = self.game.config().big_blind.0.max(1);
                    self.ledger = Ledger {
                        hand: *hand,
                        start: seats.iter().map(|s| (s.seat, s.stack.0)).collect(),
                        // Each street: everyone acts once, plus once more
                        // per raise; raises are bounded by the chips in play
                        // over the smallest raise, plus one short all-in each.
                        bound: 4 * n * (2 + n + total / bb),
                        ..Ledger::default()
                    };
                    self.shown = Shown::default();
                }
                EventKind::Action {
                    seat,
                    action,
                    amount,
                    ..
                } => {
                    let delta = if *action == ActionKind::Ante {
                        amount.0
                    } else {
                        let prev = self.ledger.street_bet.insert(*seat, amount.0).unwrap_or(0);
                        assert!(amount.0 >= prev, "street bet went down");
                        amount.0 - prev
                    };
                    *self.ledger.put_in.entry(*seat).or_default() += delta;
                    if *action == ActionKind::Fold {
                        self.ledger.folded.insert(*seat);
                    }
                }
                EventKind::Street { board, street, .. } => {
                    assert_eq!(board.len(), street.board_len());
                    self.ledger.street_bet.clear();
                }
                EventKind::Showdown { hand, hands } => {
                    for h in hands {
                        assert!(!self.ledger.folded.contains(&h.seat), "folded hand shown");
                    }
                    self.shown = Shown {
                        hand: Some(*hand),
                        seats: hands.iter().map(|h| h.seat).collect(),
                    };
                }
                EventKind::HandEnded { stacks, .. } => stacks_at_end = Some(stacks.clone()),
                EventKind::HandVoided { stacks, .. } => {
                    for s in stacks {
                        assert_eq!(Some(&s.stack.0), self.ledger.start.get(&s.seat));
                    }
                    self.hands_finished += 1;
                }
                _ => {}
            }
        }
        if let Some(stacks) = stacks_at_end {
            self.check_summary(&stacks);
            self.hands_finished += 1;
        }
    }

    fn check_summary(&self, stacks: &[SeatChips]) {
        let s = self.game.last_summary().expect("summary after hand end");
        assert_eq!(s.hand, self.ledger.hand);
        let start: u64 = s.seats.iter().map(|r| r.start_stack.0).sum();
        let end: u64 = s.seats.iter().map(|r| r.end_stack.0).sum();
        assert_eq!(start, end, "stacks not conserved over the hand");
        for r in &s.seats {
            assert_eq!(Some(&r.start_stack.0), self.ledger.start.get(&r.seat));
            assert!(stacks.contains(&SeatChips {
                seat: r.seat,
                stack: r.end_stack
            }));
        }

        let mut won: BTreeMap<SeatNo, u64> = BTreeMap::new();
        for pot in &s.pots {
            assert!(!pot.winners.is_empty());
            let shares: u64 = pot.winners.iter().map(|w| w.1 .0).sum();
            assert_eq!(shares, pot.amount.0, "shares must add up to the pot");
            let max = pot.winners.iter().map(|w| w.1).max().expect("winner");
            let min = pot.winners.iter().map(|w| w.1).min().expect("winner");
            assert!(max.0 - min.0 < pot.winners.len() as u64, "split unevenly");
            for (seat, share) in &pot.winners {
                assert!(!self.ledger.folded.contains(seat), "folded seat won a pot");
                *won.entry(*seat).or_default() += share.0;
            }
        }

        // Whatever a seat got back beyond its winnings is a returned
        // uncalled bet: only the unmatched top of the biggest stake, and only
        // if that player did not fold.
        let put_in = |seat: SeatNo| self.ledger.put_in.get(&seat).copied().unwrap_or(0);
        let mut returned_total = 0;
        for r in &s.seats {
            let returned = i128::from(r.end_stack.0) - i128::from(r.start_stack.0)
                + i128::from(put_in(r.seat))
                - i128::from(won.get(&r.seat).copied().unwrap_or(0));
            let others_max = s
                .seats
                .iter()
                .filter(|o| o.seat != r.seat)
                .map(|o| put_in(o.seat))
                .max()
                .unwrap_or(0);
            let expected = if self.ledger.folded.contains(&r.seat) {
                0
            } else {
                put_in(r.seat).saturating_sub(others_max)
            };
            assert_eq!(
                returned,
                i128::from(expected),
                "returned to seat {}",
                r.seat
            );
            returned_total += expected;
        }
        let pots: u64 = s.pots.iter().map(|p| p.amount.0).sum();
        let committed: u64 = self.ledger.put_in.values().sum();
        assert_eq!(
            pots + returned_total,
            committed,
            "pots must hold what went in"
        );
    }

    fn check_views(&self) {
        let mut viewers: Vec<Option<PlayerId>> = vec![None, Some(PlayerId("nobody".into()))];
        viewers.extend(self.game.seats().into_iter().map(|s| Some(s.player)));
        for viewer in viewers {
            let view = self.game.view_for(viewer.as_ref());
            let json = serde_json::to_value(&view).expect("json");
            assert_eq!(json["hand_in_progress"], self.game.hand_in_progress());
            let mine = viewer.as_ref().and_then(|v| self.game.seat_of(v));
            for s in &view.seats {
                if s.cards.is_none() || Some(s.seat) == mine {
                    continue;
                }
                assert!(
                    !self.game.hand_in_progress(),
                    "{viewer:?} sees seat {}'s cards mid-hand",
                    s.seat
                );
                assert_eq!(self.shown.hand, Some(self.game.hand_no()));
                assert!(self.shown.seats.contains(&s.seat), "unshown cards visible");
                assert!(!self.ledger.folded.contains(&s.seat));
            }
            if mine.is_none() || mine != self.game.to_act() {
                assert!(view.legal.is_empty());
            }
        }
    }

    fn random_seat(&mut self) -> SeatNo {
        self.rng.gen_range(0..self.game.config().seats + 1)
    }

    fn seat_churn(&mut self) -> Command {
        let seat = self.random_seat();
        match self.rng.gen_range(0..5) {
            0 => Command::Leave { seat },
            1 => Command::SitOut { seat },
            2 => Command::SitIn { seat },
            _ => {
                self.next_player += 1;
                let name = if self.rng.gen_bool(0.2) {
                    "p1".to_string()
                } else {
                    format!("new{}", self.next_player)
                };
                let cfg = self.game.config().clone();
                let stack = self
                    .rng
                    .gen_range(cfg.min_buy_in.0 - 1..=cfg.max_buy_in.0 + 1);
                Command::Sit {
                    seat,
                    player: PlayerId(name),
                    stack: Chips(stack),
                }
            }
        }
    }

    fn random_legal_action(&mut self) -> Action {
        let legal = self.game.legal_actions();
        // Weighted so that hands run several streets instead of mostly
        // ending in an early fold or all-in.
        let pick = *legal
            .choose_weighted(&mut self.rng, |l| match l {
                LegalAction::Fold => 2,
                LegalAction::Check | LegalAction::Call { .. } => 8,
                LegalAction::Bet { .. } | LegalAction::Raise { .. } => 4,
                LegalAction::AllIn { .. } => 1,
            })
            .expect("a seat to act has options");
        let amount = |rng: &mut ChaCha8Rng, min: Chips, max: Chips| {
            Chips(match rng.gen_range(0..4) {
                0 => min.0,
                1 => max.0,
                _ => rng.gen_range(min.0..=max.0),
            })
        };
        match pick {
            LegalAction::Fold => Action::Fold,
            LegalAction::Check => Action::Check,
            LegalAction::Call { .. } => Action::Call,
            LegalAction::Bet { min, max } => Action::Bet(amount(&mut self.rng, min, max)),
            LegalAction::Raise { min, max } => Action::Raise(amount(&mut self.rng, min, max)),
            LegalAction::AllIn { .. } => Action::AllIn,
        }
    }

    /// A command that is usually illegal: wrong seat, stale hand, amounts
    /// just outside the legal range, or an action that is not offered.
    fn probe(&mut self) -> Command {
        let hand_no = self.game.hand_no();
        let hand = match self.rng.gen_range(0..6) {
            0 => hand_no.wrapping_add(1),
            1 => hand_no.wrapping_sub(1),
            _ => hand_no,
        };
        let seat = match self.game.to_act() {
            Some(s) if self.rng.gen_bool(0.6) => s,
            _ => self.random_seat(),
        };
        let legal = self.game.legal_actions();
        let edge = legal
            .iter()
            .find_map(|l| match l {
                LegalAction::Bet { min, max } | LegalAction::Raise { min, max } => {
                    Some((min.0, max.0))
                }
                _ => None,
            })
            .unwrap_or((2, 100));
        let x = match self.rng.gen_range(0..5) {
            0 => edge.0.saturating_sub(1),
            1 => edge.1.saturating_add(1),
            2 => u64::MAX,
            3 => 0,
            _ => self.rng.gen_range(0..=edge.1.saturating_add(10)),
        };
        let action = match self.rng.gen_range(0..6) {
            0 => Action::Fold,
            1 => Action::Check,
            2 => Action::Call,
            3 => Action::Bet(Chips(x)),
            4 => Action::Raise(Chips(x)),
            _ => Action::AllIn,
        };
        if self.rng.gen_bool(0.1) {
            Command::Timeout { hand, seat }
        } else {
            Command::Act {
                hand,
                seat,
                decision: self.game.decision().unwrap_or(0),
                action,
            }
        }
    }

    fn between_hands(&mut self, churn: bool) {
        while churn && self.rng.gen_bool(0.3) {
            let cmd = self.seat_churn();
            let _ = self.apply(cmd);
        }
        if churn && self.rng.gen_bool(0.1) {
            let mut deck = shuffled_deck(&mut self.rng);
            if self.rng.gen_bool(0.5) {
                deck.pop();
            } else {
                deck[0] = deck[1];
            }
            let r = self.apply(Command::StartHand { deck });
            assert_eq!(r.map(|_| ()), Err(RuleError::BadDeck));
        }
        let can = self.game.can_start_hand();
        let deck = shuffled_deck(&mut self.rng);
        let r = self.apply(Command::StartHand { deck });
        assert_eq!(
            r.is_ok(),
            can,
            "can_start_hand disagrees with StartHand: {r:?}"
        );
    }

    fn step_in_hand(&mut self, probes: bool) {
        let roll = self.rng.gen_range(0..100);
        let cmd = match self.game.to_act() {
            Some(_) if probes && roll < 20 => self.probe(),
            Some(_) if probes && roll < 23 => self.seat_churn(),
            Some(_) if probes && roll < 24 => Command::VoidHand {
                reason: VoidReason::Shutdown,
            },
            Some(seat) if roll < 32 => Command::Timeout {
                hand: self.game.hand_no(),
                seat,
            },
            Some(seat) => {
                let action = self.random_legal_action();
                let hand = self.game.hand_no();
                let decision = self.game.decision().unwrap_or(0);
                let r = self.apply(Command::Act {
                    hand,
                    seat,
                    decision,
                    action,
                });
                assert!(r.is_ok(), "legal {action:?} refused: {r:?}");
                return;
            }
            None => panic!("hand in progress with nobody to act"),
        };
        let legal = self.game.legal_actions();
        let accepted = self.apply(cmd.clone()).is_ok();
        if let (true, Command::Act { action, .. }) = (accepted, cmd) {
            assert!(
                covered(action, &legal),
                "{action:?} accepted but not offered in {legal:?}"
            );
        }
    }

    /// Plays up to `hands` hands; returns how many ended or were voided.
    fn play(&mut self, hands: u32, probes: bool) -> u32 {
        let mut steps = 0;
        while self.hands_finished < hands && steps < 20_000 {
            steps += 1;
            if self.game.hand_in_progress() {
                self.step_in_hand(probes);
                continue;
            }
            if !self.game.can_start_hand() && !probes {
                break;
            }
            self.between_hands(probes);
            if !self.game.hand_in_progress() && !self.game.can_start_hand() {
                break;
            }
            if steps % 50 == 0 {
                let json = serde_json::to_string(&self.game).expect("json");
                let back: Game = serde_json::from_str(&json).expect("parse");
                assert_eq!(back, self.game);
            }
        }
        self.hands_finished
    }
}

/// Few cases by default so the debug test run stays quick; set
/// `PROPTEST_CASES` for a longer soak (e.g. 20000 with `--release`).
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48)
}

/// Whether an accepted action is one of the offered legal actions.
fn covered(action: Action, legal: &[LegalAction]) -> bool {
    let all_in = legal.iter().find_map(|l| match l {
        LegalAction::AllIn { amount } => Some(*amount),
        _ => None,
    });
    legal.iter().any(|l| match (action, *l) {
        (Action::Fold, LegalAction::Fold)
        | (Action::Check, LegalAction::Check)
        | (Action::Call, LegalAction::Call { .. })
        | (Action::Call, LegalAction::AllIn { .. })
        | (Action::AllIn, LegalAction::AllIn { .. }) => true,
        (Action::Bet(x), LegalAction::Bet { min, max })
        | (Action::Raise(x), LegalAction::Raise { min, max }) => (min..=max).contains(&x),
        (Action::Bet(x) | Action::Raise(x), LegalAction::AllIn { amount }) => {
            Some(x) == all_in && x == amount
        }
        _ => false,
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Random legal and illegal commands, including seat changes and voided
    /// hands: every invariant holds after every command.
    #[test]
    fn random_commands_keep_every_table_invariant(setup in setup()) {
        let mut h = Harness::new(&setup);
        h.play(4, true);
    }

    /// Only legal actions: every hand ends within the action bound and the
    /// table keeps dealing until fewer than two players have chips.
    #[test]
    fn hands_played_with_legal_actions_always_terminate(setup in setup()) {
        let mut h = Harness::new(&setup);
        let before = h.game.total_chips();
        h.play(6, false);
        prop_assert!(!h.game.hand_in_progress());
        prop_assert_eq!(h.game.total_chips(), before);
    }
}
