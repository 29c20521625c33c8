//! Taking a table: lease first, then the fence stamp, then the table's rows.
//! Nothing is constructed for a table this process does not own, and every
//! way an acquire can fail after the lease was taken hands the lease back.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{error, warn};

use crate::actors::table::{Loaded, Stored};
use crate::chips::{Chips, PlayerId};
use crate::games::Occupant;
use crate::instruments;
use crate::lease::{HeldLease, LeaseClock, LeaseError};
use crate::protocol::ClientError;
use crate::runtime::Runtime;
use crate::store::{StoreError, TableRow};
use crate::types::{
    recorded_freeze, ErrorCode, Fence, FreezeReason, StateReason, TableId, TableState,
};

/// Why a table could not be hosted, recovered or disposed here.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HostError {
    #[error("no such table")]
    NotFound,
    #[error("table is owned by {owner}")]
    OwnedElsewhere { owner: String, ttl_ms: i64 },
    /// Frozen in Postgres, for the reason recorded there.
    #[error("table is frozen ({0})")]
    Frozen(FreezeReason),
    #[error("table is {0}")]
    Closed(TableState),
    #[error("table is not frozen")]
    NotFrozen,
    #[error("server is draining")]
    Draining,
    #[error("the table is not hosted by this instance")]
    NotHosted,
    #[error("{0}")]
    Unavailable(String),
}

impl HostError {
    pub fn code(&self) -> ErrorCode {
        match self {
            HostError::NotFound | HostError::Closed(_) => ErrorCode::TableNotFound,
            HostError::OwnedElsewhere { .. } => ErrorCode::OwnedElsewhere,
            HostError::Frozen(_) => ErrorCode::TableFrozen,
            HostError::NotFrozen => ErrorCode::NotFrozen,
            HostError::Draining => ErrorCode::Draining,
            HostError::NotHosted => ErrorCode::NotHosted,
            HostError::Unavailable(_) => ErrorCode::Unavailable,
        }
    }

    fn frozen(row: &TableRow) -> HostError {
        HostError::Frozen(
            recorded_freeze(row.state, row.state_reason).unwrap_or(FreezeReason::InternalError),
        )
    }

    fn unavailable(e: impl std::fmt::Display) -> HostError {
        HostError::Unavailable(e.to_string())
    }
}

/// The one mapping from a hosting failure to what a client is told; the
/// HTTP API adds only a status.
impl From<HostError> for ClientError {
    fn from(e: HostError) -> ClientError {
        let mut ce = ClientError::new(e.code(), e.to_string());
        if let HostError::OwnedElsewhere { owner, .. } = e {
            ce.owner = Some(owner);
        }
        ce
    }
}

impl From<LeaseError> for HostError {
    fn from(e: LeaseError) -> HostError {
        match e {
            LeaseError::OwnedElsewhere { owner, ttl_ms } => {
                HostError::OwnedElsewhere { owner, ttl_ms }
            }
            other => HostError::unavailable(other),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Host an open (or shut-down) table.
    Host,
    /// Host a frozen table again under a new fence (operator's recover).
    Recover,
}

/// A table whose lease and stamp are taken and whose game is loaded: all
/// the manager needs to start its actor.
pub(super) struct Prepared {
    pub table: TableId,
    pub fence: Fence,
    pub clock: Arc<LeaseClock>,
    pub game: Loaded,
}

/// The table's row, if it belongs to this environment.
async fn row_here(rt: &Runtime, table: &TableId) -> Result<TableRow, HostError> {
    rt.store
        .table(table)
        .await
        .map_err(HostError::unavailable)?
        .filter(|r| r.environment == rt.environment())
        .ok_or(HostError::NotFound)
}

/// Takes the lease above the fence Postgres has seen, counting the outcome.
async fn acquire(rt: &Runtime, table: &TableId, floor: Fence) -> Result<Fence, HostError> {
    let result = rt.lease.acquire(table, floor).await;
    let label = match &result {
        Ok(_) => "acquired",
        Err(LeaseError::OwnedElsewhere { .. }) => "owned_elsewhere",
        Err(_) => "error",
    };
    metrics::counter!(instruments::LEASE_ACQUIRES, "result" => label).increment(1);
    Ok(result?)
}

/// Whether `row` is a table released to this instance for a move.
fn promised_here(rt: &Runtime, row: &TableRow) -> bool {
    row.state == TableState::Released
        && row.state_reason == Some(StateReason::Moved)
        && row.owner_instance.as_deref() == Some(rt.instance_id())
}

/// How long a table released to this instance for a move waits for its
/// previous owner's lease to be handed back.
const PROMISED_LEASE_WAIT: Duration = Duration::from_secs(2);

/// Takes the lease of a table released to this instance for a move. The
/// previous owner records the release in Postgres first and hands its
/// lease back just after, and its clients follow the table here as soon as
/// they are told of the move, so the lease may still be the previous
/// owner's for the moment of one Redis round trip: it is asked again until
/// it is handed back (or has expired), never taken over.
async fn acquire_promised(rt: &Runtime, table: &TableId, floor: Fence) -> Result<Fence, HostError> {
    let until = Instant::now() + PROMISED_LEASE_WAIT.min(rt.ttl());
    loop {
        match acquire(rt, table, floor).await {
            Err(HostError::OwnedElsewhere { .. }) if Instant::now() < until => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => return other,
        }
    }
}

/// Hands a lease back; harmless if it is already gone.
pub(super) async fn release(rt: &Runtime, table: &TableId, fence: Fence) {
    let lease = [HeldLease {
        table: table.clone(),
        fence,
    }];
    if let Err(e) = rt.lease.release_all(&lease).await {
        warn!(table_id = %table, error = %e, "could not release a lease; it expires with its TTL");
    }
}

pub(super) async fn acquire_and_load(
    rt: Arc<Runtime>,
    table: TableId,
    mode: Mode,
) -> Result<Prepared, HostError> {
    let row = row_here(&rt, &table).await?;
    match (mode, row.state) {
        (Mode::Host, s) if s.is_hostable() => {}
        (Mode::Recover, TableState::Frozen) => {}
        (Mode::Host, TableState::Frozen) => return Err(HostError::frozen(&row)),
        (Mode::Recover, s) if s.is_hostable() => return Err(HostError::NotFrozen),
        (_, other) => return Err(HostError::Closed(other)),
    }
    // The takeover rule (I1): an open table of another owner is not even
    // asked of Redis while that owner is alive on record, so its lease (if
    // the key merely vanished) is left for it to re-assert. The stamp
    // checks again under the row lock.
    // A table released for a move is promised to its target in the same
    // way while the target is alive: a join elsewhere is relayed there.
    let promised = matches!(
        (row.state, row.state_reason),
        (TableState::Open | TableState::Draining, _)
            | (TableState::Released, Some(StateReason::Moved))
    );
    if let (Mode::Host, true, Some(owner)) = (mode, promised, row.owner_instance.as_deref()) {
        if owner != rt.instance_id()
            && rt
                .store
                .owner_alive(&table, owner)
                .await
                .map_err(HostError::unavailable)?
        {
            metrics::counter!(instruments::LEASE_ACQUIRES, "result" => "owned_elsewhere")
                .increment(1);
            return Err(HostError::OwnedElsewhere {
                owner: owner.to_string(),
                ttl_ms: -1,
            });
        }
    }
    let sent = Instant::now();
    let fence = if promised_here(&rt, &row) {
        acquire_promised(&rt, &table, row.fence).await?
    } else {
        acquire(&rt, &table, row.fence).await?
    };
    match load_under_lease(&rt, &table, fence, mode).await {
        Ok(game) => Ok(Prepared {
            table,
            fence,
            clock: LeaseClock::new(sent, rt.ttl()),
            game,
        }),
        Err(e) => {
            release(&rt, &table, fence).await;
            Err(e)
        }
    }
}

/// Stamps the fence and loads the game; the caller holds the lease.
async fn load_under_lease(
    rt: &Runtime,
    table: &TableId,
    fence: Fence,
    mode: Mode,
) -> Result<Loaded, HostError> {
    let stamped = rt
        .store
        .stamp(table, fence, rt.instance_id(), mode == Mode::Recover)
        .await
        .map_err(|e| {
            warn!(table_id = %table, fence = fence.0, error = %e, "stamp refused; releasing the lease");
            match e {
                StoreError::StaleOwnerBoundaryWrite {
                    frozen: Some(reason),
                    ..
                } => HostError::Frozen(reason),
                StoreError::StaleOwnerBoundaryWrite { .. } => {
                    HostError::unavailable("a newer owner stamped the table")
                }
                StoreError::OwnerAlive { owner } => HostError::OwnedElsewhere { owner, ttl_ms: -1 },
                other => HostError::unavailable(other),
            }
        })?;
    match stamped.state {
        TableState::Open => {}
        TableState::Frozen => return Err(HostError::frozen(&stamped)),
        other => return Err(HostError::Closed(other)),
    }
    let seats = rt
        .store
        .seats(table)
        .await
        .map_err(HostError::unavailable)?
        .into_iter()
        .map(|s| Occupant {
            seat: s.seat,
            player: PlayerId(s.player),
            stack: s.stack,
        })
        .collect();
    // Read after the stamp: every journal row of an earlier owner either
    // committed before it (the group commit holds the row FOR KEY SHARE,
    // the stamp FOR UPDATE) or is refused after it, so this is the whole
    // journal of the hand in progress.
    let journal = rt
        .store
        .journal_in_progress(table, stamped.hand_no)
        .await
        .map_err(HostError::unavailable)?;
    let stored = Stored {
        config: &stamped.config,
        number: stamped.hand_no,
        state: &stamped.game_state,
        seats,
        journal,
    };
    rt.games.resume(&stamped.game_kind, stored).map_err(|e| {
        error!(table_id = %table, error = %e, "stored table does not satisfy the rules");
        HostError::unavailable(e)
    })
}

/// Takes a frozen table's lease (refused while another live owner holds
/// it), stamps a new fence, disposes it in one fenced transaction, and
/// releases the lease. Answers what each player got back.
pub(super) async fn dispose(
    rt: Arc<Runtime>,
    table: TableId,
) -> Result<Vec<(String, Chips)>, HostError> {
    let row = row_here(&rt, &table).await?;
    if row.state != TableState::Frozen {
        return Err(HostError::NotFrozen);
    }
    let fence = acquire(&rt, &table, row.fence).await?;
    let result = async {
        rt.store
            .stamp(&table, fence, rt.instance_id(), false)
            .await
            .map_err(HostError::unavailable)?;
        rt.store
            .dispose(&table, fence, rt.instance_id())
            .await
            .map_err(|e| match e {
                StoreError::WrongState(_) => HostError::NotFrozen,
                other => HostError::unavailable(other),
            })
    }
    .await;
    release(&rt, &table, fence).await;
    if result.is_ok() {
        warn!(event = "table_disposed", table_id = %table, fence = fence.0, "frozen table disposed: escape, custody, closed");
    }
    result
}
