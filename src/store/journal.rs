//! The journal of commands (I15) and its group commit.
//!
//! Every command a table applies (a deal's start with its seed, a seat's
//! act, the action clock's act, a stand-up) is appended here under the
//! table's fence before any event it produced is told. One writer per
//! process takes the entries of every table: what arrives while a batch is
//! being written (or within the configured window) goes out in the next,
//! as one statement over arrays joined to `tables` on each row's own fence.
//! A stale table's entry is refused alone; its neighbours in the batch
//! commit.
//!
//! A table has at most one entry in flight (it waits for the commit before
//! it goes on), so a batch never holds two entries of one table and the
//! journal's order per table is the order the table applied them.

use std::sync::Arc;
use std::time::Duration;

use sqlx::{PgPool, Row};
use tokio::sync::{mpsc, oneshot, Semaphore};

use super::StoreError;
use crate::chips::SeatNo;
use crate::instruments;
use crate::types::{recorded_freeze, Fence, StateReason, TableId, TableState};

/// What kind of command a journal row holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A deal: the hand (or game) `number` starts, decided by `seed`.
    Start,
    /// A seat's answer to the open decision: `command` is the `act`
    /// frame's game fields.
    Act,
    /// The action clock answered the open decision for its seat.
    Timeout,
    /// A seated player stood up during the hand.
    Leave,
}

impl EntryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Start => "start",
            EntryKind::Act => "act",
            EntryKind::Timeout => "timeout",
            EntryKind::Leave => "leave",
        }
    }
}

/// One command, as the journal keeps it.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// The boundary number of the hand or game in progress.
    pub number: u64,
    /// Its place in that hand or game under this fence (0 for the start).
    pub seq: u32,
    pub kind: EntryKind,
    pub seat: Option<SeatNo>,
    pub decision: Option<u64>,
    /// The command's own fields (an act's), as JSON.
    pub command: Option<serde_json::Value>,
    /// The start's seed: what decides the hand's randomness. Server-side
    /// only: never sent, never logged.
    pub seed: Option<[u8; 32]>,
    /// The deadline (Unix ms) of the decision this command opened, if it
    /// opened one: the next owner keeps it (the action clock's time left).
    pub deadline_ms: Option<i64>,
    /// The `seq` of the last event the table had told when this command's
    /// events went out (they follow it, numbered on): what lets the next
    /// owner tell a reconnecting client the events it missed.
    pub told_after: Option<u64>,
    /// How long the decision this command answered had been open when it
    /// came, for a game that keeps its own clock (its replay is charged the
    /// same).
    pub spent_ms: Option<u64>,
}

impl Entry {
    /// A deal of hand `number`, decided by `seed`; `seats` is who sat
    /// where with what when it was dealt (`[[seat, player, stack], …]`).
    pub fn start(number: u64, seed: [u8; 32], seats: serde_json::Value) -> Entry {
        Entry {
            number,
            seq: 0,
            kind: EntryKind::Start,
            seat: None,
            decision: None,
            command: Some(serde_json::json!({ "seats": seats })),
            seed: Some(seed),
            deadline_ms: None,
            told_after: None,
            spent_ms: None,
        }
    }
}

/// How the group commit is sized.
#[derive(Clone, Copy, Debug)]
pub struct JournalSettings {
    /// How long the writer waits for more entries once one has arrived
    /// (0: it sends what is queued at once).
    pub window: Duration,
    /// The most entries in one batch.
    pub max_batch: usize,
    /// The most batches in flight at once (each on its own connection).
    pub max_in_flight: usize,
}

impl Default for JournalSettings {
    fn default() -> JournalSettings {
        JournalSettings {
            window: Duration::ZERO,
            max_batch: 512,
            max_in_flight: 4,
        }
    }
}

struct Pending {
    table: TableId,
    fence: Fence,
    entry: Entry,
    answer: oneshot::Sender<Result<Appended, StoreError>>,
}

/// What became of one appended entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Appended {
    /// Committed now.
    Committed,
    /// Already in the journal under the same fence (an earlier try whose
    /// answer was lost).
    AlreadyThere,
}

/// The process's journal writer: cheap to clone, shared by every table.
#[derive(Clone)]
pub struct Journal {
    tx: mpsc::UnboundedSender<Pending>,
}

impl Journal {
    /// Starts the writer on the current Tokio runtime.
    pub fn start(pool: PgPool, settings: JournalSettings) -> Journal {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(pool, settings, rx));
        Journal { tx }
    }

    /// Appends `entry` to table `table`'s journal under `fence`, in the
    /// next batch. Refused with `StaleOwnerBoundaryWrite` when Postgres
    /// holds another fence for the table.
    pub async fn append(
        &self,
        table: &TableId,
        fence: Fence,
        entry: Entry,
    ) -> Result<Appended, StoreError> {
        let (answer, told) = oneshot::channel();
        self.tx
            .send(Pending {
                table: table.clone(),
                fence,
                entry,
                answer,
            })
            .map_err(|_| StoreError::Db(sqlx::Error::PoolClosed))?;
        told.await
            .map_err(|_| StoreError::Db(sqlx::Error::WorkerCrashed))?
    }
}

async fn run(pool: PgPool, settings: JournalSettings, mut rx: mpsc::UnboundedReceiver<Pending>) {
    let slots = Arc::new(Semaphore::new(settings.max_in_flight.max(1)));
    let max = settings.max_batch.max(1);
    while let Some(first) = rx.recv().await {
        // A batch slot first: while every slot is busy, entries queue up
        // and go out together in the next batch.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut batch = vec![first];
        if !settings.window.is_zero() {
            let until = tokio::time::Instant::now() + settings.window;
            while batch.len() < max {
                match tokio::time::timeout_at(until, rx.recv()).await {
                    Ok(Some(p)) => batch.push(p),
                    Ok(None) | Err(_) => break,
                }
            }
        }
        while batch.len() < max {
            match rx.try_recv() {
                Ok(p) => batch.push(p),
                Err(_) => break,
            }
        }
        let pool = pool.clone();
        tokio::spawn(async move {
            write_batch(&pool, batch).await;
            drop(slot);
        });
    }
}

/// Writes one batch and answers each of its entries.
async fn write_batch(pool: &PgPool, mut batch: Vec<Pending>) {
    metrics::histogram!(instruments::JOURNAL_BATCH_SIZE).record(batch.len() as f64);
    match insert(pool, &batch).await {
        Ok(outcomes) => {
            for (p, outcome) in batch.into_iter().zip(outcomes) {
                answer(p, outcome);
            }
        }
        Err(e) if batch.len() == 1 => {
            if let Some(p) = batch.pop() {
                answer(p, Err(e));
            }
        }
        Err(e) if !e.is_transient() => {
            // Refused as a whole for something one entry did (Postgres
            // refused a row): each entry is written alone, so only the one
            // at fault is refused.
            for p in batch {
                let outcome = match insert(pool, std::slice::from_ref(&p)).await {
                    Ok(mut one) => one.pop().unwrap_or(Err(StoreError::TableNotFound)),
                    Err(e) => Err(e),
                };
                answer(p, outcome);
            }
        }
        Err(e) => {
            // The batch as a whole failed for now (Postgres unreachable, a
            // budget ran out): every entry is told so, as a failure worth
            // trying again, and its table tries again.
            let text = e.to_string();
            for p in batch {
                let again = std::io::Error::other(text.clone());
                answer(p, Err(StoreError::Db(sqlx::Error::Io(again))));
            }
        }
    }
}

/// Tells one entry's table what became of it; commits and a stale owner's
/// refusals are counted.
fn answer(p: Pending, outcome: Result<Appended, StoreError>) {
    match &outcome {
        Ok(Appended::Committed) => metrics::counter!(instruments::JOURNAL_ENTRIES).increment(1),
        Err(StoreError::StaleOwnerBoundaryWrite { .. }) => {
            metrics::counter!(instruments::JOURNAL_STALE_REFUSED).increment(1)
        }
        _ => {}
    }
    let _ = p.answer.send(outcome);
}

/// The batch as one statement: each row is inserted only if its table's
/// row holds its fence (`FOR KEY SHARE` on it: a takeover's stamp, which
/// holds the row `FOR UPDATE`, waits for the batch and then sees its rows,
/// while the table's own fenced writes, `FOR NO KEY UPDATE`, never hold
/// the batch up), then the refused ones are told why.
async fn insert(
    pool: &PgPool,
    batch: &[Pending],
) -> Result<Vec<Result<Appended, StoreError>>, StoreError> {
    let n = batch.len();
    let mut tables = Vec::with_capacity(n);
    let mut numbers = Vec::with_capacity(n);
    let mut fences = Vec::with_capacity(n);
    let mut seqs = Vec::with_capacity(n);
    let mut kinds = Vec::with_capacity(n);
    let mut seats: Vec<Option<i16>> = Vec::with_capacity(n);
    let mut decisions: Vec<Option<i64>> = Vec::with_capacity(n);
    let mut commands: Vec<Option<String>> = Vec::with_capacity(n);
    let mut seeds: Vec<Option<Vec<u8>>> = Vec::with_capacity(n);
    let mut deadlines: Vec<Option<i64>> = Vec::with_capacity(n);
    let mut told: Vec<Option<i64>> = Vec::with_capacity(n);
    let mut spent: Vec<Option<i64>> = Vec::with_capacity(n);
    for p in batch {
        let e = &p.entry;
        tables.push(p.table.as_str());
        numbers.push(db_u64(e.number, "journal number")?);
        fences.push(p.fence.as_db());
        seqs.push(i32::try_from(e.seq).map_err(|_| StoreError::BadAmount("journal seq".into()))?);
        kinds.push(e.kind.as_str());
        seats.push(e.seat.map(i16::from));
        decisions.push(e.decision.map(|d| db_u64(d, "decision")).transpose()?);
        commands.push(e.command.as_ref().map(|c| c.to_string()));
        seeds.push(e.seed.map(|s| s.to_vec()));
        deadlines.push(e.deadline_ms);
        told.push(e.told_after.map(|t| db_u64(t, "told_after")).transpose()?);
        spent.push(e.spent_ms.map(|t| db_u64(t, "spent_ms")).transpose()?);
    }
    let inserted: Vec<(String, i64, i32)> = sqlx::query_as(
        "WITH input AS ( \
             SELECT * FROM UNNEST($1::text[], $2::int8[], $3::int8[], $4::int4[], $5::text[], \
                                  $6::int2[], $7::int8[], $8::text[], $9::bytea[], $10::int8[], \
                                  $11::int8[], $12::int8[]) \
                 AS i(table_id, number, fence, seq, kind, seat, decision, command, seed, \
                      deadline_ms, told_after, spent_ms) \
         ), fenced AS ( \
             SELECT t.id, t.owner_fencing_token AS fence FROM tables t JOIN input i \
                 ON t.id = i.table_id AND t.owner_fencing_token = i.fence \
             FOR KEY SHARE OF t \
         ) \
         INSERT INTO journal (table_id, number, fence, seq, kind, seat, decision, command, seed, \
                              deadline_ms, told_after, spent_ms) \
         SELECT i.table_id, i.number, i.fence, i.seq, i.kind, i.seat, i.decision, \
                i.command::jsonb, i.seed, i.deadline_ms, i.told_after, i.spent_ms \
         FROM input i JOIN fenced f ON f.id = i.table_id AND f.fence = i.fence \
         ON CONFLICT DO NOTHING \
         RETURNING table_id, fence, seq",
    )
    .bind(&tables)
    .bind(&numbers)
    .bind(&fences)
    .bind(&seqs)
    .bind(&kinds)
    .bind(&seats)
    .bind(&decisions)
    .bind(&commands)
    .bind(&seeds)
    .bind(&deadlines)
    .bind(&told)
    .bind(&spent)
    .fetch_all(pool)
    .await?;
    let mut outcomes: Vec<Option<Result<Appended, StoreError>>> = batch
        .iter()
        .zip(&seqs)
        .map(|(p, seq)| {
            inserted
                .iter()
                .any(|(t, f, s)| t == p.table.as_str() && *f == p.fence.as_db() && s == seq)
                .then_some(Ok(Appended::Committed))
        })
        .collect();
    let refused: Vec<&str> = batch
        .iter()
        .zip(&outcomes)
        .filter(|(_, o)| o.is_none())
        .map(|(p, _)| p.table.as_str())
        .collect();
    if refused.is_empty() {
        return Ok(outcomes.into_iter().flatten().collect());
    }
    // Why each refused row was refused: another fence, or a row already
    // there under this one (a retry of a write whose answer was lost).
    let rows = sqlx::query(
        "SELECT id, owner_fencing_token, state, state_reason FROM tables WHERE id = ANY($1)",
    )
    .bind(&refused)
    .fetch_all(pool)
    .await?;
    for (p, outcome) in batch.iter().zip(outcomes.iter_mut()) {
        if outcome.is_some() {
            continue;
        }
        let row = rows.iter().find(|r| {
            r.try_get::<&str, _>("id")
                .is_ok_and(|id| id == p.table.as_str())
        });
        *outcome = Some(match row {
            None => Err(StoreError::TableNotFound),
            Some(row) => {
                let current = Fence::from_db(row.try_get("owner_fencing_token")?);
                if current == p.fence {
                    Ok(Appended::AlreadyThere)
                } else {
                    let state: TableState = row.try_get("state")?;
                    let reason: Option<StateReason> = row.try_get("state_reason")?;
                    Err(StoreError::StaleOwnerBoundaryWrite {
                        table: p.table.clone(),
                        fence: p.fence,
                        current,
                        frozen: recorded_freeze(state, reason),
                    })
                }
            }
        });
    }
    Ok(outcomes.into_iter().flatten().collect())
}

/// The journal of the hand (or game) in progress at a table whose last
/// recorded boundary is `boundary`: the entries of the latest number past
/// it, from its latest start on (a hand dealt again under a newer fence
/// replaces an earlier deal of the same number; a hand continued under a
/// newer fence after an owner change keeps its earlier rows), in `seq`
/// order. Empty when nothing is in progress.
pub async fn in_progress(
    pool: &PgPool,
    table: &TableId,
    boundary: u64,
) -> Result<Vec<Entry>, StoreError> {
    let rows = sqlx::query(
        "WITH latest AS ( \
             SELECT number, fence FROM journal \
             WHERE table_id = $1 AND number > $2 AND seq = 0 AND kind = 'start' \
             ORDER BY number DESC, fence DESC LIMIT 1 \
         ) \
         SELECT j.number, j.fence, j.seq, j.kind, j.seat, j.decision, j.command, j.seed, \
                j.deadline_ms, j.told_after, j.spent_ms \
         FROM journal j JOIN latest l ON j.number = l.number AND j.fence >= l.fence \
         WHERE j.table_id = $1 \
         ORDER BY j.seq, j.fence",
    )
    .bind(table.as_str())
    .bind(db_u64(boundary, "boundary number")?)
    .fetch_all(pool)
    .await?;
    rows.iter().map(entry_of).collect()
}

fn entry_of(row: &sqlx::postgres::PgRow) -> Result<Entry, StoreError> {
    let broken = |what: &str| StoreError::Inconsistent(format!("journal row: {what}"));
    let kind = match row.try_get::<&str, _>("kind")? {
        "start" => EntryKind::Start,
        "act" => EntryKind::Act,
        "timeout" => EntryKind::Timeout,
        "leave" => EntryKind::Leave,
        _ => return Err(broken("unknown kind")),
    };
    let seed = match row.try_get::<Option<Vec<u8>>, _>("seed")? {
        Some(bytes) => Some(<[u8; 32]>::try_from(bytes).map_err(|_| broken("seed size"))?),
        None => None,
    };
    let number: i64 = row.try_get("number")?;
    let seq: i32 = row.try_get("seq")?;
    Ok(Entry {
        number: u64::try_from(number).map_err(|_| broken("number"))?,
        seq: u32::try_from(seq).map_err(|_| broken("seq"))?,
        kind,
        seat: row
            .try_get::<Option<i16>, _>("seat")?
            .map(|s| SeatNo::try_from(s).map_err(|_| broken("seat")))
            .transpose()?,
        decision: row
            .try_get::<Option<i64>, _>("decision")?
            .map(|d| u64::try_from(d).map_err(|_| broken("decision")))
            .transpose()?,
        command: row.try_get("command")?,
        seed,
        deadline_ms: row.try_get("deadline_ms")?,
        told_after: row
            .try_get::<Option<i64>, _>("told_after")?
            .map(|t| u64::try_from(t).map_err(|_| broken("told_after")))
            .transpose()?,
        spent_ms: row
            .try_get::<Option<i64>, _>("spent_ms")?
            .map(|t| u64::try_from(t).map_err(|_| broken("spent_ms")))
            .transpose()?,
    })
}

fn db_u64(v: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(v).map_err(|_| StoreError::BadAmount(what.into()))
}
