//! The real `pitboss` binary as a child process: its configuration by
//! environment, starting it and waiting until it listens, signals, its exit,
//! its logs; and `pitboss token` for player tokens.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::db::TestDb;
use super::process::{guarded_command, lock, send_signal, spawn_reader, strip_ansi};
use super::redis::shared_redis_url;
use super::wait::{eventually, POLL};

/// Secret every test server signs player tokens with; `mint_token` uses it too.
pub const AUTH_SECRET: &str = "test-secret";
/// Bearer token for `/admin` on every test server.
pub const ADMIN_TOKEN: &str = "test-admin";

const START_TIMEOUT: Duration = Duration::from_secs(30);

fn pitboss_bin() -> &'static str {
    env!("CARGO_BIN_EXE_pitboss")
}

/// The crate root, so the binary finds `config/` whatever directory the test
/// runner chose.
fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
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
    pub(super) client: reqwest::Client,
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
