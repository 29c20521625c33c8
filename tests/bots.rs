//! `pitboss-bots` against a real server: the load generator plays whole
//! hands through the public API, leaves every seat at the end, and the chip
//! audit — its own and the server's — balances.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{Server, ServerConfig, WsClient};
use serde_json::{json, Value};
use tokio::sync::watch;

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
    run_bots_at(&server.http, args, limit).await
}

/// `run_bots` against `urls` (one URL, or several comma-separated).
async fn run_bots_at(urls: &str, args: &[&str], limit: Duration) -> BotsRun {
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
        .args(["--url", urls])
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

/// A client that watches `tables` through `server` without sitting, reading
/// everything it is sent until told to stop; gives its connection back.
fn watcher(
    server: &Server,
    tables: Vec<String>,
    stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<WsClient> {
    let url = server.ws_url(&common::mint_token("watcher"));
    tokio::spawn(async move {
        let mut c = WsClient::connect_url(&url).await.expect("watcher connects");
        for t in &tables {
            c.send(json!({"type": "join", "table": t})).await;
        }
        while !*stop.borrow() && c.closed.is_none() {
            c.recv_json(Duration::from_millis(100)).await;
        }
        c
    })
}

/// The tables of the environment, as any instance reads them from Postgres.
async fn tables(server: &Server) -> Vec<Value> {
    let (status, list) = server.admin_get("/admin/tables").await;
    assert_eq!(status, 200, "{list}");
    list["tables"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bots_play_through_a_rolling_restart_of_three_instances_and_nothing_is_lost() {
    let mut db = common::test_db().await;
    let env = common::unique_env();
    let ttl_ms = 1500;
    let cfg = ServerConfig::new(&db, &env)
        .with_ttl_ms(ttl_ms)
        .with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "2000")
        .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "100")
        .with_env("PITBOSS__SHUTDOWN__DRAIN_TIMEOUT_MS", "3000");
    let ids = ["roll-a", "roll-b", "roll-c"];
    let mut servers = Vec::new();
    for id in ids {
        servers.push(Server::start(cfg.clone().with_instance(id)).await);
    }
    let urls = servers
        .iter()
        .map(|s| s.http.clone())
        .collect::<Vec<_>>()
        .join(",");

    let bots = tokio::spawn(async move {
        run_bots_at(
            &urls,
            &[
                "--tables",
                "30",
                "--players",
                "2",
                "--duration",
                "40",
                "--no-progress",
                "--seed",
                "11",
            ],
            Duration::from_secs(150),
        )
        .await
    });
    // Every table created and dealing.
    let ready = common::eventually(Duration::from_secs(60), Duration::from_millis(250), || {
        let s = &servers[0];
        async move {
            let ts = tables(s).await;
            ts.len() == 30 && ts.iter().all(|t| t["hand_no"].as_u64() > Some(0))
        }
    })
    .await;
    assert!(ready, "30 tables dealing: {:?}", tables(&servers[0]).await);
    let all: Vec<String> = tables(&servers[0])
        .await
        .iter()
        .filter_map(|t| t["id"].as_str().map(String::from))
        .collect();
    for id in ids {
        assert!(
            tables(&servers[0]).await.iter().any(|t| t["owner"] == id),
            "the bots spread their tables: none on {id}"
        );
    }

    for (i, id) in ids.iter().enumerate() {
        let survivors: Vec<usize> = (0..3).filter(|j| *j != i).collect();
        // Clients of the instances that stay watch every table through them.
        let (stop_tx, stop_rx) = watch::channel(false);
        let watchers: Vec<_> = survivors
            .iter()
            .map(|j| watcher(&servers[*j], all.clone(), stop_rx.clone()))
            .collect();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = tables(&servers[survivors[0]]).await;
        let moving: Vec<(String, u64)> = before
            .iter()
            .filter(|t| t["owner"] == *id && t["state"] == "open")
            .map(|t| {
                (
                    t["id"].as_str().unwrap_or_default().to_string(),
                    t["fence"].as_u64().unwrap_or(0),
                )
            })
            .collect();
        assert!(!moving.is_empty(), "{id} hosts tables before its restart");

        servers[i].sigterm();
        let status = servers[i]
            .wait_exit(Duration::from_secs(20))
            .await
            .unwrap_or_else(|| panic!("{id} exits after its drain"));
        assert!(status.success(), "{id} exited {status}");
        let exited = std::time::Instant::now();
        let judge = &servers[survivors[0]];
        let rehosted =
            common::eventually(Duration::from_secs(10), Duration::from_millis(20), || {
                let moving = &moving;
                async move {
                    let now = tables(judge).await;
                    moving.iter().all(|(t, fence)| {
                        now.iter().any(|v| {
                            v["id"] == t.as_str()
                                && v["state"] == "open"
                                && v["owner"] != *id
                                && v["fence"].as_u64() > Some(*fence)
                        })
                    })
                }
            })
            .await;
        let took = exited.elapsed();
        assert!(
            rehosted,
            "{id}'s tables were hosted again: {:?}",
            tables(judge).await
        );
        println!(
            "{id}: {} tables hosted elsewhere {took:?} after it exited",
            moving.len()
        );
        assert!(
            took <= Duration::from_millis(1500),
            "{id}'s {} tables were hosted elsewhere {took:?} after its exit",
            moving.len()
        );

        // The watchers on the other instances kept their connections and saw
        // each of the tables' new hosting: a snapshot, or, caught up from the
        // journal, its next event, which comes within an action clock (2 s).
        tokio::time::sleep(Duration::from_millis(3000)).await;
        let _ = stop_tx.send(true);
        for w in watchers {
            let c = w.await.expect("watcher task");
            assert!(
                c.closed.is_none(),
                "a client of a surviving instance was disconnected: {:?}",
                c.closed
            );
            for (t, fence) in &moving {
                // Each hosting numbers its frames from its fence's epoch: a
                // snapshot of the new hosting, or its events after a
                // catch-up from the journal.
                assert!(
                    c.seen.iter().any(|v| v["table"] == t.as_str()
                        && v["seq"].as_u64().map(|s| s >> 32) > Some(*fence)),
                    "a watcher saw {t}'s new hosting (above fence {fence}): {:?}",
                    c.seen
                        .iter()
                        .filter(|v| v["table"] == t.as_str())
                        .rev()
                        .take(5)
                        .collect::<Vec<_>>()
                );
            }
        }
        // The same id on the same port: the bots' URLs stay good.
        let port = servers[i].addr.port().to_string();
        servers[i] = Server::start(
            cfg.clone()
                .with_instance(id)
                .with_env("PITBOSS__HTTP__PORT", &port),
        )
        .await;
    }

    let run = bots.await.expect("bots task");
    eprintln!("{}", run.dump());
    assert!(run.status.success(), "bots failed:\n{}", run.dump());
    assert_eq!(run.field("delta"), Some("0"), "{}", run.dump());
    assert_eq!(run.field("seats left"), Some("0"), "{}", run.dump());

    // Postgres: every chip accounted for, no hand applied twice, and each
    // table's fences strictly increasing from hosting to hosting, with hands
    // written under non-decreasing fences.
    let audit = servers[0].audit().await;
    assert_eq!(audit["delta"], 0, "{audit}");
    let pool = db.pool().await;
    let twice: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM (SELECT table_id, hand_no, player FROM ledger WHERE kind = 'hand' \
         GROUP BY 1, 2, 3 HAVING COUNT(*) > 1) d",
    )
    .fetch_one(&pool)
    .await
    .expect("ledger");
    assert_eq!(twice, 0, "a hand applied twice");
    let backwards: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM hands a JOIN hands b ON a.table_id = b.table_id \
         AND b.hand_no > a.hand_no AND b.fence < a.fence",
    )
    .fetch_one(&pool)
    .await
    .expect("hands");
    assert_eq!(backwards, 0, "a later hand written under an older fence");
    let not_increasing: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM (SELECT fence, lag(fence) OVER (PARTITION BY table_id ORDER BY id) AS prev \
         FROM table_events WHERE to_state = 'open' AND fence IS NOT NULL) e WHERE fence <= prev",
    )
    .fetch_one(&pool)
    .await
    .expect("events");
    assert_eq!(not_increasing, 0, "a hosting whose fence did not rise");

    drop(servers);
    db.drop_db().await;
}
