//! Fixtures for the tests of the fenced store (`tests/store_fencing*.rs`):
//! a fresh store, tables stamped and seated, hand summaries, seat and
//! cash-out rows, everything a boundary write could touch read straight
//! from the database, and the checks the tests repeat.

use pitboss::games::holdem::rules::{
    Chips, HandSummary, PlayerId, PotAward, SeatNo, SeatResult, TableConfig,
};
use pitboss::games::GameKind;
use pitboss::store::{CashOut, SeatRow, Store, StoreError};
use pitboss::types::{Fence, StateReason, TableId, TableState};

use super::{rules_config, test_db, TestDb};

pub async fn fresh_store() -> (TestDb, Store) {
    let db = test_db().await;
    let store = db.store("store-test").await;
    (db, store)
}

pub fn config() -> TableConfig {
    rules_config()
}

/// A table created and stamped with fence 1 by `inst-a`, nobody seated.
pub async fn stamped_table(store: &Store) -> TableId {
    let t = TableId::generate();
    store
        .create_table("test", &t, GameKind::HOLDEM, &config())
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
pub async fn seated_table(store: &Store) -> TableId {
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
pub fn summary(hand: u64, seats: &[(SeatNo, &str, u64, u64)]) -> HandSummary {
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

pub fn seat(seat: SeatNo, player: &str, stack: u64) -> SeatRow {
    SeatRow {
        seat,
        player: player.to_string(),
        stack: Chips(stack),
    }
}

pub fn out(seat: SeatNo, player: &str, stack: u64) -> CashOut {
    CashOut {
        seat,
        player: PlayerId::from(player),
        stack: Chips(stack),
    }
}

pub type LedgerRow = (
    String,
    String,
    Option<String>,
    Option<i64>,
    Option<i64>,
    i64,
    i64,
);

/// from, to, reason, owner, fence
pub type EventRow = (
    Option<TableState>,
    TableState,
    Option<StateReason>,
    Option<String>,
    Option<i64>,
);

/// Everything a boundary write could touch, read straight from the database.
#[derive(Debug, PartialEq)]
pub struct Snapshot {
    /// state, state_reason, owner_fencing_token, owner_instance, hand_no, button
    pub table: (
        String,
        Option<String>,
        i64,
        Option<String>,
        i64,
        Option<i16>,
    ),
    /// hand_no, fence, owner
    pub hands: Vec<(i64, i64, String)>,
    pub seats: Vec<SeatRow>,
    /// player, balance, granted
    pub wallets: Vec<(String, i64, i64)>,
    /// kind, player, table_id, hand_no, fence, wallet_delta, stack_delta
    pub ledger: Vec<LedgerRow>,
    /// from, to, reason, owner, fence
    pub events: Vec<EventRow>,
    /// wallets, stacks, granted, delta
    pub audit: (i128, i128, i128, i128),
}

pub async fn snapshot(store: &Store, t: &TableId) -> Snapshot {
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

pub async fn ledger(store: &Store) -> Vec<LedgerRow> {
    sqlx::query_as(
        "SELECT kind, player, table_id, hand_no, fence, wallet_delta, stack_delta \
         FROM ledger ORDER BY id",
    )
    .fetch_all(store.pool())
    .await
    .expect("read ledger")
}

pub async fn balance(store: &Store, player: &str) -> Option<u64> {
    store.balance(player).await.expect("balance").map(|c| c.0)
}

pub async fn assert_conserved(store: &Store) {
    let a = store.audit().await.expect("audit");
    assert_eq!(a.delta, 0, "chips not conserved: {a:?}");
    assert_eq!(a.wallets + a.stacks, a.granted, "{a:?}");
}

pub fn is_stale(e: &StoreError, t: &TableId, fence: u64, current: u64) -> bool {
    matches!(
        e,
        StoreError::StaleOwnerBoundaryWrite { table, fence: f, current: c, .. }
            if table == t && *f == Fence(fence) && *c == Fence(current)
    )
}

/// A hold'em hand written the way a hold'em table writes its boundary:
/// the summary as the result, each seat from its start to its end stack,
/// the button as the state the game keeps.
#[allow(async_fn_in_trait, dead_code)]
pub trait WriteHand {
    async fn write_hand(
        &self,
        id: &TableId,
        fence: Fence,
        owner: &str,
        summary: &HandSummary,
        button: Option<SeatNo>,
        outs: &[CashOut],
    ) -> Result<(), StoreError>;
}

impl WriteHand for Store {
    async fn write_hand(
        &self,
        id: &TableId,
        fence: Fence,
        owner: &str,
        summary: &HandSummary,
        button: Option<SeatNo>,
        outs: &[CashOut],
    ) -> Result<(), StoreError> {
        let state = serde_json::json!({ "button": button });
        let settlement = pitboss::games::holdem::settlement_of(summary);
        let boundary = pitboss::store::Boundary::of(settlement, state).expect("a summary is JSON");
        self.write_boundary(id, fence, owner, &boundary, outs).await
    }
}
