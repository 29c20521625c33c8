//! The binary's own surface: config errors, the token command, migrations
//! applied by several instances starting at once.

mod common;

use std::process::Command;

use common::{test_db, unique_env, Server, ServerConfig};

fn pitboss(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pitboss"));
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run pitboss")
}

#[test]
fn a_config_error_exits_non_zero_with_one_clear_line() {
    for (key, value) in [
        ("PITBOSS__LEASE__TTL_MS", "soon"),
        ("PITBOSS__LEASE__TTL_MS", "10"),
        ("PITBOSS__INSTANCE__ID", "a|b"),
        ("PITBOSS__INSTANCE__ENVIRONMENT", "has space"),
    ] {
        let out = pitboss(&["serve"], &[("PITBOSS_ENV", "test"), (key, value)]);
        assert!(!out.status.success(), "{key}={value} was accepted");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{key}={value}: {stderr}");
        assert!(
            lines[0].starts_with("config error"),
            "{key}={value}: {stderr}"
        );
    }
    let out = pitboss(&["serve"], &[("PITBOSS_ENV", "staging")]);
    assert!(!out.status.success());
}

#[test]
fn production_refuses_to_start_without_its_secrets() {
    let out = pitboss(&["serve"], &[("PITBOSS_ENV", "production")]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("PITBOSS__AUTH__SECRET"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn token_prints_a_token_for_valid_names_and_refuses_others() {
    let out = pitboss(&["token", "alice"], &[("PITBOSS_ENV", "test")]);
    assert!(out.status.success());
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(token.split('.').count(), 2, "{token}");
    let out = pitboss(&["token", "not a name"], &[("PITBOSS_ENV", "test")]);
    assert!(!out.status.success());
    let out = pitboss(&["frobnicate"], &[("PITBOSS_ENV", "test")]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage"));
}

#[tokio::test]
async fn instances_starting_together_on_a_fresh_database_migrate_once_and_both_serve() {
    let db = test_db().await;
    let env = unique_env();
    let cfg = ServerConfig::new(&db, &env);
    let (a, b, c) = tokio::join!(
        Server::start(cfg.clone().with_instance("inst-a")),
        Server::start(cfg.clone().with_instance("inst-b")),
        Server::start(cfg.with_instance("inst-c")),
    );
    for s in [&a, &b, &c] {
        let (status, _) = s.get("/readyz").await;
        assert_eq!(status, 200);
    }
    let pool = db.pool().await;
    let applied: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations")
        .fetch_one(&pool)
        .await
        .expect("migrations table");
    let files = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"))
        .expect("migrations dir")
        .count() as i64;
    assert_eq!(applied, files);
}
