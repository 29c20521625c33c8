//! Watches the run while it goes: who owns each table (from the admin API),
//! what each instance reports on `/metrics`, how many hands Postgres has
//! recorded, and instances that exit without being told to. Prints a
//! progress line every few seconds.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use sqlx::PgPool;

use crate::faults::Faults;
use crate::fleet::{lock, Fleet};

const TICK: Duration = Duration::from_secs(1);
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// One instance's gauges and counters, as last scraped.
#[derive(Debug, Clone, Default)]
pub struct Scrape {
    pub hosted: f64,
    pub paused: f64,
    pub frozen: f64,
}

/// What the monitor has seen; read by the faults (who owns what) and the
/// report (instances that died on their own).
#[derive(Default)]
pub struct Seen {
    /// table id → owner instance id, as of the last successful read.
    pub owners: Mutex<HashMap<String, String>>,
    /// table id → state.
    pub states: Mutex<HashMap<String, String>>,
    pub scrapes: Mutex<BTreeMap<String, Scrape>>,
    /// Instances that exited without being told to: what, and their log.
    pub unexpected_exits: Mutex<Vec<(String, String)>>,
    pub hands: Mutex<i64>,
}

impl Seen {
    /// Tables owned by `instance` as last seen.
    pub fn tables_of(&self, instance: &str) -> Vec<String> {
        lock(&self.owners)
            .iter()
            .filter(|(_, o)| o.as_str() == instance)
            .map(|(t, _)| t.clone())
            .collect()
    }

    pub fn owner_of(&self, table: &str) -> Option<String> {
        lock(&self.owners).get(table).cloned()
    }
}

pub struct Monitor {
    pub seen: Arc<Seen>,
    pub stop: Arc<AtomicBool>,
}

/// Sums every sample of `name` (all label sets) in Prometheus text.
pub fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            // `name{…} v` or `name v`, not `name_more …`.
            let rest = match rest.chars().next()? {
                '{' => &rest[rest.find('}')? + 1..],
                ' ' => rest,
                _ => return None,
            };
            rest.split_whitespace().next()?.parse::<f64>().ok()
        })
        .sum()
}

/// The sample of `name` whose labels contain `label` (e.g. `state="frozen"`).
pub fn metric_with(text: &str, name: &str, label: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

impl Monitor {
    pub fn new() -> Monitor {
        Monitor {
            seen: Arc::new(Seen::default()),
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Runs until `stop` is set.
    pub async fn run(
        &self,
        fleet: Arc<Fleet>,
        faults: Arc<Faults>,
        pool: PgPool,
        admin_token: String,
    ) {
        let http = match reqwest::Client::builder()
            .timeout(Duration::from_millis(900))
            .build()
        {
            Ok(c) => c,
            Err(e) => {
                eprintln!("chaos: monitor: no HTTP client: {e}");
                return;
            }
        };
        let started = Instant::now();
        let mut last_progress = Instant::now();
        let mut hands_then = 0i64;
        while !self.stop.load(Ordering::Relaxed) {
            tokio::time::sleep(TICK).await;
            self.restart_the_dead(&fleet, &faults).await;
            self.read_tables(&fleet, &http, &admin_token).await;
            self.scrape(&fleet, &http).await;
            if last_progress.elapsed() >= PROGRESS_EVERY {
                last_progress = Instant::now();
                let hands: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM hands")
                    .fetch_one(&pool)
                    .await
                    .unwrap_or(hands_then);
                *lock(&self.seen.hands) = hands;
                println!(
                    "chaos: {:>6.1}s  {}  hands {hands} (+{})  {}",
                    started.elapsed().as_secs_f64(),
                    faults.progress(),
                    hands - hands_then,
                    self.tables_line(&fleet),
                );
                hands_then = hands;
            }
        }
    }

    /// An instance that exited without being told to is a finding: it is
    /// recorded, and started again so the run goes on.
    async fn restart_the_dead(&self, fleet: &Fleet, faults: &Faults) {
        for slot in &fleet.slots {
            // A slot a fault is working on is that fault's to restart.
            let Ok(_lane) = faults.process_lane.try_lock() else {
                continue;
            };
            if let Some((what, log)) = slot.reap_unexpected() {
                println!("chaos: UNEXPECTED: {what}; log {log}");
                lock(&self.seen.unexpected_exits).push((what, log));
                if let Err(e) = fleet.start(slot).await {
                    eprintln!("chaos: restarting {}: {e:#}", slot.id());
                }
            }
        }
    }

    async fn read_tables(&self, fleet: &Fleet, http: &reqwest::Client, token: &str) {
        for slot in &fleet.slots {
            let view = slot.view();
            if !view.up || view.stopped {
                continue;
            }
            let url = format!("{}/admin/tables", slot.http());
            let Ok(resp) = http.get(&url).bearer_auth(token).send().await else {
                continue;
            };
            let Ok(body) = resp.json::<Value>().await else {
                continue;
            };
            let Some(tables) = body["tables"].as_array() else {
                continue;
            };
            let mut owners = HashMap::new();
            let mut states = HashMap::new();
            for t in tables {
                let Some(id) = t["id"].as_str() else { continue };
                if let Some(o) = t["owner"].as_str() {
                    owners.insert(id.to_string(), o.to_string());
                }
                if let Some(s) = t["state"].as_str() {
                    states.insert(id.to_string(), s.to_string());
                }
            }
            *lock(&self.seen.owners) = owners;
            *lock(&self.seen.states) = states;
            return;
        }
    }

    async fn scrape(&self, fleet: &Fleet, http: &reqwest::Client) {
        for slot in &fleet.slots {
            let view = slot.view();
            if !view.up || view.stopped {
                lock(&self.seen.scrapes).remove(&view.id);
                continue;
            }
            let url = format!("{}/metrics", slot.http());
            let text = match http.get(&url).send().await {
                Ok(r) => r.text().await.unwrap_or_default(),
                Err(_) => continue,
            };
            let scrape = Scrape {
                hosted: metric_sum(&text, "pitboss_tables_hosted"),
                paused: metric_sum(&text, "pitboss_tables_paused"),
                frozen: metric_with(&text, "pitboss_tables{", "state=\"frozen\""),
            };
            lock(&self.seen.scrapes).insert(view.id, scrape);
        }
    }

    fn tables_line(&self, fleet: &Fleet) -> String {
        let scrapes = lock(&self.seen.scrapes).clone();
        let mut hosted = Vec::new();
        let (mut paused, mut frozen) = (0.0, 0.0f64);
        for slot in &fleet.slots {
            let v = slot.view();
            let mark = if v.stopped {
                " (stopped)"
            } else if !v.up {
                " (down)"
            } else {
                ""
            };
            match scrapes.get(&v.id) {
                Some(s) => {
                    hosted.push(format!("{}:{}{mark}", v.id, s.hosted));
                    paused += s.paused;
                    frozen = frozen.max(s.frozen);
                }
                None => hosted.push(format!("{}:?{mark}", v.id)),
            }
        }
        format!(
            "hosted {}  paused {paused}  frozen {frozen}",
            hosted.join(" ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_summed_over_their_labels_and_read_by_label() {
        let text = "# HELP pitboss_tables_paused x\n\
                    pitboss_tables_paused 2\n\
                    pitboss_tables_hosted 33\n\
                    pitboss_table_pauses_total{reason=\"redis_unreachable\"} 4\n\
                    pitboss_table_pauses_total{reason=\"store_unreachable\"} 1\n\
                    pitboss_tables{state=\"open\"} 90\n\
                    pitboss_tables{state=\"frozen\"} 1\n";
        assert_eq!(metric_sum(text, "pitboss_tables_paused"), 2.0);
        assert_eq!(metric_sum(text, "pitboss_table_pauses_total"), 5.0);
        assert_eq!(metric_sum(text, "pitboss_tables_hosted"), 33.0);
        assert_eq!(
            metric_with(text, "pitboss_tables{", "state=\"frozen\""),
            1.0
        );
    }
}
