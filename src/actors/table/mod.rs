//! One hosted table: its game (any [`Game`]), its timers, its subscribed sessions,
//! and the fenced writes at every boundary.
//!
//! - [`handlers`]: the messages sessions and the manager send it;
//! - [`play`]: the game's flow (its rules, the action clock, boundary
//!   writes, the next deal);
//! - [`cash_out`]: standing players up, and cash-outs beside the hand;
//! - [`fanout`]: subscribers, history, replay, snapshots;
//! - [`lifecycle`]: freeze, drain, idle release, absent players, deadline;
//! - [`timers`]: the one-shot deadlines, armed only while something is due;
//! - [`replay`]: the hand in progress rebuilt from its journal.

mod cash_out;
mod env;
mod error;
mod fanout;
mod handle;
mod handlers;
mod lifecycle;
mod play;
mod registry;
mod replay;
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

use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;
use tracing::{info, warn};

use crate::games::Game;
use crate::instruments;
use crate::lease::LeaseClock;
use crate::types::{Fence, FreezeReason, PauseReason, TableId, TableState};
use fanout::Fanout;

/// Where a table is in its life, with what each stage needs to know.
enum Phase {
    Open,
    /// Letting its hand finish before it is released, for a shutdown or a
    /// move.
    Draining(Draining),
    /// Not dealing for a while (its lease or its liveness cannot be
    /// proven), the hand in progress held as it is; no action is taken.
    Paused(Pause),
    /// No longer playing (frozen, drained, idle, superseded): recording its
    /// state, about to stop.
    Stopping(Stop),
}

/// A drain under way.
struct Draining {
    /// A move: the instance the table is released to; `None` for a
    /// shutdown.
    to: Option<String>,
}

/// A pause under way.
struct Pause {
    reason: PauseReason,
    /// When this table last asked the manager to re-assert its lease.
    reassert_asked: Option<Instant>,
}

/// A table that stops.
#[derive(Default)]
struct Stop {
    /// Frozen, with the reason the manager and the watchers are told.
    frozen: Option<FreezeReason>,
    /// How it ends once its buy-ins in flight have an outcome (each is
    /// answered as Postgres recorded it).
    then: Option<lifecycle::Ending>,
}

impl Phase {
    fn paused(reason: PauseReason) -> Phase {
        Phase::Paused(Pause {
            reason,
            reassert_asked: None,
        })
    }

    fn frozen(reason: FreezeReason) -> Phase {
        Phase::Stopping(Stop {
            frozen: Some(reason),
            then: None,
        })
    }

    fn stopping() -> Phase {
        Phase::Stopping(Stop::default())
    }

    fn is_open(&self) -> bool {
        matches!(self, Phase::Open)
    }

    fn is_draining(&self) -> bool {
        matches!(self, Phase::Draining(_))
    }

    /// Why play is paused, while it is.
    fn pause_reason(&self) -> Option<PauseReason> {
        match self {
            Phase::Paused(p) => Some(p.reason),
            _ => None,
        }
    }

    /// No longer playing: frozen or released.
    fn is_stopped(&self) -> bool {
        matches!(self, Phase::Stopping(_))
    }

    /// Why the table froze, once it has.
    fn freeze_reason(&self) -> Option<FreezeReason> {
        match self {
            Phase::Stopping(stop) => stop.frozen,
            _ => None,
        }
    }

    /// The state a snapshot reports.
    fn state(&self) -> TableState {
        match self {
            Phase::Open | Phase::Paused(_) => TableState::Open,
            Phase::Draining(_) => TableState::Draining,
            Phase::Stopping(Stop {
                frozen: Some(_), ..
            }) => TableState::Frozen,
            Phase::Stopping(_) => TableState::Released,
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
    /// Its deadlines, one timer per kind at most.
    timers: timers::Timers,
    /// This table's own address, for the messages it sends itself.
    me: Option<actix::WeakAddr<Table<G>>>,
    /// Whether anybody sits here, and who is seated without a connection.
    presence: timers::Presence,
    /// Unix millis at which the current action clock runs out.
    action_deadline_ms: Option<i64>,
    /// The deadline the next decision announced carries: the one its
    /// command was journalled with, so the journal and the players agree.
    announced_deadline_ms: Option<i64>,
    /// A hand whose result could not be recorded and was told void: the
    /// freeze that follows voids it in Postgres too.
    voided: Option<u64>,
    /// The hand in progress as the journal left it, continued once the
    /// actor starts.
    resumed: Option<Box<replay::Resumed<G>>>,
    /// The boundary writes, one at a time; see `persist`.
    writer: writer::Writer,
    /// The hand in progress as the journal knows it (its seed, the place
    /// of its next command).
    hand: Option<play::Journalled>,
    /// Buy-ins and cash-outs in flight, beside the game.
    side: side_writes::SideWrites,
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
        // A revived table's players reconnect after the redeploy; until then
        // their seats are held like any dropped connection's.
        let seated = game.occupants().into_iter().map(|s| s.player).collect();
        let presence = timers::Presence::hosted(seated, Instant::now());
        Table {
            id,
            fence,
            env,
            clock,
            owner,
            game,
            phase: Phase::Open,
            fanout,
            timers: timers::Timers::default(),
            me: None,
            presence,
            action_deadline_ms: None,
            announced_deadline_ms: None,
            voided: None,
            resumed: None,
            writer: writer::Writer::default(),
            side: side_writes::SideWrites::default(),
            hand: None,
            span,
        }
    }

    /// Hosts the hand (or game) in progress its journal rebuilt, if any.
    pub(super) fn resuming(mut self, resumed: Option<replay::Resumed<G>>) -> Table<G> {
        self.resumed = resumed.map(Box::new);
        self
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
        if let Some(resumed) = self.resumed.take() {
            self.continue_hand(*resumed, ctx);
        }
        self.schedule_next_hand(ctx);
    }

    fn stopped(&mut self, _ctx: &mut Self::Context) {
        metrics::gauge!(instruments::TABLES_HOSTED).decrement(1.0);
        if self.phase.pause_reason().is_some() {
            metrics::gauge!(instruments::TABLES_PAUSED).decrement(1.0);
        }
        self.owner.stopped.do_send(TableStopped {
            table: self.id.clone(),
            fence: self.fence,
            frozen: self.phase.freeze_reason(),
        });
    }
}
