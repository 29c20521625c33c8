//! Black-box integration-test harness for pitboss.
//!
//! Tests drive the real `pitboss` binary (`CARGO_BIN_EXE_pitboss`) over HTTP
//! and WebSocket, against a fresh Postgres database per test and either the
//! shared Redis (isolated by a per-test environment name) or a private
//! `redis-server` the test can stop, pause and restart. Nothing here links the
//! pitboss library: the tests see only what an operator or a client sees.
//!
//! Every child process is killed when its handle drops, so a failing test
//! never leaks servers into the next one.
#![allow(dead_code)]

use std::future::Future;
use std::io::{BufRead, BufReader, Read};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{Connection, PgConnection};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub use tokio_tungstenite::tungstenite::Error as WsError;

/// Secret every test server signs player tokens with; `mint_token` uses it too.
pub const AUTH_SECRET: &str = "test-secret";
/// Bearer token for `/admin` on every test server.
pub const ADMIN_TOKEN: &str = "test-admin";

const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";
const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";
const START_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(20);

fn pitboss_bin() -> &'static str {
    env!("CARGO_BIN_EXE_pitboss")
}

/// The crate root, so the binary finds `config/` whatever directory the test
/// runner chose.
fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking test thread must not turn every later Drop into a second
    // panic: the data behind these locks stays valid after a panic.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A command for a long-lived child that dies with the test process, even
/// when the test runner kills that process and no `Drop` runs (a timed-out
/// test must not leave servers behind). `setpriv` (util-linux) sets the
/// parent-death signal and then execs the program, so the pid is the
/// program's own; where it is missing the child is started plainly.
fn guarded_command(program: &str) -> Command {
    const SETPRIV: &str = "/usr/bin/setpriv";
    if Path::new(SETPRIV).exists() {
        let mut cmd = Command::new(SETPRIV);
        cmd.args(["--pdeathsig", "KILL", "--", program]);
        cmd
    } else {
        Command::new(program)
    }
}

/// A command for the pitboss binary with no `PITBOSS*` variables inherited
/// from the developer's shell, so a stray setting never changes a test.
fn pitboss_command(guarded: bool) -> Command {
    let mut cmd = if guarded {
        guarded_command(pitboss_bin())
    } else {
        Command::new(pitboss_bin())
    };
    cmd.current_dir(crate_dir()).stdin(Stdio::null());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("PITBOSS") {
            cmd.env_remove(key);
        }
    }
    cmd
}

// ---------------------------------------------------------------------------
// Small pure helpers
// ---------------------------------------------------------------------------

/// A fresh shard name for `PITBOSS__INSTANCE__ENVIRONMENT`, so this test's
/// lease and fence keys on the shared Redis are its own.
pub fn unique_env() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("t_{}", &id[..8])
}

/// `lease:table:{env}:{id}`, as the contract names it.
pub fn lease_key(env: &str, table: &str) -> String {
    format!("lease:table:{env}:{table}")
}

/// `fence:table:{env}:{id}`, as the contract names it.
pub fn fence_key(env: &str, table: &str) -> String {
    format!("fence:table:{env}:{table}")
}

/// The default table body for `POST /admin/tables`.
pub fn table_config() -> Value {
    json!({
        "small_blind": 1,
        "big_blind": 2,
        "ante": 0,
        "seats": 6,
        "min_buy_in": 40,
        "max_buy_in": 200
    })
}

/// Removes terminal colour sequences, which tracing adds around field names
/// and would otherwise split `key=value` apart.
pub fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            // CSI parameters end at the first byte in '@'..='~'.
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Finds a socket address in a log field named exactly `addr`, in any of
/// tracing's formats: `addr=1.2.3.4:5` (full/compact), `addr: 1.2.3.4:5`
/// (pretty) or `"addr":"1.2.3.4:5"` (JSON).
pub fn parse_addr_field(line: &str) -> Option<SocketAddr> {
    let line = strip_ansi(line);
    let bytes = line.as_bytes();
    let mut from = 0;
    while let Some(pos) = line[from..].find("addr") {
        let start = from + pos;
        let end = start + "addr".len();
        from = end;
        // `peer_addr`, `local_addr`, `xaddr` are other fields.
        if start > 0 {
            let before = bytes[start - 1];
            if before.is_ascii_alphanumeric() || before == b'_' {
                continue;
            }
        }
        let rest = &line[end..];
        let rest = rest.strip_prefix('"').unwrap_or(rest).trim_start();
        let Some(rest) = rest.strip_prefix('=').or_else(|| rest.strip_prefix(':')) else {
            continue;
        };
        let rest = rest.trim_start();
        let rest = rest.strip_prefix('"').unwrap_or(rest);
        let token = rest
            .split(|c: char| c.is_whitespace() || matches!(c, '"' | ',' | '}'))
            .next()
            .unwrap_or("");
        if let Ok(addr) = token.parse::<SocketAddr>() {
            return Some(addr);
        }
    }
    None
}

/// `url` with its database name replaced by `db` (query string kept).
pub fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let authority_start = base.find("://").map(|i| i + 3).unwrap_or(0);
    let root = match base[authority_start..].find('/') {
        Some(i) => &base[..authority_start + i],
        None => base,
    };
    match query {
        Some(q) => format!("{root}/{db}?{q}"),
        None => format!("{root}/{db}"),
    }
}

/// Polls `f` every `every` until it returns true (→ true) or `timeout` passes
/// (→ false). `f` always runs at least once.
pub async fn eventually<F, Fut>(timeout: Duration, every: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if f().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(every).await;
    }
}

fn free_port() -> u16 {
    // The port is free the moment the listener drops; a race with another
    // process is possible, so callers that bind it retry with a new one.
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0 to find a free port")
}

/// Reads `pipe` line by line into `sink` (colour stripped), echoing each line
/// to stderr with `prefix` when one is given.
fn spawn_reader<R: Read + Send + 'static>(
    pipe: R,
    sink: Arc<Mutex<Vec<String>>>,
    prefix: Option<String>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(pipe);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let raw = String::from_utf8_lossy(&buf);
                    let line = strip_ansi(raw.trim_end_matches(['\n', '\r']));
                    if let Some(p) = &prefix {
                        eprintln!("[{p}] {line}");
                    }
                    lock(&sink).push(line);
                }
            }
        }
    })
}

fn send_signal(pid: u32, sig: Signal) -> nix::Result<()> {
    let pid = i32::try_from(pid).expect("pid fits in i32");
    kill(Pid::from_raw(pid), sig)
}

// ---------------------------------------------------------------------------
// Postgres
// ---------------------------------------------------------------------------

/// A database of its own for one test, created from `PITBOSS_TEST_PG_URL`.
/// It is dropped by `drop_db` or, failing that, when the handle drops (set
/// `PITBOSS_TEST_KEEP_DB=1` to keep it for a post-mortem).
pub struct TestDb {
    pub name: String,
    pub url: String,
    admin_url: String,
    pool: PgPool,
    dropped: bool,
}

/// Creates `pitboss_t_<uuid>` on the test Postgres. The schema is empty: the
/// pitboss binary applies its migrations when a server starts.
pub async fn test_db() -> TestDb {
    let admin_url = std::env::var("PITBOSS_TEST_PG_URL").unwrap_or_else(|_| DEFAULT_PG_URL.into());
    let name = format!("pitboss_t_{}", uuid::Uuid::new_v4().simple());
    let mut admin = PgConnection::connect(&admin_url).await.unwrap_or_else(|e| {
        panic!("connect to test Postgres at {admin_url} (run scripts/services.sh?): {e}")
    });
    let create = format!("CREATE DATABASE \"{name}\"");
    let mut attempt = 0;
    loop {
        attempt += 1;
        match sqlx::raw_sql(&create).execute(&mut admin).await {
            Ok(_) => break,
            // Concurrent CREATE DATABASE can trip over a transient lock on
            // the template; another try a moment later succeeds.
            Err(e) if attempt < 5 => {
                eprintln!("CREATE DATABASE {name} failed (attempt {attempt}): {e}; retrying");
                tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
            }
            Err(e) => panic!("CREATE DATABASE {name}: {e}"),
        }
    }
    let _ = admin.close().await;
    let url = with_database(&admin_url, &name);
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(10))
        .connect_lazy(&url)
        .unwrap_or_else(|e| panic!("bad test database url {url}: {e}"));
    TestDb {
        name,
        url,
        admin_url,
        pool,
        dropped: false,
    }
}

impl TestDb {
    /// A pool on this database. It connects lazily, so it sees the schema
    /// the server migrated once a server has started.
    pub async fn pool(&self) -> PgPool {
        self.pool.clone()
    }

    /// Drops the database (terminating any connection still on it).
    /// Best-effort: a failure is reported on stderr, never panics.
    pub async fn drop_db(&mut self) {
        if self.dropped {
            return;
        }
        self.dropped = true;
        self.pool.close().await;
        if let Err(e) = drop_database(&self.admin_url, &self.name).await {
            eprintln!("warning: could not drop test database {}: {e}", self.name);
        }
    }
}

async fn drop_database(admin_url: &str, name: &str) -> Result<(), sqlx::Error> {
    let mut admin = PgConnection::connect(admin_url).await?;
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = $1 AND pid <> pg_backend_pid()",
    )
    .bind(name)
    .execute(&mut admin)
    .await?;
    let plain = format!("DROP DATABASE IF EXISTS \"{name}\"");
    if sqlx::raw_sql(&plain).execute(&mut admin).await.is_err() {
        // A connection that arrived after the terminate; FORCE (PG 13+)
        // ends it as part of the drop.
        let forced = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
        sqlx::raw_sql(&forced).execute(&mut admin).await?;
    }
    let _ = admin.close().await;
    Ok(())
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if self.dropped || std::env::var_os("PITBOSS_TEST_KEEP_DB").is_some() {
            return;
        }
        self.dropped = true;
        let admin_url = self.admin_url.clone();
        let name = self.name.clone();
        // Drop cannot await and may run inside the test's runtime, so the
        // cleanup gets a thread and a runtime of its own.
        let cleanup = std::thread::spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("warning: no runtime to drop test database {name}: {e}");
                    return;
                }
            };
            if let Err(e) = rt.block_on(drop_database(&admin_url, &name)) {
                eprintln!("warning: could not drop test database {name}: {e}");
            }
        });
        let _ = cleanup.join();
    }
}

// ---------------------------------------------------------------------------
// Redis
// ---------------------------------------------------------------------------

/// A multiplexed connection to `url`; panics with the reason if Redis does
/// not answer.
pub async fn redis_conn(url: &str) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(url).unwrap_or_else(|e| panic!("bad redis url {url}: {e}"));
    client
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|e| panic!("connect to redis at {url}: {e}"))
}

/// True if Redis at `url` answers PING within `timeout`.
pub async fn redis_answers(url: &str, timeout: Duration) -> bool {
    let attempt = async {
        let client = redis::Client::open(url).ok()?;
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        redis::cmd("PING")
            .query_async::<String>(&mut conn)
            .await
            .ok()
    };
    matches!(tokio::time::timeout(timeout, attempt).await, Ok(Some(pong)) if pong == "PONG")
}

/// The default Redis for servers: `PITBOSS_TEST_REDIS_URL` or the local one.
pub fn shared_redis_url() -> String {
    std::env::var("PITBOSS_TEST_REDIS_URL").unwrap_or_else(|_| DEFAULT_REDIS_URL.into())
}

/// Deletes this environment's lease and fence keys on `url` (SCAN + DEL on
/// `*:table:{env}:*`), so a test can leave the shared Redis as it found it.
pub async fn clear_env_keys(url: &str, env: &str) {
    let mut conn = redis_conn(url).await;
    let pattern = format!("*:table:{env}:*");
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(500)
            .query_async(&mut conn)
            .await
            .expect("SCAN on redis");
        if !keys.is_empty() {
            let _: i64 = redis::cmd("DEL")
                .arg(&keys)
                .query_async(&mut conn)
                .await
                .expect("DEL on redis");
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
}

/// A `redis-server` of the test's own on a free port, for faults the shared
/// Redis must never suffer: stop, crash, pause, restart.
pub struct PrivateRedis {
    pub port: u16,
    child: Option<Child>,
    logs: Arc<Mutex<Vec<String>>>,
}

impl PrivateRedis {
    /// Starts a fresh, empty, non-persistent server and waits for PING.
    pub async fn start() -> PrivateRedis {
        let mut last_logs = Vec::new();
        for _ in 0..5 {
            let mut redis = PrivateRedis {
                port: free_port(),
                child: None,
                logs: Arc::new(Mutex::new(Vec::new())),
            };
            if redis.spawn_and_wait(Duration::from_secs(10)).await {
                return redis;
            }
            // Most likely another process took the port in between.
            last_logs = lock(&redis.logs).clone();
        }
        panic!(
            "could not start a private redis-server after 5 ports; last output:\n{}",
            last_logs.join("\n")
        );
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The server's own output so far.
    pub fn logs(&self) -> Vec<String> {
        lock(&self.logs).clone()
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// True while the process has not exited.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Graceful stop (SIGTERM, SIGKILL after 5 s); returns once the process
    /// is gone, so the port refuses connections.
    pub async fn stop(&mut self) {
        self.end(Signal::SIGTERM).await;
    }

    /// Crash: SIGKILL and wait.
    pub async fn kill(&mut self) {
        self.end(Signal::SIGKILL).await;
    }

    /// SIGSTOP: the port still accepts connections but nothing answers,
    /// which is how a hung Redis looks to a client.
    pub fn pause(&self) {
        if let Some(pid) = self.pid() {
            send_signal(pid, Signal::SIGSTOP).expect("SIGSTOP private redis");
        }
    }

    /// SIGCONT after `pause`.
    pub fn resume(&self) {
        if let Some(pid) = self.pid() {
            send_signal(pid, Signal::SIGCONT).expect("SIGCONT private redis");
        }
    }

    /// Starts a new, empty server on the same port (after `stop`/`kill`)
    /// and waits until it answers PING.
    pub async fn start_again(&mut self) {
        assert!(
            !self.is_running(),
            "start_again while redis is still running"
        );
        self.child = None;
        // The old socket may take a moment to leave the port.
        for _ in 0..20 {
            if self.spawn_and_wait(Duration::from_secs(10)).await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        panic!(
            "private redis-server did not come back on port {}; output:\n{}",
            self.port,
            self.logs().join("\n")
        );
    }

    async fn end(&mut self, sig: Signal) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        // A paused server would never act on SIGTERM.
        let _ = send_signal(child.id(), Signal::SIGCONT);
        let _ = send_signal(child.id(), sig);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return;
            }
            tokio::time::sleep(POLL).await;
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Spawns on `self.port`; true once it answers PING, false (child
    /// reaped) if it exits or stays silent for `timeout`.
    async fn spawn_and_wait(&mut self, timeout: Duration) -> bool {
        let mut cmd = guarded_command("redis-server");
        cmd.arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--daemonize", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(std::env::temp_dir())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn redis-server (run scripts/services.sh?): {e}"));
        if let Some(out) = child.stdout.take() {
            spawn_reader(out, self.logs.clone(), None);
        }
        if let Some(err) = child.stderr.take() {
            spawn_reader(err, self.logs.clone(), None);
        }
        self.child = Some(child);
        let url = self.url();
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if !self.is_running() {
                self.child = None;
                return false;
            }
            if redis_answers(&url, Duration::from_millis(500)).await {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.kill().await;
        false
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = send_signal(child.id(), Signal::SIGCONT);
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

// ---------------------------------------------------------------------------
// The pitboss server
// ---------------------------------------------------------------------------

/// How one test server is configured; clone it to start a second instance or
/// to restart "the same" one.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub instance_id: String,
    pub environment: String,
    pub db_url: String,
    pub redis_url: String,
    pub ttl_ms: u64,
    pub extra_env: Vec<(String, String)>,
}

impl ServerConfig {
    /// Instance `inst-a`, the shared Redis, lease TTL 1500 ms.
    pub fn new(db: &TestDb, environment: &str) -> ServerConfig {
        ServerConfig {
            instance_id: "inst-a".into(),
            environment: environment.into(),
            db_url: db.url.clone(),
            redis_url: shared_redis_url(),
            ttl_ms: 1500,
            extra_env: Vec::new(),
        }
    }

    pub fn with_instance(mut self, id: &str) -> ServerConfig {
        self.instance_id = id.into();
        self
    }

    pub fn with_redis(mut self, url: &str) -> ServerConfig {
        self.redis_url = url.into();
        self
    }

    pub fn with_ttl_ms(mut self, ttl_ms: u64) -> ServerConfig {
        self.ttl_ms = ttl_ms;
        self
    }

    /// Any further variable, e.g. `PITBOSS__TABLE__ACTION_TIMEOUT_MS`; set
    /// last, so it can override the harness's own.
    pub fn with_env(mut self, key: &str, value: &str) -> ServerConfig {
        self.extra_env.push((key.into(), value.into()));
        self
    }
}

/// Why a server did not come up: it exited (status set) or never logged
/// its address in time (status `None`).
#[derive(Debug)]
pub struct StartFailure {
    pub status: Option<ExitStatus>,
    pub logs: Vec<String>,
}

impl std::fmt::Display for StartFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.status {
            Some(s) => writeln!(f, "pitboss exited before it listened ({s}); its output:")?,
            None => writeln!(
                f,
                "pitboss logged no `addr` within {}s; its output:",
                START_TIMEOUT.as_secs()
            )?,
        }
        for line in &self.logs {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}

struct ChildState {
    child: Child,
    status: Option<ExitStatus>,
}

impl ChildState {
    fn poll(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            if let Ok(Some(s)) = self.child.try_wait() {
                self.status = Some(s);
            }
        }
        self.status
    }
}

/// A running `pitboss serve`. Killed (SIGCONT, then SIGKILL) on drop.
pub struct Server {
    state: Mutex<ChildState>,
    pid: u32,
    pub addr: SocketAddr,
    /// `http://<addr>`
    pub http: String,
    pub cfg: ServerConfig,
    logs: Arc<Mutex<Vec<String>>>,
    readers: Vec<JoinHandle<()>>,
    client: reqwest::Client,
}

impl Server {
    /// Starts the binary and waits until it logs its bound address; panics
    /// with the captured output if it exits first or takes over 30 s.
    pub async fn start(cfg: ServerConfig) -> Server {
        match Server::try_start(cfg).await {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        }
    }

    /// Like `start`, but hands a failure back (e.g. to test config errors).
    pub async fn try_start(cfg: ServerConfig) -> Result<Server, StartFailure> {
        let mut cmd = pitboss_command(true);
        cmd.arg("serve")
            .env("PITBOSS_ENV", "test")
            .env("PITBOSS__HTTP__HOST", "127.0.0.1")
            .env("PITBOSS__HTTP__PORT", "0")
            .env("PITBOSS__DATABASE__URL", &cfg.db_url)
            .env("PITBOSS__REDIS__URL", &cfg.redis_url)
            .env("PITBOSS__INSTANCE__ID", &cfg.instance_id)
            .env("PITBOSS__INSTANCE__ENVIRONMENT", &cfg.environment)
            .env("PITBOSS__LEASE__TTL_MS", cfg.ttl_ms.to_string())
            .env("PITBOSS__AUTH__SECRET", AUTH_SECRET)
            .env("PITBOSS__ADMIN__TOKEN", ADMIN_TOKEN)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in &cfg.extra_env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", pitboss_bin()));
        let pid = child.id();
        let logs = Arc::new(Mutex::new(Vec::new()));
        let mut readers = Vec::new();
        let prefix = Some(cfg.instance_id.clone());
        if let Some(out) = child.stdout.take() {
            readers.push(spawn_reader(out, logs.clone(), prefix.clone()));
        }
        if let Some(err) = child.stderr.take() {
            readers.push(spawn_reader(err, logs.clone(), prefix));
        }
        let mut state = ChildState {
            child,
            status: None,
        };

        let deadline = Instant::now() + START_TIMEOUT;
        let mut scanned = 0;
        let found = loop {
            let found = {
                let lines = lock(&logs);
                let hit = lines[scanned..].iter().find_map(|l| parse_addr_field(l));
                scanned = lines.len();
                hit
            };
            if let Some(addr) = found {
                break Ok(addr);
            }
            if let Some(status) = state.poll() {
                break Err(Some(status));
            }
            if Instant::now() >= deadline {
                break Err(None);
            }
            tokio::time::sleep(POLL).await;
        };
        let addr = match found {
            Ok(addr) => addr,
            Err(status) => {
                if status.is_none() {
                    let _ = send_signal(pid, Signal::SIGCONT);
                    let _ = state.child.kill();
                    let _ = state.child.wait();
                }
                // Let the readers catch the last lines before reporting.
                let until = Instant::now() + Duration::from_secs(2);
                while readers.iter().any(|r| !r.is_finished()) && Instant::now() < until {
                    tokio::time::sleep(POLL).await;
                }
                let logs = lock(&logs).clone();
                return Err(StartFailure { status, logs });
            }
        };
        // A server told to bind a wildcard is still reached over loopback.
        let addr = if addr.ip().is_unspecified() {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), addr.port())
        } else {
            addr
        };
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("build reqwest client");
        Ok(Server {
            state: Mutex::new(state),
            pid,
            addr,
            http: format!("http://{addr}"),
            cfg,
            logs,
            readers,
            client,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    fn signal(&self, sig: Signal) {
        let mut st = lock(&self.state);
        // Once reaped the pid may belong to someone else.
        if st.poll().is_some() {
            return;
        }
        send_signal(self.pid, sig).unwrap_or_else(|e| panic!("{sig} to pitboss: {e}"));
    }

    pub fn sigterm(&self) {
        self.signal(Signal::SIGTERM)
    }

    pub fn sigint(&self) {
        self.signal(Signal::SIGINT)
    }

    pub fn sigkill(&self) {
        self.signal(Signal::SIGKILL)
    }

    /// Freezes the process: it holds its leases in memory but renews none,
    /// the classic "paused past the TTL" fault.
    pub fn sigstop(&self) {
        self.signal(Signal::SIGSTOP)
    }

    pub fn sigcont(&self) {
        self.signal(Signal::SIGCONT)
    }

    /// True while the process has not exited.
    pub fn is_running(&self) -> bool {
        lock(&self.state).poll().is_none()
    }

    /// The exit status, or `None` if it is still running after `timeout`.
    pub async fn wait_exit(&self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = lock(&self.state).poll() {
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Everything the process printed so far (stdout and stderr, colour
    /// stripped), one entry per line.
    pub fn logs(&self) -> Vec<String> {
        lock(&self.logs).clone()
    }

    pub fn logs_contain(&self, needle: &str) -> bool {
        lock(&self.logs).iter().any(|l| l.contains(needle))
    }

    pub async fn wait_for_log(&self, needle: &str, timeout: Duration) -> bool {
        eventually(timeout, POLL, || async { self.logs_contain(needle) }).await
    }

    /// Any request; the body as text.
    pub async fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        bearer: Option<&str>,
        body: Option<&Value>,
    ) -> (u16, String) {
        let url = format!("{}{}", self.http, path);
        let mut req = self.client.request(method.clone(), &url);
        if let Some(token) = bearer {
            req = req.bearer_auth(token);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let status = resp.status().as_u16();
        let text = resp
            .text()
            .await
            .unwrap_or_else(|e| panic!("{method} {url}: reading body: {e}"));
        (status, text)
    }

    /// Unauthenticated GET; the body as text.
    pub async fn get(&self, path: &str) -> (u16, String) {
        self.request(reqwest::Method::GET, path, None, None).await
    }

    pub async fn admin_get(&self, path: &str) -> (u16, Value) {
        let (status, text) = self
            .request(reqwest::Method::GET, path, Some(ADMIN_TOKEN), None)
            .await;
        (status, body_json(text))
    }

    pub async fn admin_post(&self, path: &str, body: Value) -> (u16, Value) {
        let (status, text) = self
            .request(reqwest::Method::POST, path, Some(ADMIN_TOKEN), Some(&body))
            .await;
        (status, body_json(text))
    }

    /// `POST /admin/tables`, expecting 201; the table view.
    pub async fn create_table(&self, config: Value) -> Value {
        let (status, view) = self.admin_post("/admin/tables", config.clone()).await;
        assert_eq!(
            status, 201,
            "POST /admin/tables {config} -> {status} {view}"
        );
        view
    }

    /// `POST /admin/players/{player}/grant`, expecting 200; `{player, balance}`.
    pub async fn grant(&self, player: &str, chips: i64) -> Value {
        let path = format!("/admin/players/{player}/grant");
        let (status, body) = self.admin_post(&path, json!({ "chips": chips })).await;
        assert_eq!(status, 200, "POST {path} {chips} -> {status} {body}");
        body
    }

    /// `GET /admin/tables/{id}`, expecting 200; the table view.
    pub async fn table(&self, id: &str) -> Value {
        let path = format!("/admin/tables/{id}");
        let (status, body) = self.admin_get(&path).await;
        assert_eq!(status, 200, "GET {path} -> {status} {body}");
        body
    }

    /// `GET /admin/audit`, expecting 200.
    pub async fn audit(&self) -> Value {
        let (status, body) = self.admin_get("/admin/audit").await;
        assert_eq!(status, 200, "GET /admin/audit -> {status} {body}");
        body
    }

    /// `ws://<addr>/ws?token=<token>`
    pub fn ws_url(&self, token: &str) -> String {
        format!("ws://{}/ws?token={}", self.addr, percent_encode(token))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let mut st = lock(&self.state);
        if st.poll().is_none() {
            // SIGKILL ends a stopped process too, but a SIGCONT first keeps
            // the order of events the same on every kernel.
            let _ = send_signal(self.pid, Signal::SIGCONT);
            let _ = st.child.kill();
            let _ = st.child.wait();
        }
    }
}

fn body_json(text: String) -> Value {
    if text.trim().is_empty() {
        return Value::Null;
    }
    // A non-JSON body stays visible in assertion messages as a string.
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A player token signed with the test secret (`pitboss token <player>`).
pub fn mint_token(player: &str) -> String {
    let out = pitboss_command(false)
        .args(["token", player])
        .env("PITBOSS_ENV", "test")
        .env("PITBOSS__AUTH__SECRET", AUTH_SECRET)
        .env("PITBOSS__ADMIN__TOKEN", ADMIN_TOKEN)
        .output()
        .unwrap_or_else(|e| panic!("run {} token {player}: {e}", pitboss_bin()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "pitboss token {player} failed ({}):\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // The token is the last thing printed, whatever a logger put before it.
    let token = stdout
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("");
    assert!(!token.is_empty(), "pitboss token {player} printed nothing");
    token.to_string()
}

// ---------------------------------------------------------------------------
// WebSocket client
// ---------------------------------------------------------------------------

type Ws = WebSocketStream<MaybeTlsStream<tokio::net::TcpStream>>;

/// A player's WebSocket connection. Every JSON frame received is kept in
/// `seen`, in order, for assertions after the fact.
pub struct WsClient {
    ws: Ws,
    pub seen: Vec<Value>,
    /// `(code, reason)` once the server closed; 1005 for a close frame
    /// without a code, 1006 for a connection that ended without one.
    pub closed: Option<(u16, String)>,
}

impl WsClient {
    /// Connects to `ws://addr/ws?token=...`. A refused upgrade comes back as
    /// `WsError::Http(response)` with the status (401 for a bad token).
    pub async fn connect(server: &Server, token: &str) -> Result<WsClient, WsError> {
        WsClient::connect_url(&server.ws_url(token)).await
    }

    /// Connects to any URL, e.g. `/ws` with no token at all.
    pub async fn connect_url(url: &str) -> Result<WsClient, WsError> {
        let (ws, _response) = tokio_tungstenite::connect_async(url).await?;
        Ok(WsClient {
            ws,
            seen: Vec::new(),
            closed: None,
        })
    }

    /// Sends a JSON text frame; panics if the connection is gone.
    pub async fn send(&mut self, frame: Value) {
        let text = frame.to_string();
        self.try_send(Message::Text(text))
            .await
            .unwrap_or_else(|e| panic!("send {frame}: {e}"));
    }

    /// Sends raw text (for malformed-frame tests); panics if the connection
    /// is gone.
    pub async fn send_text(&mut self, text: &str) {
        self.try_send(Message::Text(text.to_string()))
            .await
            .unwrap_or_else(|e| panic!("send {text:?}: {e}"));
    }

    pub async fn try_send(&mut self, msg: Message) -> Result<(), WsError> {
        self.ws.send(msg).await
    }

    /// The next JSON frame, or `None` on timeout or once the connection is
    /// closed (see `closed`). Ping/pong and binary frames are skipped.
    pub async fn recv_json(&mut self, timeout: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.closed.is_some() {
                return None;
            }
            let next = match tokio::time::timeout_at(deadline, self.ws.next()).await {
                Err(_) => return None,
                Ok(next) => next,
            };
            match next {
                None => {
                    self.closed = Some((1006, "connection ended".into()));
                    return None;
                }
                Some(Err(e)) => {
                    self.closed = Some((1006, e.to_string()));
                    return None;
                }
                Some(Ok(Message::Text(text))) => {
                    let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
                        panic!("server sent a non-JSON text frame ({e}): {text}")
                    });
                    self.seen.push(value.clone());
                    return Some(value);
                }
                Some(Ok(Message::Close(frame))) => {
                    self.closed = Some(close_info(frame));
                    return None;
                }
                Some(Ok(_)) => continue,
            }
        }
    }

    /// Receives until a frame satisfies `pred` and returns it; `None` on
    /// timeout or close. Everything received lands in `seen`.
    pub async fn recv_until(
        &mut self,
        pred: impl Fn(&Value) -> bool,
        timeout: Duration,
    ) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            let v = self.recv_json(left).await?;
            if pred(&v) {
                return Some(v);
            }
        }
    }

    /// The next frame with `"type": ty`.
    pub async fn recv_type(&mut self, ty: &str, timeout: Duration) -> Option<Value> {
        self.recv_until(|v| v["type"] == ty, timeout).await
    }

    /// The next `event` frame of `kind`.
    pub async fn recv_event(&mut self, kind: &str, timeout: Duration) -> Option<Value> {
        self.recv_until(|v| v["type"] == "event" && v["kind"] == kind, timeout)
            .await
    }

    /// Waits for the server to close; `(code, reason)`, or `None` on timeout.
    /// Frames received meanwhile land in `seen`.
    pub async fn expect_close(&mut self, timeout: Duration) -> Option<(u16, String)> {
        let deadline = Instant::now() + timeout;
        while self.closed.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            if self.recv_json(left).await.is_none() && self.closed.is_none() {
                return None;
            }
        }
        self.closed.clone()
    }

    /// Highest `seq` seen so far on `table` (for a reconnect with `since`).
    pub fn last_seq(&self, table: &str) -> Option<u64> {
        self.seen
            .iter()
            .filter(|v| v["table"] == table)
            .filter_map(|v| v["seq"].as_u64())
            .max()
    }

    /// A client-side close; best-effort.
    pub async fn close(&mut self) {
        let _ = self
            .ws
            .close(Some(CloseFrame {
                code: CloseCode::Normal,
                reason: "bye".into(),
            }))
            .await;
    }
}

/// The HTTP status of a refused WebSocket upgrade (e.g. 401 for a bad
/// token), `None` for any other connection error.
pub fn refused_status(err: &WsError) -> Option<u16> {
    match err {
        WsError::Http(resp) => Some(resp.status().as_u16()),
        _ => None,
    }
}

fn close_info(frame: Option<CloseFrame<'_>>) -> (u16, String) {
    match frame {
        Some(f) => (u16::from(f.code), f.reason.to_string()),
        None => (1005, String::new()),
    }
}
