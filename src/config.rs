//! Typed settings, layered: embedded `config/base.toml`, then the files in the
//! config directory (`base.toml`, `{PITBOSS_ENV}.toml`), then `PITBOSS__*`
//! environment variables (`PITBOSS__LEASE__TTL_MS=1500`).

use std::path::PathBuf;
use std::time::Duration;

use secrecy::SecretString;
use serde::Deserialize;

const EMBEDDED_BASE: &str = include_str!("../config/base.toml");

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
                "PITBOSS_ENV must be local, test or production, not {other:?}"
            )),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct Settings {
    pub http: HttpSettings,
    pub database: DatabaseSettings,
    pub redis: RedisSettings,
    pub instance: InstanceSettings,
    pub lease: LeaseSettings,
    pub table: TableSettings,
    pub ws: WsSettings,
    pub shutdown: ShutdownSettings,
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
pub struct HttpSettings {
    pub host: String,
    pub port: u16,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DatabaseSettings {
    pub url: SecretString,
    pub max_connections: u32,
    pub acquire_timeout_ms: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RedisSettings {
    pub url: SecretString,
    /// Upper bound for one Redis round trip; a slower answer counts as failed.
    pub op_timeout_ms: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct InstanceSettings {
    /// Lease owner id. Resolved at load time, so it is always set afterwards.
    #[serde(default)]
    pub id: Option<String>,
    pub environment: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct LeaseSettings {
    pub ttl_ms: u64,
}

#[derive(Debug, Clone, Deserialize)]
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
pub struct ShutdownSettings {
    pub drain_timeout_ms: u64,
}

#[derive(Debug, Clone, Deserialize, Default)]
pub struct AuthSettings {
    pub secret: Option<SecretString>,
}

#[derive(Debug, Clone, Deserialize, Default)]
pub struct AdminSettings {
    pub token: Option<SecretString>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct LogSettings {
    /// `pretty`, `compact` or `json`.
    pub format: String,
}

impl Settings {
    /// Loads the layered settings and checks them; the error is one line an
    /// operator can act on.
    pub fn load() -> Result<Settings, String> {
        let run_env: RunEnv = std::env::var("PITBOSS_ENV")
            .unwrap_or_else(|_| "local".into())
            .parse()?;
        let dir = std::env::var("PITBOSS_CONFIG_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|_| PathBuf::from("config"));

        let built = config::Config::builder()
            .add_source(config::File::from_str(
                EMBEDDED_BASE,
                config::FileFormat::Toml,
            ))
            .add_source(config::File::from(dir.join("base.toml")).required(false))
            .add_source(
                config::File::from(dir.join(format!("{}.toml", run_env.as_str()))).required(false),
            )
            .add_source(
                config::Environment::with_prefix("PITBOSS")
                    .prefix_separator("__")
                    .separator("__")
                    .try_parsing(true),
            )
            .build()
            .map_err(|e| format!("config error: {e}"))?;
        let mut settings: Settings = built
            .try_deserialize()
            .map_err(|e| format!("config error: {e}"))?;
        settings.run_env = run_env;
        settings.instance.id = Some(resolve_instance_id(settings.instance.id.take())?);
        settings.check()?;
        Ok(settings)
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
        if self.lease.ttl_ms < 300 {
            return Err("config error: lease.ttl_ms must be at least 300".into());
        }
        if self.ws.max_frame_bytes < 128 || self.ws.rate_per_sec == 0 || self.ws.rate_burst == 0 {
            return Err(
                "config error: ws.max_frame_bytes must be >= 128 and ws rates above 0".into(),
            );
        }
        if self.table.arbiters == 0 {
            return Err("config error: table.arbiters must be at least 1".into());
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

/// The lease owner id must survive a restart of the process on the same
/// host (so a restarted instance re-takes its own tables at once), which is
/// why it is never derived from the pid.
fn resolve_instance_id(configured: Option<String>) -> Result<String, String> {
    if let Some(id) = configured.filter(|s| !s.is_empty()) {
        return Ok(id);
    }
    for var in ["FLY_MACHINE_ID", "FLY_ALLOC_ID"] {
        if let Ok(v) = std::env::var(var) {
            if !v.is_empty() {
                return Ok(v);
            }
        }
    }
    hostname::get()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .ok_or_else(|| "config error: no instance id: set PITBOSS__INSTANCE__ID".to_string())
}
