//! What the bench measures beside the bots: a WebSocket ping → pong
//! baseline through the same server, and a reading every second of the
//! server's act histogram and of the CPU time of the server, of Postgres
//! and of the bots; and the windows, shares of a core and quantiles drawn
//! from them.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use futures::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;

use crate::instance::{histogram_buckets, usage};

use super::ACTION_HISTOGRAM;

/// Pings through the server every 100 ms (half the server's default frame
/// rate limit) until told to stop; the round trips measured.
pub(super) async fn ping_baseline(
    url: String,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<Vec<(u128, Duration)>> {
    let (mut ws, _) = tokio_tungstenite::connect_async(url.as_str())
        .await
        .context("the baseline's connection")?;
    let mut rtts = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = tick.tick() => {}
        }
        let sent = Instant::now();
        let sent_ms = unix_now_ms();
        ws.send(Message::Ping(b"bench".to_vec())).await?;
        let pong = async {
            loop {
                match ws.next().await {
                    Some(Ok(Message::Pong(_))) => return Ok(()),
                    Some(Ok(_)) => continue,
                    other => bail!("the baseline's connection ended: {other:?}"),
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(10), pong)
            .await
            .context("no pong within 10 s")??;
        rtts.push((sent_ms, sent.elapsed()));
    }
    let _ = ws.close(None).await;
    Ok(rtts)
}

fn unix_now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// One reading, every second of the run.
pub(super) struct Sample {
    at_ms: u128,
    /// The server's act histogram, cumulative buckets.
    pub(super) buckets: Vec<(f64, f64)>,
    /// CPU time so far, in seconds: the server, the run database's Postgres
    /// backends (those on this host), the bots.
    cpu: [f64; 3],
}

/// What the sampler reads.
pub(super) struct Probe {
    pub(super) http: String,
    pub(super) server: u32,
    pub(super) bots: Option<u32>,
    pub(super) pg_url: String,
    pub(super) database: String,
    pub(super) ticks: u64,
}

/// Reads the server's act histogram and the CPU time of the server, of
/// Postgres and of the bots every second until told to stop, so that each
/// phase of the run can be told from the rest.
pub(super) async fn sample(p: Probe, mut stop: tokio::sync::watch::Receiver<bool>) -> Vec<Sample> {
    use sqlx::Connection as _;
    let mut pg = sqlx::PgConnection::connect(&p.pg_url).await.ok();
    // Backends that ended keep the CPU they had at their last reading.
    let mut backends: std::collections::HashMap<i32, f64> = Default::default();
    let mut samples = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let cpu_of = |pid: u32| usage(pid, p.ticks).map_or(f64::NAN, |u| u.cpu.as_secs_f64());
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = tick.tick() => {}
        }
        let at_ms = unix_now_ms();
        let Ok(buckets) = histogram_buckets(&p.http, ACTION_HISTOGRAM).await else {
            continue;
        };
        if let Some(conn) = pg.as_mut() {
            let pids: Vec<i32> =
                sqlx::query_scalar("SELECT pid FROM pg_stat_activity WHERE datname = $1")
                    .bind(&p.database)
                    .fetch_all(conn)
                    .await
                    .unwrap_or_default();
            for pid in pids {
                if let Ok(u) = usage(pid as u32, p.ticks) {
                    backends.insert(pid, u.cpu.as_secs_f64());
                }
            }
        }
        let postgres = if backends.is_empty() {
            f64::NAN
        } else {
            backends.values().sum()
        };
        let bots = p.bots.map_or(f64::NAN, cpu_of);
        samples.push(Sample {
            at_ms,
            buckets,
            cpu: [cpu_of(p.server), postgres, bots],
        });
    }
    samples
}

/// The first and the last sample within `[from, until)` (unix ms); `None`
/// when the window holds fewer than two.
pub(super) fn window(samples: &[Sample], from: u128, until: u128) -> Option<(&Sample, &Sample)> {
    let inside = |s: &&Sample| s.at_ms >= from && s.at_ms < until;
    let first = samples.iter().find(inside)?;
    let last = samples.iter().rev().find(inside)?;
    (!std::ptr::eq(first, last)).then_some((first, last))
}

/// Share of one core each of server, Postgres and bots used between two
/// samples.
pub(super) fn cores(a: &Sample, b: &Sample) -> [f64; 3] {
    let secs = (b.at_ms.saturating_sub(a.at_ms)) as f64 / 1000.0;
    [0, 1, 2].map(|i| (b.cpu[i] - a.cpu[i]) / secs)
}

pub(super) fn quantile_ms(xs: &mut [Duration], q: f64) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort();
    let i = ((xs.len() as f64 - 1.0) * q).round() as usize;
    xs[i].as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instance::bucket_difference;

    #[test]
    fn a_window_is_the_difference_of_its_first_and_last_sample_inside() {
        let at = |at_ms: u128, count: f64, cpu: f64| Sample {
            at_ms,
            buckets: vec![(0.001, count), (f64::INFINITY, count)],
            cpu: [cpu; 3],
        };
        let samples = [
            at(1_000, 5.0, 1.0),
            at(2_000, 7.0, 1.5),
            at(3_000, 17.0, 2.5),
            at(4_000, 30.0, 4.0),
        ];
        let (a, b) = window(&samples, 1_500, 3_500).expect("two samples inside");
        assert_eq!((a.at_ms, b.at_ms), (2_000, 3_000));
        assert_eq!(
            bucket_difference(&b.buckets, &a.buckets),
            vec![(0.001, 10.0), (f64::INFINITY, 10.0)]
        );
        assert_eq!(cores(a, b), [1.0; 3], "one CPU second in one second");
        assert!(window(&samples, 1_500, 2_500).is_none(), "one sample only");
    }
}
