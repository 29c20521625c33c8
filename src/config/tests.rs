//! Loading, strictness and cross-field rules, against config directories
//! the tests write.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use config::Source as _;
use secrecy::ExposeSecret;

use super::load::looks_like_a_mistyped_setting;
use super::*;

/// A copy of the repository's `config/` in a directory of its own, so a
/// test can break one file without touching the others.
struct ConfigDir {
    path: PathBuf,
}

impl ConfigDir {
    fn copy_of_repo() -> ConfigDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "pitboss-config-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).expect("create config dir");
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
        for name in ["base.toml", "local.toml", "test.toml", "production.toml"] {
            std::fs::copy(repo.join(name), path.join(name)).expect("copy config file");
        }
        ConfigDir { path }
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.path.join(name), text).expect("write config file");
    }

    fn append(&self, name: &str, text: &str) {
        let old = std::fs::read_to_string(self.path.join(name)).expect("read config file");
        self.write(name, &format!("{old}\n{text}\n"));
    }

    fn load(&self, vars: &[(&str, &str)]) -> Result<Settings, String> {
        self.load_with(vars, &LoadOptions::default())
    }

    fn load_with(&self, vars: &[(&str, &str)], options: &LoadOptions) -> Result<Settings, String> {
        let sources = Sources {
            run_env: RunEnv::Test,
            dir: self.path.clone(),
            vars: vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        load_from(&sources, options)
    }
}

impl Drop for ConfigDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn err(result: Result<Settings, String>) -> String {
    match result {
        Ok(_) => panic!("the settings were accepted"),
        Err(e) => {
            assert_eq!(e.lines().count(), 1, "one line: {e}");
            e
        }
    }
}

#[test]
fn the_repository_config_loads_for_every_environment() {
    let dir = ConfigDir::copy_of_repo();
    for run_env in [RunEnv::Local, RunEnv::Test] {
        let sources = Sources {
            run_env,
            dir: dir.path.clone(),
            vars: HashMap::new(),
        };
        let settings = load_from(&sources, &LoadOptions::default()).expect("loads");
        assert_eq!(settings.run_env, run_env);
    }
    let sources = Sources {
        run_env: RunEnv::Production,
        dir: dir.path.clone(),
        vars: [
            ("PITBOSS__AUTH__SECRET", "s"),
            ("PITBOSS__ADMIN__TOKEN", "t"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    };
    let settings = load_from(&sources, &LoadOptions::default()).expect("production loads");
    assert_eq!(settings.instance.environment, "production");
}

#[test]
fn every_key_of_base_toml_can_be_set_by_its_environment_variable() {
    let dir = ConfigDir::copy_of_repo();
    let base = config::File::from(dir.path.join("base.toml"))
        .collect()
        .expect("read base.toml");
    let mut vars = Vec::new();
    for (section, keys) in base {
        let keys = keys.into_table().expect("a section");
        for (key, value) in keys {
            vars.push((
                format!(
                    "PITBOSS__{}__{}",
                    section.to_uppercase(),
                    key.to_uppercase()
                ),
                value.into_string().expect("a scalar"),
            ));
        }
    }
    // The optional keys, commented out in the file.
    for (name, value) in [
        ("PITBOSS__INSTANCE__ID", "007"),
        ("PITBOSS__REDIS__OP_TIMEOUT_MS", "1000"),
        ("PITBOSS__AUTH__SECRET", "0123"),
        ("PITBOSS__ADMIN__TOKEN", "true"),
    ] {
        vars.push((name.to_string(), value.to_string()));
    }
    assert!(vars.len() > 20, "{vars:?}");
    let borrowed: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let settings = dir.load(&borrowed).expect("every variable is a setting");
    // Strings keep their exact text even when they look like numbers.
    assert_eq!(settings.instance_id(), "007");
    assert_eq!(
        settings
            .auth
            .secret
            .as_ref()
            .map(|s| s.expose_secret().to_string()),
        Some("0123".into())
    );
    assert_eq!(
        settings
            .admin
            .token
            .as_ref()
            .map(|s| s.expose_secret().to_string()),
        Some("true".into())
    );
    assert_eq!(settings.redis.op_timeout_ms, 1000);
    assert_eq!(settings.database.connect_timeout_ms, 30000);

    let settings = dir
        .load(&[
            ("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "4321"),
            ("pitboss__http__port", "9"),
        ])
        .expect("loads");
    assert_eq!(settings.table.action_timeout_ms, 4321);
    assert_eq!(settings.http.port, 9);
}

#[test]
fn an_unknown_environment_variable_is_named() {
    let dir = ConfigDir::copy_of_repo();
    for name in [
        "PITBOSS__TABLE__ACTON_TIMEOUT_MS",
        "PITBOSS__TABLE_ACTION_TIMEOUT_MS",
        "PITBOSS__TABEL__ACTION_TIMEOUT_MS",
        "PITBOSS__SETTINGS__RUN_ENV",
    ] {
        let e = err(dir.load(&[(name, "5")]));
        assert_eq!(
            e,
            format!("config error: unknown environment variable {name}")
        );
    }
}

#[test]
fn an_unknown_key_in_a_file_is_named_with_the_file() {
    let dir = ConfigDir::copy_of_repo();
    dir.append("test.toml", "[ws]\nping_intervall_ms = 5");
    let e = err(dir.load(&[]));
    let file = dir.path.join("test.toml");
    assert_eq!(
        e,
        format!(
            "config error: unknown key ws.ping_intervall_ms in {}",
            file.display()
        )
    );

    let dir = ConfigDir::copy_of_repo();
    dir.append("base.toml", "[tabel]\narbiters = 2");
    let e = err(dir.load(&[]));
    assert!(e.contains("unknown key tabel in"), "{e}");
    assert!(e.ends_with("base.toml"), "{e}");
}

#[test]
fn a_missing_base_toml_names_the_directory_looked_in() {
    let dir = ConfigDir::copy_of_repo();
    std::fs::remove_file(dir.path.join("base.toml")).expect("remove");
    let e = err(dir.load(&[]));
    assert!(e.starts_with("config error: no base.toml in "), "{e}");
    assert!(e.contains(&dir.path.display().to_string()), "{e}");
}

#[test]
fn a_toml_syntax_error_is_one_line_naming_the_file() {
    let dir = ConfigDir::copy_of_repo();
    dir.append("test.toml", "[lease]\nttl_ms 1500");
    let e = err(dir.load(&[]));
    assert!(
        e.starts_with("config error: TOML parse error at line"),
        "{e}"
    );
    assert!(e.contains("expected"), "the reason: {e}");
    assert!(
        e.ends_with(&format!(" in {}", dir.path.join("test.toml").display())),
        "{e}"
    );
}

#[test]
fn the_redis_op_timeout_follows_a_short_ttl_unless_set_and_must_fit_in_the_renew_period() {
    let dir = ConfigDir::copy_of_repo();
    let s = dir
        .load(&[("PITBOSS__LEASE__TTL_MS", "15000")])
        .expect("loads");
    assert_eq!(s.redis.op_timeout_ms, 2000);
    let s = dir
        .load(&[("PITBOSS__LEASE__TTL_MS", "900")])
        .expect("loads");
    assert_eq!(s.redis.op_timeout_ms, 300);
    let e = err(dir.load(&[
        ("PITBOSS__LEASE__TTL_MS", "1500"),
        ("PITBOSS__REDIS__OP_TIMEOUT_MS", "2000"),
    ]));
    assert!(e.contains("redis.op_timeout_ms (2000)"), "{e}");
    assert!(e.contains("lease.ttl_ms (1500)"), "{e}");
}

#[test]
fn zero_timeouts_and_inverted_pairs_are_refused() {
    let dir = ConfigDir::copy_of_repo();
    for (name, value, says) in [
        (
            "PITBOSS__WS__PING_INTERVAL_MS",
            "0",
            "ws.ping_interval_ms must be above 0",
        ),
        (
            "PITBOSS__TABLE__ACTION_TIMEOUT_MS",
            "0",
            "table.action_timeout_ms must be above 0",
        ),
        (
            "PITBOSS__DATABASE__CONNECT_TIMEOUT_MS",
            "0",
            "database.connect_timeout_ms must be above 0",
        ),
        (
            "PITBOSS__REDIS__OP_TIMEOUT_MS",
            "0",
            "redis.op_timeout_ms must be above 0",
        ),
        (
            "PITBOSS__DATABASE__MAX_CONNECTIONS",
            "0",
            "database.max_connections must be above 0",
        ),
        (
            "PITBOSS__WS__IDLE_TIMEOUT_MS",
            "10000",
            "ws.idle_timeout_ms (10000) must be longer than ws.ping_interval_ms (10000)",
        ),
        (
            "PITBOSS__LOG__FORMAT",
            "jsno",
            "log.format must be pretty, compact or json",
        ),
    ] {
        let e = err(dir.load(&[(name, value)]));
        assert!(e.contains(says), "{name}={value}: {e}");
    }
}

#[test]
fn command_line_host_and_port_win_over_variables() {
    let dir = ConfigDir::copy_of_repo();
    let options = LoadOptions {
        config_dir: None,
        http_host: Some("0.0.0.0".into()),
        http_port: Some(9123),
    };
    let s = dir
        .load_with(
            &[("PITBOSS__HTTP__PORT", "1"), ("PITBOSS__HTTP__HOST", "::1")],
            &options,
        )
        .expect("loads");
    assert_eq!((s.http.host.as_str(), s.http.port), ("0.0.0.0", 9123));
}

#[test]
fn a_mistyped_prefix_is_caught_and_other_pitboss_variables_are_not_settings() {
    assert!(looks_like_a_mistyped_setting("PITBOSS_HTTP__PORT"));
    assert!(!looks_like_a_mistyped_setting("PITBOSS_TEST_PG_URL"));
    assert!(!looks_like_a_mistyped_setting("PITBOSS_ENV"));
    assert!(!is_setting_var("PITBOSS_CONFIG_DIR"));
    assert!(is_setting_var("pitboss__http__port"));
}

#[test]
fn wrong_types_negative_and_out_of_range_numbers_are_one_line_errors_naming_the_key() {
    let dir = ConfigDir::copy_of_repo();
    for (name, value, key) in [
        ("PITBOSS__HTTP__PORT", "eighty", "http.port"),
        ("PITBOSS__HTTP__PORT", "70000", "http.port"),
        ("PITBOSS__HTTP__PORT", "-1", "http.port"),
        ("PITBOSS__LEASE__TTL_MS", "-1500", "lease.ttl_ms"),
        ("PITBOSS__LEASE__TTL_MS", "1.5", "lease.ttl_ms"),
        ("PITBOSS__LEASE__TTL_MS", "1e30", "lease.ttl_ms"),
        (
            "PITBOSS__LEASE__TTL_MS",
            "18446744073709551616",
            "lease.ttl_ms",
        ),
        ("PITBOSS__WS__MAX_FRAME_BYTES", "", "ws.max_frame_bytes"),
        ("PITBOSS__WS__RATE_PER_SEC", "4294967296", "ws.rate_per_sec"),
    ] {
        let e = err(dir.load(&[(name, value)]));
        assert!(e.contains(key), "{name}={value}: {e}");
    }
}

/// Values that fit the setting's type but not what Redis or Postgres take:
/// refused at start with the key named, not left to fail as a Redis or
/// Postgres error on the first write.
#[test]
fn timeouts_beyond_what_redis_or_postgres_take_are_refused_at_start() {
    let dir = ConfigDir::copy_of_repo();
    for (name, value, says) in [
        (
            "PITBOSS__LEASE__TTL_MS",
            "18446744073709551615",
            "lease.ttl_ms (18446744073709551615) must be at most 86400000",
        ),
        (
            "PITBOSS__LEASE__TTL_MS",
            "86400001",
            "lease.ttl_ms (86400001) must be at most 86400000",
        ),
        (
            "PITBOSS__DATABASE__STATEMENT_TIMEOUT_MS",
            "2147483648",
            "database.statement_timeout_ms (2147483648) must be at most 2147483647",
        ),
        (
            "PITBOSS__DATABASE__LOCK_TIMEOUT_MS",
            "18446744073709551615",
            "database.lock_timeout_ms",
        ),
        (
            "PITBOSS__DATABASE__IDLE_IN_TRANSACTION_TIMEOUT_MS",
            "9999999999",
            "database.idle_in_transaction_timeout_ms",
        ),
    ] {
        let e = err(dir.load(&[(name, value)]));
        assert!(e.contains(says), "{name}={value}: {e}");
    }
    let s = dir
        .load(&[
            ("PITBOSS__LEASE__TTL_MS", "86400000"),
            ("PITBOSS__DATABASE__STATEMENT_TIMEOUT_MS", "2147483647"),
        ])
        .expect("the largest values load");
    assert_eq!(s.lease.ttl_ms, 86_400_000);
}

#[test]
fn bad_instance_ids_and_environments_are_refused() {
    let dir = ConfigDir::copy_of_repo();
    let long = "i".repeat(129);
    for (name, value, says) in [
        ("PITBOSS__INSTANCE__ID", "a|b", "instance id"),
        ("PITBOSS__INSTANCE__ID", "a b", "instance id"),
        ("PITBOSS__INSTANCE__ID", long.as_str(), "instance id"),
        ("PITBOSS__INSTANCE__ENVIRONMENT", "", "instance.environment"),
        (
            "PITBOSS__INSTANCE__ENVIRONMENT",
            "prod:{x}",
            "instance.environment",
        ),
        ("PITBOSS__HTTP__HOST", "", "http.host"),
        (
            "PITBOSS__REDIS__CLUSTER_NODES",
            "http://a:1",
            "redis.cluster_nodes",
        ),
    ] {
        let e = err(dir.load(&[(name, value)]));
        assert!(e.contains(says), "{name}={value:?}: {e}");
    }
}

#[test]
fn seed_nodes_are_taken_as_host_port_or_as_redis_urls() {
    let dir = ConfigDir::copy_of_repo();
    let s = dir
        .load(&[(
            "PITBOSS__REDIS__CLUSTER_NODES",
            "127.0.0.1:7000, redis://127.0.0.1:7001,rediss://cache.example.com:6380,[::1]:7002",
        )])
        .expect("host:port and URLs load");
    assert_eq!(
        s.redis.cluster_nodes().expect("nodes"),
        [
            "redis://127.0.0.1:7000",
            "redis://127.0.0.1:7001",
            "rediss://cache.example.com:6380",
            "redis://[::1]:7002",
        ]
    );
    let s = dir
        .load(&[
            (
                "PITBOSS__REDIS__SENTINEL_NODES",
                "10.0.0.5:26379,sentinel-2:26379",
            ),
            ("PITBOSS__REDIS__SENTINEL_MASTER", "pitboss"),
        ])
        .expect("bare Sentinel nodes load");
    assert_eq!(
        s.redis.sentinel_nodes().expect("nodes"),
        ["redis://10.0.0.5:26379", "redis://sentinel-2:26379"]
    );
}

#[test]
fn a_seed_node_that_is_neither_host_port_nor_a_url_is_refused_with_the_expected_form() {
    let dir = ConfigDir::copy_of_repo();
    for (name, value, entry) in [
        ("PITBOSS__REDIS__CLUSTER_NODES", "bogus", 1),
        ("PITBOSS__REDIS__CLUSTER_NODES", "127.0.0.1:7000,bogus", 2),
        ("PITBOSS__REDIS__CLUSTER_NODES", "127.0.0.1:0", 1),
        ("PITBOSS__REDIS__CLUSTER_NODES", "127.0.0.1:70000", 1),
        ("PITBOSS__REDIS__CLUSTER_NODES", "host:", 1),
        ("PITBOSS__REDIS__CLUSTER_NODES", ":7000", 1),
        ("PITBOSS__REDIS__CLUSTER_NODES", "a b:7000", 1),
        ("PITBOSS__REDIS__CLUSTER_NODES", "[zz]:7000", 1),
        ("PITBOSS__REDIS__CLUSTER_NODES", "redis://", 1),
        ("PITBOSS__REDIS__SENTINEL_NODES", "http://a:1", 1),
    ] {
        let mut vars = vec![(name, value)];
        if name.contains("SENTINEL") {
            vars.push(("PITBOSS__REDIS__SENTINEL_MASTER", "pitboss"));
        }
        let e = err(dir.load(&vars));
        let key = if name.contains("SENTINEL") {
            "redis.sentinel_nodes"
        } else {
            "redis.cluster_nodes"
        };
        assert!(
            e.contains(&format!("{key} entry {entry} is not a node")),
            "{value:?}: {e}"
        );
        assert!(
            e.contains("host:port, redis://host:port or rediss://host:port"),
            "{value:?}: {e}"
        );
        assert!(!e.contains('\n'), "one line: {e}");
    }
}

/// Found by the `config_env` fuzz target: the `config` crate reads `[n]` in
/// a variable's name as an index (`PITBOSS__HTTP[9999999999]` made it
/// allocate an array that large) and `.` as a path, and which of two
/// variables for one key won depended on hash order.
#[test]
fn variable_names_that_are_paths_or_that_set_one_key_twice_are_refused() {
    let dir = ConfigDir::copy_of_repo();
    for name in [
        "PITBOSS__HTTP[9999999999]",
        "PITBOSS__HTTP__PORT[0]",
        "PITBOSS__HTTP.PORT",
        "PITBOSS__HTTP__PO`RT",
        "PITBOSS__HTTP__PO RT",
    ] {
        let e = err(dir.load(&[(name, "5")]));
        assert_eq!(
            e,
            format!(
                "config error: unknown environment variable {} (settings are PITBOSS__<SECTION>__<KEY>, in letters, digits and '_')",
                if name.contains(' ') { format!("{name:?}") } else { name.to_string() }
            )
        );
    }
    let e = err(dir.load(&[("PITBOSS__HTTP__PORT", "5"), ("pitboss__http__port", "6")]));
    assert_eq!(
        e,
        "config error: environment variables PITBOSS__HTTP__PORT and pitboss__http__port both set http.port"
    );
    let e = err(dir.load(&[("PITBOSS__HTTP", "5"), ("PITBOSS__HTTP__PORT", "6")]));
    assert_eq!(
        e,
        "config error: environment variables PITBOSS__HTTP and PITBOSS__HTTP__PORT both set http"
    );
    // One variable per key, in any case, still loads.
    let settings = dir
        .load(&[("pitboss__http__port", "6"), ("PITBOSS__HTTP__HOST", "::1")])
        .expect("loads");
    assert_eq!(
        (settings.http.port, settings.http.host.as_str()),
        (6, "::1")
    );
}
