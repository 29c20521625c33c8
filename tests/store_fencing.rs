//! The fenced Postgres store, for seats and table state: a buy-in moves
//! chips from a wallet to a seat and a cash-out back, each with its ledger
//! row and only under the table's current fencing token; state transitions
//! and stamps land only with the current (or, for a stamp, a higher) fence;
//! and a stale write racing a new owner's stamp never lands after it. Hand
//! results, grants and the audit are in `store_fencing_hands.rs`.
//!
//! Each test gets a fresh database (`common::test_db()`), migrated with the
//! crate's own migrations; the fixtures are in `common::store`.

mod common;

use pitboss::games::holdem::rules::{Chips, PlayerId};
use pitboss::store::StoreError;
use pitboss::types::{Fence, FreezeReason, StateReason, TableState};

use common::store::{
    assert_conserved, balance, fresh_store, is_stale, ledger, out, seat, seated_table, snapshot,
    stamped_table, summary, LedgerRow, WriteHand,
};

// ---------------------------------------------------------------------------
// Buy-in and cash-out
// ---------------------------------------------------------------------------

#[tokio::test]
async fn buy_in_debits_the_wallet_and_seats_the_player_with_a_ledger_row() {
    let (mut db, store) = fresh_store().await;
    let t = stamped_table(&store).await;
    store.grant("alice", Chips(1000)).await.unwrap();
    let ledger_before = ledger(&store).await;

    let left = store
        .buy_in(&t, Fence(1), 3, &PlayerId::from("alice"), Chips(150))
        .await
        .expect("buy_in");
    assert_eq!(left, Chips(850));
    assert_eq!(balance(&store, "alice").await, Some(850));
    assert_eq!(store.seats(&t).await.unwrap(), vec![seat(3, "alice", 150)]);
    assert_eq!(
        ledger(&store).await[ledger_before.len()..].to_vec(),
        vec![(
            "buy_in".to_string(),
            "alice".to_string(),
            Some(t.to_string()),
            None,
            Some(1),
            -150,
            150
        )]
    );
    assert_conserved(&store).await;

    db.drop_db().await;
}

#[tokio::test]
async fn buy_in_with_insufficient_funds_is_refused_and_changes_nothing() {
    let (mut db, store) = fresh_store().await;
    let t = stamped_table(&store).await;
    store.grant("alice", Chips(100)).await.unwrap();
    let before = snapshot(&store, &t).await;

    let err = store
        .buy_in(&t, Fence(1), 0, &PlayerId::from("alice"), Chips(101))
        .await
        .expect_err("buy-in above the balance");
    assert!(matches!(err, StoreError::InsufficientFunds), "got {err:?}");
    assert_eq!(snapshot(&store, &t).await, before);

    let err = store
        .buy_in(&t, Fence(1), 0, &PlayerId::from("nobody"), Chips(1))
        .await
        .expect_err("buy-in without a wallet");
    assert!(matches!(err, StoreError::InsufficientFunds), "got {err:?}");
    assert_eq!(snapshot(&store, &t).await, before);

    // The whole balance is not too much.
    store
        .buy_in(&t, Fence(1), 0, &PlayerId::from("alice"), Chips(100))
        .await
        .expect("buy-in of the exact balance");
    assert_eq!(balance(&store, "alice").await, Some(0));
    assert_conserved(&store).await;

    db.drop_db().await;
}

#[tokio::test]
async fn buy_in_to_a_taken_seat_is_refused_with_seat_taken_and_changes_nothing() {
    let (mut db, store) = fresh_store().await;
    let t = seated_table(&store).await;
    store.grant("carol", Chips(1000)).await.unwrap();
    let before = snapshot(&store, &t).await;

    let err = store
        .buy_in(&t, Fence(1), 0, &PlayerId::from("carol"), Chips(100))
        .await
        .expect_err("seat 0 is alice's");
    assert!(matches!(err, StoreError::SeatTaken), "got {err:?}");
    assert_eq!(
        snapshot(&store, &t).await,
        before,
        "carol's wallet must not be debited"
    );

    db.drop_db().await;
}

#[tokio::test]
async fn buy_in_by_a_player_already_seated_is_refused_with_already_seated() {
    let (mut db, store) = fresh_store().await;
    let t = seated_table(&store).await;
    let before = snapshot(&store, &t).await;

    let err = store
        .buy_in(&t, Fence(1), 4, &PlayerId::from("alice"), Chips(100))
        .await
        .expect_err("alice already sits in seat 0");
    assert!(matches!(err, StoreError::AlreadySeated), "got {err:?}");
    assert_eq!(snapshot(&store, &t).await, before);

    db.drop_db().await;
}

#[tokio::test]
async fn buy_in_with_a_stale_fence_is_refused_and_changes_nothing() {
    let (mut db, store) = fresh_store().await;
    let t = stamped_table(&store).await;
    store.grant("alice", Chips(1000)).await.unwrap();
    store.stamp(&t, Fence(2), "inst-b", false).await.unwrap();
    let before = snapshot(&store, &t).await;

    let err = store
        .buy_in(&t, Fence(1), 0, &PlayerId::from("alice"), Chips(100))
        .await
        .expect_err("stale buy-in");
    assert!(is_stale(&err, &t, 1, 2), "got {err:?}");
    assert_eq!(snapshot(&store, &t).await, before);

    db.drop_db().await;
}

#[tokio::test]
async fn buy_in_at_a_table_that_is_not_open_is_refused_with_wrong_state() {
    let (mut db, store) = fresh_store().await;
    let t = stamped_table(&store).await;
    store.grant("alice", Chips(1000)).await.unwrap();
    store
        .transition(
            &t,
            Fence(1),
            "inst-a",
            TableState::Frozen,
            FreezeReason::LeaseLost,
        )
        .await
        .expect("freeze");
    let before = snapshot(&store, &t).await;

    let err = store
        .buy_in(&t, Fence(1), 0, &PlayerId::from("alice"), Chips(100))
        .await
        .expect_err("buy-in at a frozen table");
    assert!(
        matches!(&err, StoreError::WrongState(TableState::Frozen)),
        "got {err:?}"
    );
    assert_eq!(snapshot(&store, &t).await, before);

    db.drop_db().await;
}

#[tokio::test]
async fn cash_out_returns_the_stack_to_the_wallet_and_deletes_the_seat() {
    let (mut db, store) = fresh_store().await;
    let t = seated_table(&store).await;
    let before = snapshot(&store, &t).await;

    // A wrong stack or a stale fence changes nothing.
    let err = store
        .cash_out(&t, Fence(1), &[out(0, "alice", 199)])
        .await
        .expect_err("cash-out of a stack the seat does not hold");
    assert!(matches!(err, StoreError::Inconsistent(_)), "got {err:?}");
    assert_eq!(snapshot(&store, &t).await, before);
    // Seats are vacated together: one wrong stack keeps every seat, wallet
    // and ledger row as it was, and the refusal names that seat.
    let ledger_before = ledger(&store).await;
    let err = store
        .cash_out(&t, Fence(1), &[out(0, "alice", 200), out(1, "bob", 201)])
        .await
        .expect_err("bob's seat holds 200");
    match &err {
        StoreError::Inconsistent(why) => assert!(
            why.contains("seat 1 (bob) does not hold 201 chips"),
            "{why}"
        ),
        other => panic!("got {other:?}"),
    }
    assert_eq!(snapshot(&store, &t).await, before);
    assert_eq!(ledger(&store).await, ledger_before);
    store.stamp(&t, Fence(2), "inst-b", false).await.unwrap();
    let before = snapshot(&store, &t).await;
    let err = store
        .cash_out(&t, Fence(1), &[out(0, "alice", 200)])
        .await
        .expect_err("stale cash-out");
    assert!(is_stale(&err, &t, 1, 2), "got {err:?}");
    assert_eq!(snapshot(&store, &t).await, before);

    let ledger_before = ledger(&store).await;
    store
        .cash_out(&t, Fence(2), &[out(0, "alice", 200)])
        .await
        .expect("cash_out");
    assert_eq!(balance(&store, "alice").await, Some(1000));
    assert_eq!(balance(&store, "bob").await, Some(800));
    assert_eq!(store.seats(&t).await.unwrap(), vec![seat(1, "bob", 200)]);
    assert_eq!(
        ledger(&store).await[ledger_before.len()..].to_vec(),
        vec![(
            "cash_out".to_string(),
            "alice".to_string(),
            Some(t.to_string()),
            None,
            Some(2),
            200,
            -200
        )]
    );
    assert_conserved(&store).await;

    db.drop_db().await;
}

#[tokio::test]
async fn write_hand_cash_outs_return_stacks_to_wallets_and_delete_the_seats() {
    let (mut db, store) = fresh_store().await;
    let t = seated_table(&store).await;
    let ledger_before = ledger(&store).await;

    let hand = summary(1, &[(0, "alice", 200, 260), (1, "bob", 200, 140)]);
    store
        .write_hand(
            &t,
            Fence(1),
            "inst-a",
            &hand,
            Some(0),
            &[out(1, "bob", 140)],
        )
        .await
        .expect("write_hand with a cash-out");

    assert_eq!(store.seats(&t).await.unwrap(), vec![seat(0, "alice", 260)]);
    assert_eq!(balance(&store, "bob").await, Some(940));
    assert_eq!(balance(&store, "alice").await, Some(800));
    let tid = Some(t.to_string());
    let expected: Vec<LedgerRow> = vec![
        (
            "hand".into(),
            "alice".into(),
            tid.clone(),
            Some(1),
            Some(1),
            0,
            60,
        ),
        (
            "hand".into(),
            "bob".into(),
            tid.clone(),
            Some(1),
            Some(1),
            0,
            -60,
        ),
        (
            "cash_out".into(),
            "bob".into(),
            tid,
            None,
            Some(1),
            140,
            -140,
        ),
    ];
    assert_eq!(
        ledger(&store).await[ledger_before.len()..].to_vec(),
        expected
    );
    assert_conserved(&store).await;

    // A cash-out of the pre-hand stack is inconsistent and rolls the hand back.
    let before = snapshot(&store, &t).await;
    let hand = summary(2, &[(0, "alice", 260, 260)]);
    let err = store
        .write_hand(
            &t,
            Fence(1),
            "inst-a",
            &hand,
            Some(0),
            &[out(0, "alice", 200)],
        )
        .await
        .expect_err("cash-out of the wrong stack");
    assert!(matches!(err, StoreError::Inconsistent(_)), "got {err:?}");
    assert_eq!(snapshot(&store, &t).await, before);

    db.drop_db().await;
}

// ---------------------------------------------------------------------------
// State transitions and stamps
// ---------------------------------------------------------------------------

#[tokio::test]
async fn transition_with_a_stale_fence_is_rejected_and_the_state_stays() {
    let (mut db, store) = fresh_store().await;
    let t = stamped_table(&store).await;
    store.stamp(&t, Fence(2), "inst-b", false).await.unwrap();
    let before = snapshot(&store, &t).await;

    // The stale owner freezes: only its local copy, never the new owner's row.
    let err = store
        .transition(
            &t,
            Fence(1),
            "inst-a",
            TableState::Frozen,
            FreezeReason::LeaseLost,
        )
        .await
        .expect_err("stale transition");
    assert!(is_stale(&err, &t, 1, 2), "got {err:?}");
    assert_eq!(snapshot(&store, &t).await, before);
    assert_eq!(
        store.table(&t).await.unwrap().unwrap().state,
        TableState::Open
    );

    db.drop_db().await;
}

#[tokio::test]
async fn transition_with_the_current_fence_lands_and_records_a_table_event() {
    let (mut db, store) = fresh_store().await;
    let t = stamped_table(&store).await;
    store.stamp(&t, Fence(2), "inst-b", false).await.unwrap();
    let events_before = store.events(&t).await.unwrap().len();

    store
        .transition(
            &t,
            Fence(2),
            "inst-b",
            TableState::Draining,
            StateReason::Shutdown,
        )
        .await
        .expect("transition");
    let row = store.table(&t).await.unwrap().unwrap();
    assert_eq!(row.state, TableState::Draining);
    assert_eq!(row.state_reason, Some(StateReason::Shutdown));
    assert_eq!(row.fence, Fence(2), "a transition never changes the token");

    let events = store.events(&t).await.unwrap();
    assert_eq!(events.len(), events_before + 1);
    let e = events.last().unwrap();
    assert_eq!(e.from, Some(TableState::Open));
    assert_eq!(e.to, TableState::Draining);
    assert_eq!(e.reason, Some(StateReason::Shutdown));
    assert_eq!(e.owner.as_deref(), Some("inst-b"));
    assert_eq!(e.fence, Some(2));

    db.drop_db().await;
}

#[tokio::test]
async fn stamp_with_a_lower_or_equal_fence_is_refused_and_changes_nothing() {
    let (mut db, store) = fresh_store().await;
    let t = stamped_table(&store).await;
    store.stamp(&t, Fence(3), "inst-a", false).await.unwrap();
    let before = snapshot(&store, &t).await;

    let err = store
        .stamp(&t, Fence(3), "inst-b", false)
        .await
        .expect_err("equal fence");
    assert!(is_stale(&err, &t, 3, 3), "got {err:?}");
    assert_eq!(snapshot(&store, &t).await, before);

    let err = store
        .stamp(&t, Fence(2), "inst-b", true)
        .await
        .expect_err("lower fence");
    assert!(is_stale(&err, &t, 2, 3), "got {err:?}");
    assert_eq!(snapshot(&store, &t).await, before);

    let row = store.table(&t).await.unwrap().unwrap();
    assert_eq!(row.fence, Fence(3));
    assert_eq!(row.owner_instance.as_deref(), Some("inst-a"));
    assert_eq!(store.fence_floor(&t).await.unwrap(), Fence(3));

    db.drop_db().await;
}

#[tokio::test]
async fn stamp_reopens_a_released_or_draining_table() {
    let (mut db, store) = fresh_store().await;
    let t = stamped_table(&store).await;

    for (k, left_as) in [(1u64, TableState::Released), (2, TableState::Draining)] {
        store
            .transition(&t, Fence(k), "inst-a", left_as, StateReason::Shutdown)
            .await
            .expect("leave the table");
        let row = store
            .stamp(&t, Fence(k + 1), "inst-b", false)
            .await
            .expect("revive");
        assert_eq!(row.state, TableState::Open, "a {left_as} table must reopen");
        assert_eq!(row.state_reason, None);
        assert_eq!(row.fence, Fence(k + 1));
        assert_eq!(row.owner_instance.as_deref(), Some("inst-b"));
        let e = store.events(&t).await.unwrap().pop().unwrap();
        assert_eq!(e.from, Some(left_as));
        assert_eq!(e.to, TableState::Open);
        assert_eq!(e.reason, Some(StateReason::Revived));
        assert_eq!(e.owner.as_deref(), Some("inst-b"));
        assert_eq!(e.fence, Some(i64::try_from(k + 1).unwrap()));
    }

    db.drop_db().await;
}

#[tokio::test]
async fn stamp_leaves_a_frozen_table_frozen_unless_recover_is_set() {
    let (mut db, store) = fresh_store().await;
    let t = stamped_table(&store).await;
    store
        .transition(
            &t,
            Fence(1),
            "inst-a",
            TableState::Frozen,
            FreezeReason::LeaseLost,
        )
        .await
        .unwrap();

    let row = store.stamp(&t, Fence(2), "inst-b", false).await.unwrap();
    assert_eq!(row.state, TableState::Frozen);
    assert_eq!(row.state_reason, Some(StateReason::LeaseLost));
    assert_eq!(row.fence, Fence(2));
    let e = store.events(&t).await.unwrap().pop().unwrap();
    assert_eq!(
        (e.from, e.to, e.reason),
        (
            Some(TableState::Frozen),
            TableState::Frozen,
            Some(StateReason::Acquired)
        )
    );

    let row = store.stamp(&t, Fence(3), "inst-b", true).await.unwrap();
    assert_eq!(row.state, TableState::Open);
    assert_eq!(row.state_reason, None);
    assert_eq!(row.fence, Fence(3));
    let e = store.events(&t).await.unwrap().pop().unwrap();
    assert_eq!(
        (e.from, e.to, e.reason),
        (
            Some(TableState::Frozen),
            TableState::Open,
            Some(StateReason::Recovered)
        )
    );
    assert_eq!((e.owner.as_deref(), e.fence), (Some("inst-b"), Some(3)));

    db.drop_db().await;
}

// ---------------------------------------------------------------------------
// Concurrency: a stale write racing a new owner's stamp
// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_stale_fence_write_racing_a_new_stamp_never_lands_after_the_stamp() {
    const ROUNDS: u64 = 20;
    let (mut db, store) = fresh_store().await;
    let t = seated_table(&store).await;
    let (mut alice, mut bob) = (200u64, 200u64);
    let (mut landed, mut refused) = (0, 0);

    for k in 1..=ROUNDS {
        // Round k: inst-k holds fence k and ends hand k while inst-(k+1)
        // stamps fence k+1.
        let hand = summary(
            k,
            &[(0, "alice", alice, alice + 5), (1, "bob", bob, bob - 5)],
        );
        let writer = format!("inst-{k}");
        let stamper = format!("inst-{}", k + 1);
        let write = store.write_hand(&t, Fence(k), &writer, &hand, Some(0), &[]);
        let stamp = store.stamp(&t, Fence(k + 1), &stamper, false);
        // Alternate which one is polled first.
        let (w, s) = if k % 2 == 0 {
            tokio::join!(write, stamp)
        } else {
            let (s, w) = tokio::join!(stamp, write);
            (w, s)
        };
        let stamped = s.unwrap_or_else(|e| panic!("round {k}: the stamp must land: {e:?}"));
        assert_eq!(stamped.fence, Fence(k + 1));
        match w {
            Ok(()) => {
                // The write committed with fence k, so it must have come
                // before the stamp: the stamp saw its hand number.
                assert_eq!(
                    stamped.hand_no,
                    k,
                    "round {k}: hand {k} with fence {k} landed after fence {} was stamped",
                    k + 1
                );
                alice += 5;
                bob -= 5;
                landed += 1;
            }
            Err(e) => {
                assert!(is_stale(&e, &t, k, k + 1), "round {k}: got {e:?}");
                refused += 1;
            }
        }
        let rows: Vec<(i64, i64, String)> = sqlx::query_as(
            "SELECT hand_no, fence, owner FROM hands WHERE table_id = $1 AND hand_no = $2",
        )
        .bind(t.as_str())
        .bind(i64::try_from(k).unwrap())
        .fetch_all(store.pool())
        .await
        .unwrap();
        if stamped.hand_no == k {
            let k = i64::try_from(k).unwrap();
            assert_eq!(rows, vec![(k, k, writer.clone())]);
        } else {
            assert!(rows.is_empty(), "round {k}: a refused hand left {rows:?}");
        }
        assert_eq!(
            store.seats(&t).await.unwrap(),
            vec![seat(0, "alice", alice), seat(1, "bob", bob)],
            "round {k}"
        );
    }
    eprintln!("{landed} writes landed before their stamp, {refused} were refused");
    assert_eq!(landed + refused, ROUNDS);

    // Every recorded hand, and every ledger row of it, carries the token
    // that was current when it was written (fence k for hand k).
    let hands: Vec<(i64, i64)> =
        sqlx::query_as("SELECT hand_no, fence FROM hands WHERE table_id = $1")
            .bind(t.as_str())
            .fetch_all(store.pool())
            .await
            .unwrap();
    assert_eq!(hands.len(), landed as usize);
    for (hand_no, fence) in &hands {
        assert_eq!(hand_no, fence, "hand {hand_no} carries fence {fence}");
    }
    let bad_ledger: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM ledger WHERE kind = 'hand' AND fence IS DISTINCT FROM hand_no",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert_eq!(bad_ledger, 0);
    assert_eq!(store.fence_floor(&t).await.unwrap(), Fence(ROUNDS + 1));
    assert_conserved(&store).await;

    db.drop_db().await;
}
