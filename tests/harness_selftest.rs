//! Checks of the test harness itself, on the parts that need no pitboss
//! server: if these fail, every black-box test's failure is suspect.

mod common;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::*;
use sqlx::{Connection, PgConnection};

async fn database_exists(name: &str) -> bool {
    let mut admin = PgConnection::connect(&admin_pg_url())
        .await
        .expect("connect to the admin database");
    let found: Option<i32> = sqlx::query_scalar("SELECT 1 FROM pg_database WHERE datname = $1")
        .bind(name)
        .fetch_optional(&mut admin)
        .await
        .expect("query pg_database");
    found.is_some()
}

#[tokio::test]
async fn test_db_is_fresh_usable_and_dropped() {
    let mut db = test_db().await;
    assert!(db.name.starts_with("pitboss_t_"), "name {}", db.name);
    assert!(db.url.ends_with(&format!("/{}", db.name)), "url {}", db.url);
    assert!(database_exists(&db.name).await);

    let pool = db.pool().await;
    let current: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(&pool)
        .await
        .expect("query the test database");
    assert_eq!(current, db.name);
    let tables: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'",
    )
    .fetch_one(&pool)
    .await
    .expect("count tables");
    assert_eq!(tables, 0, "a fresh database has no tables");

    // drop_db must succeed even with the pool's connection still open.
    db.drop_db().await;
    assert!(!database_exists(&db.name).await, "{} still exists", db.name);
    // Idempotent.
    db.drop_db().await;
}

#[tokio::test]
async fn test_db_is_dropped_when_the_handle_drops() {
    if std::env::var_os("PITBOSS_TEST_KEEP_DB").is_some() {
        return;
    }
    let name = {
        let db = test_db().await;
        let pool = db.pool().await;
        sqlx::query("SELECT 1")
            .execute(&pool)
            .await
            .expect("use the database");
        db.name.clone()
    };
    assert!(!database_exists(&name).await, "{name} outlived its TestDb");
}

#[tokio::test]
async fn two_test_dbs_are_distinct() {
    let (mut a, mut b) = tokio::join!(test_db(), test_db());
    assert_ne!(a.name, b.name);
    a.drop_db().await;
    b.drop_db().await;
}

#[tokio::test]
async fn private_redis_stops_and_starts_again_on_its_port() {
    let mut redis = PrivateRedis::start().await;
    let url = redis.url();
    assert_eq!(url, format!("redis://127.0.0.1:{}", redis.port));
    assert_ne!(redis.port, 6379);

    let mut conn = redis_conn(&url).await;
    let pong: String = redis::cmd("PING")
        .query_async(&mut conn)
        .await
        .expect("PING");
    assert_eq!(pong, "PONG");
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query_async(&mut conn)
        .await
        .expect("SET");
    drop(conn);

    redis.stop().await;
    assert!(!redis.is_running());
    assert!(!redis_answers(&url, Duration::from_millis(500)).await);

    let port = redis.port;
    redis.start_again().await;
    assert_eq!(redis.port, port, "same port after start_again");
    assert!(redis_answers(&url, Duration::from_secs(2)).await);
    let mut conn = redis_conn(&url).await;
    let v: Option<String> = redis::cmd("GET")
        .arg("k")
        .query_async(&mut conn)
        .await
        .expect("GET");
    assert_eq!(v, None, "a private redis keeps nothing across restarts");

    redis.kill().await;
    assert!(!redis_answers(&url, Duration::from_millis(500)).await);
    redis.start_again().await;
    assert!(redis_answers(&url, Duration::from_secs(2)).await);
}

#[tokio::test]
async fn private_redis_pause_makes_it_hang_and_resume_brings_it_back() {
    let redis = PrivateRedis::start().await;
    let url = redis.url();
    redis.pause();
    let started = Instant::now();
    assert!(!redis_answers(&url, Duration::from_millis(300)).await);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "timeout honoured"
    );
    redis.resume();
    assert!(
        eventually(Duration::from_secs(5), Duration::from_millis(50), || {
            redis_answers(&url, Duration::from_millis(500))
        })
        .await
    );
}

#[tokio::test]
async fn private_redis_process_dies_with_its_handle() {
    let redis = PrivateRedis::start().await;
    let pid = redis.pid().expect("a running child");
    let url = redis.url();
    drop(redis);
    assert!(!redis_answers(&url, Duration::from_millis(500)).await);
    // Reaped, not a zombie: /proc no longer has it (or it is someone else's
    // pid by now, which is not a redis-server on our port).
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    assert!(!comm.starts_with("redis-server"), "pid {pid} still {comm}");
}

#[tokio::test]
async fn clear_env_keys_removes_only_that_environment() {
    let redis = PrivateRedis::start().await;
    let url = redis.url();
    let (mine, other) = (unique_env(), unique_env());
    let mut conn = redis_conn(&url).await;
    for key in [
        lease_key(&mine, "1"),
        fence_key(&mine, "1"),
        lease_key(&other, "1"),
    ] {
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg("x")
            .query_async(&mut conn)
            .await
            .expect("SET");
    }
    clear_env_keys(&url, &mine).await;
    let left: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .expect("KEYS");
    assert_eq!(left, vec![lease_key(&other, "1")]);
}

#[test]
fn unique_env_is_unique_and_well_formed() {
    let envs: HashSet<String> = (0..2000).map(|_| unique_env()).collect();
    assert_eq!(envs.len(), 2000);
    for env in &envs {
        assert_eq!(env.len(), 10, "{env}");
        assert!(env.starts_with("t_"), "{env}");
        assert!(env[2..].chars().all(|c| c.is_ascii_hexdigit()), "{env}");
    }
}

#[test]
fn contract_key_names() {
    assert_eq!(lease_key("prod", "42"), "lease:table:prod:{42}");
    assert_eq!(fence_key("prod", "42"), "fence:table:prod:{42}");
}

#[test]
fn addr_is_found_in_every_log_format() {
    let v4: SocketAddr = "127.0.0.1:43121".parse().expect("literal");
    let cases = [
        "2025-01-01T00:00:00.000Z  INFO pitboss::http: listening addr=127.0.0.1:43121",
        "2025-01-01T00:00:00Z INFO listening addr=127.0.0.1:43121 workers=2",
        "\u{1b}[2m2025-01-01\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m listening \u{1b}[3maddr\u{1b}[0m\u{1b}[2m=\u{1b}[0m127.0.0.1:43121",
        "  2025-01-01T00:00:00Z  INFO pitboss: listening, addr: 127.0.0.1:43121",
        r#"{"timestamp":"x","level":"INFO","fields":{"message":"listening","addr":"127.0.0.1:43121"},"target":"pitboss"}"#,
        r#"{"level":"INFO","message":"listening","addr":"127.0.0.1:43121"}"#,
        r#"INFO listening addr="127.0.0.1:43121""#,
    ];
    for line in cases {
        assert_eq!(parse_addr_field(line), Some(v4), "{line:?}");
    }
    let v6: SocketAddr = "[::1]:8080".parse().expect("literal");
    assert_eq!(parse_addr_field("INFO listening addr=[::1]:8080"), Some(v6));
}

#[test]
fn addr_ignores_other_fields_and_non_addresses() {
    let none = [
        "INFO connected peer_addr=10.0.0.1:5555",
        "INFO db local_addr=127.0.0.1:5432",
        "INFO address=127.0.0.1:1",
        "INFO addr=localhost:8080",
        "INFO addr= ",
        "INFO starting",
        "",
    ];
    for line in none {
        assert_eq!(parse_addr_field(line), None, "{line:?}");
    }
    // The right field wins even after a look-alike on the same line.
    let line = "INFO peer_addr=10.0.0.1:5555 addr=127.0.0.1:9000";
    assert_eq!(
        parse_addr_field(line),
        Some("127.0.0.1:9000".parse().expect("literal"))
    );
}

#[test]
fn strip_ansi_leaves_plain_text() {
    assert_eq!(strip_ansi("\u{1b}[1;32mok\u{1b}[0m done"), "ok done");
    assert_eq!(strip_ansi("plain"), "plain");
}

#[test]
fn with_database_replaces_only_the_path() {
    assert_eq!(
        with_database("postgres://postgres@127.0.0.1:5432/postgres", "x"),
        "postgres://postgres@127.0.0.1:5432/x"
    );
    assert_eq!(
        with_database("postgres://u:p@h:1/db?sslmode=disable", "x"),
        "postgres://u:p@h:1/x?sslmode=disable"
    );
    assert_eq!(with_database("postgres://h", "x"), "postgres://h/x");
}

#[tokio::test]
async fn eventually_polls_until_true_or_timeout() {
    let started = Instant::now();
    let ok = eventually(
        Duration::from_secs(5),
        Duration::from_millis(10),
        || async { started.elapsed() > Duration::from_millis(50) },
    )
    .await;
    assert!(ok);

    let started = Instant::now();
    let never = eventually(
        Duration::from_millis(100),
        Duration::from_millis(10),
        || async { false },
    )
    .await;
    assert!(!never);
    assert!(started.elapsed() >= Duration::from_millis(100));
    assert!(started.elapsed() < Duration::from_secs(2));
}
