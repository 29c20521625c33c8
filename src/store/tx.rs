//! Steps shared by the fenced transactions: the row lock and fence check,
//! state and event rows, and cash-outs with their ledger rows.

use sqlx::{Postgres, Row, Transaction};

use super::*;

pub(super) struct Locked {
    pub state: TableState,
    pub reason: Option<StateReason>,
    pub fence: Fence,
    pub owner: Option<String>,
}

impl Locked {
    /// Why the row is frozen, if it is.
    pub fn frozen(&self) -> Option<FreezeReason> {
        recorded_freeze(self.state, self.reason)
    }
}

/// How a transaction holds the table row.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum RowLock {
    /// `FOR UPDATE`: for what moves the fence (a stamp, a re-assert, an
    /// operator's freeze). It waits for the journal's batches (which hold
    /// the row `FOR KEY SHARE`), and they for it, so a newer owner sees
    /// every journal row an older fence committed.
    Fence,
    /// `FOR NO KEY UPDATE`: for a fenced write that keeps the fence
    /// (buy-ins, cash-outs, boundaries, transitions). Serialised against
    /// each other and against a stamp, but never in the way of the
    /// journal: the hand in progress goes on while such a write waits.
    Write,
}

pub(super) async fn lock_table(
    tx: &mut Transaction<'_, Postgres>,
    id: &TableId,
) -> Result<Locked, StoreError> {
    lock_row(tx, id, RowLock::Fence).await
}

pub(super) async fn lock_row(
    tx: &mut Transaction<'_, Postgres>,
    id: &TableId,
    lock: RowLock,
) -> Result<Locked, StoreError> {
    let sql = match lock {
        RowLock::Fence => {
            "SELECT state, state_reason, owner_fencing_token, owner_instance FROM tables \
             WHERE id = $1 FOR UPDATE"
        }
        RowLock::Write => {
            "SELECT state, state_reason, owner_fencing_token, owner_instance FROM tables \
             WHERE id = $1 FOR NO KEY UPDATE"
        }
    };
    let row = sqlx::query(sql)
        .bind(id.as_str())
        .fetch_optional(&mut **tx)
        .await?
        .ok_or(StoreError::TableNotFound)?;
    Ok(Locked {
        state: row.try_get("state")?,
        reason: row.try_get("state_reason")?,
        fence: Fence::from_db(row.try_get("owner_fencing_token")?),
        owner: row.try_get("owner_instance")?,
    })
}

/// Locks the table row for a write that keeps the fence, and checks it.
pub(super) async fn lock_fenced(
    tx: &mut Transaction<'_, Postgres>,
    id: &TableId,
    fence: Fence,
) -> Result<Locked, StoreError> {
    lock_fenced_as(tx, id, fence, RowLock::Write).await
}

pub(super) async fn lock_fenced_as(
    tx: &mut Transaction<'_, Postgres>,
    id: &TableId,
    fence: Fence,
    lock: RowLock,
) -> Result<Locked, StoreError> {
    let locked = lock_row(tx, id, lock).await?;
    if locked.fence != fence {
        return Err(StoreError::StaleOwnerBoundaryWrite {
            table: id.clone(),
            fence,
            current: locked.fence,
            frozen: locked.frozen(),
        });
    }
    Ok(locked)
}

/// One audited state change inside a fenced transaction.
pub(super) struct Step<'a> {
    pub from: TableState,
    pub to: TableState,
    pub reason: StateReason,
    pub owner: &'a str,
    pub fence: Fence,
}

pub(super) async fn move_state(
    tx: &mut Transaction<'_, Postgres>,
    id: &TableId,
    step: Step<'_>,
) -> Result<(), StoreError> {
    set_state(tx, id, step.to, Some(step.reason)).await?;
    insert_event(
        tx,
        id,
        Some(step.from),
        step.to,
        Some(step.reason),
        Some(step.owner),
        Some(step.fence),
    )
    .await
}

/// Voids the hand (or game) in progress in `tx`: its journal goes (every
/// row past the last boundary) and its number is burnt (`hand_no` moves to
/// it, and at least to `told`, a number its players were told is void), so
/// a recovery hosts the table at the last boundary instead of resuming the
/// hand, and never deals that number again.
pub(super) async fn void_in_progress(
    tx: &mut Transaction<'_, Postgres>,
    id: &TableId,
    told: Option<i64>,
) -> Result<(), StoreError> {
    sqlx::query(
        "WITH gone AS ( \
             DELETE FROM journal WHERE table_id = $1 \
             AND number > (SELECT hand_no FROM tables WHERE id = $1) \
             RETURNING number \
         ) \
         UPDATE tables SET hand_no = GREATEST(hand_no, \
             COALESCE((SELECT MAX(number) FROM gone), hand_no), COALESCE($2, hand_no)) \
         WHERE id = $1",
    )
    .bind(id.as_str())
    .bind(told)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

pub(super) async fn seat_rows<'e>(
    db: impl sqlx::PgExecutor<'e>,
    id: &TableId,
) -> Result<Vec<SeatRow>, StoreError> {
    let rows =
        sqlx::query("SELECT seat, player, stack FROM seats WHERE table_id = $1 ORDER BY seat")
            .bind(id.as_str())
            .fetch_all(db)
            .await?;
    rows.iter()
        .map(|r| {
            Ok(SeatRow {
                seat: SeatNo::try_from(r.try_get::<i16, _>("seat")?)
                    .map_err(|_| StoreError::Inconsistent("seat number".into()))?,
                player: r.try_get("player")?,
                stack: chips_from_db(r.try_get("stack")?),
            })
        })
        .collect()
}

async fn set_state(
    tx: &mut Transaction<'_, Postgres>,
    id: &TableId,
    to: TableState,
    reason: Option<StateReason>,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE tables SET state = $2, state_reason = $3, updated_at = now() WHERE id = $1",
    )
    .bind(id.as_str())
    .bind(to)
    .bind(reason)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

pub(super) async fn cash_out_in(
    tx: &mut Transaction<'_, Postgres>,
    id: &TableId,
    fence: Fence,
    outs: &[CashOut],
    kind: LedgerKind,
) -> Result<(), StoreError> {
    if outs.is_empty() {
        return Ok(());
    }
    let mut seats = Vec::with_capacity(outs.len());
    let mut players = Vec::with_capacity(outs.len());
    let mut stacks = Vec::with_capacity(outs.len());
    for out in outs {
        seats.push(i16::from(out.seat));
        players.push(out.player.0.as_str());
        stacks.push(db_chips(out.stack)?);
    }
    // Every seat vacated, its stack credited to its player's wallet and a
    // ledger row written, in one statement; each seat only if it holds the
    // stack the table says. When one does not, the caller's transaction
    // ends without a commit, so nothing of it stays.
    let vacated: Vec<i16> = sqlx::query_scalar(
        "WITH v AS ( \
             SELECT * FROM UNNEST($2::int2[], $3::text[], $4::int8[]) WITH ORDINALITY AS v(seat, player, stack, n)), \
         gone AS ( \
             DELETE FROM seats AS s USING v \
             WHERE s.table_id = $1 AND s.seat = v.seat AND s.player = v.player AND s.stack = v.stack \
             RETURNING s.seat, s.player, s.stack), \
         paid AS ( \
             UPDATE accounts AS a SET balance = a.balance + gone.stack, updated_at = now() \
             FROM gone WHERE a.player = gone.player), \
         logged AS ( \
             INSERT INTO ledger (kind, player, table_id, hand_no, fence, wallet_delta, stack_delta) \
             SELECT $5, v.player, $1, NULL, $6, v.stack, -v.stack FROM v \
             WHERE v.player IN (SELECT player FROM gone) ORDER BY v.n) \
         SELECT seat FROM gone",
    )
    .bind(id.as_str())
    .bind(&seats)
    .bind(&players)
    .bind(&stacks)
    .bind(kind)
    .bind(fence.as_db())
    .fetch_all(&mut **tx)
    .await
    .map_err(StoreError::from_db)?;
    if vacated.len() == outs.len() {
        return Ok(());
    }
    Err(StoreError::Inconsistent(
        match first_not_returned(outs, |o| o.seat, &vacated) {
            Some(out) => format!(
                "seat {} ({}) does not hold {} chips",
                out.seat, out.player.0, out.stack
            ),
            None => "a cash-out lists one seat twice".into(),
        },
    ))
}

/// The first of `listed` whose seat a seat-by-seat statement did not
/// return: the row it did not find as listed. `None` when every seat came
/// back, and fewer rows than listed means one was listed twice.
pub(super) fn first_not_returned<'a, T>(
    listed: &'a [T],
    seat: impl Fn(&T) -> SeatNo,
    returned: &[i16],
) -> Option<&'a T> {
    listed
        .iter()
        .find(|x| !returned.contains(&i16::from(seat(x))))
}

pub(super) async fn insert_event(
    tx: &mut Transaction<'_, Postgres>,
    id: &TableId,
    from: Option<TableState>,
    to: TableState,
    reason: Option<StateReason>,
    owner: Option<&str>,
    fence: Option<Fence>,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO table_events (table_id, from_state, to_state, reason, owner, fence) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(id.as_str())
    .bind(from)
    .bind(to)
    .bind(reason)
    .bind(owner)
    .bind(fence.map(Fence::as_db))
    .execute(&mut **tx)
    .await?;
    Ok(())
}
