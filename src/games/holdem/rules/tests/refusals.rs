//! Refusals: refused commands return typed errors and leave the state
//! unchanged; a hand needs two dealt-in players; chip totals that would
//! overflow, bad resumes and bad table configs are refused; a voided hand
//! restores the start stacks.

use super::*;

#[test]
fn refused_commands_return_typed_errors_and_leave_the_state_unchanged() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100), (2, 100)]);
    let act_cmd = |hand, seat, action| Command::Act {
        hand,
        seat,
        decision: 1,
        action,
    };
    refused(
        &mut g,
        act_cmd(1, 0, Action::Call),
        RuleError::NoHandInProgress,
    );
    refused(
        &mut g,
        Command::VoidHand {
            reason: VoidReason::Shutdown,
        },
        RuleError::NoHandInProgress,
    );
    refused(
        &mut g,
        Command::StartHand {
            deck: standard_deck()[..51].to_vec(),
        },
        RuleError::BadDeck,
    );
    let mut dup = standard_deck();
    dup[51] = dup[0];
    refused(&mut g, Command::StartHand { deck: dup }, RuleError::BadDeck);
    start(&mut g, standard_deck());
    refused(
        &mut g,
        Command::StartHand {
            deck: standard_deck(),
        },
        RuleError::HandInProgress,
    );
    refused(&mut g, act_cmd(1, 1, Action::Call), RuleError::NotYourTurn);
    refused(
        &mut g,
        act_cmd(0, 0, Action::Call),
        RuleError::StaleHand {
            expected: 1,
            got: 0,
        },
    );
    refused(
        &mut g,
        act_cmd(2, 0, Action::Call),
        RuleError::StaleHand {
            expected: 1,
            got: 2,
        },
    );
    refused(
        &mut g,
        act_cmd(1, 9, Action::Call),
        RuleError::SeatOutOfRange,
    );
    refused(
        &mut g,
        act_cmd(1, 0, Action::Check),
        RuleError::IllegalAction("cannot check facing a bet: 2 to call".into()),
    );
    refused(
        &mut g,
        act_cmd(1, 0, Action::Bet(Chips(10))),
        RuleError::IllegalAction("there is already a bet on this street; raise instead".into()),
    );
    refused(
        &mut g,
        act_cmd(1, 0, Action::Raise(Chips(3))),
        RuleError::BadAmount("the minimum raise is to 4".into()),
    );
    refused(
        &mut g,
        act_cmd(1, 0, Action::Raise(Chips(101))),
        RuleError::InsufficientChips,
    );
    refused(
        &mut g,
        act_cmd(1, 0, Action::Raise(Chips(u64::MAX))),
        RuleError::InsufficientChips,
    );
    refused(&mut g, Command::SitOut { seat: 5 }, RuleError::NotSeated);
    // The hand is over once everyone else folds; acting again is refused.
    fold_around(&mut g);
    refused(
        &mut g,
        act_cmd(1, 2, Action::Check),
        RuleError::NoHandInProgress,
    );
}

#[test]
fn starting_a_hand_needs_two_dealt_in_players() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 0)]);
    assert!(!g.can_start_hand());
    refused(
        &mut g,
        Command::StartHand {
            deck: standard_deck(),
        },
        RuleError::NotEnoughPlayers,
    );
}

#[test]
fn chip_totals_that_would_overflow_are_refused() {
    let mut cfg = config(2, 1, 2, 0);
    cfg.max_buy_in = Chips(u64::MAX / 2);
    let seats = vec![
        (0, pid("a"), Chips(u64::MAX / 2)),
        (1, pid("b"), Chips(u64::MAX / 2 + 2)),
    ];
    assert_eq!(
        Game::resume(cfg.clone(), 0, None, seats).map(|_| ()),
        Err(RuleError::Overflow)
    );
    let mut g =
        Game::resume(cfg, 0, None, vec![(0, pid("a"), Chips(u64::MAX - 5))]).expect("resume");
    refused(
        &mut g,
        Command::Sit {
            seat: 1,
            player: pid("b"),
            stack: Chips(10),
        },
        RuleError::Overflow,
    );
}

#[test]
fn resume_refuses_bad_seats_duplicates_and_bad_configs() {
    let cfg = config(3, 1, 2, 0);
    let r = |button, seats: Vec<(SeatNo, &str)>| {
        let seats = seats
            .into_iter()
            .map(|(s, p)| (s, pid(p), Chips(10)))
            .collect();
        Game::resume(cfg.clone(), 0, button, seats).map(|_| ())
    };
    assert_eq!(r(None, vec![(3, "a")]), Err(RuleError::SeatOutOfRange));
    assert_eq!(r(Some(3), vec![]), Err(RuleError::SeatOutOfRange));
    assert_eq!(r(None, vec![(0, "a"), (0, "b")]), Err(RuleError::SeatTaken));
    assert_eq!(
        r(None, vec![(0, "a"), (1, "a")]),
        Err(RuleError::AlreadySeated)
    );
    let mut bad = cfg.clone();
    bad.seats = 11;
    assert_eq!(
        Game::new(bad).map(|_| ()).map_err(|e| e.code().as_str()),
        Err("bad_config")
    );
}

#[test]
fn table_config_validation_enforces_seats_blinds_and_buy_in_limits() {
    let good = config(6, 1, 2, 0);
    assert_eq!(good.validate(), Ok(()));
    type Tweak = fn(&mut TableConfig);
    let cases: [(&str, Tweak); 7] = [
        ("one seat", |c| c.seats = 1),
        ("eleven seats", |c| c.seats = 11),
        ("zero small blind", |c| c.small_blind = Chips(0)),
        ("sb above bb", |c| c.small_blind = Chips(3)),
        ("min buy-in below bb", |c| c.min_buy_in = Chips(1)),
        ("min above max", |c| c.max_buy_in = Chips(1)),
        ("max buy-in overflows", |c| c.max_buy_in = Chips(u64::MAX)),
    ];
    for (name, f) in cases {
        let mut c = good.clone();
        f(&mut c);
        assert!(
            matches!(c.validate(), Err(RuleError::BadConfig(_))),
            "{name}"
        );
    }
}

#[test]
fn void_hand_restores_start_stacks_keeps_the_hand_number_and_the_button() {
    let mut g = table(config(6, 1, 2, 1), &[(0, 100), (1, 100), (2, 100)]);
    start(&mut g, standard_deck());
    fold_around(&mut g);
    assert_eq!(g.button(), Some(0));
    let before: Vec<u64> = (0..3).map(|s| stack(&g, s)).collect();
    start(&mut g, standard_deck());
    assert_eq!(g.button(), Some(1));
    act(&mut g, 1, Action::Raise(Chips(10)));
    g.apply(Command::Leave { seat: 0 }).expect("leave");
    let ev = g
        .apply(Command::VoidHand {
            reason: VoidReason::Shutdown,
        })
        .expect("void");
    assert_eq!(
        kinds(&ev)[0],
        &EventKind::HandVoided {
            hand: 2,
            stacks: vec![
                SeatChips {
                    seat: 0,
                    stack: Chips(before[0])
                },
                SeatChips {
                    seat: 1,
                    stack: Chips(before[1])
                },
                SeatChips {
                    seat: 2,
                    stack: Chips(before[2])
                },
            ],
            reason: VoidReason::Shutdown,
        }
    );
    assert!(matches!(kinds(&ev)[1], EventKind::Left { seat: 0, .. }));
    assert!(!g.hand_in_progress());
    assert_eq!(g.hand_no(), 2);
    assert_eq!(g.button(), Some(0));
    assert_eq!(g.last_summary().map(|s| s.hand), Some(1));
    start(&mut g, standard_deck());
    assert_eq!(g.hand_no(), 3);
}
