//! Child processes (`pitboss serve`, `redis-server`, `pitboss-bots`): spawned
//! so they die with this process, their output written to a log file,
//! signalled by pid, and killed and reaped when their handle drops.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// `setpriv` from util-linux, if it is on PATH: it sets the parent-death
/// signal and then execs the program, so a child outlives neither a crash
/// nor a SIGKILL of the harness, and its pid stays the program's own.
fn setpriv() -> Option<&'static Path> {
    static FOUND: OnceLock<Option<PathBuf>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let path = std::env::var_os("PATH")?;
            std::env::split_paths(&path)
                .map(|dir| dir.join("setpriv"))
                .find(|p| p.is_file())
        })
        .as_deref()
}

/// A command for `program` that dies with this process where `setpriv` is
/// available (a plain command otherwise).
pub fn guarded_command(program: &Path) -> Command {
    match setpriv() {
        Some(sp) => {
            let mut cmd = Command::new(sp);
            cmd.args(["--pdeathsig", "KILL", "--"]).arg(program);
            cmd
        }
        None => Command::new(program),
    }
}

/// Pids of the children still running, so an interrupted run can end them
/// all even where tasks still hold their handles.
static LIVE: Mutex<Vec<u32>> = Mutex::new(Vec::new());

fn live() -> std::sync::MutexGuard<'static, Vec<u32>> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// SIGKILLs every child still running (continued first, if stopped).
pub fn kill_all() {
    for pid in live().drain(..) {
        if let Ok(pid) = i32::try_from(pid) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

/// A running child whose stdout and stderr go to one log file.
pub struct ChildProc {
    child: Child,
    status: Option<ExitStatus>,
    pub log: PathBuf,
}

impl ChildProc {
    /// Spawns `cmd` with no stdin, its output appended to `log`.
    pub fn spawn(mut cmd: Command, log: &Path) -> anyhow::Result<ChildProc> {
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening log file {}", log.display()))?;
        let err = out.try_clone().context("duplicating a log file handle")?;
        let program = format!("{:?}", cmd.get_program());
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .with_context(|| format!("starting {program}"))?;
        live().push(child.id());
        Ok(ChildProc {
            child,
            status: None,
            log: log.to_path_buf(),
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status once the child has exited (it is reaped then).
    pub fn poll(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            if let Ok(Some(s)) = self.child.try_wait() {
                self.status = Some(s);
                let pid = self.pid();
                live().retain(|p| *p != pid);
            }
        }
        self.status
    }

    /// Sends `sig` unless the child has exited: once reaped, its pid may
    /// belong to another process.
    pub fn signal(&mut self, sig: Signal) -> anyhow::Result<()> {
        if self.poll().is_some() {
            return Ok(());
        }
        let pid = i32::try_from(self.pid()).context("pid out of range")?;
        kill(Pid::from_raw(pid), sig).with_context(|| format!("{sig} to pid {pid}"))
    }

    /// Waits up to `timeout` for the child to exit.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.poll() {
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Kills and reaps the child unless it has exited. A stopped process
    /// is continued first, so it dies the same way on every kernel.
    pub fn kill(&mut self) {
        if self.poll().is_some() {
            return;
        }
        let _ = self.signal(Signal::SIGCONT);
        let _ = self.child.kill();
        if let Ok(s) = self.child.wait() {
            self.status = Some(s);
        }
        let pid = self.pid();
        live().retain(|p| *p != pid);
    }
}

impl Drop for ChildProc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A TCP port that was free a moment ago on loopback. Another process may
/// take it in between, so whoever binds it retries with a new one.
pub fn free_port() -> anyhow::Result<u16> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").context("binding 127.0.0.1:0 for a port")?;
    Ok(listener.local_addr()?.port())
}
