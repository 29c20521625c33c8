//! What a table needs of its process, and nothing more: its own fenced
//! writes ([`TableStore`], its rows only), this instance's id, the liveness
//! it may deal under, the drain flag and the table settings. A table is
//! handed no Redis client, no store beyond its own rows and no other
//! actor's settings.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::TableSettings;
use crate::lease::LeaseClock;
use crate::runtime::Runtime;
use crate::store::TableStore;
use crate::types::TableId;

#[derive(Clone)]
pub struct TableEnv {
    /// Every write a table makes goes through it under the table's fence.
    pub store: TableStore,
    pub settings: TableSettings,
    instance_id: Arc<str>,
    liveness: Arc<LeaseClock>,
    draining: Arc<AtomicBool>,
    ttl: Duration,
}

impl TableEnv {
    /// Table `table`'s share of its process.
    pub fn of(rt: &Runtime, table: &TableId) -> TableEnv {
        let instance_id: Arc<str> = Arc::from(rt.instance_id());
        TableEnv {
            store: TableStore::new(rt.store.clone(), table.clone(), instance_id.clone()),
            settings: rt.settings.table.clone(),
            instance_id,
            liveness: rt.liveness.clone(),
            draining: rt.draining_flag(),
            ttl: rt.ttl(),
        }
    }

    /// The instance hosting the table: the owner its snapshots name.
    pub fn instance_id(&self) -> &str {
        &self.instance_id
    }

    /// Whether this process may deal now (its liveness is on record).
    pub fn is_alive_on_record(&self, now: Instant) -> bool {
        self.liveness.is_valid(now)
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    pub fn action_timeout(&self) -> Duration {
        Duration::from_millis(self.settings.action_timeout_ms)
    }

    pub fn next_hand_delay(&self) -> Duration {
        Duration::from_millis(self.settings.next_hand_delay_ms)
    }

    pub fn idle_evict(&self) -> Duration {
        Duration::from_millis(self.settings.idle_evict_ms)
    }

    pub fn reconnect_window(&self) -> Duration {
        Duration::from_millis(self.settings.reconnect_window_ms)
    }
}
