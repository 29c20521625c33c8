//! What every actor and handler shares: settings, pools, signer, flags.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::watch;

use crate::actors::table::Games;
use crate::auth::TokenSigner;
use crate::config::Settings;
use crate::lease::{LeaseClient, LeaseClock, Registration};
use crate::peers::PeerDirectory;
use crate::store::Store;

pub struct Runtime {
    pub settings: Settings,
    pub store: Store,
    pub lease: LeaseClient,
    pub signer: TokenSigner,
    pub metrics: PrometheusHandle,
    /// This process's claim on its instance id.
    pub registration: Registration,
    /// Until when Postgres has this process's liveness on record: the
    /// heartbeat confirms it on every beat. Tables deal only while it is
    /// valid, so a process that other instances may consider gone (and
    /// whose tables they may take) has stopped dealing first (I1).
    pub liveness: Arc<LeaseClock>,
    /// The other instances of this environment.
    pub peers: PeerDirectory,
    /// The games this process hosts.
    pub games: Games,
    draining: Arc<AtomicBool>,
    /// Flips to true when a drain starts; idle sessions close on it.
    shutdown: watch::Sender<bool>,
}

impl Runtime {
    pub fn new(
        settings: Settings,
        store: Store,
        lease: LeaseClient,
        signer: TokenSigner,
        metrics: PrometheusHandle,
        registration: Registration,
        liveness: Arc<LeaseClock>,
    ) -> Runtime {
        let peers = PeerDirectory::new(store.clone(), settings.instance.environment.clone());
        Runtime {
            settings,
            store,
            lease,
            signer,
            metrics,
            registration,
            liveness,
            peers,
            games: Games::default(),
            draining: Arc::new(AtomicBool::new(false)),
            shutdown: watch::channel(false).0,
        }
    }

    /// The games this process hosts (none until they are given).
    pub fn with_games(mut self, games: Games) -> Runtime {
        self.games = games;
        self
    }

    pub fn instance_id(&self) -> &str {
        self.settings.instance_id()
    }

    pub fn environment(&self) -> &str {
        &self.settings.instance.environment
    }

    /// Whether this process may deal now: its liveness is on record in
    /// Postgres recently enough that nobody may consider it gone.
    pub fn is_alive_on_record(&self, now: Instant) -> bool {
        self.liveness.is_valid(now)
    }

    /// The drain flag, for the parts that share only it.
    pub fn draining_flag(&self) -> Arc<AtomicBool> {
        self.draining.clone()
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::Release);
        self.shutdown.send_replace(true);
    }

    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    pub fn ttl(&self) -> Duration {
        self.settings.lease_ttl()
    }

    pub fn action_timeout(&self) -> Duration {
        Duration::from_millis(self.settings.table.action_timeout_ms)
    }

    pub fn next_hand_delay(&self) -> Duration {
        Duration::from_millis(self.settings.table.next_hand_delay_ms)
    }

    pub fn idle_evict(&self) -> Duration {
        Duration::from_millis(self.settings.table.idle_evict_ms)
    }
}
