//! The fenced Postgres store, for hand results: a hand is written only under
//! the table's current fencing token, at most once, and only if it conserves
//! chips and starts from the stacks the store holds, with one ledger row per
//! stack that moved; grants refuse amounts Postgres cannot hold, and the
//! audit sums wallets, stacks and grants (wallets + stacks = grants). Seats,
//! table state and stamps are in `store_fencing.rs`.
//!
//! Each test gets a fresh database (`common::test_db()`), migrated with the
//! crate's own migrations; the fixtures are in `common::store`.

mod common;

use pitboss::games::holdem::rules::{Chips, PlayerId};
use pitboss::store::StoreError;
use pitboss::types::Fence;

use common::store::{
    assert_conserved, balance, fresh_store, is_stale, ledger, out, seat, seated_table, snapshot,
    stamped_table, summary, WriteHand,
};

// ---------------------------------------------------------------------------
// Fencing of hand results
// ---------------------------------------------------------------------------

#[tokio::test]
async fn stale_owner_payout_is_rejected_and_changes_nothing() {
    let (mut db, store) = fresh_store().await;
    let t = seated_table(&store).await;
    let row = store
        .stamp(&t, Fence(2), "inst-b", false)
        .await
        .expect("the new owner stamps fence 2");
    assert_eq!(row.fence, Fence(2));
    assert_eq!(row.owner_instance.as_deref(), Some("inst-b"));

    let before = snapshot(&store, &t).await;
    let hand = summary(1, &[(0, "alice", 200, 250), (1, "bob", 200, 150)]);
    let err = store
        .write_hand(
            &t,
            Fence(1),
            "inst-a",
            &hand,
            Some(0),
            &[out(1, "bob", 150)],
        )
        .await
        .expect_err("a stale owner's payout must be refused");
    assert!(is_stale(&err, &t, 1, 2), "got {err:?}");
    assert_eq!(
        snapshot(&store, &t).await,
        before,
        "a refused write changed rows"
    );

    // A token from the future is not the current one either.
    let err = store
        .write_hand(&t, Fence(3), "inst-c", &hand, Some(0), &[])
        .await
        .expect_err("a fence above the current one must be refused");
    assert!(is_stale(&err, &t, 3, 2), "got {err:?}");
    assert_eq!(snapshot(&store, &t).await, before);

    // The same hand with the current fence lands.
    store
        .write_hand(&t, Fence(2), "inst-b", &hand, Some(0), &[])
        .await
        .expect("the current owner's write lands");
    let after = snapshot(&store, &t).await;
    assert_eq!(after.hands, vec![(1, 2, "inst-b".to_string())]);
    assert_eq!(
        after.seats,
        vec![seat(0, "alice", 250), seat(1, "bob", 150)]
    );
    assert_eq!(after.table.4, 1, "hand_no");
    assert_conserved(&store).await;

    db.drop_db().await;
}

#[tokio::test]
async fn a_hand_cannot_be_applied_twice() {
    let (mut db, store) = fresh_store().await;
    let t = seated_table(&store).await;
    let hand = summary(1, &[(0, "alice", 200, 250), (1, "bob", 200, 150)]);
    store
        .write_hand(&t, Fence(1), "inst-a", &hand, Some(0), &[])
        .await
        .expect("first apply");
    let before = snapshot(&store, &t).await;

    // A retry after a timeout: the very same summary.
    let err = store
        .write_hand(&t, Fence(1), "inst-a", &hand, Some(0), &[])
        .await
        .expect_err("second apply");
    assert!(
        matches!(err, StoreError::HandAlreadyApplied(1)),
        "got {err:?}"
    );
    assert_eq!(snapshot(&store, &t).await, before);

    // The same number with stacks that match the table now: still refused.
    let again = summary(1, &[(0, "alice", 250, 300), (1, "bob", 150, 100)]);
    let err = store
        .write_hand(&t, Fence(1), "inst-a", &again, Some(1), &[])
        .await
        .expect_err("a second hand 1");
    assert!(
        matches!(err, StoreError::HandAlreadyApplied(1)),
        "got {err:?}"
    );
    assert_eq!(snapshot(&store, &t).await, before);
    assert_conserved(&store).await;

    db.drop_db().await;
}

#[tokio::test]
async fn a_hand_summary_that_creates_chips_is_refused_and_changes_nothing() {
    let (mut db, store) = fresh_store().await;
    let t = seated_table(&store).await;
    let before = snapshot(&store, &t).await;
    let minted = summary(1, &[(0, "alice", 200, 260), (1, "bob", 200, 150)]);
    let err = store
        .write_hand(&t, Fence(1), "inst-a", &minted, Some(0), &[])
        .await
        .expect_err("a summary that mints 10 chips");
    assert!(matches!(err, StoreError::Inconsistent(_)), "got {err:?}");
    assert_eq!(snapshot(&store, &t).await, before);
    assert_conserved(&store).await;
    db.drop_db().await;
}

#[tokio::test]
async fn a_buy_in_moves_wallet_to_stack_with_its_fenced_ledger_row() {
    let (mut db, store) = fresh_store().await;
    let t = seated_table(&store).await;
    store.grant("carol", Chips(500)).await.unwrap();
    let ledger_before = ledger(&store).await;
    let left = store
        .buy_in(&t, Fence(1), 3, &PlayerId::from("carol"), Chips(120))
        .await
        .expect("buy_in");
    assert_eq!(left, Chips(380));
    assert_eq!(balance(&store, "carol").await, Some(380));
    assert!(store
        .seats(&t)
        .await
        .unwrap()
        .contains(&seat(3, "carol", 120)));
    assert_eq!(
        ledger(&store).await[ledger_before.len()..].to_vec(),
        vec![(
            "buy_in".to_string(),
            "carol".to_string(),
            Some(t.to_string()),
            None,
            Some(1),
            -120,
            120
        )]
    );
    assert_conserved(&store).await;
    db.drop_db().await;
}

#[tokio::test]
async fn a_hand_whose_seat_no_longer_holds_its_start_stack_is_refused_naming_it() {
    let (mut db, store) = fresh_store().await;
    let t = seated_table(&store).await;
    let before = snapshot(&store, &t).await;
    let ledger_before = ledger(&store).await;
    // Conserves chips, and alice's seat holds her start stack, but bob's
    // holds 200, not 210: the seats are updated together, and not one of
    // them may move.
    let stale = summary(1, &[(0, "alice", 200, 240), (1, "bob", 210, 170)]);
    let err = store
        .write_hand(&t, Fence(1), "inst-a", &stale, Some(0), &[])
        .await
        .expect_err("a start stack the seat does not hold");
    match &err {
        StoreError::Inconsistent(why) => assert!(
            why.contains("seat 1 (bob) did not hold 210 chips at the start of hand 1"),
            "the first seat that differs is named: {why}"
        ),
        other => panic!("got {other:?}"),
    }
    assert_eq!(snapshot(&store, &t).await, before);
    assert_eq!(ledger(&store).await, ledger_before);
    assert_conserved(&store).await;
    db.drop_db().await;
}

#[tokio::test]
async fn write_hand_moves_stacks_writes_one_ledger_row_per_nonzero_delta_and_advances_hand_no() {
    let (mut db, store) = fresh_store().await;
    let t = seated_table(&store).await;
    store.grant("carol", Chips(1000)).await.unwrap();
    store
        .buy_in(&t, Fence(1), 2, &PlayerId::from("carol"), Chips(200))
        .await
        .unwrap();
    let ledger_before = ledger(&store).await;
    let wallets_before = snapshot(&store, &t).await.wallets;

    let hand = summary(
        1,
        &[
            (0, "alice", 200, 230),
            (1, "bob", 200, 170),
            (2, "carol", 200, 200),
        ],
    );
    store
        .write_hand(&t, Fence(1), "inst-a", &hand, Some(2), &[])
        .await
        .expect("write_hand");

    assert_eq!(
        store.seats(&t).await.unwrap(),
        vec![
            seat(0, "alice", 230),
            seat(1, "bob", 170),
            seat(2, "carol", 200)
        ]
    );
    let ledger_after = ledger(&store).await;
    assert_eq!(
        ledger_after[ledger_before.len()..].to_vec(),
        vec![
            (
                "hand".to_string(),
                "alice".to_string(),
                Some(t.to_string()),
                Some(1),
                Some(1),
                0,
                30
            ),
            (
                "hand".to_string(),
                "bob".to_string(),
                Some(t.to_string()),
                Some(1),
                Some(1),
                0,
                -30
            ),
        ],
        "one ledger row per non-zero delta, none for carol"
    );
    let row = store.table(&t).await.unwrap().expect("table row");
    assert_eq!(row.hand_no, 1);
    assert_eq!(row.game_state, serde_json::json!({"button": 2}));
    let after = snapshot(&store, &t).await;
    assert_eq!(after.wallets, wallets_before, "a hand never moves wallets");
    assert_eq!(after.hands, vec![(1, 1, "inst-a".to_string())]);
    assert_conserved(&store).await;

    // The next hand advances hand_no again.
    let next = summary(2, &[(0, "alice", 230, 220), (1, "bob", 170, 180)]);
    store
        .write_hand(&t, Fence(1), "inst-a", &next, Some(0), &[])
        .await
        .expect("hand 2");
    assert_eq!(store.table(&t).await.unwrap().unwrap().hand_no, 2);
    assert_conserved(&store).await;

    db.drop_db().await;
}

#[tokio::test]
async fn write_hand_whose_start_stack_disagrees_with_the_store_is_inconsistent_and_changes_nothing()
{
    let (mut db, store) = fresh_store().await;
    let t = seated_table(&store).await;
    let before = snapshot(&store, &t).await;

    // alice's row matches and would be updated first; bob's start is wrong,
    // so the whole transaction must roll back.
    let hand = summary(1, &[(0, "alice", 200, 240), (1, "bob", 190, 150)]);
    let err = store
        .write_hand(&t, Fence(1), "inst-a", &hand, Some(0), &[])
        .await
        .expect_err("a summary that disagrees with the stored stacks");
    assert!(matches!(err, StoreError::Inconsistent(_)), "got {err:?}");
    assert_eq!(snapshot(&store, &t).await, before);

    // The wrong player in a seat is just as inconsistent.
    let hand = summary(1, &[(0, "bob", 200, 240), (1, "alice", 200, 160)]);
    let err = store
        .write_hand(&t, Fence(1), "inst-a", &hand, Some(0), &[])
        .await
        .expect_err("players swapped between seats");
    assert!(matches!(err, StoreError::Inconsistent(_)), "got {err:?}");
    assert_eq!(snapshot(&store, &t).await, before);

    db.drop_db().await;
}

// ---------------------------------------------------------------------------
// Grants and the audit
// ---------------------------------------------------------------------------

#[tokio::test]
async fn grant_rejects_amounts_that_would_overflow_bigint_and_changes_nothing() {
    let (mut db, store) = fresh_store().await;
    let t = stamped_table(&store).await;
    let max = u64::try_from(i64::MAX).unwrap();

    let before = snapshot(&store, &t).await;
    let err = store
        .grant("whale", Chips(max + 1))
        .await
        .expect_err("a grant above BIGINT");
    assert!(matches!(err, StoreError::BadAmount(_)), "got {err:?}");
    assert_eq!(snapshot(&store, &t).await, before);
    assert_eq!(balance(&store, "whale").await, None);

    assert_eq!(store.grant("whale", Chips(max)).await.unwrap(), Chips(max));
    let before = snapshot(&store, &t).await;
    let err = store
        .grant("whale", Chips(1))
        .await
        .expect_err("a grant that overflows the balance");
    assert!(matches!(err, StoreError::BadAmount(_)), "got {err:?}");
    assert_eq!(snapshot(&store, &t).await, before);
    assert_eq!(balance(&store, "whale").await, Some(max));
    assert_conserved(&store).await;

    db.drop_db().await;
}

#[tokio::test]
async fn audit_sums_wallets_stacks_and_grants() {
    let (mut db, store) = fresh_store().await;
    let t = stamped_table(&store).await;
    let a = store.audit().await.unwrap();
    assert_eq!((a.wallets, a.stacks, a.granted, a.delta), (0, 0, 0, 0));

    store.grant("alice", Chips(1000)).await.unwrap();
    store.grant("bob", Chips(300)).await.unwrap();
    assert_eq!(store.grant("bob", Chips(200)).await.unwrap(), Chips(500));
    store
        .buy_in(&t, Fence(1), 0, &PlayerId::from("alice"), Chips(200))
        .await
        .unwrap();
    store
        .buy_in(&t, Fence(1), 1, &PlayerId::from("bob"), Chips(50))
        .await
        .unwrap();

    let a = store.audit().await.unwrap();
    assert_eq!(a.wallets, 800 + 450);
    assert_eq!(a.stacks, 250);
    assert_eq!(a.granted, 1500);
    assert_eq!(a.delta, 0);

    // Chips created behind the store's back show up as a non-zero delta.
    sqlx::query("UPDATE seats SET stack = stack + 7 WHERE player = 'bob'")
        .execute(store.pool())
        .await
        .unwrap();
    let a = store.audit().await.unwrap();
    assert_eq!((a.stacks, a.delta), (257, 7));

    db.drop_db().await;
}
