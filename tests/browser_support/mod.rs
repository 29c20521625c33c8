//! What the browser test (`tests/browser.rs`) drives: Chromium through a
//! chromedriver of its own (installed by `scripts/browser-deps.sh` when
//! missing), and the opponent, a plain WebSocket client. Reading and
//! driving the pages is in `page`, the admin page's checks in `admin`.

pub mod admin;
pub mod page;

use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use fantoccini::{Client, ClientBuilder};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};

use crate::common::WsClient;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
pub const POLL: Duration = Duration::from_millis(100);

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn artifacts_dir() -> PathBuf {
    crate_dir().join("target").join("browser-artifacts")
}

fn browser_present() -> bool {
    Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists()
}

/// Chromium and chromedriver, installed by `scripts/browser-deps.sh` if
/// they are missing; an error that says what to do if that fails.
pub fn ensure_browser() -> std::result::Result<(), String> {
    if browser_present() {
        return Ok(());
    }
    let script = crate_dir().join("scripts").join("browser-deps.sh");
    eprintln!(
        "browser test: {CHROMIUM} or {CHROMEDRIVER} missing; running {}",
        script.display()
    );
    let out = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .output();
    if browser_present() {
        return Ok(());
    }
    let detail = match out {
        Ok(o) => format!(
            "{} exited with {}:\n{}\n{}",
            script.display(),
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => format!("could not run {}: {e}", script.display()),
    };
    Err(format!(
        "the browser test needs {CHROMIUM} and {CHROMEDRIVER} (Debian packages chromium and \
         chromium-driver) and they could not be installed. Run scripts/browser-deps.sh as root, \
         or set PITBOSS_SKIP_BROWSER=1 to skip this test.\n{detail}"
    ))
}

pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a free local port")
}

/// A chromedriver on a free port, in a process group of its own so that
/// dropping it also ends the Chromium it started.
pub struct Driver {
    child: Child,
    url: String,
    profile: PathBuf,
}

impl Driver {
    pub async fn start(artifacts: &Path) -> Result<Driver> {
        let port = free_port();
        let profile = std::env::temp_dir().join(format!(
            "pitboss-chromium-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&profile)
            .with_context(|| format!("create {}", profile.display()))?;
        let log = artifacts.join("chromedriver.log");
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", log.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .with_context(|| format!("spawn {CHROMEDRIVER}"))?;
        let mut driver = Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
            profile,
        };
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .context("build reqwest client")?;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(resp) = http.get(format!("{}/status", driver.url)).send().await {
                if let Ok(body) = resp.json::<Value>().await {
                    if body["value"]["ready"] == true {
                        return Ok(driver);
                    }
                }
            }
            if let Ok(Some(status)) = driver.child.try_wait() {
                bail!(
                    "chromedriver exited early ({status}); see {}",
                    log.display()
                );
            }
            if Instant::now() >= deadline {
                bail!(
                    "chromedriver did not answer on {} within 20 s; see {}",
                    driver.url,
                    log.display()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    pub async fn session(&self) -> Result<Client> {
        let mut caps = serde_json::Map::new();
        caps.insert("browserName".into(), json!("chrome"));
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": CHROMIUM,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--no-first-run",
                    "--window-size=1400,1000",
                    format!("--user-data-dir={}", self.profile.display()),
                ],
            }),
        );
        ClientBuilder::native()
            .capabilities(caps)
            .connect(&self.url)
            .await
            .context("start a Chromium session through chromedriver")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // The group is chromedriver's own (process_group(0)): it and the
            // browser it launched, nothing else.
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

// ---------------------------------------------------------------------------
// The opponent: a plain WebSocket client
// ---------------------------------------------------------------------------

/// Bob answers his own turns with check, else call, else fold, until told
/// to leave; then he leaves and returns once his `left` event arrives.
pub async fn bob_plays(
    mut bob: WsClient,
    table: String,
    seat: u64,
    leave: Arc<AtomicBool>,
) -> WsClient {
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut leaving = false;
    while Instant::now() < deadline {
        if leave.load(Ordering::SeqCst) && !leaving {
            bob.send(json!({"type": "leave", "table": table})).await;
            leaving = true;
        }
        let Some(v) = bob.recv_json(Duration::from_millis(200)).await else {
            if bob.closed.is_some() {
                break;
            }
            continue;
        };
        if leaving && v["kind"] == "left" && v["seat"] == seat {
            break;
        }
        if !leaving && v["kind"] == "turn" && v["seat"] == seat {
            let legal: Vec<&str> = v["legal"]
                .as_array()
                .map(|a| a.iter().filter_map(|l| l["action"].as_str()).collect())
                .unwrap_or_default();
            let action = ["check", "call", "fold"]
                .into_iter()
                .find(|a| legal.contains(a))
                .unwrap_or("fold");
            bob.send(json!({"type": "act", "table": table, "hand": v["hand"], "decision": v["decision"], "action": action}))
                .await;
        }
    }
    bob
}
