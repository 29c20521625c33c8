//! One table's share of the store: every write the table may make, each a
//! fenced transaction on that table's rows only, under the fence the table
//! names. A table holds this handle and no other: it cannot reach another
//! table's rows, the instances, the wallets beside its own seats' buy-ins
//! and cash-outs, or any read the manager makes.

use std::sync::Arc;

use super::{Appended, Boundary, CashOut, Entry, Store, StoreError};
use crate::chips::{Chips, PlayerId, SeatNo};
use crate::types::{Fence, StateReason, TableId, TableState};

#[derive(Clone)]
pub struct TableStore {
    store: Store,
    table: TableId,
    /// The instance hosting the table, recorded as its owner.
    owner: Arc<str>,
}

impl TableStore {
    pub fn new(store: Store, table: TableId, owner: Arc<str>) -> TableStore {
        TableStore {
            store,
            table,
            owner,
        }
    }

    /// Wallet → stack for `player` taking `seat` ([`Store::buy_in`]).
    pub async fn buy_in(
        &self,
        fence: Fence,
        seat: SeatNo,
        player: &PlayerId,
        amount: Chips,
    ) -> Result<Chips, StoreError> {
        self.store
            .buy_in(&self.table, fence, seat, player, amount)
            .await
    }

    /// Stacks → wallets, the seats vacated ([`Store::cash_out`]).
    pub async fn cash_out(&self, fence: Fence, outs: &[CashOut]) -> Result<(), StoreError> {
        self.store.cash_out(&self.table, fence, outs).await
    }

    /// Whether every one of `outs` is vacated already (a retried cash-out
    /// whose first try committed).
    pub async fn all_vacated(&self, outs: &[CashOut]) -> Result<bool, StoreError> {
        self.store.all_vacated(&self.table, outs).await
    }

    /// One command of the game in progress, committed under `fence` in the
    /// process's next group commit ([`super::Journal::append`]).
    pub async fn journal(&self, fence: Fence, entry: Entry) -> Result<Appended, StoreError> {
        self.store.journal().append(&self.table, fence, entry).await
    }

    /// A settled boundary ([`Store::write_boundary`]).
    pub async fn write_boundary(
        &self,
        fence: Fence,
        boundary: &Boundary,
        outs: &[CashOut],
    ) -> Result<(), StoreError> {
        self.store
            .write_boundary(&self.table, fence, &self.owner, boundary, outs)
            .await
    }

    /// A voided boundary's number burnt, its leavers cashed out
    /// ([`Store::record_void`]).
    pub async fn record_void(
        &self,
        fence: Fence,
        number: u64,
        outs: &[CashOut],
    ) -> Result<(), StoreError> {
        self.store
            .record_void(&self.table, fence, number, outs)
            .await
    }

    /// Postgres moved from `old` to `new` if it still holds `old` with this
    /// owner ([`Store::reassert`]).
    pub async fn reassert(&self, old: Fence, new: Fence) -> Result<(), StoreError> {
        self.store
            .reassert(&self.table, old, new, &self.owner)
            .await
    }

    /// A change of state under `fence` ([`Store::transition`]).
    pub async fn transition(
        &self,
        fence: Fence,
        to: TableState,
        reason: impl Into<StateReason>,
    ) -> Result<(), StoreError> {
        self.store
            .transition(&self.table, fence, &self.owner, to, reason)
            .await
    }

    /// Frozen with hand `number`, told void, voided in Postgres too
    /// ([`Store::freeze_voided`]).
    pub async fn freeze_voided(
        &self,
        fence: Fence,
        reason: impl Into<StateReason>,
        number: u64,
    ) -> Result<(), StoreError> {
        self.store
            .freeze_voided(&self.table, fence, &self.owner, reason, number)
            .await
    }

    /// Released for a move to `target` ([`Store::release_to`]).
    pub async fn release_to(&self, fence: Fence, target: &str) -> Result<(), StoreError> {
        self.store
            .release_to(&self.table, fence, &self.owner, target)
            .await
    }
}
