//! The pit boss: hosts a table only after taking its lease and stamping the
//! fence in Postgres, keeps the registry of hosted tables, revives tables at
//! boot (and whenever their lease is free again), and runs the drain.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use rand::Rng;
use tokio::sync::oneshot;
use tracing::{debug, error, info, warn};

mod hosting;
mod messages;

pub use hosting::HostError;
pub use messages::{
    Dispose, DrainAll, FencesSeen, ForceRelease, HeldLeases, HostedTables, IsHosted, LoadOrCreate,
    MoveOut, Recover, RenewReport,
};

use super::table::{
    CheckLease, Freeze, Owner, Refence, RefenceOutcome, TableEnv, TableHandle, TableParts,
};
use crate::instruments;
use crate::lease::{HeldLease, LeaseClock, LeaseError};
use crate::runtime::Runtime;
use crate::store::StoreError;
use crate::types::{Fence, FreezeReason, TableId};
use hosting::{acquire_and_load, release, Mode, Prepared};

struct Hosted {
    addr: TableHandle,
    fence: Fence,
    clock: Arc<LeaseClock>,
    /// The lease is being taken again (re-assert): it is not renewed
    /// meanwhile, and reports about its old fence are stale.
    reasserting: bool,
}

type Waiter = oneshot::Sender<Result<TableHandle, HostError>>;

/// The callers of a move, and what they are to be told.
type Mover = (
    Vec<oneshot::Sender<Result<(), HostError>>>,
    Result<(), HostError>,
);

/// At most this many acquisitions under way when a scan starts more.
const SCAN_ACQUIRES: usize = 64;
/// How soon a scan looks again when a table it could take was still
/// leased (a drain handing its leases back, or a lease running out).
const SCAN_SOON: Duration = Duration::from_millis(75);

/// What is under way for a table being acquired, and who waits for it.
struct Pending {
    /// `None`: a disposal.
    mode: Option<Mode>,
    waiters: Vec<Waiter>,
}

pub struct TableManager {
    rt: Arc<Runtime>,
    arbiters: Vec<ArbiterHandle>,
    next_arbiter: usize,
    hosted: HashMap<TableId, Hosted>,
    /// Tables being acquired right now, with whoever waits for them, so two
    /// joins never acquire the same table twice (a second same-owner acquire
    /// would bump the fence under the first).
    pending: HashMap<TableId, Pending>,
    scanning: bool,
    drain: Option<DrainState>,
    /// The last scan found more tables to host than it could start.
    scan_backlog: bool,
    /// This id may still have open tables stamped by an earlier process
    /// (a restart) for the scan to take back.
    own_earlier_left: bool,
    /// Tables being moved to another instance, and who waits for their
    /// lease to be released.
    moving: HashMap<TableId, Vec<oneshot::Sender<Result<(), HostError>>>>,
    /// Moves of tables that stopped while their lease was being taken
    /// again: they are answered once the re-assert has handed back what it
    /// took, so the target never finds this instance's lease still held.
    moved_mid_reassert: HashMap<TableId, Mover>,
}

#[derive(Default)]
struct DrainState {
    /// Leases of drained tables not yet handed back. They go back as the
    /// tables stop, a batch per round trip, so the next instance can take
    /// the first tables while the others still drain.
    released: Vec<HeldLease>,
    done: Vec<oneshot::Sender<()>>,
    /// A batch is on its way to Redis.
    releasing: bool,
    /// Leases handed back so far, and how many of them were still ours.
    handed_back: usize,
    still_ours: usize,
    complete: bool,
}

impl TableManager {
    pub fn new(rt: Arc<Runtime>, arbiters: Vec<ArbiterHandle>) -> TableManager {
        TableManager {
            rt,
            arbiters,
            next_arbiter: 0,
            hosted: HashMap::new(),
            pending: HashMap::new(),
            scanning: false,
            drain: None,
            moving: HashMap::new(),
            moved_mid_reassert: HashMap::new(),
            scan_backlog: false,
            own_earlier_left: true,
        }
    }

    fn held(&self) -> Vec<HeldLease> {
        self.hosted
            .iter()
            .filter(|(_, h)| !h.reasserting)
            .map(|(table, h)| HeldLease {
                table: table.clone(),
                fence: h.fence,
            })
            .collect()
    }

    /// Wakes every table whose lease or whose instance's liveness cannot be
    /// proven now, or whose lease was given up: it pauses, asks for a
    /// re-assert, or stops. A table with a proven lease is left alone; a
    /// paused one re-checks on its own until it resumes.
    fn watch_leases(&self) {
        let now = Instant::now();
        let alive = self.rt.is_alive_on_record(now);
        for h in self.hosted.values() {
            if !alive || !h.clock.is_valid(now) {
                h.addr.do_send(CheckLease);
            }
        }
    }

    fn update_gauge(&self) {
        metrics::gauge!(instruments::LEASES_HELD).set(self.hosted.len() as f64);
    }

    /// Starts acquiring `table` unless that is already under way; the waiter
    /// (if any) learns the outcome.
    /// Hosts (or recovers) `table` and answers with the outcome.
    fn host_answer(
        &mut self,
        table: TableId,
        mode: Mode,
        ctx: &mut Context<Self>,
    ) -> ResponseFuture<Result<TableHandle, HostError>> {
        let (tx, rx) = oneshot::channel();
        self.host_as(table, mode, Some(tx), ctx);
        Box::pin(async move {
            rx.await
                .unwrap_or(Err(HostError::Unavailable("manager stopped".into())))
        })
    }

    fn host_as(
        &mut self,
        table: TableId,
        mode: Mode,
        waiter: Option<Waiter>,
        ctx: &mut Context<Self>,
    ) {
        if let Some(h) = self.hosted.get(&table) {
            if let Some(w) = waiter {
                let _ = w.send(match mode {
                    // A copy that has stopped, before its `TableStopped`
                    // reached the manager, is no address to hand out.
                    Mode::Host if !h.addr.connected() => Err(HostError::Unavailable(
                        "the table is stopping here; join again in a moment".into(),
                    )),
                    Mode::Host => Ok(h.addr.clone()),
                    Mode::Recover => Err(HostError::NotFrozen),
                });
            }
            return;
        }
        if self.drain.is_some() {
            if let Some(w) = waiter {
                let _ = w.send(Err(HostError::Draining));
            }
            return;
        }
        if let Some(pending) = self.pending.get_mut(&table) {
            // Only the same request shares the outcome: a recover must not
            // be answered by a host (or a disposal) it never asked for.
            if pending.mode == Some(mode) {
                pending.waiters.extend(waiter);
            } else if let Some(w) = waiter {
                let _ = w.send(Err(HostError::Unavailable(
                    "the table is busy with another request; try again".into(),
                )));
            }
            return;
        }
        let table_key = table.clone();
        // The entry marks the acquire as under way, even with no waiter.
        self.pending.insert(
            table.clone(),
            Pending {
                mode: Some(mode),
                waiters: waiter.into_iter().collect(),
            },
        );
        let rt = self.rt.clone();
        // Every step is bounded on its own (Redis operation timeout,
        // Postgres budgets); the whole is bounded too (I11). A lease taken
        // by an abandoned attempt expires with its TTL, or is re-taken by
        // the next attempt (same owner).
        let bound = rt.ttl();
        let attempt = async move {
            tokio::time::timeout(bound, acquire_and_load(rt, table_key, mode))
                .await
                .unwrap_or_else(|_| {
                    Err(HostError::Unavailable(format!(
                        "taking the table took longer than {bound:?}"
                    )))
                })
        };
        ctx.spawn(attempt.into_actor(self).map(move |res, act, ctx| {
            let waiters = act
                .pending
                .remove(&table)
                .map(|p| p.waiters)
                .unwrap_or_default();
            let outcome = res.and_then(|prepared| act.start_table(prepared, ctx));
            if let Err(e) = &outcome {
                debug!(table_id = %table, error = %e, "table not hosted");
            }
            for w in waiters {
                let _ = w.send(outcome.clone());
            }
            act.maybe_finish_drain(ctx);
            // A scan that found more than it could start goes on as soon as
            // there is room, rather than at the next period.
            if act.scan_backlog && act.pending.len() <= SCAN_ACQUIRES / 2 {
                act.scan(ctx);
            }
        }));
    }

    /// Recovers a table frozen by a lost lease or a permanent store error
    /// (opt-in, `table.auto_recover_after_ms`) after `cooldown`, trying
    /// again while its lease is held elsewhere or Redis/Postgres cannot be
    /// reached; gives up when the table is no longer frozen.
    fn auto_recover(&mut self, table: TableId, cooldown: Duration, ctx: &mut Context<Self>) {
        ctx.run_later(cooldown, move |act, ctx| {
            if act.drain.is_some() {
                return;
            }
            warn!(event = "table_auto_recover", table_id = %table, "recovering a frozen table automatically");
            let (tx, rx) = oneshot::channel();
            act.host_as(table.clone(), Mode::Recover, Some(tx), ctx);
            ctx.spawn(rx.into_actor(act).map(move |res, act, ctx| match res {
                Ok(Err(HostError::OwnedElsewhere { .. } | HostError::Unavailable(_))) => {
                    act.auto_recover(table, cooldown, ctx)
                }
                Ok(Err(e)) => info!(table_id = %table, error = %e, "automatic recovery not needed"),
                Ok(Ok(_)) | Err(_) => {}
            }));
        });
    }

    /// Takes a hosted table's lease again after its key vanished, was
    /// found holding another value, or could not be proven (I4): acquire
    /// above the table's own fence, then the table moves Postgres to the new
    /// fence only if Postgres still holds its own. Success: the table
    /// carries on, the hand in progress included. Refused (Postgres holds
    /// another fence): its copy freezes. Contested (Redis names another
    /// holder that has not stamped Postgres yet) or Redis/Postgres
    /// unreachable: nothing changes, the table stays paused once its deadline
    /// passes, and the next renew or the paused table asks again.
    fn reassert(&mut self, table: TableId, ctx: &mut Context<Self>) {
        // A revoked lease (given up by a forced release, or by a refused
        // re-assert) is never taken again: the process is letting it go.
        let Some(h) = self
            .hosted
            .get_mut(&table)
            .filter(|h| !h.reasserting && !h.clock.is_revoked())
        else {
            return;
        };
        h.reasserting = true;
        let (rt, addr, old) = (self.rt.clone(), h.addr.clone(), h.fence);
        let key = table.clone();
        let fut = async move {
            let sent = Instant::now();
            match rt.lease.acquire(&key, old).await {
                Ok(new) => {
                    let outcome = addr
                        .send(Refence { fence: new })
                        .await
                        .unwrap_or(RefenceOutcome::Refused);
                    (outcome, Some((new, sent)))
                }
                // Redis names another holder, but Postgres decides: until
                // that owner stamps, the table is still this one's (its
                // takeover may yet be refused), so it stays paused and asks
                // again; once it stamps, the fence check stops this copy.
                Err(LeaseError::OwnedElsewhere { owner, .. }) => {
                    warn!(event = "reassert_contested", table_id = %key, owner = %owner, "the lease is held by another owner; waiting for Postgres to tell who owns the table");
                    (RefenceOutcome::Contested, None)
                }
                Err(e) => {
                    warn!(table_id = %key, error = %e, "could not re-assert the lease; will try again");
                    (RefenceOutcome::Failed, None)
                }
            }
        };
        ctx.spawn(fut.into_actor(self).map(move |(outcome, taken), act, _ctx| {
            metrics::counter!(instruments::LEASE_REASSERTS, "result" => outcome.label())
                .increment(1);
            let hosted = act.hosted.get_mut(&table).filter(|h| h.fence == old);
            match (hosted, outcome, taken) {
                (Some(h), RefenceOutcome::Reasserted, Some((new, sent))) => {
                    h.fence = new;
                    h.clock.confirm(sent, act.rt.ttl());
                    h.reasserting = false;
                    info!(event = "lease_reasserted", table_id = %table, fence = new.0, "lease re-asserted");
                }
                (Some(h), RefenceOutcome::Contested, _) => {
                    // The table pauses as `contested` (not `redis_unreachable`)
                    // once its deadline passes, or at once if it already has.
                    h.clock.mark_contested();
                    h.reasserting = false;
                    h.addr.do_send(CheckLease);
                }
                (Some(h), RefenceOutcome::Failed, _) => h.reasserting = false,
                (hosted, _, taken) => {
                    // Refused, or the table stopped meanwhile: its copy
                    // stops, and a lease taken for it goes back.
                    if let Some(h) = hosted {
                        h.reasserting = false;
                        h.clock.revoke();
                        h.addr.do_send(Freeze {
                            reason: FreezeReason::LeaseLost,
                        });
                    }
                    let movers = act.moved_mid_reassert.remove(&table);
                    let rt = act.rt.clone();
                    actix::spawn(async move {
                        if let Some((new, _)) = taken {
                            release(&rt, &table, new).await;
                        }
                        if let Some((movers, moved)) = movers {
                            for m in movers {
                                let _ = m.send(moved.clone());
                            }
                        }
                    });
                }
            }
        }));
    }

    fn start_table(
        &mut self,
        p: Prepared,
        ctx: &mut Context<Self>,
    ) -> Result<TableHandle, HostError> {
        let lease = HeldLease {
            table: p.table.clone(),
            fence: p.fence,
        };
        if self.drain.is_some() {
            // Drain began while we were acquiring: hand the lease straight back.
            let rt = self.rt.clone();
            actix::spawn(async move { release(&rt, &lease.table, lease.fence).await });
            return Err(HostError::Draining);
        }
        let arbiter = &self.arbiters[self.next_arbiter % self.arbiters.len()];
        self.next_arbiter = self.next_arbiter.wrapping_add(1);
        let (rt, clock) = (self.rt.clone(), p.clock.clone());
        let owner = Owner {
            stopped: ctx.address().recipient(),
            reassert: ctx.address().recipient(),
        };
        let parts = TableParts {
            id: p.table.clone(),
            fence: p.fence,
            env: TableEnv::of(&rt, &p.table),
            clock,
            owner,
        };
        let addr = p.game.start(arbiter, parts);
        info!(event = "lease_acquired", table_id = %p.table, fence = p.fence.0, "hosting table");
        self.hosted.insert(
            p.table,
            Hosted {
                addr: addr.clone(),
                fence: p.fence,
                clock: p.clock,
                reasserting: false,
            },
        );
        self.update_gauge();
        Ok(addr)
    }

    /// Hosts every table of the environment that may need an owner (see
    /// `Store::revivable`) and whose lease is free or ours. Runs at boot and
    /// then every 250–500 ms, so a draining predecessor's tables are picked
    /// up within a second of their release; a scan costs one indexed query
    /// and, only for its candidates, one pipelined GET each, whatever the
    /// number of tables hosted.
    fn scan(&mut self, ctx: &mut Context<Self>) {
        if self.scanning || self.drain.is_some() {
            return;
        }
        self.scanning = true;
        let own_earlier = self.own_earlier_left;
        let rt = self.rt.clone();
        let fut = async move {
            let (ids, own_found) = rt
                .store
                .revivable(rt.environment(), rt.instance_id(), own_earlier)
                .await?;
            metrics::gauge!(instruments::REVIVE_CANDIDATES).set(ids.len() as f64);
            metrics::counter!(instruments::REVIVE_SCANS).increment(1);
            metrics::counter!(instruments::REVIVE_SCAN_ROWS).increment(ids.len() as u64);
            metrics::counter!(instruments::REVIVE_SCAN_REDIS_COMMANDS).increment(ids.len() as u64);
            let free = rt
                .lease
                .claimable(&ids)
                .await
                .map_err(|e| StoreError::Inconsistent(e.to_string()));
            Ok::<_, StoreError>((ids, free?, own_found))
        };
        ctx.spawn(fut.into_actor(self).map(move |res, act, ctx| {
            act.scanning = false;
            match res {
                Ok((ids, free, own_found)) => {
                    act.scan_backlog = false;
                    if own_earlier && own_found == 0 {
                        // A restart's tables are all back; none can appear
                        // later, so later scans stop asking.
                        act.own_earlier_left = false;
                    }
                    let mut held_elsewhere = false;
                    for (id, is_free) in ids.into_iter().zip(free) {
                        if act.hosted.contains_key(&id) || act.pending.contains_key(&id) {
                            continue;
                        }
                        held_elsewhere |= !is_free;
                        if is_free && act.pending.len() >= SCAN_ACQUIRES {
                            // Thousands of acquisitions at once would starve
                            // the renews and the liveness beat of Redis and
                            // Postgres connections; the rest come next.
                            act.scan_backlog = true;
                            break;
                        }
                        if is_free {
                            act.host_as(id, Mode::Host, None, ctx);
                        } else {
                            metrics::counter!(instruments::LEASE_ACQUIRES, "result" => "owned_elsewhere").increment(1);
                            debug!(table_id = %id, "table is leased elsewhere; will retry");
                        }
                    }
                    if held_elsewhere && act.drain.is_none() {
                        // Most often a predecessor draining right now: it
                        // hands its leases back as its tables stop, so look
                        // again soon rather than at the next period.
                        ctx.run_later(SCAN_SOON, |act, ctx| act.scan(ctx));
                    }
                }
                Err(e) => debug!(error = %e, "revive scan failed; will retry"),
            }
        }));
    }

    fn schedule_scan(ctx: &mut Context<Self>) {
        let wait = Duration::from_millis(rand::thread_rng().gen_range(250..=500));
        ctx.run_later(wait, |act, ctx| {
            act.scan(ctx);
            if act.drain.is_none() {
                Self::schedule_scan(ctx);
            }
        });
    }

    /// Hands back the leases of the tables drained so far, one batch per
    /// round trip (compare-and-delete: a lease no longer ours stays), and
    /// ends the drain once every table has stopped and its lease is back.
    fn maybe_finish_drain(&mut self, ctx: &mut Context<Self>) {
        let Some(drain) = &mut self.drain else { return };
        if drain.releasing || drain.complete {
            return;
        }
        if drain.released.is_empty() {
            if !self.hosted.is_empty() || !self.pending.is_empty() {
                return;
            }
            drain.complete = true;
            info!(
                event = "leases_released",
                leases = drain.handed_back,
                still_ours = drain.still_ours,
                "released every lease"
            );
            for tx in drain.done.drain(..) {
                let _ = tx.send(());
            }
            return;
        }
        drain.releasing = true;
        let leases = std::mem::take(&mut drain.released);
        let rt = self.rt.clone();
        let fut = async move { (leases.len(), rt.lease.release_all(&leases).await) };
        ctx.spawn(fut.into_actor(self).map(|(n, res), act, ctx| {
            let Some(drain) = &mut act.drain else { return };
            drain.releasing = false;
            drain.handed_back += n;
            match res {
                Ok(ours) => drain.still_ours += ours,
                Err(e) => {
                    error!(error = %e, leases = n, "could not release leases; they expire with their TTL")
                }
            }
            act.maybe_finish_drain(ctx);
        }));
    }
}

impl Actor for TableManager {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.scan(ctx);
        Self::schedule_scan(ctx);
        // Every hosted lease's local deadline, on a clock of the manager's
        // own (it never waits on Redis), so a slow or dead Redis pauses a
        // table before anyone else could take it; one pass over the
        // registry instead of a timer in every table.
        ctx.run_interval(
            super::table::lease_check_period(self.rt.ttl()),
            |act, _ctx| act.watch_leases(),
        );
    }
}
