//! What a table needs of its process, and nothing more: Postgres for its
//! fenced writes, this instance's id, the liveness it may deal under, the
//! drain flag and the table settings. A table is handed no Redis client
//! and no other actor's settings.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::TableSettings;
use crate::lease::LeaseClock;
use crate::runtime::Runtime;
use crate::store::Store;

#[derive(Clone)]
pub struct TableEnv {
    /// Every write a table makes goes through it under the table's fence.
    pub store: Store,
    pub settings: TableSettings,
    instance_id: Arc<str>,
    liveness: Arc<LeaseClock>,
    draining: Arc<AtomicBool>,
    ttl: Duration,
}

impl TableEnv {
    /// A table's share of its process.
    pub fn of(rt: &Runtime) -> TableEnv {
        TableEnv {
            store: rt.store.clone(),
            settings: rt.settings.table.clone(),
            instance_id: Arc::from(rt.instance_id()),
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
}
