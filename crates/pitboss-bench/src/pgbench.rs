//! Running `pgbench` as the baseline of a bench: a custom script with
//! prepared statements for a number of seconds, its transactions per second
//! read from its output.

use std::path::Path;
use std::process::Stdio;

use anyhow::{bail, Context as _};

/// Runs `pgbench` with `script` on `url` for `seconds` with `clients`
/// connections (two threads), each `defines` pair given as `--define`;
/// returns its transactions per second. A failed transaction fails the run.
pub async fn tps(
    pgbench: &Path,
    url: &str,
    clients: usize,
    seconds: u64,
    defines: &[(&str, usize)],
    script: &Path,
) -> anyhow::Result<f64> {
    let mut cmd = tokio::process::Command::new(pgbench);
    cmd.args(["--no-vacuum", "--protocol", "prepared"])
        .args(["--client", &clients.to_string()])
        .args(["--jobs", "2"])
        .args(["--time", &seconds.to_string()]);
    for (name, value) in defines {
        cmd.args(["--define", &format!("{name}={value}")]);
    }
    let out = cmd
        .arg("--file")
        .arg(script)
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .await
        .with_context(|| format!("run {} (Debian: postgresql-client)", pgbench.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "pgbench failed ({}): {}{}",
            out.status,
            stdout,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let failed = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("number of failed transactions: "))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0);
    if failed > 0 {
        bail!("pgbench: {failed} transactions failed:\n{stdout}");
    }
    stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("tps = "))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("no tps in pgbench's output:\n{stdout}"))
}
