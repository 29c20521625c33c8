//! The real `pitboss` binary as a child process: its configuration by
//! environment, starting it and waiting until it listens, signals, its exit,
//! its logs; and `pitboss token` for player tokens.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::Duration;

use nix::sys::signal::Signal;

use super::db::TestDb;
use super::process::{guarded_command, lock, strip_ansi, Output, Process};
use super::redis::shared_redis_url;
use super::wait::{eventually, poll_until, POLL};

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

/// A command for the pitboss binary in the test environment, with the test
/// secret and admin token, and no other `PITBOSS*` variables inherited from
/// the developer's shell, so a stray setting never changes a test.
fn pitboss_command(bin: &str, guarded: bool) -> Command {
    let mut cmd = if guarded {
        guarded_command(bin)
    } else {
        Command::new(bin)
    };
    cmd.current_dir(crate_dir()).stdin(Stdio::null());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("PITBOSS") {
            cmd.env_remove(key);
        }
    }
    cmd.env("PITBOSS_ENV", "test")
        .env("PITBOSS__AUTH__SECRET", AUTH_SECRET)
        .env("PITBOSS__ADMIN__TOKEN", ADMIN_TOKEN);
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
    let out = pitboss_command(pitboss_bin(), false)
        .args(["token", player])
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
    /// The server binary: `pitboss`, or the one that also hosts the
    /// tests' own game (`with_test_games`).
    pub bin: &'static str,
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
            bin: pitboss_bin(),
        }
    }

    /// The server that hosts Nim, a game of the tests' own, beside the
    /// games of this build (`tests/support/test_server.rs`).
    #[allow(dead_code)]
    pub fn with_test_games(mut self) -> ServerConfig {
        self.bin = env!("CARGO_BIN_EXE_pitboss-test-games");
        self
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

    /// `pitboss serve` with this configuration, on a port of its choosing
    /// on loopback.
    pub fn command(&self) -> Command {
        let mut cmd = pitboss_command(self.bin, true);
        cmd.arg("serve")
            .env("PITBOSS__HTTP__HOST", "127.0.0.1")
            .env("PITBOSS__HTTP__PORT", "0")
            .env("PITBOSS__DATABASE__URL", &self.db_url)
            .env("PITBOSS__REDIS__URL", &self.redis_url)
            .env("PITBOSS__INSTANCE__ID", &self.instance_id)
            .env("PITBOSS__INSTANCE__ENVIRONMENT", &self.environment)
            .env("PITBOSS__LEASE__TTL_MS", self.ttl_ms.to_string())
            .env("RUST_LOG", "info");
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
        cmd
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

/// Ends a server that did not come up and collects what it printed.
async fn start_failure(
    status: Option<ExitStatus>,
    mut process: Process,
    readers: Vec<JoinHandle<()>>,
    output: Output,
) -> StartFailure {
    process.kill();
    // Let the readers catch the last lines before reporting.
    poll_until(Duration::from_secs(2), POLL, || {
        readers.iter().all(|r| r.is_finished()).then_some(())
    })
    .await;
    StartFailure {
        status,
        logs: output.lines(),
    }
}

/// A running `pitboss serve`. Killed (SIGCONT, then SIGKILL) on drop.
pub struct Server {
    process: Mutex<Process>,
    pid: u32,
    pub addr: SocketAddr,
    /// `http://<addr>`
    pub http: String,
    pub cfg: ServerConfig,
    output: Output,
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
        let output = Output::default();
        let echo = Some(cfg.instance_id.clone());
        let (mut process, readers) = Process::spawn(&mut cfg.command(), &output, echo)
            .unwrap_or_else(|e| panic!("spawn {}: {e}", cfg.bin));
        let pid = process.pid();

        let mut scanned = 0;
        let found = poll_until(START_TIMEOUT, POLL, || {
            if let Some(addr) = output.scan(&mut scanned, parse_addr_field) {
                return Some(Ok(addr));
            }
            process.poll().map(Err)
        })
        .await;
        let addr = match found {
            Some(Ok(addr)) => addr,
            // It exited first (its status), or stayed silent past the deadline.
            failed => {
                let status = failed.and_then(Result::err);
                return Err(start_failure(status, process, readers, output).await);
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
            process: Mutex::new(process),
            pid,
            addr,
            http: format!("http://{addr}"),
            cfg,
            output,
            client,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    fn signal(&self, sig: Signal) {
        lock(&self.process)
            .signal(sig)
            .unwrap_or_else(|e| panic!("{sig} to pitboss: {e}"));
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
        lock(&self.process).poll().is_none()
    }

    /// The exit status, or `None` if it is still running after `timeout`.
    pub async fn wait_exit(&self, timeout: Duration) -> Option<ExitStatus> {
        poll_until(timeout, POLL, || lock(&self.process).poll()).await
    }

    /// Everything the process printed so far (stdout and stderr, colour
    /// stripped), one entry per line.
    pub fn logs(&self) -> Vec<String> {
        self.output.lines()
    }

    pub fn logs_contain(&self, needle: &str) -> bool {
        self.output.contains(needle)
    }

    pub async fn wait_for_log(&self, needle: &str, timeout: Duration) -> bool {
        eventually(timeout, POLL, || async { self.logs_contain(needle) }).await
    }
}
