//! What the manager is asked (host, recover, dispose, who is hosted, which
//! leases to renew) and told (a table stopped, a renew's outcome, drain).

use std::time::{Duration, Instant};

use actix::prelude::*;
use tokio::sync::oneshot;
use tracing::{debug, error, info, warn};

use super::hosting::{dispose, release, HostError, Mode};
use super::{DrainState, Pending, TableManager};
use crate::actors::table::{Drain, Freeze, ReassertLease, Superseded, TableHandle, TableStopped};
use crate::chips::Chips;
use crate::instruments;
use crate::lease::{HeldLease, RenewOutcome};
use crate::types::{recorded_freeze, Fence, FreezeReason, StateReason, TableId, TableState};

/// Find the table here, or take its lease and host it.
#[derive(Message)]
#[rtype(result = "Result<TableHandle, HostError>")]
pub struct LoadOrCreate {
    pub table: TableId,
}

impl Handler<LoadOrCreate> for TableManager {
    type Result = ResponseFuture<Result<TableHandle, HostError>>;

    fn handle(&mut self, msg: LoadOrCreate, ctx: &mut Self::Context) -> Self::Result {
        self.host_answer(msg.table, Mode::Host, ctx)
    }
}

/// Host a frozen table again: a new lease (the fence floor guarantees a
/// higher token), the table reopened at its last boundary.
#[derive(Message)]
#[rtype(result = "Result<TableHandle, HostError>")]
pub struct Recover {
    pub table: TableId,
}

impl Handler<Recover> for TableManager {
    type Result = ResponseFuture<Result<TableHandle, HostError>>;

    fn handle(&mut self, msg: Recover, ctx: &mut Self::Context) -> Self::Result {
        self.host_answer(msg.table, Mode::Recover, ctx)
    }
}

/// Whether this process hosts the table now.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct IsHosted {
    pub table: TableId,
}

impl Handler<IsHosted> for TableManager {
    type Result = bool;

    fn handle(&mut self, msg: IsHosted, _ctx: &mut Self::Context) -> bool {
        self.hosted.contains_key(&msg.table)
    }
}

#[derive(Message)]
#[rtype(result = "Vec<TableId>")]
pub struct HostedTables;

impl Handler<HostedTables> for TableManager {
    type Result = Vec<TableId>;

    fn handle(&mut self, _msg: HostedTables, _ctx: &mut Self::Context) -> Vec<TableId> {
        self.hosted.keys().cloned().collect()
    }
}

impl Handler<TableStopped> for TableManager {
    type Result = ();

    fn handle(&mut self, msg: TableStopped, ctx: &mut Self::Context) {
        // A table that re-asserted stops with a fence above the one the
        // registry may still hold; an older hosting's stop is ignored.
        match self.hosted.get(&msg.table) {
            Some(h) if h.fence <= msg.fence => {}
            _ => return,
        }
        let reasserting = match self.hosted.remove(&msg.table) {
            Some(h) => {
                h.clock.revoke();
                h.reasserting
            }
            None => false,
        };
        self.update_gauge();
        let cooldown = self.rt.settings.table.auto_recover_after_ms;
        let recoverable = matches!(
            msg.frozen,
            Some(FreezeReason::LeaseLost | FreezeReason::StoreError)
        );
        if recoverable && cooldown > 0 && self.drain.is_none() {
            // Opt-in: by default a freeze stays loud and waits for an operator.
            info!(table_id = %msg.table, cooldown_ms = cooldown, "automatic recovery scheduled");
            self.auto_recover(msg.table.clone(), Duration::from_millis(cooldown), ctx);
        }
        // A move ends here: released to its target, or stopped otherwise.
        let moved = match msg.frozen {
            None => Ok(()),
            Some(reason) => Err(HostError::Frozen(reason)),
        };
        let movers = self.moving.remove(&msg.table).unwrap_or_default();
        let lease = HeldLease {
            table: msg.table,
            fence: msg.fence,
        };
        match &mut self.drain {
            // Handed back with the others drained meanwhile, in one round
            // trip.
            Some(drain) => {
                drain.released.push(lease);
                for m in movers {
                    let _ = m.send(Err(HostError::Draining));
                }
                self.maybe_finish_drain(ctx);
            }
            None => {
                // Compare-and-delete: harmless if the lease is already gone.
                let rt = self.rt.clone();
                if reasserting && !movers.is_empty() {
                    // A re-assert in flight may have taken the lease above
                    // this fence: the move is answered once it hands that
                    // back (see `reassert`).
                    self.moved_mid_reassert
                        .insert(lease.table.clone(), (movers, moved));
                    actix::spawn(async move { release(&rt, &lease.table, lease.fence).await });
                    return;
                }
                actix::spawn(async move {
                    release(&rt, &lease.table, lease.fence).await;
                    for m in movers {
                        let _ = m.send(moved.clone());
                    }
                });
            }
        }
    }
}

/// The leases to renew now.
#[derive(Message)]
#[rtype(result = "Vec<HeldLease>")]
pub struct HeldLeases;

impl Handler<HeldLeases> for TableManager {
    type Result = MessageResult<HeldLeases>;

    fn handle(&mut self, _msg: HeldLeases, _ctx: &mut Self::Context) -> Self::Result {
        MessageResult(self.held())
    }
}

/// The outcome of one batched renew sent at `sent`.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RenewReport {
    pub sent: Instant,
    pub outcomes: Vec<(HeldLease, RenewOutcome)>,
}

impl Handler<RenewReport> for TableManager {
    type Result = ();

    fn handle(&mut self, msg: RenewReport, ctx: &mut Self::Context) {
        let ttl = self.rt.ttl();
        for (lease, outcome) in msg.outcomes {
            let hosted = self
                .hosted
                .get(&lease.table)
                .filter(|h| h.fence == lease.fence && !h.reasserting);
            let Some(h) = hosted else {
                // I5: the table was released (idle eviction, drain) while the
                // renew was in flight; losing its lease is expected.
                if !matches!(outcome, RenewOutcome::Renewed | RenewOutcome::Unanswered) {
                    metrics::counter!(instruments::LEASE_RENEW_BENIGN).increment(1);
                    debug!(table_id = %lease.table, outcome = outcome.label(), "lease of a released table not renewed (benign)");
                }
                continue;
            };
            match outcome {
                RenewOutcome::Renewed => h.clock.confirm(msg.sent, ttl),
                // Its node did not answer: nothing proven either way. The
                // table pauses at its local deadline and asks for a
                // re-assert, as when all of Redis is unreachable.
                RenewOutcome::Unanswered => {}
                RenewOutcome::Gone | RenewOutcome::Foreign => {
                    // Loud, but not final: the owner takes the lease again
                    // if nobody else holds it and Postgres still holds its
                    // fence. Another holder in Redis is contested until
                    // Postgres shows its stamp; only Postgres moving on
                    // freezes the copy.
                    metrics::counter!(instruments::LEASES_LOST, "reason" => outcome.label())
                        .increment(1);
                    warn!(
                        event = "lease_lost",
                        table_id = %lease.table,
                        fence = lease.fence.0,
                        outcome = outcome.label(),
                        "lease not renewed; re-asserting it"
                    );
                    self.reassert(lease.table, ctx);
                }
            }
        }
    }
}

/// Start draining; resolves when every table has stopped and every lease
/// has been released. No table waits for its hand in progress: the next
/// owner resumes it from the journal.
#[derive(Message)]
#[rtype(result = "()")]
pub struct DrainAll;

impl Handler<DrainAll> for TableManager {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _msg: DrainAll, ctx: &mut Self::Context) -> Self::Result {
        let (tx, rx) = oneshot::channel();
        let drain = self.drain.get_or_insert_with(DrainState::default);
        if drain.complete {
            let _ = tx.send(());
        } else {
            drain.done.push(tx);
        }
        for h in self.hosted.values() {
            h.addr.do_send(Drain { to: None });
        }
        self.maybe_finish_drain(ctx);
        Box::pin(async move {
            let _ = rx.await;
        })
    }
}

/// Second signal: release every lease now, in one round trip, whatever the
/// tables are doing (their hands are voided by not being written).
#[derive(Message)]
#[rtype(result = "()")]
pub struct ForceRelease;

impl Handler<ForceRelease> for TableManager {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _msg: ForceRelease, _ctx: &mut Self::Context) -> Self::Result {
        let mut leases = self.held();
        for h in self.hosted.values() {
            h.clock.revoke();
        }
        if let Some(drain) = &mut self.drain {
            leases.append(&mut drain.released);
        }
        let rt = self.rt.clone();
        Box::pin(async move {
            match rt.lease.release_all(&leases).await {
                Ok(n) => info!(
                    event = "leases_released",
                    leases = leases.len(),
                    still_ours = n,
                    "released every lease"
                ),
                Err(e) => {
                    error!(error = %e, "could not release leases; they expire with their TTL")
                }
            }
        })
    }
}

/// Dispose a frozen table: take its lease (refused while another live owner
/// holds it), stamp a new fence, then escape → custody → closed in one
/// fenced transaction, and release the lease. Answers what each player got
/// back.
#[derive(Message)]
#[rtype(result = "Result<Vec<(String, Chips)>, HostError>")]
pub struct Dispose {
    pub table: TableId,
}

impl Handler<Dispose> for TableManager {
    type Result = ResponseActFuture<Self, Result<Vec<(String, Chips)>, HostError>>;

    fn handle(&mut self, msg: Dispose, _ctx: &mut Self::Context) -> Self::Result {
        if self.hosted.contains_key(&msg.table) {
            return Box::pin(fut::ready(Err(HostError::NotFrozen)));
        }
        if self.pending.contains_key(&msg.table) {
            return Box::pin(fut::ready(Err(HostError::Unavailable(
                "the table is being acquired right now".into(),
            ))));
        }
        // The pending entry keeps joins and recovers off the table meanwhile.
        self.pending.insert(
            msg.table.clone(),
            Pending {
                mode: None,
                waiters: Vec::new(),
            },
        );
        let rt = self.rt.clone();
        let table = msg.table.clone();
        let fut = async move { dispose(rt, table).await };
        Box::pin(fut.into_actor(self).map(move |res, act, _ctx| {
            // Nobody waits behind a disposal (other requests are refused
            // while it runs); the entry only kept them off.
            act.pending.remove(&msg.table);
            res
        }))
    }
}

/// What Postgres holds for tables this process hosts: `(table, state,
/// reason, fence)`. A table whose fence has moved past this process's was
/// stamped or frozen behind its back (an operator's freeze from any
/// instance, or a newer owner): its copy stops at once.
#[derive(Message)]
#[rtype(result = "()")]
pub struct FencesSeen {
    pub rows: Vec<(TableId, TableState, Option<StateReason>, Fence)>,
}

impl Handler<FencesSeen> for TableManager {
    type Result = ();

    fn handle(&mut self, msg: FencesSeen, _ctx: &mut Self::Context) {
        for (table, state, reason, fence) in msg.rows {
            // A re-assert moves Postgres ahead of the registry for a moment.
            let Some(h) = self
                .hosted
                .get(&table)
                .filter(|h| h.fence < fence && !h.reasserting)
            else {
                continue;
            };
            let frozen = recorded_freeze(state, reason);
            warn!(
                event = "fence_moved",
                table_id = %table,
                fence = h.fence.0,
                current = fence.0,
                frozen = frozen.map(FreezeReason::as_str),
                "Postgres holds a newer fence for this table; stopping its copy"
            );
            if let Some(reason) = frozen {
                // Frozen in Postgres (an operator's freeze through another
                // instance): the copy stops and tells that reason.
                h.clock.revoke();
                h.addr.do_send(Freeze { reason });
            } else {
                // The table may see its clock revoked before this message:
                // it stops the same way then.
                h.clock.supersede();
                // A newer owner stamped it: nothing to record, nothing
                // frozen; the copy's watchers follow the table there.
                metrics::counter!(instruments::LEASES_LOST, "reason" => "foreign").increment(1);
                h.addr.do_send(Superseded);
            }
        }
    }
}

impl Handler<ReassertLease> for TableManager {
    type Result = ();

    fn handle(&mut self, msg: ReassertLease, ctx: &mut Self::Context) {
        if self
            .hosted
            .get(&msg.table)
            .is_some_and(|h| h.fence == msg.fence)
        {
            self.reassert(msg.table, ctx);
        }
    }
}

/// Move a table hosted here to instance `to`: it finishes the hand in
/// progress (within the drain timeout, else voids it), records itself
/// released to `to`, stops, and its lease is released. Resolves then; the
/// caller asks `to` to host it.
#[derive(Message)]
#[rtype(result = "Result<(), HostError>")]
pub struct MoveOut {
    pub table: TableId,
    pub to: String,
}

impl Handler<MoveOut> for TableManager {
    type Result = ResponseFuture<Result<(), HostError>>;

    fn handle(&mut self, msg: MoveOut, _ctx: &mut Self::Context) -> Self::Result {
        if self.drain.is_some() {
            return Box::pin(async { Err(HostError::Draining) });
        }
        let Some(h) = self.hosted.get(&msg.table) else {
            return Box::pin(async { Err(HostError::NotHosted) });
        };
        let settings = &self.rt.settings;
        let drain = Duration::from_millis(settings.shutdown.drain_timeout_ms);
        // The writes in flight, then the state write and the release.
        let bound = drain
            .saturating_add(
                Duration::from_millis(settings.database.statement_timeout_ms).saturating_mul(2),
            )
            .saturating_add(Duration::from_secs(1));
        info!(event = "table_move_started", table_id = %msg.table, to = %msg.to, "moving the table");
        h.addr.do_send(Drain { to: Some(msg.to) });
        let (tx, rx) = oneshot::channel();
        self.moving.entry(msg.table).or_default().push(tx);
        Box::pin(async move {
            match tokio::time::timeout(bound, rx).await {
                Ok(Ok(result)) => result,
                _ => Err(HostError::Unavailable(
                    "the table did not finish its move in time".into(),
                )),
            }
        })
    }
}
