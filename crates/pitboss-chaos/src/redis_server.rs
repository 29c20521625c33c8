//! The run's own `redis-server`: on a free port, without persistence, so a
//! restart loses every key (the "Redis restarted with data loss" fault).
//! The machine's shared Redis is never touched.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use nix::sys::signal::Signal;

use crate::children::{free_port, guarded_command, ChildProc};

pub struct PrivateRedis {
    pub port: u16,
    binary: PathBuf,
    dir: PathBuf,
    child: Option<ChildProc>,
    starts: u32,
}

impl PrivateRedis {
    /// Starts a fresh server on a free port and waits until it answers.
    pub async fn start(binary: &Path, dir: &Path) -> anyhow::Result<PrivateRedis> {
        let mut last = None;
        for _ in 0..5 {
            let mut redis = PrivateRedis {
                port: free_port()?,
                binary: binary.to_path_buf(),
                dir: dir.to_path_buf(),
                child: None,
                starts: 0,
            };
            match redis.spawn_and_wait().await {
                Ok(()) => return Ok(redis),
                // Most likely another process took the port in between.
                Err(e) => last = Some(e),
            }
        }
        Err(last
            .unwrap_or_else(|| anyhow::anyhow!("no attempt made"))
            .context("starting a private redis-server (is redis-server installed?)"))
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A crash: SIGKILL and reap. Every key is gone with it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill();
        }
    }

    /// A new, empty server on the same port, after `kill`.
    pub async fn start_again(&mut self) -> anyhow::Result<()> {
        self.kill();
        let mut last = None;
        // The old socket may take a moment to leave the port.
        for _ in 0..20 {
            match self.spawn_and_wait().await {
                Ok(()) => return Ok(()),
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Err(last
            .unwrap_or_else(|| anyhow::anyhow!("no attempt made"))
            .context(format!(
                "redis-server did not come back on port {}",
                self.port
            )))
    }

    /// SIGSTOP: the port still accepts connections but nothing answers,
    /// which is how a hung Redis looks to a client.
    pub fn pause(&mut self) -> anyhow::Result<()> {
        match self.child.as_mut() {
            Some(c) => c.signal(Signal::SIGSTOP),
            None => bail!("redis-server is not running"),
        }
    }

    pub fn resume(&mut self) -> anyhow::Result<()> {
        match self.child.as_mut() {
            Some(c) => c.signal(Signal::SIGCONT),
            None => bail!("redis-server is not running"),
        }
    }

    async fn spawn_and_wait(&mut self) -> anyhow::Result<()> {
        self.starts += 1;
        let log = self
            .dir
            .join(format!("redis-{}-{}.log", self.port, self.starts));
        let mut cmd = guarded_command(&self.binary);
        cmd.arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--daemonize", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(&self.dir);
        let mut child = ChildProc::spawn(cmd, &log)?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(status) = child.poll() {
                bail!(
                    "redis-server on port {} exited at start ({status}); see {}",
                    self.port,
                    log.display()
                );
            }
            if answers(&self.url()).await {
                self.child = Some(child);
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!(
            "redis-server on port {} did not answer within 10 s",
            self.port
        )
    }
}

/// True if Redis at `url` answers PING within half a second.
async fn answers(url: &str) -> bool {
    let attempt = async {
        let client = redis::Client::open(url).ok()?;
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        redis::cmd("PING")
            .query_async::<String>(&mut conn)
            .await
            .ok()
    };
    matches!(
        tokio::time::timeout(Duration::from_millis(500), attempt).await,
        Ok(Some(pong)) if pong == "PONG"
    )
}

/// Deletes `key` on the server at `url`, bounded by a second; true when a
/// key was deleted.
pub async fn delete_key(url: &str, key: &str) -> anyhow::Result<bool> {
    let attempt = async {
        let client = redis::Client::open(url)?;
        let mut conn = client.get_multiplexed_async_connection().await?;
        let n: i64 = redis::cmd("DEL").arg(key).query_async(&mut conn).await?;
        Ok::<bool, redis::RedisError>(n > 0)
    };
    tokio::time::timeout(Duration::from_secs(1), attempt)
        .await
        .context("Redis did not answer within 1 s")?
        .context("DEL on Redis")
}
