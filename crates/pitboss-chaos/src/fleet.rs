//! The pitboss instances: one slot each, with a fixed HTTP port (so the
//! bots' URLs stay valid across restarts) and a Redis proxy of its own.
//! A slot's process can be killed, stopped, drained and started again,
//! under its instance id or a new one.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use nix::sys::signal::Signal;

use crate::children::{free_port, guarded_command, ChildProc};
use crate::proxy::Proxy;

/// How long a started instance may take to answer `/healthz`.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Attempts to start an instance: a restart under the same id can meet the
/// old process's registration, or its port not yet free.
const START_ATTEMPTS: u32 = 6;

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The data behind these locks stays valid after a panicking task.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What the rest of the run may read about a slot at any moment.
#[derive(Debug, Clone)]
pub struct SlotView {
    pub id: String,
    /// A process is running (it may be stopped).
    pub up: bool,
    /// SIGSTOPped: it answers nothing until continued.
    pub stopped: bool,
}

pub struct Slot {
    pub port: u16,
    pub proxy: Proxy,
    letter: char,
    generation: AtomicU32,
    process: Mutex<Option<ChildProc>>,
    view: Mutex<SlotView>,
}

impl Slot {
    pub fn view(&self) -> SlotView {
        lock(&self.view).clone()
    }

    pub fn id(&self) -> String {
        lock(&self.view).id.clone()
    }

    pub fn http(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn take_process(&self) -> Option<ChildProc> {
        let p = lock(&self.process).take();
        lock(&self.view).up = false;
        p
    }

    /// A process that exited without being told to: its status, and the
    /// log it wrote. The slot is left empty, to be started again.
    pub fn reap_unexpected(&self) -> Option<(String, String)> {
        let mut guard = lock(&self.process);
        let status = guard.as_mut()?.poll()?;
        let child = guard.take()?;
        drop(guard);
        let mut view = lock(&self.view);
        view.up = false;
        view.stopped = false;
        Some((
            format!("{} exited by itself ({status})", view.id),
            child.log.display().to_string(),
        ))
    }
}

pub struct Fleet {
    pub slots: Vec<Slot>,
    pitboss: PathBuf,
    config_dir: PathBuf,
    logs: PathBuf,
    env: Vec<(String, String)>,
    incarnations: AtomicU32,
    http: reqwest::Client,
    /// Every instance log written, for the checks at the end.
    pub logs_written: Mutex<Vec<PathBuf>>,
}

pub struct FleetConfig<'a> {
    pub instances: usize,
    pub pitboss: &'a Path,
    pub config_dir: &'a Path,
    pub logs: &'a Path,
    pub redis_port: u16,
    /// Settings every instance gets (`PITBOSS__…` variables).
    pub env: Vec<(String, String)>,
}

impl Fleet {
    pub async fn new(cfg: FleetConfig<'_>) -> anyhow::Result<Fleet> {
        let mut slots = Vec::new();
        for index in 0..cfg.instances {
            let letter = (b'a' + index as u8) as char;
            slots.push(Slot {
                port: free_port()?,
                proxy: Proxy::start(cfg.redis_port).await?,
                letter,
                generation: AtomicU32::new(1),
                process: Mutex::new(None),
                view: Mutex::new(SlotView {
                    id: format!("chaos-{letter}"),
                    up: false,
                    stopped: false,
                }),
            });
        }
        Ok(Fleet {
            slots,
            pitboss: cfg.pitboss.to_path_buf(),
            config_dir: cfg.config_dir.to_path_buf(),
            logs: cfg.logs.to_path_buf(),
            env: cfg.env,
            incarnations: AtomicU32::new(0),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(1))
                .build()
                .context("building the HTTP client")?,
            logs_written: Mutex::new(Vec::new()),
        })
    }

    pub fn urls(&self) -> Vec<String> {
        self.slots.iter().map(Slot::http).collect()
    }

    /// `pitboss serve` for `slot` under its current id, waiting until it
    /// answers `/healthz`; tried again a few times if it exits first.
    pub async fn start(&self, slot: &Slot) -> anyhow::Result<()> {
        let id = slot.id();
        let mut last = String::new();
        for attempt in 1..=START_ATTEMPTS {
            let n = self.incarnations.fetch_add(1, Ordering::Relaxed) + 1;
            let log = self.logs.join(format!("{id}.{n}.log"));
            let mut child = ChildProc::spawn(self.command(slot, &id), &log)?;
            lock(&self.logs_written).push(log.clone());
            let deadline = Instant::now() + START_TIMEOUT;
            let healthz = format!("{}/healthz", slot.http());
            let outcome = loop {
                if let Some(status) = child.poll() {
                    break Err(format!("exited at start ({status}); see {}", log.display()));
                }
                if let Ok(r) = self.http.get(&healthz).send().await {
                    if r.status().is_success() {
                        break Ok(());
                    }
                }
                if Instant::now() >= deadline {
                    child.kill();
                    break Err(format!(
                        "did not answer /healthz within {}s; see {}",
                        START_TIMEOUT.as_secs(),
                        log.display()
                    ));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            match outcome {
                Ok(()) => {
                    *lock(&slot.process) = Some(child);
                    let mut view = lock(&slot.view);
                    view.up = true;
                    view.stopped = false;
                    return Ok(());
                }
                Err(e) => {
                    last = e;
                    eprintln!("chaos: {id} (attempt {attempt}) {last}");
                    tokio::time::sleep(Duration::from_millis(500 * u64::from(attempt))).await;
                }
            }
        }
        bail!("{id} could not be started: {last}")
    }

    fn command(&self, slot: &Slot, id: &str) -> std::process::Command {
        let mut cmd = guarded_command(&self.pitboss);
        cmd.arg("serve").arg("--config-dir").arg(&self.config_dir);
        // Nothing from the caller's shell may change an instance's settings.
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("PITBOSS") {
                cmd.env_remove(key);
            }
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("PITBOSS__HTTP__HOST", "127.0.0.1")
            .env("PITBOSS__HTTP__PORT", slot.port.to_string())
            .env("PITBOSS__REDIS__URL", slot.proxy.url())
            .env("PITBOSS__INSTANCE__ID", id);
        cmd
    }

    /// SIGKILL, a moment down, then a start under the same id or a new one.
    pub async fn kill_and_restart(
        &self,
        slot: &Slot,
        down: Duration,
        new_id: bool,
    ) -> anyhow::Result<String> {
        let old = slot.id();
        if let Some(mut p) = slot.take_process() {
            p.kill();
        }
        tokio::time::sleep(down).await;
        if new_id {
            let g = slot.generation.fetch_add(1, Ordering::Relaxed) + 1;
            lock(&slot.view).id = format!("chaos-{}{g}", slot.letter);
        }
        self.start(slot).await?;
        Ok(if new_id {
            format!("{old} -> {}", slot.id())
        } else {
            old
        })
    }

    /// SIGSTOP for `pause`, then SIGCONT.
    pub async fn stop_and_continue(&self, slot: &Slot, pause: Duration) -> anyhow::Result<String> {
        let id = slot.id();
        self.signal(slot, Signal::SIGSTOP)?;
        lock(&slot.view).stopped = true;
        tokio::time::sleep(pause).await;
        let resumed = self.signal(slot, Signal::SIGCONT);
        lock(&slot.view).stopped = false;
        resumed?;
        Ok(id)
    }

    /// SIGTERM, the drain waited for, then a start under the same id.
    pub async fn term_and_restart(&self, slot: &Slot) -> anyhow::Result<String> {
        let id = slot.id();
        let mut note = id.clone();
        if let Some(mut p) = slot.take_process() {
            p.signal(Signal::SIGTERM)?;
            match p.wait_exit(Duration::from_secs(20)).await {
                Some(s) if s.success() => {}
                Some(s) => note = format!("{id} (exit after SIGTERM: {s})"),
                None => {
                    p.kill();
                    note = format!("{id} (no exit within 20 s of SIGTERM; killed)");
                }
            }
        }
        self.start(slot).await?;
        Ok(note)
    }

    fn signal(&self, slot: &Slot, sig: Signal) -> anyhow::Result<()> {
        match lock(&slot.process).as_mut() {
            Some(p) => p.signal(sig),
            None => bail!("{} is not running", slot.id()),
        }
    }

    /// Drains every instance (SIGTERM) and waits for each to exit.
    pub async fn stop_all(&self) {
        let mut draining = Vec::new();
        for slot in &self.slots {
            if let Some(mut p) = slot.take_process() {
                let _ = p.signal(Signal::SIGCONT);
                let _ = p.signal(Signal::SIGTERM);
                draining.push(p);
            }
        }
        for mut p in draining {
            if p.wait_exit(Duration::from_secs(20)).await.is_none() {
                p.kill();
            }
        }
    }
}
