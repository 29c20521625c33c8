//! Child processes the harness starts (`pitboss serve`, `redis-server`):
//! spawned so they die with the test process, their output captured line by
//! line, signalled, and killed and reaped when their handle drops.

use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking test thread must not turn every later Drop into a second
    // panic: the data behind these locks stays valid after a panic.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A command for a long-lived child that dies with the test process, even
/// when the test runner kills that process and no `Drop` runs (a timed-out
/// test must not leave servers behind). `setpriv` (util-linux) sets the
/// parent-death signal and then execs the program, so the pid is the
/// program's own; where it is missing the child is started plainly.
pub(super) fn guarded_command(program: &str) -> Command {
    const SETPRIV: &str = "/usr/bin/setpriv";
    if Path::new(SETPRIV).exists() {
        let mut cmd = Command::new(SETPRIV);
        cmd.args(["--pdeathsig", "KILL", "--", program]);
        cmd
    } else {
        Command::new(program)
    }
}

pub(super) fn send_signal(pid: u32, sig: Signal) -> nix::Result<()> {
    let pid = i32::try_from(pid).expect("pid fits in i32");
    kill(Pid::from_raw(pid), sig)
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

/// Everything a child printed (stdout and stderr, colour stripped), one
/// entry per line. Clones share the lines, so the output of a restarted
/// child can go on in the same log.
#[derive(Clone, Default)]
pub(super) struct Output(Arc<Mutex<Vec<String>>>);

impl Output {
    pub(super) fn lines(&self) -> Vec<String> {
        lock(&self.0).clone()
    }

    pub(super) fn contains(&self, needle: &str) -> bool {
        lock(&self.0).iter().any(|l| l.contains(needle))
    }

    /// The first line from `*from` on for which `f` gives a value; `*from`
    /// moves past every line looked at, so the next call reads only newer
    /// ones.
    pub(super) fn scan<T>(&self, from: &mut usize, f: impl FnMut(&str) -> Option<T>) -> Option<T> {
        let lines = lock(&self.0);
        let hit = lines[*from..].iter().map(String::as_str).find_map(f);
        *from = lines.len();
        hit
    }

    /// Reads `pipe` line by line into this output, echoing each line to
    /// stderr with `prefix` when one is given.
    fn read_from<R: Read + Send + 'static>(
        &self,
        pipe: R,
        prefix: Option<String>,
    ) -> JoinHandle<()> {
        let sink = self.0.clone();
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
}

/// A running child. Dropping it kills and reaps it (see `kill`).
pub(super) struct Process {
    child: Child,
    status: Option<ExitStatus>,
}

impl Process {
    /// Spawns `cmd` with no stdin and both output streams read into
    /// `output` (echoed to stderr under `echo`, if given); the reader
    /// threads end when the child's pipes close.
    pub(super) fn spawn(
        cmd: &mut Command,
        output: &Output,
        echo: Option<String>,
    ) -> io::Result<(Process, Vec<JoinHandle<()>>)> {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let mut readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            readers.push(output.read_from(out, echo.clone()));
        }
        if let Some(err) = child.stderr.take() {
            readers.push(output.read_from(err, echo));
        }
        let process = Process {
            child,
            status: None,
        };
        Ok((process, readers))
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status once the child has exited (it is reaped then), else
    /// `None`.
    pub(super) fn poll(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            if let Ok(Some(s)) = self.child.try_wait() {
                self.status = Some(s);
            }
        }
        self.status
    }

    /// Sends `sig` unless the child has exited: once reaped, its pid may
    /// belong to someone else.
    pub(super) fn signal(&mut self, sig: Signal) -> nix::Result<()> {
        if self.poll().is_some() {
            return Ok(());
        }
        send_signal(self.pid(), sig)
    }

    /// Kills and reaps the child unless it has exited. SIGKILL ends a
    /// stopped process too, but a SIGCONT first keeps the order of events
    /// the same on every kernel.
    pub(super) fn kill(&mut self) {
        if self.poll().is_some() {
            return;
        }
        let _ = send_signal(self.pid(), Signal::SIGCONT);
        let _ = self.child.kill();
        if let Ok(s) = self.child.wait() {
            self.status = Some(s);
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}
