//! Child processes the harness starts (`pitboss serve`, `redis-server`):
//! spawned so they die with the test process, their output captured line by
//! line, and signalled.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::Command;
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

/// Reads `pipe` line by line into `sink` (colour stripped), echoing each line
/// to stderr with `prefix` when one is given.
pub(super) fn spawn_reader<R: Read + Send + 'static>(
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

pub(super) fn send_signal(pid: u32, sig: Signal) -> nix::Result<()> {
    let pid = i32::try_from(pid).expect("pid fits in i32");
    kill(Pid::from_raw(pid), sig)
}
