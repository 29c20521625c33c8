//! The binary's own surface: config errors, strict keys, flags, the token
//! command, start-up failures (a busy port, an unreachable Postgres or
//! Redis), migrations applied by several instances starting at once.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{parse_addr_field, shared_redis_url, test_db, unique_env, Server, ServerConfig};

/// Long enough for any command here; a hung binary fails the test instead
/// of stalling the run.
const RUN_LIMIT: Duration = Duration::from_secs(60);

struct Ran {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    took: Duration,
}

impl Ran {
    fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// The single line the binary printed on stderr; fails if there were
    /// more or none.
    fn stderr_line(&self) -> &str {
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(
            lines.len(),
            1,
            "exactly one line on stderr: {}",
            self.stderr
        );
        lines[0]
    }
}

/// Runs the binary with only `PATH` and `env` in its environment, from
/// `cwd` (the crate root when `None`), and waits for it to exit.
fn run(args: &[&str], env: &[(&str, &str)], cwd: Option<&Path>) -> Ran {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pitboss"));
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .current_dir(cwd.unwrap_or(Path::new(env!("CARGO_MANIFEST_DIR"))))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let started = Instant::now();
    let mut child = KillOnDrop(cmd.spawn().expect("run pitboss"));
    let stdout = read_all(child.0.stdout.take());
    let stderr = read_all(child.0.stderr.take());
    let status = loop {
        if let Some(status) = child.0.try_wait().expect("wait for pitboss") {
            break status;
        }
        assert!(
            started.elapsed() < RUN_LIMIT,
            "pitboss {args:?} still running after {RUN_LIMIT:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = started.elapsed();
    Ran {
        status,
        stdout: stdout.recv().unwrap_or_default(),
        stderr: stderr.recv().unwrap_or_default(),
        took,
    }
}

fn read_all<R: Read + Send + 'static>(from: Option<R>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut from) = from {
            let _ = from.read_to_string(&mut text);
        }
        let _ = tx.send(text);
    });
    rx
}

fn pitboss(args: &[&str], env: &[(&str, &str)]) -> Ran {
    run(args, env, None)
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A directory of this test's own, removed when it drops.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("pitboss-cli-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        Scratch(dir)
    }

    /// The repository's config files, copied here.
    fn with_repo_config() -> Scratch {
        let scratch = Scratch::new();
        for name in ["base.toml", "local.toml", "test.toml", "production.toml"] {
            std::fs::copy(repo_config().join(name), scratch.0.join(name)).expect("copy config");
        }
        scratch
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("a UTF-8 temp dir")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn repo_config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("config")
}

/// A local port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr").port()
}

#[test]
fn a_config_error_exits_non_zero_with_one_clear_line() {
    for (key, value) in [
        ("PITBOSS__LEASE__TTL_MS", "soon"),
        ("PITBOSS__LEASE__TTL_MS", "10"),
        ("PITBOSS__INSTANCE__ID", "a|b"),
        ("PITBOSS__INSTANCE__ENVIRONMENT", "has space"),
        // Cross-field and zero rules (the test TTL is 1500 ms).
        ("PITBOSS__REDIS__OP_TIMEOUT_MS", "2000"),
        ("PITBOSS__WS__PING_INTERVAL_MS", "0"),
        ("PITBOSS__WS__IDLE_TIMEOUT_MS", "10000"),
        ("PITBOSS__LOG__FORMAT", "jsno"),
    ] {
        let out = pitboss(&["serve"], &[("PITBOSS_ENV", "test"), (key, value)]);
        assert_eq!(out.code(), Some(2), "{key}={value}: {}", out.stderr);
        assert!(
            out.stderr_line().starts_with("config error"),
            "{key}={value}: {}",
            out.stderr
        );
    }
    let out = pitboss(&["serve"], &[("PITBOSS_ENV", "staging")]);
    assert_eq!(out.code(), Some(2));
    assert!(out.stderr_line().contains("PITBOSS_ENV"), "{}", out.stderr);
}

#[test]
fn production_refuses_to_start_without_its_secrets() {
    let out = pitboss(&["serve"], &[("PITBOSS_ENV", "production")]);
    assert_eq!(out.code(), Some(2));
    assert!(
        out.stderr_line().contains("PITBOSS__AUTH__SECRET"),
        "{}",
        out.stderr
    );
}

#[test]
fn token_prints_a_token_for_valid_names_and_refuses_others() {
    let out = pitboss(&["token", "alice"], &[("PITBOSS_ENV", "test")]);
    assert!(out.status.success(), "{}", out.stderr);
    let token = out.stdout.trim().to_string();
    assert_eq!(token.split('.').count(), 2, "{token}");
    let out = pitboss(&["token", "not a name"], &[("PITBOSS_ENV", "test")]);
    assert_eq!(out.code(), Some(2));
    let out = pitboss(&["frobnicate"], &[("PITBOSS_ENV", "test")]);
    assert_eq!(out.code(), Some(2));
    assert!(out.stderr_line().contains("usage"), "{}", out.stderr);
}

#[test]
fn unknown_flags_and_bad_flag_values_are_a_one_line_usage_error() {
    for (args, names) in [
        (&["serve", "--prot", "9000"][..], "--prot"),
        (&["--prot", "9000"][..], "--prot"),
        (&["serve", "--port", "http"][..], "--port"),
        (&["serve", "--port"][..], "--port"),
        (&["token", "--port", "9000", "alice"][..], "--port"),
        (&["token", "alice", "bob"][..], "bob"),
    ] {
        let out = pitboss(args, &[("PITBOSS_ENV", "test")]);
        assert_eq!(out.code(), Some(2), "{args:?}: {}", out.stderr);
        let line = out.stderr_line();
        assert!(
            line.contains(names) && line.contains("usage"),
            "{args:?}: {line}"
        );
    }
}

#[test]
fn an_unknown_key_in_a_config_file_exits_2_with_one_line_naming_the_key_and_the_file() {
    let dir = Scratch::with_repo_config();
    let test_toml = dir.0.join("test.toml");
    let text = std::fs::read_to_string(&test_toml).expect("read test.toml");
    assert!(text.contains("action_timeout_ms"), "{text}");
    std::fs::write(
        &test_toml,
        text.replace("action_timeout_ms", "acton_timeout_ms"),
    )
    .expect("write test.toml");
    for command in [&["token", "alice"][..], &["serve"][..]] {
        let args = [command, &["--config-dir", dir.path()][..]].concat();
        let out = pitboss(&args, &[("PITBOSS_ENV", "test")]);
        assert_eq!(out.code(), Some(2), "{args:?}: {}", out.stderr);
        assert_eq!(
            out.stderr_line(),
            format!(
                "config error: unknown key table.acton_timeout_ms in {}",
                test_toml.display()
            )
        );
    }

    let dir = Scratch::with_repo_config();
    let base_toml = dir.0.join("base.toml");
    let text = std::fs::read_to_string(&base_toml).expect("read base.toml");
    std::fs::write(&base_toml, format!("{text}\n[tabel]\narbiters = 2\n"))
        .expect("write base.toml");
    let out = pitboss(
        &["token", "alice", "--config-dir", dir.path()],
        &[("PITBOSS_ENV", "test")],
    );
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert_eq!(
        out.stderr_line(),
        format!("config error: unknown key tabel in {}", base_toml.display())
    );
}

#[test]
fn an_unknown_pitboss_environment_variable_exits_2_with_one_line_naming_it() {
    for name in [
        "PITBOSS__TABLE__ACTON_TIMEOUT_MS",
        "PITBOSS__TABLE_ACTION_TIMEOUT_MS",
        "PITBOSS__TABEL__ACTION_TIMEOUT_MS",
        "PITBOSS_TABLE__ACTION_TIMEOUT_MS",
    ] {
        let out = pitboss(&["serve"], &[("PITBOSS_ENV", "test"), (name, "5000")]);
        assert_eq!(out.code(), Some(2), "{name}: {}", out.stderr);
        let line = out.stderr_line();
        assert!(
            line.starts_with(&format!(
                "config error: unknown environment variable {name}"
            )),
            "{line}"
        );
    }
    // The real key, by the same route, is accepted.
    let out = pitboss(
        &["token", "alice"],
        &[
            ("PITBOSS_ENV", "test"),
            ("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "5000"),
        ],
    );
    assert!(out.status.success(), "{}", out.stderr);
}

#[test]
fn token_outside_the_repository_says_where_it_looked_for_the_config() {
    let elsewhere = Scratch::new();
    let out = run(
        &["token", "alice"],
        &[("PITBOSS_ENV", "test")],
        Some(&elsewhere.0),
    );
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    let line = out.stderr_line();
    let looked_in = elsewhere.0.join("config");
    assert!(
        line.starts_with(&format!(
            "config error: no base.toml in {}",
            looked_in.display()
        )),
        "{line}"
    );
    assert!(!line.contains("secret"), "{line}");

    let missing = elsewhere.0.join("nowhere");
    let out = run(
        &[
            "token",
            "--config-dir",
            missing.to_str().expect("utf-8"),
            "alice",
        ],
        &[("PITBOSS_ENV", "test")],
        Some(&elsewhere.0),
    );
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert!(
        out.stderr_line().contains(&missing.display().to_string()),
        "{}",
        out.stderr
    );

    let out = run(
        &[
            "token",
            "--config-dir",
            repo_config().to_str().expect("utf-8"),
            "alice",
        ],
        &[("PITBOSS_ENV", "test")],
        Some(&elsewhere.0),
    );
    assert!(out.status.success(), "{}", out.stderr);
    assert_eq!(out.stdout.trim().split('.').count(), 2, "{}", out.stdout);
}

fn serve_env<'a>(db_url: &'a str, redis_url: &'a str, env: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("PITBOSS_ENV", "test"),
        ("PITBOSS__DATABASE__URL", db_url),
        ("PITBOSS__REDIS__URL", redis_url),
        ("PITBOSS__INSTANCE__ID", "inst-cli"),
        ("PITBOSS__INSTANCE__ENVIRONMENT", env),
        ("RUST_LOG", "info"),
    ]
}

#[tokio::test]
async fn serve_on_a_busy_port_exits_1_with_one_line_and_no_panic() {
    let db = test_db().await;
    let env = unique_env();
    let redis = shared_redis_url();
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port().to_string();
    let out = pitboss(
        &["serve", "--host", "127.0.0.1", "--port", &port],
        &serve_env(&db.url, &redis, &env),
    );
    assert_eq!(out.code(), Some(1), "{}\n{}", out.stdout, out.stderr);
    let line = out.stderr_line();
    assert!(
        line.contains(&format!("127.0.0.1:{port}")) && line.contains("in use"),
        "{line}"
    );
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    assert!(!out.stdout.contains("panicked"), "{}", out.stdout);
    drop(taken);
}

#[test]
fn an_unreachable_postgres_is_named_retried_and_given_up_within_the_connect_timeout() {
    let port = closed_port();
    let url = format!("postgres://postgres:hunter2@127.0.0.1:{port}/pitboss");
    let redis = shared_redis_url();
    let env = unique_env();
    let mut vars = serve_env(&url, &redis, &env);
    vars.push(("PITBOSS__DATABASE__CONNECT_TIMEOUT_MS", "2000"));
    let out = pitboss(&["serve", "--port", "0"], &vars);
    assert_eq!(out.code(), Some(1), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.took >= Duration::from_millis(1900) && out.took < Duration::from_secs(6),
        "gave up after {:?}",
        out.took
    );
    let line = out.stderr_line();
    assert!(
        line.contains(&format!("Postgres 127.0.0.1:{port}/pitboss")),
        "{line}"
    );
    assert!(line.contains("database.connect_timeout_ms"), "{line}");
    assert!(
        out.stdout.contains(&format!("Postgres 127.0.0.1:{port}/pitboss unreachable (connection refused); retrying, giving up in")),
        "a countdown while it retries: {}",
        out.stdout
    );
    assert!(!out.stdout.contains("hunter2") && !out.stderr.contains("hunter2"));
}

#[tokio::test]
async fn an_unreachable_redis_is_named_retried_and_given_up_within_the_connect_timeout() {
    let db = test_db().await;
    let port = closed_port();
    let redis = format!("redis://:hunter2@127.0.0.1:{port}");
    let env = unique_env();
    let mut vars = serve_env(&db.url, &redis, &env);
    vars.push(("PITBOSS__REDIS__CONNECT_TIMEOUT_MS", "1500"));
    let out = pitboss(&["serve", "--port", "0"], &vars);
    assert_eq!(out.code(), Some(1), "{}\n{}", out.stdout, out.stderr);
    // Postgres comes first (a fresh database is migrated) and is not timed.
    assert!(
        out.took < Duration::from_secs(20),
        "gave up after {:?}",
        out.took
    );
    let line = out.stderr_line();
    assert!(line.contains(&format!("Redis 127.0.0.1:{port}")), "{line}");
    assert!(line.contains("redis.connect_timeout_ms"), "{line}");
    assert!(
        out.stdout.contains("retrying, giving up in"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("hunter2") && !out.stderr.contains("hunter2"));
}

#[tokio::test]
async fn serve_takes_its_port_host_and_config_dir_from_flags() {
    let db = test_db().await;
    let env = unique_env();
    let redis = shared_redis_url();
    let elsewhere = Scratch::new();
    let port = closed_port();
    let config_dir = repo_config();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pitboss"));
    cmd.args([
        "serve",
        "--config-dir",
        config_dir.to_str().expect("utf-8"),
        "--host",
        "127.0.0.1",
        "--port",
        &port.to_string(),
    ])
    .env_clear()
    .env("PATH", std::env::var("PATH").unwrap_or_default())
    // The flags win over the variables.
    .env("PITBOSS__HTTP__PORT", "1")
    .env("PITBOSS__HTTP__HOST", "192.0.2.1")
    .current_dir(&elsewhere.0)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    for (k, v) in serve_env(&db.url, &redis, &env) {
        cmd.env(k, v);
    }
    let mut child = KillOnDrop(cmd.spawn().expect("spawn pitboss"));
    let stdout = child.0.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(addr) = parse_addr_field(&line) {
                let _ = tx.send(addr);
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("pitboss logged its address");
    assert_eq!(addr.to_string(), format!("127.0.0.1:{port}"));
    let health = reqwest::get(format!("http://127.0.0.1:{port}/healthz"))
        .await
        .expect("GET /healthz");
    assert_eq!(health.status(), 200);

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.0.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.0.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "pitboss did not stop after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn instances_starting_together_on_a_fresh_database_migrate_once_and_both_serve() {
    let db = test_db().await;
    let env = unique_env();
    let cfg = ServerConfig::new(&db, &env);
    let (a, b, c) = tokio::join!(
        Server::start(cfg.clone().with_instance("inst-a")),
        Server::start(cfg.clone().with_instance("inst-b")),
        Server::start(cfg.with_instance("inst-c")),
    );
    for s in [&a, &b, &c] {
        let (status, _) = s.get("/readyz").await;
        assert_eq!(status, 200);
    }
    let pool = db.pool().await;
    let applied: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations")
        .fetch_one(&pool)
        .await
        .expect("migrations table");
    let files = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"))
        .expect("migrations dir")
        .count() as i64;
    assert_eq!(applied, files);
}
