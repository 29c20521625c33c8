//! The binary's command line, without a server: help, usage errors and a
//! missing admin token all end before any request is made.

use std::process::{Command, Output};

fn bots(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pitboss-bots"));
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run pitboss-bots")
}

#[test]
fn help_prints_the_usage_and_exits_zero() {
    let out = bots(&["--help"], &[]);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Usage: pitboss-bots"), "{stdout}");
    assert!(stdout.contains("--admin-token"), "{stdout}");
}

#[test]
fn without_an_admin_token_it_exits_2_saying_how_to_pass_one() {
    for env in [&[][..], &[("PITBOSS__ADMIN__TOKEN", "")]] {
        let out = bots(&["--hands", "1", "--url", "http://127.0.0.1:9"], env);
        assert_eq!(out.status.code(), Some(2), "{env:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("--admin-token") && stderr.contains("PITBOSS__ADMIN__TOKEN"),
            "{env:?}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
}

#[test]
fn a_bad_option_exits_2_with_the_reason_and_where_the_help_is() {
    let out = bots(&["--players", "11"], &[("PITBOSS__ADMIN__TOKEN", "t")]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: invalid value '11' for '--players <M>': must be 2..=10"),
        "{stderr}"
    );
    assert!(stderr.contains("--help"), "{stderr}");
}
