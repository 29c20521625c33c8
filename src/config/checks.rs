//! The properties the `config_env` fuzz target and the environment
//! property tests both assert, kept in one place so that the two check
//! exactly the same thing on the inputs each of them grows.
//!
//! An input is an environment: `NAME=value` entries separated by NUL
//! bytes (what an environment block is), over the repository's `config/`
//! directory. It is loaded the way `Settings::load` loads the process's
//! environment, without touching the process's. Checked on every input:
//!
//! - no panic, and no unbounded allocation (a variable's name is never
//!   taken as a path into an array);
//! - a refusal is one line starting `config error: ` that names what is
//!   wrong: a variable the input sets (by its name or by the key it sets),
//!   or a setting that must be set (`PITBOSS__AUTH__SECRET`,
//!   `PITBOSS__ADMIN__TOKEN`);
//! - an accepted config passes its own check again, runs in the
//!   environment `PITBOSS_ENV` names, and holds exactly what each variable
//!   set: the text of a text setting, the number of a number setting; no
//!   two of its variables set the same key, or a key and its section.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use secrecy::{ExposeSecret, SecretString};

use super::{is_setting_var, load_from, var_key, LoadOptions, RunEnv, Settings, Sources};

/// Separates an input's entries, as in an environment block: a variable's
/// name and value never hold a NUL.
pub const ENTRY_SEPARATOR: u8 = 0;

/// The repository's config directory, which every input loads over.
pub fn repo_config_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("config")
}

#[cfg(unix)]
fn os(bytes: &[u8]) -> OsString {
    std::os::unix::ffi::OsStringExt::from_vec(bytes.to_vec())
}

#[cfg(not(unix))]
fn os(bytes: &[u8]) -> OsString {
    String::from_utf8_lossy(bytes).into_owned().into()
}

/// The environment `data` stands for: entries split at NUL, each a name up
/// to its first `=` and a value after it (empty without one); empty entries
/// are skipped.
pub fn environment(data: &[u8]) -> Vec<(OsString, OsString)> {
    data.split(|&b| b == ENTRY_SEPARATOR)
        .filter(|entry| !entry.is_empty())
        .map(|entry| match entry.iter().position(|&b| b == b'=') {
            Some(i) => (os(&entry[..i]), os(&entry[i + 1..])),
            None => (os(entry), OsString::new()),
        })
        .collect()
}

/// The inverse of [`environment`], for generators.
pub fn block(vars: &[(String, String)]) -> Vec<u8> {
    let entries: Vec<Vec<u8>> = vars
        .iter()
        .map(|(n, v)| format!("{n}={v}").into_bytes())
        .collect();
    entries.join(&ENTRY_SEPARATOR)
}

/// Loads the environment `data` stands for and checks the answer.
///
/// # Panics
///
/// When a property does not hold, naming the environment.
pub fn check_environment(data: &[u8]) {
    check_vars(environment(data));
}

/// Loads `env` over the repository's config directory, as `Settings::load`
/// loads the process's environment, and checks the answer.
///
/// # Panics
///
/// When a property does not hold, naming the environment.
pub fn check_vars(env: Vec<(OsString, OsString)>) {
    let options = LoadOptions {
        config_dir: Some(repo_config_dir()),
        ..LoadOptions::default()
    };
    let answer =
        Sources::from_vars(&options, env.clone()).and_then(|s| Ok((load_from(&s, &options)?, s)));
    match answer {
        Ok((settings, sources)) => check_settings(&settings, &sources, &env),
        Err(e) => check_refusal(&e, &env),
    }
}

/// The names the refusal may name: every variable, as given and as the key
/// it sets (every dotted prefix of it too: a variable that makes a section
/// or setting the wrong shape is refused for that section or setting).
fn nameable(env: &[(OsString, OsString)]) -> Vec<String> {
    let mut names = vec![
        "PITBOSS__AUTH__SECRET".to_string(),
        "PITBOSS__ADMIN__TOKEN".to_string(),
    ];
    for (name, _) in env {
        let Some(name) = name.to_str() else { continue };
        // Only PITBOSS names (of any case) are read at all.
        if !name
            .get(..7)
            .is_some_and(|p| p.eq_ignore_ascii_case("PITBOSS"))
        {
            continue;
        }
        names.push(name.to_string());
        names.push(format!("{name:?}"));
        if is_setting_var(name) {
            let key = var_key(name);
            let mut prefix = String::new();
            for part in key.split('.') {
                if !prefix.is_empty() {
                    prefix.push('.');
                }
                prefix.push_str(part);
                if !prefix.is_empty() {
                    names.push(prefix.clone());
                }
            }
        }
    }
    names
}

fn check_refusal(e: &str, env: &[(OsString, OsString)]) {
    assert!(e.starts_with("config error: "), "{env:?}: {e:?}");
    assert!(
        !e.contains(['\n', '\r']),
        "{env:?}: a refusal of more than one line: {e:?}"
    );
    let names = nameable(env);
    assert!(
        names.iter().any(|n| e.contains(n.as_str())),
        "{env:?}: {e:?} names no variable or key of {names:?}"
    );
}

/// What a setting holds, as text, if `key` is one.
fn setting(s: &Settings, key: &str) -> Option<String> {
    fn secret(v: &SecretString) -> String {
        v.expose_secret().to_string()
    }
    Some(match key {
        "http.host" => s.http.host.clone(),
        "http.port" => s.http.port.to_string(),
        "database.url" => secret(&s.database.url),
        "database.max_connections" => s.database.max_connections.to_string(),
        "database.acquire_timeout_ms" => s.database.acquire_timeout_ms.to_string(),
        "database.connect_timeout_ms" => s.database.connect_timeout_ms.to_string(),
        "database.statement_timeout_ms" => s.database.statement_timeout_ms.to_string(),
        "database.lock_timeout_ms" => s.database.lock_timeout_ms.to_string(),
        "database.idle_in_transaction_timeout_ms" => {
            s.database.idle_in_transaction_timeout_ms.to_string()
        }
        "redis.url" => secret(&s.redis.url),
        "redis.op_timeout_ms" => s.redis.op_timeout_ms.to_string(),
        "redis.connect_timeout_ms" => s.redis.connect_timeout_ms.to_string(),
        "redis.tls_ca_file" => s.redis.tls_ca_file.as_ref()?.to_str()?.to_string(),
        "redis.cluster_nodes" => secret(s.redis.cluster_nodes.as_ref()?),
        "redis.sentinel_nodes" => secret(s.redis.sentinel_nodes.as_ref()?),
        "redis.sentinel_master" => s.redis.sentinel_master.clone()?,
        "instance.environment" => s.instance.environment.clone(),
        "instance.advertise_url" => s.instance.advertise_url.clone()?,
        "lease.ttl_ms" => s.lease.ttl_ms.to_string(),
        "table.action_timeout_ms" => s.table.action_timeout_ms.to_string(),
        "table.next_hand_delay_ms" => s.table.next_hand_delay_ms.to_string(),
        "table.idle_evict_ms" => s.table.idle_evict_ms.to_string(),
        "table.arbiters" => s.table.arbiters.to_string(),
        "table.history_events" => s.table.history_events.to_string(),
        "table.reconnect_window_ms" => s.table.reconnect_window_ms.to_string(),
        "table.auto_recover_after_ms" => s.table.auto_recover_after_ms.to_string(),
        "ws.max_frame_bytes" => s.ws.max_frame_bytes.to_string(),
        "ws.rate_per_sec" => s.ws.rate_per_sec.to_string(),
        "ws.rate_burst" => s.ws.rate_burst.to_string(),
        "ws.rate_strikes" => s.ws.rate_strikes.to_string(),
        "ws.outbound_queue_bytes" => s.ws.outbound_queue_bytes.to_string(),
        "ws.ping_interval_ms" => s.ws.ping_interval_ms.to_string(),
        "ws.idle_timeout_ms" => s.ws.idle_timeout_ms.to_string(),
        "shutdown.drain_timeout_ms" => s.shutdown.drain_timeout_ms.to_string(),
        "journal.window_us" => s.journal.window_us.to_string(),
        "journal.max_batch" => s.journal.max_batch.to_string(),
        "journal.max_in_flight" => s.journal.max_in_flight.to_string(),
        "auth.secret" => secret(s.auth.secret.as_ref()?),
        "admin.token" => secret(s.admin.token.as_ref()?),
        "log.format" => s.log.format.clone(),
        _ => return None,
    })
}

/// The number a variable's text stands for: decimal digits (with an
/// optional `+`), or one of the words the `config` crate reads as a
/// boolean, which it takes as 1 or 0.
fn number(text: &str) -> Option<u64> {
    match text.to_lowercase().as_str() {
        "true" | "on" | "yes" => Some(1),
        "false" | "off" | "no" => Some(0),
        _ => text.parse().ok(),
    }
}

fn check_settings(s: &Settings, sources: &Sources, env: &[(OsString, OsString)]) {
    assert_eq!(s.check(), Ok(()), "{env:?}");
    let run_env = env
        .iter()
        .rev()
        .find(|(n, _)| n == "PITBOSS_ENV")
        .and_then(|(_, v)| v.to_str())
        .map_or(RunEnv::Local, |v| v.parse().unwrap_or(RunEnv::Local));
    assert_eq!(s.run_env, run_env, "{env:?}");
    assert!(!s.instance_id().is_empty(), "{env:?}");
    // Each setting a variable sets holds what it says; no other variable
    // sets the same key or a section around it (which would make the
    // answer depend on hash order).
    let keys: Vec<(String, &String)> = sources
        .vars
        .iter()
        .map(|(name, value)| (var_key(name), value))
        .collect();
    for (key, value) in &keys {
        let overlapping = keys
            .iter()
            .filter(|(other, _)| {
                other == key
                    || other.starts_with(&format!("{key}."))
                    || key.starts_with(&format!("{other}."))
            })
            .count();
        assert_eq!(overlapping, 1, "{key} set twice: {env:?}");
        if key == "instance.id" {
            if !value.is_empty() {
                assert_eq!(s.instance_id(), value.as_str(), "{env:?}");
            }
            continue;
        }
        let Some(held) = setting(s, key) else {
            continue;
        };
        match (held.parse::<u64>(), number(value)) {
            (Ok(held), Some(set)) => assert_eq!(held, set, "{key} from {value:?}: {env:?}"),
            // A path or node list may be digits too: then it is text.
            _ => assert_eq!(&held, *value, "{key}: {env:?}"),
        }
    }
}
