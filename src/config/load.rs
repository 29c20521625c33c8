//! Where settings come from and how loading reads them: the command line's
//! options, the files and `PITBOSS__*` variables gathered up front, the
//! checks on variable names, and errors that name the key and the file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use config::{ConfigError, Source as _, Value, ValueKind};

use super::{RunEnv, Settings, DEFAULT_CONFIG_DIR, ENV_PREFIX, ENV_SEPARATOR};

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
pub(super) struct Sources {
    pub(super) run_env: RunEnv,
    pub(super) dir: PathBuf,
    /// The `PITBOSS__*` variables, names as given.
    pub(super) vars: HashMap<String, String>,
}

impl Sources {
    pub(super) fn from_process(options: &LoadOptions) -> Result<Sources, String> {
        Sources::from_vars(options, std::env::vars_os().collect())
    }

    /// `from_process` over the environment `env` instead of the process's
    /// (names as given, in order; a name given twice means its last value).
    pub(super) fn from_vars(
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

    pub(super) fn base_file(&self) -> PathBuf {
        self.dir.join("base.toml")
    }

    pub(super) fn env_file(&self) -> PathBuf {
        self.dir.join(format!("{}.toml", self.run_env.as_str()))
    }
}

pub(super) fn is_setting_var(name: &str) -> bool {
    name.get(..ENV_PREFIX.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(ENV_PREFIX))
}

/// `PITBOSS_HTTP__PORT`: the nesting separator is there, the prefix's is not.
/// Other `PITBOSS_*` names (`PITBOSS_ENV`, the scripts' and tests' own) are
/// not settings and are left alone.
pub(super) fn looks_like_a_mistyped_setting(name: &str) -> bool {
    name.get(..8)
        .is_some_and(|p| p.eq_ignore_ascii_case("PITBOSS_"))
        && name[8..].contains(ENV_SEPARATOR)
}

/// The settings key a `PITBOSS__SECTION__KEY` variable sets, as the `config`
/// crate maps it: lower case, separators become dots.
pub(super) fn var_key(name: &str) -> String {
    name[ENV_PREFIX.len()..]
        .to_lowercase()
        .replace(ENV_SEPARATOR, ".")
}

pub(super) fn load_from(sources: &Sources, options: &LoadOptions) -> Result<Settings, String> {
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
pub(super) fn check_var_names(vars: &HashMap<String, String>) -> Result<(), String> {
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
pub(super) fn shown(name: &str) -> String {
    if name.bytes().all(|b| b.is_ascii_graphic()) {
        name.to_string()
    } else {
        format!("{name:?}")
    }
}

/// 2 s, or less with a short TTL so the timeout stays within the renew
/// period (see `Settings::check`).
pub(super) fn default_redis_op_timeout_ms(ttl_ms: u64) -> u64 {
    (ttl_ms / 3).min(2000)
}

/// The full key serde refused as unknown (`table.acton_timeout_ms`), if
/// that is what `err` is.
pub(super) fn unknown_key(err: &ConfigError) -> Option<String> {
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
pub(super) fn unknown_key_error(key: &str, sources: &Sources, files: &[&Path]) -> String {
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

pub(super) fn has_key(map: &config::Map<String, Value>, key: &str) -> bool {
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
pub(super) fn config_error(err: &ConfigError, files: &[&Path]) -> String {
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

pub(super) fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The lease owner id must survive a restart of the process on the same
/// host (so a restarted instance re-takes its own tables at once), which is
/// why it is never derived from the pid.
pub(super) fn resolve_instance_id(configured: Option<String>) -> Result<String, String> {
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
