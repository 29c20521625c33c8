//! `pitboss-bots` against a real server: the load generator plays whole
//! hands through the public API, leaves every seat at the end, and the chip
//! audit — its own and the server's — balances.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{Server, ServerConfig};
use serde_json::Value;

/// The `pitboss-bots` binary: another package of the workspace, so cargo
/// names no `CARGO_BIN_EXE_` for it here; it is built beside the server.
fn bots_bin() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_pitboss")).with_file_name("pitboss-bots");
    assert!(
        bin.is_file(),
        "{} is missing: build it with cargo build --workspace \
         (scripts/test.sh runs cargo nextest run --workspace --all-targets, which does)",
        bin.display()
    );
    bin
}

/// What one `pitboss-bots` run printed and how it ended.
struct BotsRun {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl BotsRun {
    /// The value of a `key: value` summary line.
    fn field(&self, key: &str) -> Option<&str> {
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(": "))
            .map(str::trim)
    }

    fn dump(&self) -> String {
        format!(
            "status {}\n--- stdout\n{}--- stderr\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// Runs the real `pitboss-bots` binary against `server`, with the test admin
/// token and nothing inherited from the developer's `PITBOSS*` variables;
/// killed if it outlives `limit`.
async fn run_bots(server: &Server, args: &[&str], limit: Duration) -> BotsRun {
    let mut cmd = Command::new(bots_bin());
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("PITBOSS") {
            cmd.env_remove(key);
        }
    }
    cmd.env("PITBOSS__ADMIN__TOKEN", common::ADMIN_TOKEN)
        .args(["--url", &server.http])
        .args(args);
    let mut child = cmd.spawn().expect("spawn pitboss-bots");
    // Readers on their own threads, so a full pipe never blocks the child.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut out = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut out);
            }
            out
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for pitboss-bots") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let status = child.wait().expect("reap pitboss-bots");
            let run = BotsRun {
                status,
                stdout: out.join().unwrap_or_default(),
                stderr: err.join().unwrap_or_default(),
            };
            panic!(
                "pitboss-bots still ran after {}s\n{}",
                limit.as_secs(),
                run.dump()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    BotsRun {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bots_play_thirty_hands_leave_every_seat_and_the_audit_balances() {
    let mut db = common::test_db().await;
    let env = common::unique_env();
    let server = Server::start(
        ServerConfig::new(&db, &env)
            .with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "300")
            .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "20"),
    )
    .await;

    let run = run_bots(
        &server,
        &[
            "--tables",
            "2",
            "--players",
            "3",
            "--hands",
            "30",
            "--no-progress",
            "--seed",
            "7",
        ],
        Duration::from_secs(50),
    )
    .await;
    eprintln!("{}", run.dump());
    assert!(run.status.success(), "bots failed:\n{}", run.dump());
    let hands: u64 = run
        .field("hands")
        .and_then(|h| h.parse().ok())
        .unwrap_or_else(|| panic!("no hands line:\n{}", run.dump()));
    assert!(hands >= 30, "only {hands} hands:\n{}", run.dump());
    assert_eq!(run.field("delta"), Some("0"), "{}", run.dump());
    assert_eq!(run.field("protocol errors"), Some("0"), "{}", run.dump());
    assert_eq!(run.field("seats left"), Some("0"), "{}", run.dump());
    assert_eq!(run.field("bots"), Some("6"), "{}", run.dump());

    // The server's own view: nobody seated, every granted chip in a wallet.
    let (status, list) = server.admin_get("/admin/tables").await;
    assert_eq!(status, 200, "{list}");
    let tables = list["tables"].as_array().cloned().unwrap_or_default();
    assert_eq!(tables.len(), 2, "{list}");
    for t in &tables {
        assert_eq!(t["seats"], Value::Array(vec![]), "seat still taken: {t}");
        assert!(
            t["hand_no"].as_u64().unwrap_or(0) > 0,
            "no hand played: {t}"
        );
    }
    let audit = server.audit().await;
    assert_eq!(audit["delta"], 0, "{audit}");
    assert_eq!(audit["stacks"], 0, "{audit}");
    assert!(audit["granted"].as_i64().unwrap_or(0) > 0, "{audit}");
    assert_eq!(audit["wallets"], audit["granted"], "{audit}");

    drop(server);
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bots_with_a_wrong_admin_token_fail_with_a_clear_message() {
    let mut db = common::test_db().await;
    let env = common::unique_env();
    let server = Server::start(ServerConfig::new(&db, &env)).await;

    let run = run_bots(
        &server,
        &[
            "--admin-token",
            "not-the-token",
            "--hands",
            "5",
            "--no-progress",
        ],
        Duration::from_secs(30),
    )
    .await;
    assert!(!run.status.success(), "bots succeeded:\n{}", run.dump());
    assert!(
        run.stderr.contains("admin token") && run.stderr.contains("401"),
        "no clear reason on stderr:\n{}",
        run.dump()
    );
    // It stopped before creating anything.
    let (status, list) = server.admin_get("/admin/tables").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["tables"], Value::Array(vec![]), "{list}");

    drop(server);
    db.drop_db().await;
}
