//! Redis: per-test key namespaces on the shared server, the contract's lease
//! and fence key names, and private `redis-server` processes for faults the
//! shared one must never suffer.

use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::process::{guarded_command, send_signal, Output, Process};
use super::wait::{poll_until, POLL};

const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";

/// A fresh shard name for `PITBOSS__INSTANCE__ENVIRONMENT`, so this test's
/// lease and fence keys on the shared Redis are its own.
pub fn unique_env() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("t_{}", &id[..8])
}

/// `lease:table:<env>:{<id>}`, as the contract names it (the braces are
/// the Redis Cluster hash tag).
pub fn lease_key(env: &str, table: &str) -> String {
    format!("lease:table:{env}:{{{table}}}")
}

/// `fence:table:<env>:{<id>}`, as the contract names it.
pub fn fence_key(env: &str, table: &str) -> String {
    format!("fence:table:{env}:{{{table}}}")
}

pub(super) fn free_port() -> u16 {
    // The port is free the moment the listener drops; a race with another
    // process is possible, so callers that bind it retry with a new one.
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0 to find a free port")
}

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
/// Redis must never suffer: stop, crash, pause, restart. Killed on drop.
pub struct PrivateRedis {
    pub port: u16,
    child: Option<Process>,
    output: Output,
    /// More `redis-server` arguments (a cluster node's); `{port}` in them
    /// stands for the port.
    extra: Vec<String>,
}

impl PrivateRedis {
    /// Starts a fresh, empty, non-persistent server and waits for PING.
    pub async fn start() -> PrivateRedis {
        PrivateRedis::start_with(&[]).await
    }

    /// Like `start`, with more `redis-server` arguments.
    pub async fn start_with(extra: &[&str]) -> PrivateRedis {
        let mut last_logs = Vec::new();
        for _ in 0..5 {
            let mut redis = PrivateRedis {
                port: free_port(),
                child: None,
                output: Output::default(),
                extra: extra.iter().map(|a| a.to_string()).collect(),
            };
            redis.forget_cluster_config();
            if redis.spawn_and_wait(Duration::from_secs(10)).await {
                return redis;
            }
            // Most likely another process took the port in between.
            last_logs = redis.logs();
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
        self.output.lines()
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Process::pid)
    }

    /// True while the process has not exited.
    pub fn is_running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| c.poll().is_none())
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
        if child.poll().is_some() {
            return;
        }
        // A paused server would never act on SIGTERM.
        let _ = send_signal(child.pid(), Signal::SIGCONT);
        let _ = send_signal(child.pid(), sig);
        if poll_until(Duration::from_secs(5), POLL, || child.poll())
            .await
            .is_none()
        {
            child.kill();
        }
    }

    /// Spawns on `self.port`; true once it answers PING, false (child
    /// reaped) if it exits or stays silent for `timeout`.
    async fn spawn_and_wait(&mut self, timeout: Duration) -> bool {
        let (child, _readers) = Process::spawn(&mut self.command(), &self.output, None)
            .unwrap_or_else(|e| panic!("spawn redis-server (run scripts/services.sh?): {e}"));
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

    /// A fresh node must not load the cluster config an earlier server on
    /// the same port left in the shared directory (it would know another
    /// cluster's nodes); a restart keeps it to rejoin with its slots.
    fn forget_cluster_config(&self) {
        let port = self.port.to_string();
        let mut args = self.extra.iter();
        while let Some(arg) = args.next() {
            if arg == "--cluster-config-file" {
                if let Some(file) = args.next() {
                    let path = std::env::temp_dir().join(file.replace("{port}", &port));
                    let _ = std::fs::remove_file(path);
                }
            }
        }
    }

    fn command(&self) -> Command {
        let mut cmd = guarded_command("redis-server");
        cmd.arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--daemonize", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(std::env::temp_dir());
        let port = self.port.to_string();
        cmd.args(self.extra.iter().map(|a| a.replace("{port}", &port)));
        cmd
    }
}
