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

use super::table::{Drain, Freeze, Table};
use crate::game::{Chips, Game, PlayerId};
use crate::lease::{HeldLease, LeaseClock, LeaseError, RenewOutcome};
use crate::runtime::Runtime;
use crate::store::StoreError;
use crate::types::{Fence, TableId};

#[derive(Debug, Clone, thiserror::Error)]
pub enum HostError {
    #[error("no such table")]
    NotFound,
    #[error("table is owned by {owner}")]
    OwnedElsewhere { owner: String, ttl_ms: i64 },
    #[error("table is frozen")]
    Frozen,
    #[error("table is {0}")]
    Closed(String),
    #[error("table is not frozen")]
    NotFrozen,
    #[error("server is draining")]
    Draining,
    #[error("{0}")]
    Unavailable(String),
}

impl HostError {
    pub fn code(&self) -> &'static str {
        match self {
            HostError::NotFound | HostError::Closed(_) => "table_not_found",
            HostError::OwnedElsewhere { .. } => "owned_elsewhere",
            HostError::Frozen => "table_frozen",
            HostError::NotFrozen => "not_frozen",
            HostError::Draining => "draining",
            HostError::Unavailable(_) => "unavailable",
        }
    }
}

struct Hosted {
    addr: Addr<Table>,
    fence: Fence,
    clock: Arc<LeaseClock>,
}

type Waiter = oneshot::Sender<Result<Addr<Table>, HostError>>;

pub struct TableManager {
    rt: Arc<Runtime>,
    arbiters: Vec<ArbiterHandle>,
    next_arbiter: usize,
    hosted: HashMap<TableId, Hosted>,
    /// Tables being acquired right now, with whoever waits for them, so two
    /// joins never acquire the same table twice (a second same-owner acquire
    /// would bump the fence under the first).
    pending: HashMap<TableId, Vec<Waiter>>,
    scanning: bool,
    drain: Option<DrainState>,
}

struct DrainState {
    /// Leases of drained tables, released together at the end.
    released: Vec<HeldLease>,
    done: Vec<oneshot::Sender<()>>,
    releasing: bool,
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
        }
    }

    fn held(&self) -> Vec<HeldLease> {
        self.hosted
            .iter()
            .map(|(table, h)| HeldLease {
                table: table.clone(),
                fence: h.fence,
            })
            .collect()
    }

    fn update_gauge(&self) {
        metrics::gauge!("pitboss_leases_held").set(self.hosted.len() as f64);
    }

    /// Starts acquiring `table` unless that is already under way; the waiter
    /// (if any) learns the outcome.
    /// Hosts (or recovers) `table` and answers with the outcome.
    fn host_answer(
        &mut self,
        table: TableId,
        mode: Mode,
        ctx: &mut Context<Self>,
    ) -> ResponseFuture<Result<Addr<Table>, HostError>> {
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
        if let Some(waiters) = self.pending.get_mut(&table) {
            waiters.extend(waiter);
            return;
        }
        // The entry marks the acquire as under way, even with no waiter.
        self.pending
            .insert(table.clone(), waiter.into_iter().collect());
        let rt = self.rt.clone();
        ctx.spawn(
            acquire_and_load(rt, table.clone(), mode)
                .into_actor(self)
                .map(move |res, act, ctx| {
                    let waiters = act.pending.remove(&table).unwrap_or_default();
                    let outcome = res.and_then(|prepared| act.start_table(prepared, ctx));
                    if let Err(e) = &outcome {
                        debug!(table_id = %table, error = %e, "table not hosted");
                    }
                    for w in waiters {
                        let _ = w.send(outcome.clone());
                    }
                    act.maybe_finish_drain(ctx);
                }),
        );
    }

    /// Recovers a table frozen by a lost lease after `cooldown`, trying
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

    fn start_table(
        &mut self,
        p: Prepared,
        ctx: &mut Context<Self>,
    ) -> Result<Addr<Table>, HostError> {
        let lease = HeldLease {
            table: p.table.clone(),
            fence: p.fence,
        };
        if self.drain.is_some() {
            // Drain began while we were acquiring: hand the lease straight back.
            let rt = self.rt.clone();
            actix::spawn(async move {
                let _ = rt.lease.release_all(&[lease]).await;
            });
            return Err(HostError::Draining);
        }
        let arbiter = &self.arbiters[self.next_arbiter % self.arbiters.len()];
        self.next_arbiter = self.next_arbiter.wrapping_add(1);
        let (rt, me, clock) = (self.rt.clone(), ctx.address(), p.clock.clone());
        let (id, fence, game) = (p.table.clone(), p.fence, p.game);
        let addr =
            Table::start_in_arbiter(arbiter, move |_| Table::new(id, fence, rt, clock, me, game));
        info!(event = "lease_acquired", table_id = %p.table, fence = p.fence.0, "hosting table");
        self.hosted.insert(
            p.table,
            Hosted {
                addr: addr.clone(),
                fence: p.fence,
                clock: p.clock,
            },
        );
        self.update_gauge();
        Ok(addr)
    }

    /// Hosts every table of the environment that should be hosted and whose
    /// lease is free or ours. Runs at boot and then every 250–500 ms, so a
    /// draining predecessor's tables are picked up within a second of their
    /// release.
    fn scan(&mut self, ctx: &mut Context<Self>) {
        if self.scanning || self.drain.is_some() {
            return;
        }
        self.scanning = true;
        let rt = self.rt.clone();
        let fut = async move {
            let ids = rt.store.revivable(rt.environment()).await?;
            let free = rt
                .lease
                .claimable(&ids)
                .await
                .map_err(|e| StoreError::Inconsistent(e.to_string()));
            Ok::<_, StoreError>((ids, free?))
        };
        ctx.spawn(fut.into_actor(self).map(|res, act, ctx| {
            act.scanning = false;
            match res {
                Ok((ids, free)) => {
                    for (id, is_free) in ids.into_iter().zip(free) {
                        if act.hosted.contains_key(&id) || act.pending.contains_key(&id) {
                            continue;
                        }
                        if is_free {
                            act.host_as(id, Mode::Host, None, ctx);
                        } else {
                            metrics::counter!("pitboss_lease_acquires_total", "result" => "owned_elsewhere").increment(1);
                            debug!(table_id = %id, "table is leased elsewhere; will retry");
                        }
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

    fn maybe_finish_drain(&mut self, ctx: &mut Context<Self>) {
        let Some(drain) = &mut self.drain else { return };
        if drain.releasing || !self.hosted.is_empty() || !self.pending.is_empty() {
            return;
        }
        drain.releasing = true;
        let leases = std::mem::take(&mut drain.released);
        let rt = self.rt.clone();
        let fut = async move { (leases.len(), rt.lease.release_all(&leases).await) };
        ctx.spawn(fut.into_actor(self).map(|(n, res), act, _ctx| {
            match res {
                Ok(ours) => info!(
                    event = "leases_released",
                    leases = n,
                    still_ours = ours,
                    "released every lease"
                ),
                Err(e) => {
                    error!(error = %e, "could not release leases; they expire with their TTL")
                }
            }
            if let Some(drain) = &mut act.drain {
                drain.complete = true;
                for tx in drain.done.drain(..) {
                    let _ = tx.send(());
                }
            }
        }));
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Host an open (or shut-down) table.
    Host,
    /// Host a frozen table again under a new fence (operator's recover).
    Recover,
}

struct Prepared {
    table: TableId,
    fence: Fence,
    clock: Arc<LeaseClock>,
    game: Game,
}

/// Lease first, then the fence stamp, then the table's rows: nothing is
/// constructed for a table this process does not own.
async fn acquire_and_load(
    rt: Arc<Runtime>,
    table: TableId,
    mode: Mode,
) -> Result<Prepared, HostError> {
    let unavailable = |e: &dyn std::fmt::Display| HostError::Unavailable(e.to_string());
    let row = rt
        .store
        .table(&table)
        .await
        .map_err(|e| unavailable(&e))?
        .ok_or(HostError::NotFound)?;
    if row.environment != rt.environment() {
        return Err(HostError::NotFound);
    }
    match (mode, row.state.as_str()) {
        (Mode::Host, "open" | "draining" | "released") | (Mode::Recover, "frozen") => {}
        (Mode::Host, "frozen") => return Err(HostError::Frozen),
        (Mode::Recover, "open" | "draining" | "released") => return Err(HostError::NotFrozen),
        (_, other) => return Err(HostError::Closed(other.to_string())),
    }
    let sent = Instant::now();
    let fence = match rt.lease.acquire(&table, row.fence).await {
        Ok(f) => f,
        Err(LeaseError::OwnedElsewhere { owner, ttl_ms }) => {
            metrics::counter!("pitboss_lease_acquires_total", "result" => "owned_elsewhere")
                .increment(1);
            return Err(HostError::OwnedElsewhere { owner, ttl_ms });
        }
        Err(e) => {
            metrics::counter!("pitboss_lease_acquires_total", "result" => "error").increment(1);
            return Err(unavailable(&e));
        }
    };
    let lease = [HeldLease {
        table: table.clone(),
        fence,
    }];
    let stamped = match rt
        .store
        .stamp(&table, fence, rt.instance_id(), mode == Mode::Recover)
        .await
    {
        Ok(row) => row,
        Err(e) => {
            warn!(table_id = %table, fence = fence.0, error = %e, "stamp refused; releasing the lease");
            let _ = rt.lease.release_all(&lease).await;
            return Err(match e {
                StoreError::StaleOwnerBoundaryWrite { .. } => {
                    HostError::Unavailable("a newer owner stamped the table".into())
                }
                other => unavailable(&other),
            });
        }
    };
    if stamped.state != "open" {
        let _ = rt.lease.release_all(&lease).await;
        return Err(if stamped.state == "frozen" {
            HostError::Frozen
        } else {
            HostError::Closed(stamped.state)
        });
    }
    let seats = match rt.store.seats(&table).await {
        Ok(s) => s,
        Err(e) => {
            let _ = rt.lease.release_all(&lease).await;
            return Err(unavailable(&e));
        }
    };
    let seats = seats
        .into_iter()
        .map(|s| (s.seat, PlayerId(s.player), s.stack))
        .collect();
    let game = match Game::resume(
        stamped.config.clone(),
        stamped.hand_no,
        stamped.button,
        seats,
    ) {
        Ok(g) => g,
        Err(e) => {
            error!(table_id = %table, error = %e, "stored table does not satisfy the rules");
            let _ = rt.lease.release_all(&lease).await;
            return Err(unavailable(&e));
        }
    };
    metrics::counter!("pitboss_lease_acquires_total", "result" => "acquired").increment(1);
    Ok(Prepared {
        table,
        fence,
        clock: LeaseClock::new(sent, rt.ttl()),
        game,
    })
}

impl Actor for TableManager {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.scan(ctx);
        Self::schedule_scan(ctx);
    }
}

/// Find the table here, or take its lease and host it.
#[derive(Message)]
#[rtype(result = "Result<Addr<Table>, HostError>")]
pub struct LoadOrCreate {
    pub table: TableId,
}

impl Handler<LoadOrCreate> for TableManager {
    type Result = ResponseFuture<Result<Addr<Table>, HostError>>;

    fn handle(&mut self, msg: LoadOrCreate, ctx: &mut Self::Context) -> Self::Result {
        self.host_answer(msg.table, Mode::Host, ctx)
    }
}

/// Host a frozen table again: a new lease (the fence floor guarantees a
/// higher token), the table reopened at its last boundary.
#[derive(Message)]
#[rtype(result = "Result<Addr<Table>, HostError>")]
pub struct Recover {
    pub table: TableId,
}

impl Handler<Recover> for TableManager {
    type Result = ResponseFuture<Result<Addr<Table>, HostError>>;

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

/// A table actor has stopped (frozen, evicted, drained).
#[derive(Message)]
#[rtype(result = "()")]
pub struct TableStopped {
    pub table: TableId,
    pub fence: Fence,
    /// Set when the table stopped because it froze.
    pub frozen: Option<&'static str>,
}

impl Handler<TableStopped> for TableManager {
    type Result = ();

    fn handle(&mut self, msg: TableStopped, ctx: &mut Self::Context) {
        match self.hosted.get(&msg.table) {
            Some(h) if h.fence == msg.fence => {}
            _ => return,
        }
        if let Some(h) = self.hosted.remove(&msg.table) {
            h.clock.revoke();
        }
        self.update_gauge();
        let cooldown = self.rt.settings.table.auto_recover_after_ms;
        if msg.frozen == Some("lease_lost") && cooldown > 0 && self.drain.is_none() {
            // Opt-in: by default a freeze stays loud and waits for an operator.
            info!(table_id = %msg.table, cooldown_ms = cooldown, "automatic recovery scheduled");
            self.auto_recover(msg.table.clone(), Duration::from_millis(cooldown), ctx);
        }
        let lease = HeldLease {
            table: msg.table,
            fence: msg.fence,
        };
        match &mut self.drain {
            // Released together once every table has drained.
            Some(drain) => {
                drain.released.push(lease);
                self.maybe_finish_drain(ctx);
            }
            None => {
                // Compare-and-delete: harmless if the lease is already gone.
                let rt = self.rt.clone();
                actix::spawn(async move {
                    if let Err(e) = rt.lease.release_all(&[lease]).await {
                        warn!(error = %e, "could not release a stopped table's lease; it expires with its TTL");
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

    fn handle(&mut self, msg: RenewReport, _ctx: &mut Self::Context) {
        let ttl = self.rt.ttl();
        for (lease, outcome) in msg.outcomes {
            let hosted = self
                .hosted
                .get(&lease.table)
                .filter(|h| h.fence == lease.fence);
            let Some(h) = hosted else {
                // I5: the table was released (idle eviction, drain) while the
                // renew was in flight; losing its lease is expected.
                if outcome != RenewOutcome::Renewed {
                    metrics::counter!("pitboss_lease_renew_benign_total").increment(1);
                    debug!(table_id = %lease.table, outcome = outcome.label(), "lease of a released table not renewed (benign)");
                }
                continue;
            };
            match outcome {
                RenewOutcome::Renewed => h.clock.confirm(msg.sent, ttl),
                RenewOutcome::Gone | RenewOutcome::Foreign => {
                    h.clock.revoke();
                    metrics::counter!("pitboss_leases_lost_total", "reason" => outcome.label())
                        .increment(1);
                    warn!(
                        event = "lease_lost",
                        table_id = %lease.table,
                        fence = lease.fence.0,
                        outcome = outcome.label(),
                        "lease lost; freezing the table"
                    );
                    h.addr.do_send(Freeze {
                        reason: "lease_lost",
                    });
                }
            }
        }
    }
}

/// Start draining; resolves when every table has stopped and every lease
/// has been released. `deadline` bounds the hands in progress.
#[derive(Message)]
#[rtype(result = "()")]
pub struct DrainAll {
    pub deadline: Instant,
}

impl Handler<DrainAll> for TableManager {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, msg: DrainAll, ctx: &mut Self::Context) -> Self::Result {
        let (tx, rx) = oneshot::channel();
        let drain = self.drain.get_or_insert_with(|| DrainState {
            released: Vec::new(),
            done: Vec::new(),
            releasing: false,
            complete: false,
        });
        if drain.complete {
            let _ = tx.send(());
        } else {
            drain.done.push(tx);
        }
        for h in self.hosted.values() {
            h.addr.do_send(Drain {
                deadline: msg.deadline,
            });
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
        self.pending.insert(msg.table.clone(), Vec::new());
        let rt = self.rt.clone();
        let table = msg.table.clone();
        let fut = async move { dispose(rt, table).await };
        Box::pin(fut.into_actor(self).map(move |res, act, _ctx| {
            for w in act.pending.remove(&msg.table).unwrap_or_default() {
                let _ = w.send(Err(HostError::Closed("closed".into())));
            }
            res
        }))
    }
}

async fn dispose(rt: Arc<Runtime>, table: TableId) -> Result<Vec<(String, Chips)>, HostError> {
    let unavailable = |e: &dyn std::fmt::Display| HostError::Unavailable(e.to_string());
    let row = rt
        .store
        .table(&table)
        .await
        .map_err(|e| unavailable(&e))?
        .filter(|r| r.environment == rt.environment())
        .ok_or(HostError::NotFound)?;
    if row.state != "frozen" {
        return Err(HostError::NotFrozen);
    }
    let fence = match rt.lease.acquire(&table, row.fence).await {
        Ok(f) => f,
        Err(LeaseError::OwnedElsewhere { owner, ttl_ms }) => {
            return Err(HostError::OwnedElsewhere { owner, ttl_ms })
        }
        Err(e) => return Err(unavailable(&e)),
    };
    let lease = [HeldLease {
        table: table.clone(),
        fence,
    }];
    let result = async {
        rt.store
            .stamp(&table, fence, rt.instance_id(), false)
            .await
            .map_err(|e| unavailable(&e))?;
        rt.store
            .dispose(&table, fence, rt.instance_id())
            .await
            .map_err(|e| match e {
                StoreError::WrongState(s) if s == "open" => HostError::NotFrozen,
                other => unavailable(&other),
            })
    }
    .await;
    if let Err(e) = rt.lease.release_all(&lease).await {
        warn!(table_id = %table, error = %e, "could not release the disposed table's lease; it expires with its TTL");
    }
    if result.is_ok() {
        warn!(event = "table_disposed", table_id = %table, fence = fence.0, "frozen table disposed: escape, custody, closed");
    }
    result
}
