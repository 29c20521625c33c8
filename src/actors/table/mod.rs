//! One hosted table: its game (any [`Game`]), its timers, its subscribed sessions,
//! and the fenced writes at every boundary.
//!
//! - [`handlers`]: the messages sessions and the manager send it;
//! - [`play`]: the game's flow (its rules, the action clock, boundary
//!   writes, the next deal);
//! - [`cash_out`]: standing players up, and cash-outs beside the hand;
//! - [`fanout`]: subscribers, history, replay, snapshots;
//! - [`lifecycle`]: freeze, drain, idle release, absent players, deadline;
//! - [`timers`]: the one-shot deadlines, armed only while something is due.

mod cash_out;
mod env;
mod error;
mod fanout;
mod handle;
mod handlers;
mod lifecycle;
mod play;
mod registry;
mod side_writes;
mod timers;
mod writer;

pub use env::TableEnv;
pub use error::TableError;
pub use fanout::{Delivery, Outbound, SessionId, Watcher};
pub use handle::TableHandle;
pub use handlers::{
    Act, Drain, Freeze, Join, Leave, Refence, RefenceOutcome, Sit, Superseded, Unsubscribe,
};
pub use registry::{Games, Loaded, Stored, TableParts};
pub use timers::{lease_check_period, CheckLease};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;
use tracing::{info, warn};

use crate::chips::PlayerId;
use crate::games::Game;
use crate::instruments;
use crate::lease::LeaseClock;
use crate::types::{Fence, FreezeReason, PauseReason, TableId, TableState};
use fanout::Fanout;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Open,
    Draining,
    /// Not dealing for a while (its lease or its liveness cannot be
    /// proven), the hand in progress held as it is; no action is taken.
    Paused(PauseReason),
    /// Frozen, with the reason the manager and the watchers are told.
    Frozen(FreezeReason),
    /// Released (drained or idle): persisting its state, about to stop.
    Stopping,
}

impl Phase {
    /// The state a snapshot reports.
    fn state(self) -> TableState {
        match self {
            Phase::Open | Phase::Paused(_) => TableState::Open,
            Phase::Draining => TableState::Draining,
            Phase::Frozen(_) => TableState::Frozen,
            Phase::Stopping => TableState::Released,
        }
    }
}

/// Sent to the manager when a table actor has stopped (frozen, evicted,
/// drained). The table knows only this recipient, not the manager itself.
#[derive(Message)]
#[rtype(result = "()")]
pub struct TableStopped {
    pub table: TableId,
    pub fence: Fence,
    /// Set when the table stopped because it froze.
    pub frozen: Option<FreezeReason>,
}

/// Sent to the manager by a paused table whose lease cannot be proven: the
/// manager takes the lease again (re-assert) and, if it can, tells the table
/// its new fence with [`Refence`].
#[derive(Message)]
#[rtype(result = "()")]
pub struct ReassertLease {
    pub table: TableId,
    pub fence: Fence,
}

/// Whom a table reports to: the manager, which holds its lease. The table
/// knows only these recipients, not the manager itself.
pub struct Owner {
    pub stopped: Recipient<TableStopped>,
    pub reassert: Recipient<ReassertLease>,
}

pub struct Table<G: Game> {
    id: TableId,
    fence: Fence,
    env: TableEnv,
    clock: Arc<LeaseClock>,
    owner: Owner,
    game: G,
    phase: Phase,
    fanout: Fanout,
    action_timer: Option<SpawnHandle>,
    next_hand_timer: Option<SpawnHandle>,
    drain_timer: Option<SpawnHandle>,
    /// The idle release, armed while nobody is seated.
    idle_timer: Option<SpawnHandle>,
    /// The next stand-up, armed while a seated player has no connection.
    absent_timer: Option<SpawnHandle>,
    /// The lease re-check, armed while paused.
    recheck_timer: Option<SpawnHandle>,
    /// This table's own address, for the messages it sends itself.
    me: Option<actix::WeakAddr<Table<G>>>,
    /// Since when nobody has been seated; `None` while someone is.
    empty_since: Option<Instant>,
    /// Seated players with no connection, and since when: their seats are
    /// held for the reconnect window, then they are stood up.
    absent: HashMap<PlayerId, Instant>,
    /// Unix millis at which the current action clock runs out.
    action_deadline_ms: Option<i64>,
    /// The boundary writes, one at a time; see `persist`.
    writer: writer::Writer,
    /// Buy-ins and cash-outs in flight, beside the game.
    side: side_writes::SideWrites,
    /// When this table last asked the manager to re-assert its lease.
    reassert_asked: Option<Instant>,
    /// A move is under way: the instance the table is released to.
    moving_to: Option<String>,
    /// How this stopping copy ends once its buy-ins in flight have an
    /// outcome (each is answered as Postgres recorded it).
    ending: Option<lifecycle::Ending>,
    span: tracing::Span,
}

/// The span every log line of a table runs in. A root span: a new one per
/// hand replaces the old rather than nesting under it.
fn table_span(id: &TableId, fence: Fence, hand_no: u64) -> tracing::Span {
    tracing::info_span!(parent: None, "table", table_id = %id, fence = fence.0, hand_no)
}

/// Counts and logs a write refused because a newer owner holds the table.
fn note_stale_write(fence: Fence, current: Fence, what: &str) {
    metrics::counter!(instruments::STALE_BOUNDARY_WRITES).increment(1);
    warn!(
        event = "stale_owner_boundary_write",
        fence = fence.0,
        current = current.0,
        "StaleOwnerBoundaryWrite: {what} refused, a newer owner holds this table"
    );
}

impl<G: Game> Table<G> {
    pub fn new(
        id: TableId,
        fence: Fence,
        env: TableEnv,
        clock: Arc<LeaseClock>,
        owner: Owner,
        game: G,
    ) -> Table<G> {
        let span = table_span(&id, fence, game.number());
        let fanout = Fanout::new(id.clone(), fence, env.settings.history_events);
        let seated = game.occupants();
        let empty_since = seated.is_empty().then(Instant::now);
        // A revived table's players reconnect after the redeploy; until then
        // their seats are held like any dropped connection's.
        let now = Instant::now();
        let absent = seated.into_iter().map(|s| (s.player, now)).collect();
        Table {
            id,
            fence,
            env,
            clock,
            owner,
            game,
            phase: Phase::Open,
            fanout,
            action_timer: None,
            next_hand_timer: None,
            drain_timer: None,
            idle_timer: None,
            absent_timer: None,
            recheck_timer: None,
            me: None,
            empty_since,
            absent,
            action_deadline_ms: None,
            writer: writer::Writer::default(),
            side: side_writes::SideWrites::default(),
            reassert_asked: None,
            moving_to: None,
            ending: None,
            span,
        }
    }

    /// Log lines carry the current hand number; a fresh span per hand keeps
    /// exactly one `hand_no` field on each line.
    fn refresh_span(&mut self) {
        self.span = table_span(&self.id, self.fence, self.game.number());
    }
}

impl<G: Game> Actor for Table<G> {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let _g = self.span.clone().entered();
        info!(event = "table_hosted", "table hosted");
        metrics::gauge!(instruments::TABLES_HOSTED).increment(1.0);
        self.me = Some(ctx.address().downgrade());
        // No interval timers: the manager watches every lease deadline at
        // once and wakes only a table whose lease cannot be proven; the idle
        // release and the reconnect windows are armed only while due.
        self.arm_idle(ctx);
        self.arm_absent(ctx);
        self.schedule_next_hand(ctx);
    }

    fn stopped(&mut self, _ctx: &mut Self::Context) {
        metrics::gauge!(instruments::TABLES_HOSTED).decrement(1.0);
        if matches!(self.phase, Phase::Paused(_)) {
            metrics::gauge!(instruments::TABLES_PAUSED).decrement(1.0);
        }
        self.owner.stopped.do_send(TableStopped {
            table: self.id.clone(),
            fence: self.fence,
            frozen: match self.phase {
                Phase::Frozen(reason) => Some(reason),
                _ => None,
            },
        });
    }
}
