//! The fenced Postgres store: every write to a table's rows carries the
//! table's current fencing token, a hand is applied at most once, and chips
//! are conserved (wallets + stacks = grants).
//!
//! Each test gets a fresh database (`common::test_db()`), migrated with the
//! crate's own migrations.

mod common;

use pitboss::game::{Chips, HandSummary, PlayerId, PotAward, SeatNo, SeatResult, TableConfig};
use pitboss::store::{CashOut, SeatRow, Store, StoreError};
use pitboss::types::{Fence, FreezeReason, StateReason, TableId, TableState};

// ---------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------

async fn fresh_store() -> (common::TestDb, Store) {
    let db = common::test_db().await;
    let store = db.store("store-test").await;
    (db, store)
}

fn config() -> TableConfig {
    common::rules_config()
}

/// A table created and stamped with fence 1 by `inst-a`, nobody seated.
async fn stamped_table(store: &Store) -> TableId {
    let t = TableId::generate();
    store
        .create_table("test", &t, &config())
        .await
        .expect("create_table");
    let row = store
        .stamp(&t, Fence(1), "inst-a", false)
        .await
        .expect("stamp fence 1");
    assert_eq!(row.fence, Fence(1));
    t
}

/// A table at fence 1 (`inst-a`) with alice in seat 0 and bob in seat 1,
/// each granted 1000 and bought in for 200.
async fn seated_table(store: &Store) -> TableId {
    let t = stamped_table(store).await;
    for (seat, name) in [(0, "alice"), (1, "bob")] {
        store.grant(name, Chips(1000)).await.expect("grant");
        let left = store
            .buy_in(&t, Fence(1), seat, &PlayerId::from(name), Chips(200))
            .await
            .expect("buy_in");
        assert_eq!(left, Chips(800));
    }
    t
}

/// A hand summary from `(seat, player, start, end)`. The pot is what the
/// losers lost plus the winners' matching stakes, shared among the winners;
/// the store records it as given.
fn summary(hand: u64, seats: &[(SeatNo, &str, u64, u64)]) -> HandSummary {
    let lost: u64 = seats.iter().map(|s| s.2.saturating_sub(s.3)).sum();
    let winners: Vec<(SeatNo, Chips)> = seats
        .iter()
        .filter(|s| s.3 > s.2)
        .map(|s| (s.0, Chips(2 * (s.3 - s.2))))
        .collect();
    HandSummary {
        hand,
        seats: seats
            .iter()
            .map(|&(seat, player, start, end)| SeatResult {
                seat,
                player: PlayerId::from(player),
                start_stack: Chips(start),
                end_stack: Chips(end),
            })
            .collect(),
        pots: if lost == 0 {
            Vec::new()
        } else {
            vec![PotAward {
                amount: Chips(2 * lost),
                winners,
            }]
        },
    }
}

fn seat(seat: SeatNo, player: &str, stack: u64) -> SeatRow {
    SeatRow {
        seat,
        player: player.to_string(),
        stack: Chips(stack),
    }
}

fn out(seat: SeatNo, player: &str, stack: u64) -> CashOut {
    CashOut {
        seat,
        player: PlayerId::from(player),
        stack: Chips(stack),
    }
}

type LedgerRow = (
    String,
    String,
    Option<String>,
    Option<i64>,
    Option<i64>,
    i64,
    i64,
);

/// from, to, reason, owner, fence
type EventRow = (
    Option<TableState>,
    TableState,
    Option<StateReason>,
    Option<String>,
    Option<i64>,
);

/// Everything a boundary write could touch, read straight from the database.
#[derive(Debug, PartialEq)]
struct Snapshot {
    /// state, state_reason, owner_fencing_token, owner_instance, hand_no, button
    table: (
        String,
        Option<String>,
        i64,
        Option<String>,
        i64,
        Option<i16>,
    ),
    /// hand_no, fence, owner
    hands: Vec<(i64, i64, String)>,
    seats: Vec<SeatRow>,
    /// player, balance, granted
    wallets: Vec<(String, i64, i64)>,
    /// kind, player, table_id, hand_no, fence, wallet_delta, stack_delta
    ledger: Vec<LedgerRow>,
    /// from, to, reason, owner, fence
    events: Vec<EventRow>,
    /// wallets, stacks, granted, delta
    audit: (i128, i128, i128, i128),
}

async fn snapshot(store: &Store, t: &TableId) -> Snapshot {
    let pool = store.pool();
    let table = sqlx::query_as(
        "SELECT state, state_reason, owner_fencing_token, owner_instance, hand_no, button \
         FROM tables WHERE id = $1",
    )
    .bind(t.as_str())
    .fetch_one(pool)
    .await
    .expect("read tables");
    let hands = sqlx::query_as(
        "SELECT hand_no, fence, owner FROM hands WHERE table_id = $1 ORDER BY hand_no",
    )
    .bind(t.as_str())
    .fetch_all(pool)
    .await
    .expect("read hands");
    let wallets = sqlx::query_as("SELECT player, balance, granted FROM accounts ORDER BY player")
        .fetch_all(pool)
        .await
        .expect("read accounts");
    let ledger = ledger(store).await;
    let events = store
        .events(t)
        .await
        .expect("events")
        .into_iter()
        .map(|e| (e.from, e.to, e.reason, e.owner, e.fence))
        .collect();
    let a = store.audit().await.expect("audit");
    Snapshot {
        table,
        hands,
        seats: store.seats(t).await.expect("seats"),
        wallets,
        ledger,
        events,
        audit: (a.wallets, a.stacks, a.granted, a.delta),
    }
}

async fn ledger(store: &Store) -> Vec<LedgerRow> {
    sqlx::query_as(
        "SELECT kind, player, table_id, hand_no, fence, wallet_delta, stack_delta \
         FROM ledger ORDER BY id",
    )
    .fetch_all(store.pool())
    .await
    .expect("read ledger")
}

async fn balance(store: &Store, player: &str) -> Option<u64> {
    store.balance(player).await.expect("balance").map(|c| c.0)
}

async fn assert_conserved(store: &Store) {
    let a = store.audit().await.expect("audit");
    assert_eq!(a.delta, 0, "chips not conserved: {a:?}");
    assert_eq!(a.wallets + a.stacks, a.granted, "{a:?}");
}

fn is_stale(e: &StoreError, t: &TableId, fence: u64, current: u64) -> bool {
    matches!(
        e,
        StoreError::StaleOwnerBoundaryWrite { table, fence: f, current: c, .. }
            if table == t && *f == Fence(fence) && *c == Fence(current)
    )
}

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
    assert_eq!(row.button, Some(2));
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
