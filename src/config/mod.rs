//! Typed settings, layered: `base.toml` in the config directory, then
//! `{PITBOSS_ENV}.toml` beside it, then `PITBOSS__*` environment variables
//! (`PITBOSS__LEASE__TTL_MS=1500`), then command-line flags.
//!
//! Loading is strict: a key no setting has, in a file or as a variable, is
//! an error naming it, so a typo never passes silently.

use std::time::Duration;

use secrecy::SecretString;
use serde::Deserialize;

pub use load::LoadOptions;
use load::{is_setting_var, load_from, var_key, Sources};

/// Where the settings come from when the command line does not say.
const DEFAULT_CONFIG_DIR: &str = "config";
const ENV_PREFIX: &str = "PITBOSS__";
const ENV_SEPARATOR: &str = "__";
const MAX_LEASE_TTL_MS: u64 = 24 * 3600 * 1000;
const MAX_POSTGRES_TIMEOUT_MS: u64 = i32::MAX as u64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnv {
    Local,
    Test,
    Production,
}

impl RunEnv {
    pub fn as_str(self) -> &'static str {
        match self {
            RunEnv::Local => "local",
            RunEnv::Test => "test",
            RunEnv::Production => "production",
        }
    }
}

impl std::str::FromStr for RunEnv {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "local" => Ok(RunEnv::Local),
            "test" => Ok(RunEnv::Test),
            "production" => Ok(RunEnv::Production),
            other => Err(format!(
                "config error: PITBOSS_ENV must be local, test or production, not {other:?}"
            )),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub http: HttpSettings,
    pub database: DatabaseSettings,
    pub redis: RedisSettings,
    pub instance: InstanceSettings,
    pub lease: LeaseSettings,
    pub table: TableSettings,
    pub ws: WsSettings,
    pub shutdown: ShutdownSettings,
    pub journal: JournalSettings,
    #[serde(default)]
    pub auth: AuthSettings,
    #[serde(default)]
    pub admin: AdminSettings,
    pub log: LogSettings,
    #[serde(skip, default = "default_run_env")]
    pub run_env: RunEnv,
}

fn default_run_env() -> RunEnv {
    RunEnv::Local
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSettings {
    pub host: String,
    pub port: u16,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseSettings {
    pub url: SecretString,
    pub max_connections: u32,
    pub acquire_timeout_ms: u64,
    /// How long `serve` keeps trying to reach Postgres at start.
    pub connect_timeout_ms: u64,
    /// Postgres `statement_timeout` on every connection (I11).
    pub statement_timeout_ms: u64,
    /// Postgres `lock_timeout` on every connection: how long a statement
    /// waits for a row lock another transaction holds.
    pub lock_timeout_ms: u64,
    /// Postgres `idle_in_transaction_session_timeout` on every connection.
    pub idle_in_transaction_timeout_ms: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisSettings {
    pub url: SecretString,
    /// Upper bound for one Redis round trip; a slower answer counts as
    /// failed. Resolved at load time from `op_timeout_ms` or the lease TTL.
    #[serde(skip)]
    pub op_timeout_ms: u64,
    #[serde(rename = "op_timeout_ms", default)]
    configured_op_timeout_ms: Option<u64>,
    /// How long `serve` keeps trying to reach Redis at start.
    pub connect_timeout_ms: u64,
    /// A PEM file of the CA that signed the Redis server's certificate, for
    /// `rediss://` URLs to a server whose CA is not a public one. Unset:
    /// the system's trust store.
    #[serde(default)]
    pub tls_ca_file: Option<std::path::PathBuf>,
    /// Comma-separated seed nodes of a Redis Cluster (`h:p`, `redis://h:p`
    /// or `rediss://h:p`); set, pitboss talks Redis Cluster through them and
    /// `url` is not used.
    #[serde(default)]
    pub cluster_nodes: Option<SecretString>,
    /// Comma-separated Sentinels (`h:p` or `redis://h:p`) watching the master named
    /// `sentinel_master`; set, pitboss talks to the master they name, and
    /// finds it again after a failover. `url` is not used.
    #[serde(default)]
    pub sentinel_nodes: Option<SecretString>,
    /// The name the Sentinels monitor the master under.
    #[serde(default)]
    pub sentinel_master: Option<String>,
}

/// The non-empty entries of a comma-separated list, each as a URL: a bare
/// `host:port` (the form `redis-cli --cluster` and managed services print)
/// means `redis://host:port`. An entry that is neither stays as given, for
/// the check to refuse.
fn list(raw: Option<&SecretString>) -> Option<Vec<String>> {
    let nodes: Vec<String> = secrecy::ExposeSecret::expose_secret(raw?)
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(|n| node_url(n).unwrap_or_else(|| n.to_string()))
        .collect();
    (!nodes.is_empty()).then_some(nodes)
}

/// What the check says of a node entry it refuses.
const NODE_FORMS: &str = "host:port, redis://host:port or rediss://host:port (e.g. 10.0.0.5:7000)";

/// A seed node as a Redis URL: `redis://…` and `rediss://…` as given, a
/// bare `host:port` (host a name, an IPv4 address or a bracketed IPv6
/// address; port 1–65535) as `redis://host:port`; `None` for anything else.
pub fn node_url(entry: &str) -> Option<String> {
    if let Some(rest) = entry
        .strip_prefix("redis://")
        .or_else(|| entry.strip_prefix("rediss://"))
    {
        return (!rest.is_empty()).then(|| entry.to_string());
    }
    let (host, port) = entry.rsplit_once(':')?;
    let port_ok = !port.is_empty()
        && port.len() <= 5
        && port.bytes().all(|b| b.is_ascii_digit())
        && port.parse::<u16>().is_ok_and(|p| p > 0);
    let host_ok = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
        None => {
            !host.is_empty()
                && host.len() <= 253
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
        }
    };
    (port_ok && host_ok).then(|| format!("redis://{entry}"))
}

impl RedisSettings {
    /// The cluster's seed nodes, if a cluster is configured.
    pub fn cluster_nodes(&self) -> Option<Vec<String>> {
        list(self.cluster_nodes.as_ref())
    }

    /// The Sentinels, if the master is found through Sentinel.
    pub fn sentinel_nodes(&self) -> Option<Vec<String>> {
        list(self.sentinel_nodes.as_ref())
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceSettings {
    /// Lease owner id. Resolved at load time, so it is always set afterwards.
    #[serde(default)]
    pub id: Option<String>,
    pub environment: String,
    /// How other instances reach this one; `http://<http.host>:<bound
    /// port>` when unset.
    #[serde(default)]
    pub advertise_url: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseSettings {
    pub ttl_ms: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableSettings {
    pub action_timeout_ms: u64,
    pub next_hand_delay_ms: u64,
    pub idle_evict_ms: u64,
    pub arbiters: usize,
    pub history_events: usize,
    /// How long a seat is held for a player with no connection; after it
    /// the player is stood up and the stack goes back to the wallet.
    pub reconnect_window_ms: u64,
    /// 0 = off: a table frozen by a lost lease stays frozen for an operator.
    pub auto_recover_after_ms: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WsSettings {
    /// A bigger inbound frame closes the connection with 1009.
    pub max_frame_bytes: usize,
    /// Inbound frames per second, with a burst allowance.
    pub rate_per_sec: u32,
    pub rate_burst: u32,
    /// Rate-limited frames tolerated before the connection closes (1008).
    pub rate_strikes: u32,
    /// Bytes queued for a client that does not read before it is dropped.
    pub outbound_queue_bytes: u64,
    pub ping_interval_ms: u64,
    /// A client heard from neither frame nor pong for this long is dropped.
    pub idle_timeout_ms: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShutdownSettings {
    pub drain_timeout_ms: u64,
}

/// The journal's group commit (I15): how long the writer waits for more
/// commands once one has arrived, the most commands in one transaction,
/// and the most transactions in flight at once.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalSettings {
    pub window_us: u64,
    pub max_batch: usize,
    pub max_in_flight: usize,
}

/// The longest group-commit window: every act waits up to this long.
const MAX_JOURNAL_WINDOW_US: u64 = 100_000;
const MAX_JOURNAL_BATCH: usize = 65_536;

impl JournalSettings {
    /// The store's own form of these settings.
    pub fn group_commit(&self) -> crate::store::JournalSettings {
        crate::store::JournalSettings {
            window: Duration::from_micros(self.window_us),
            max_batch: self.max_batch,
            max_in_flight: self.max_in_flight,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct AuthSettings {
    pub secret: Option<SecretString>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct AdminSettings {
    pub token: Option<SecretString>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSettings {
    /// `pretty`, `compact` or `json`.
    pub format: String,
}

impl Settings {
    /// Loads the layered settings and checks them; the error is one line an
    /// operator can act on.
    pub fn load() -> Result<Settings, String> {
        Settings::load_with(&LoadOptions::default())
    }

    /// `load` with the command line's config directory and overrides.
    pub fn load_with(options: &LoadOptions) -> Result<Settings, String> {
        load_from(&Sources::from_process(options)?, options)
    }

    fn check(&self) -> Result<(), String> {
        let id = self.instance_id();
        if id.is_empty()
            || id.len() > 128
            || id.contains('|')
            || id.chars().any(char::is_whitespace)
        {
            return Err(format!(
                "config error: instance id {id:?} must be 1-128 characters without '|' or spaces"
            ));
        }
        let env = &self.instance.environment;
        if env.is_empty()
            || !env
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!(
                "config error: instance.environment {env:?} must be letters, digits, '_' or '-'"
            ));
        }
        if self.http.host.is_empty() {
            return Err("config error: http.host must not be empty".into());
        }
        if self.lease.ttl_ms < 300 {
            return Err("config error: lease.ttl_ms must be at least 300".into());
        }
        // Redis adds a PX expiry to its clock and refuses one that overflows
        // it, which would surface only as a Redis error when the first key
        // is written; a lease that outlives a crashed owner by more than a
        // day is a typo, not a choice.
        if self.lease.ttl_ms > MAX_LEASE_TTL_MS {
            return Err(format!(
                "config error: lease.ttl_ms ({}) must be at most {MAX_LEASE_TTL_MS} (a day)",
                self.lease.ttl_ms
            ));
        }
        // Postgres holds these as milliseconds in a 32-bit integer and
        // would refuse a larger one on every connection instead of here.
        for (key, value) in [
            (
                "database.statement_timeout_ms",
                self.database.statement_timeout_ms,
            ),
            ("database.lock_timeout_ms", self.database.lock_timeout_ms),
            (
                "database.idle_in_transaction_timeout_ms",
                self.database.idle_in_transaction_timeout_ms,
            ),
        ] {
            if value > MAX_POSTGRES_TIMEOUT_MS {
                return Err(format!(
                    "config error: {key} ({value}) must be at most {MAX_POSTGRES_TIMEOUT_MS}, the largest timeout Postgres takes"
                ));
            }
        }
        // Zero would mean "never" or "at once" where neither makes sense,
        // and a zero interval cannot be scheduled at all.
        for (key, value) in [
            (
                "database.max_connections",
                u64::from(self.database.max_connections),
            ),
            (
                "database.acquire_timeout_ms",
                self.database.acquire_timeout_ms,
            ),
            (
                "database.connect_timeout_ms",
                self.database.connect_timeout_ms,
            ),
            (
                "database.statement_timeout_ms",
                self.database.statement_timeout_ms,
            ),
            ("database.lock_timeout_ms", self.database.lock_timeout_ms),
            (
                "database.idle_in_transaction_timeout_ms",
                self.database.idle_in_transaction_timeout_ms,
            ),
            ("redis.op_timeout_ms", self.redis.op_timeout_ms),
            ("redis.connect_timeout_ms", self.redis.connect_timeout_ms),
            ("table.action_timeout_ms", self.table.action_timeout_ms),
            ("table.idle_evict_ms", self.table.idle_evict_ms),
            ("table.reconnect_window_ms", self.table.reconnect_window_ms),
            ("table.arbiters", self.table.arbiters as u64),
            ("ws.outbound_queue_bytes", self.ws.outbound_queue_bytes),
            ("ws.ping_interval_ms", self.ws.ping_interval_ms),
            ("ws.rate_per_sec", u64::from(self.ws.rate_per_sec)),
            ("ws.rate_burst", u64::from(self.ws.rate_burst)),
        ] {
            if value == 0 {
                return Err(format!("config error: {key} must be above 0"));
            }
        }
        let j = &self.journal;
        if j.window_us > MAX_JOURNAL_WINDOW_US {
            return Err(format!(
                "config error: journal.window_us ({}) must be at most {MAX_JOURNAL_WINDOW_US} (every act waits that long)",
                j.window_us
            ));
        }
        if !(1..=MAX_JOURNAL_BATCH).contains(&j.max_batch) {
            return Err(format!(
                "config error: journal.max_batch ({}) must be 1 to {MAX_JOURNAL_BATCH}",
                j.max_batch
            ));
        }
        // Each batch in flight holds a pool connection while it commits (a
        // pool smaller than this only means fewer batches at once).
        if j.max_in_flight == 0 {
            return Err("config error: journal.max_in_flight must be above 0".into());
        }
        // The heartbeat sends one renew at a time, every TTL/3: a renew that
        // hangs for longer than that delays the next one towards the local
        // deadline and freezes tables over one slow answer.
        if self.redis.op_timeout_ms.saturating_mul(3) > self.lease.ttl_ms {
            return Err(format!(
                "config error: redis.op_timeout_ms ({}) must be at most a third of lease.ttl_ms ({}), the renew period",
                self.redis.op_timeout_ms, self.lease.ttl_ms
            ));
        }
        for (key, nodes, set) in [
            (
                "redis.cluster_nodes",
                self.redis.cluster_nodes(),
                self.redis.cluster_nodes.is_some(),
            ),
            (
                "redis.sentinel_nodes",
                self.redis.sentinel_nodes(),
                self.redis.sentinel_nodes.is_some(),
            ),
        ] {
            match nodes {
                // The entry is not echoed: it may carry a password.
                Some(nodes) => {
                    if let Some(n) = nodes.iter().position(|n| node_url(n).is_none()) {
                        return Err(format!(
                            "config error: {key} entry {} is not a node: expected a comma-separated list of {NODE_FORMS}",
                            n + 1
                        ));
                    }
                }
                None if set => return Err(format!("config error: {key} is set but names no node")),
                None => {}
            }
        }
        if self.redis.cluster_nodes().is_some() && self.redis.sentinel_nodes().is_some() {
            return Err(
                "config error: set redis.cluster_nodes or redis.sentinel_nodes, not both".into(),
            );
        }
        if self.redis.sentinel_nodes().is_some()
            && self
                .redis
                .sentinel_master
                .as_deref()
                .is_none_or(str::is_empty)
        {
            return Err(
                "config error: redis.sentinel_nodes needs redis.sentinel_master, the name the Sentinels monitor".into(),
            );
        }
        if self.ws.max_frame_bytes < 128 {
            return Err("config error: ws.max_frame_bytes must be at least 128".into());
        }
        // Idleness is checked at each ping: with a shorter timeout a client
        // that answers every ping would still be dropped.
        if self.ws.idle_timeout_ms <= self.ws.ping_interval_ms {
            return Err(format!(
                "config error: ws.idle_timeout_ms ({}) must be longer than ws.ping_interval_ms ({})",
                self.ws.idle_timeout_ms, self.ws.ping_interval_ms
            ));
        }
        if !matches!(self.log.format.as_str(), "pretty" | "compact" | "json") {
            return Err(format!(
                "config error: log.format must be pretty, compact or json, not {:?}",
                self.log.format
            ));
        }
        if self.auth.secret.is_none() {
            return Err("config error: PITBOSS__AUTH__SECRET is required (player tokens are signed with it)".into());
        }
        if self.run_env == RunEnv::Production && self.admin.token.is_none() {
            return Err("config error: PITBOSS__ADMIN__TOKEN is required in production".into());
        }
        Ok(())
    }

    pub fn instance_id(&self) -> &str {
        self.instance.id.as_deref().unwrap_or_default()
    }

    pub fn lease_ttl(&self) -> Duration {
        Duration::from_millis(self.lease.ttl_ms)
    }
}

#[doc(hidden)]
pub mod checks;
mod load;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
