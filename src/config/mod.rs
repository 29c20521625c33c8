//! Typed settings, layered: `base.toml` in the config directory, then
//! `{PITBOSS_ENV}.toml` beside it, then `PITBOSS__*` environment variables
//! (`PITBOSS__LEASE__TTL_MS=1500`), then command-line flags.
//!
//! Loading is strict: a key no setting has, in a file or as a variable, is
//! an error naming it, so a typo never passes silently.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use config::{ConfigError, Source as _, Value, ValueKind};
use secrecy::SecretString;
use serde::Deserialize;

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

/// What the command line adds to the layered settings.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// `--config-dir`: wins over `PITBOSS_CONFIG_DIR` and `config`.
    pub config_dir: Option<PathBuf>,
    /// `--host`: wins over `http.host` from files and variables.
    pub http_host: Option<String>,
    /// `--port`: wins over `http.port` from files and variables.
    pub http_port: Option<u16>,
}

/// Everything settings are read from, gathered up front so loading itself
/// reads no process state and can be tested.
#[derive(Debug, Clone)]
struct Sources {
    run_env: RunEnv,
    dir: PathBuf,
    /// The `PITBOSS__*` variables, names as given.
    vars: HashMap<String, String>,
}

impl Sources {
    fn from_process(options: &LoadOptions) -> Result<Sources, String> {
        Sources::from_vars(options, std::env::vars_os().collect())
    }

    /// `from_process` over the environment `env` instead of the process's
    /// (names as given, in order; a name given twice means its last value).
    fn from_vars(
        options: &LoadOptions,
        env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    ) -> Result<Sources, String> {
        let var_os = |name: &str| {
            env.iter()
                .rev()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        let run_env: RunEnv = var_os("PITBOSS_ENV")
            .and_then(|v| v.into_string().ok())
            .unwrap_or_else(|| "local".into())
            .parse()?;
        let dir = match &options.config_dir {
            Some(dir) => dir.clone(),
            None => var_os("PITBOSS_CONFIG_DIR")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG_DIR)),
        };
        let mut vars = HashMap::new();
        for (name, value) in env {
            let Some(name) = name.to_str() else { continue };
            if is_setting_var(name) {
                let value = value.into_string().map_err(|_| {
                    format!(
                        "config error: environment variable {} is not valid UTF-8",
                        shown(name)
                    )
                })?;
                vars.insert(name.to_string(), value);
            } else if looks_like_a_mistyped_setting(name) {
                return Err(format!(
                    "config error: unknown environment variable {} (settings are {ENV_PREFIX}<SECTION>__<KEY>)",
                    shown(name)
                ));
            }
        }
        Ok(Sources { run_env, dir, vars })
    }

    fn base_file(&self) -> PathBuf {
        self.dir.join("base.toml")
    }

    fn env_file(&self) -> PathBuf {
        self.dir.join(format!("{}.toml", self.run_env.as_str()))
    }
}

fn is_setting_var(name: &str) -> bool {
    name.get(..ENV_PREFIX.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(ENV_PREFIX))
}

/// `PITBOSS_HTTP__PORT`: the nesting separator is there, the prefix's is not.
/// Other `PITBOSS_*` names (`PITBOSS_ENV`, the scripts' and tests' own) are
/// not settings and are left alone.
fn looks_like_a_mistyped_setting(name: &str) -> bool {
    name.get(..8)
        .is_some_and(|p| p.eq_ignore_ascii_case("PITBOSS_"))
        && name[8..].contains(ENV_SEPARATOR)
}

/// The settings key a `PITBOSS__SECTION__KEY` variable sets, as the `config`
/// crate maps it: lower case, separators become dots.
fn var_key(name: &str) -> String {
    name[ENV_PREFIX.len()..]
        .to_lowercase()
        .replace(ENV_SEPARATOR, ".")
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

fn load_from(sources: &Sources, options: &LoadOptions) -> Result<Settings, String> {
    let base = sources.base_file();
    if !base.is_file() {
        let looked_in = std::path::absolute(&sources.dir).unwrap_or_else(|_| sources.dir.clone());
        return Err(format!(
            "config error: no base.toml in {} (run pitboss from the repository root, or point --config-dir or PITBOSS_CONFIG_DIR at the config directory)",
            looked_in.display()
        ));
    }
    check_var_names(&sources.vars)?;
    let env_file = sources.env_file();
    let vars = config::Environment::with_prefix("PITBOSS")
        .prefix_separator(ENV_SEPARATOR)
        .separator(ENV_SEPARATOR)
        // Values stay strings: typed keys parse them when they are read,
        // and a secret or an id such as `0123` keeps its exact text.
        .source(Some(sources.vars.clone().into_iter().collect()));
    let mut builder = config::Config::builder()
        .add_source(config::File::from(base.clone()))
        .add_source(config::File::from(env_file.clone()).required(false))
        .add_source(vars.clone());
    if let Some(host) = &options.http_host {
        builder = builder
            .set_override("http.host", host.as_str())
            .map_err(|e| format!("config error: {e}"))?;
    }
    if let Some(port) = options.http_port {
        builder = builder
            .set_override("http.port", u64::from(port))
            .map_err(|e| format!("config error: {e}"))?;
    }
    let files = [env_file.as_path(), base.as_path()];
    let built = builder.build().map_err(|e| config_error(&e, &files))?;
    let mut settings: Settings = match built.try_deserialize() {
        Ok(s) => s,
        Err(e) => {
            let Some(key) = unknown_key(&e) else {
                return Err(config_error(&e, &files));
            };
            return Err(unknown_key_error(&key, sources, &files));
        }
    };
    settings.run_env = sources.run_env;
    settings.instance.id = Some(resolve_instance_id(settings.instance.id.take())?);
    settings.redis.op_timeout_ms = settings
        .redis
        .configured_op_timeout_ms
        .unwrap_or_else(|| default_redis_op_timeout_ms(settings.lease.ttl_ms));
    settings.check()?;
    Ok(settings)
}

/// Every setting variable names one setting or section of its own: after
/// the prefix, only letters, digits and `_` (the `config` crate would read
/// `[0]`, `.` or a backtick as a path into the settings, and `HTTP[9999999999]`
/// as an array that large), and no two variables set the same key or a key
/// and the section around it (which one won would depend on hash order).
fn check_var_names(vars: &HashMap<String, String>) -> Result<(), String> {
    let mut names: Vec<&String> = vars.keys().collect();
    names.sort();
    let mut keys: Vec<(String, &String)> = Vec::with_capacity(names.len());
    for name in names {
        let plain = name
            .get(ENV_PREFIX.len()..)
            .is_some_and(|rest| rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
        if !plain {
            return Err(format!(
                "config error: unknown environment variable {} (settings are {ENV_PREFIX}<SECTION>__<KEY>, in letters, digits and '_')",
                shown(name)
            ));
        }
        let key = var_key(name);
        let within = |outer: &str, inner: &str| {
            inner == outer
                || inner
                    .strip_prefix(outer)
                    .is_some_and(|r| r.starts_with('.'))
        };
        if let Some((other_key, other)) = keys
            .iter()
            .find(|(k, _)| within(k, &key) || within(&key, k))
        {
            let outer = if other_key.len() <= key.len() {
                other_key
            } else {
                &key
            };
            return Err(format!(
                "config error: environment variables {other} and {name} both set {outer}"
            ));
        }
        keys.push((key, name));
    }
    Ok(())
}

/// A variable's name in a refusal: as it is when it is printable ASCII,
/// quoted and escaped otherwise, so the refusal stays one line.
fn shown(name: &str) -> String {
    if name.bytes().all(|b| b.is_ascii_graphic()) {
        name.to_string()
    } else {
        format!("{name:?}")
    }
}

/// 2 s, or less with a short TTL so the timeout stays within the renew
/// period (see `Settings::check`).
fn default_redis_op_timeout_ms(ttl_ms: u64) -> u64 {
    (ttl_ms / 3).min(2000)
}

/// The full key serde refused as unknown (`table.acton_timeout_ms`), if
/// that is what `err` is.
fn unknown_key(err: &ConfigError) -> Option<String> {
    let (message, parent) = match err {
        ConfigError::At { error, key, .. } => (error.to_string(), key.as_deref()),
        ConfigError::Message(m) => (m.clone(), None),
        _ => return None,
    };
    let field = message.strip_prefix("unknown field `")?.split('`').next()?;
    Some(match parent {
        Some(parent) if !parent.is_empty() => format!("{parent}.{field}"),
        _ => field.to_string(),
    })
}

/// Names the source that set an unknown key (or a key inside an unknown
/// section): the variable first (it wins), then the files from the last
/// layer down.
fn unknown_key_error(key: &str, sources: &Sources, files: &[&Path]) -> String {
    let mut names: Vec<&String> = sources.vars.keys().collect();
    names.sort();
    let sets_key = |name: &&String| {
        let set = var_key(name);
        set == key || set.starts_with(&format!("{key}."))
    };
    if let Some(name) = names.into_iter().find(sets_key) {
        return format!("config error: unknown environment variable {name}");
    }
    for file in files {
        let Ok(map) = config::File::from(file.to_path_buf())
            .required(false)
            .collect()
        else {
            continue;
        };
        if has_key(&map, key) {
            return format!("config error: unknown key {key} in {}", file.display());
        }
    }
    format!("config error: unknown key {key}")
}

fn has_key(map: &config::Map<String, Value>, key: &str) -> bool {
    let (head, rest) = match key.split_once('.') {
        Some((head, rest)) => (head, Some(rest)),
        None => (key, None),
    };
    match (map.get(head), rest) {
        (Some(_), None) => true,
        (
            Some(Value {
                kind: ValueKind::Table(inner),
                ..
            }),
            Some(rest),
        ) => has_key(inner, rest),
        _ => false,
    }
}

/// One line, whatever the parser said. A TOML error spans several lines
/// (position, excerpt, caret, reason): keep the position and the reason, and
/// name the file as the caller gave it.
fn config_error(err: &ConfigError, files: &[&Path]) -> String {
    if let ConfigError::FileParse { uri, cause } = err {
        let text = cause.to_string();
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let message = match lines.as_slice() {
            [] => String::new(),
            [only] => (*only).to_string(),
            [first, .., last] => format!("{first}: {last}"),
        };
        let file = uri.as_deref().map(|uri| {
            files
                .iter()
                .find(|f| same_file(f, Path::new(uri)))
                .map(|f| f.display().to_string())
                .unwrap_or_else(|| uri.to_string())
        });
        return match file {
            Some(file) => format!("config error: {message} in {file}"),
            None => format!("config error: {message}"),
        };
    }
    let text = err.to_string();
    format!(
        "config error: {}",
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    )
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
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

#[doc(hidden)]
pub mod checks;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
