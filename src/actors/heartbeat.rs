//! Every TTL/3: renews every held lease in one round trip and reports the
//! outcome to the manager (which re-asserts leases found `gone` or
//! `foreign`), refreshes the Redis registration, and records the process's
//! liveness in Postgres. A failed renew extends nothing, so the tables' own
//! local deadline checks pause them if Redis stays away.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;
use tracing::{debug, error, warn};

use super::table_manager::{FencesSeen, HeldLeases, RenewReport, TableManager};
use crate::instruments;
use crate::runtime::Runtime;
use crate::types::TableId;

pub struct Heartbeat {
    rt: Arc<Runtime>,
    manager: Addr<TableManager>,
    in_flight: bool,
    /// A fence check is outstanding. It runs apart from the renew, so a
    /// slow Postgres never holds back a Redis renew.
    checking_fences: bool,
    /// Unix millis of the last renew that Redis confirmed, for the metric.
    last_ok_ms: Arc<AtomicU64>,
}

impl Heartbeat {
    pub fn new(
        rt: Arc<Runtime>,
        manager: Addr<TableManager>,
        last_ok_ms: Arc<AtomicU64>,
    ) -> Heartbeat {
        Heartbeat {
            rt,
            manager,
            in_flight: false,
            checking_fences: false,
            last_ok_ms,
        }
    }

    fn tick(&mut self, ctx: &mut Context<Self>) {
        self.check_fences(ctx);
        // A renew still outstanding (Redis slow) is not doubled up; its
        // timeout ends it within one period.
        if self.in_flight {
            return;
        }
        self.in_flight = true;
        let (rt, manager, last_ok) = (
            self.rt.clone(),
            self.manager.clone(),
            self.last_ok_ms.clone(),
        );
        let fut = async move {
            // The instance registration beats with the leases (I12).
            let registered = rt.lease.refresh_instance(&rt.registration);
            let leases = async {
                let leases = manager.send(HeldLeases).await.unwrap_or_default();
                renew(&rt, &manager, &last_ok, leases).await;
            };
            let (registered, ()) = tokio::join!(registered, leases);
            match registered {
                Ok(true) => {}
                Ok(false) => error!(
                    event = "instance_id_taken",
                    "another process holds this instance id now; this process's leases will be refused"
                ),
                Err(e) => warn!(error = %e, "could not refresh the instance registration"),
            }
        };
        ctx.spawn(fut.into_actor(self).map(|(), act, _| act.in_flight = false));
    }

    /// The Postgres half of a beat, run apart from the renew so a slow
    /// Postgres never holds back a Redis renew: records this process's
    /// liveness (which the takeover rule reads, and without which its tables
    /// stop dealing), then reads the fences of the hosted tables: one that
    /// moved past this process's (an operator's freeze from another
    /// instance, a newer owner's stamp) stops that table's copy within one
    /// period.
    fn check_fences(&mut self, ctx: &mut Context<Self>) {
        if self.checking_fences {
            return;
        }
        self.checking_fences = true;
        let (rt, manager) = (self.rt.clone(), self.manager.clone());
        let fut = async move {
            let sent = Instant::now();
            let beat = rt
                .store
                .beat(
                    rt.environment(),
                    rt.instance_id(),
                    rt.registration.incarnation(),
                    rt.registration.advertise_url(),
                    rt.is_draining(),
                )
                .await;
            match beat {
                Ok(()) => rt.liveness.confirm(sent, rt.ttl()),
                Err(e) => {
                    metrics::counter!(instruments::LIVENESS_ERRORS).increment(1);
                    warn!(event = "liveness_not_recorded", error = %e, "could not record this instance's liveness in Postgres");
                    return;
                }
            }
            let tables: Vec<TableId> = manager
                .send(HeldLeases)
                .await
                .unwrap_or_default()
                .into_iter()
                .map(|l| l.table)
                .collect();
            if tables.is_empty() {
                return;
            }
            match rt.store.fences(&tables).await {
                Ok(rows) => {
                    metrics::counter!(instruments::FENCE_CHECK_ROWS).increment(rows.len() as u64);
                    manager.do_send(FencesSeen { rows });
                }
                Err(e) => debug!(error = %e, "could not read the hosted tables' fences"),
            }
        };
        ctx.spawn(
            fut.into_actor(self)
                .map(|(), act, _| act.checking_fences = false),
        );
    }
}

/// Renews every held lease in one round trip and reports the outcome.
async fn renew(
    rt: &Runtime,
    manager: &Addr<TableManager>,
    last_ok: &AtomicU64,
    leases: Vec<crate::lease::HeldLease>,
) {
    if leases.is_empty() {
        last_ok.store(now_ms(), Ordering::Relaxed);
        return;
    }
    let sent = Instant::now();
    metrics::counter!(instruments::LEASES_RENEWED).increment(leases.len() as u64);
    match rt.lease.renew_all(&leases).await {
        Ok(outcomes) => {
            metrics::histogram!(instruments::LEASE_RENEW_SECONDS)
                .record(sent.elapsed().as_secs_f64());
            last_ok.store(now_ms(), Ordering::Relaxed);
            manager.do_send(RenewReport {
                sent,
                outcomes: leases.into_iter().zip(outcomes).collect(),
            });
        }
        Err(e) => {
            metrics::counter!(instruments::LEASE_RENEW_ERRORS).increment(1);
            warn!(event = "lease_renew_failed", error = %e, leases = leases.len(), "lease renew failed");
        }
    }
}

pub fn now_ms() -> u64 {
    u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0)
}

impl Actor for Heartbeat {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let period = self.rt.ttl() / 3;
        ctx.run_interval(period, |act, ctx| act.tick(ctx));
    }
}
