//! Postgres: tables, wallets, seats, hands, ledger, state transitions.
//!
//! Every write to a table's rows is fenced: it locks the table row
//! (`FOR UPDATE`), compares the owner's fencing token with the caller's, and
//! only then writes, in one transaction. The row lock serialises boundary
//! writes against a new owner's stamp, so a stale owner can never land a
//! write after a newer owner has stamped the table.

use std::time::Duration;

use serde::Serialize;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{Postgres, Row, Transaction};

use crate::game::{Chips, HandSummary, PlayerId, SeatNo, TableConfig};
use crate::types::{Fence, TableId};

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "stale owner boundary write on table {table}: fence {fence} is not the current {current}"
    )]
    StaleOwnerBoundaryWrite {
        table: TableId,
        fence: Fence,
        current: Fence,
    },
    #[error("table not found")]
    TableNotFound,
    #[error("hand {0} was already applied")]
    HandAlreadyApplied(u64),
    #[error("wallet balance is too low")]
    InsufficientFunds,
    #[error("seat is taken")]
    SeatTaken,
    #[error("player is already seated at this table")]
    AlreadySeated,
    #[error("player is not seated there")]
    NotSeated,
    #[error("table is {0}")]
    WrongState(String),
    #[error("amount out of range: {0}")]
    BadAmount(String),
    #[error("stored data disagrees with the table: {0}")]
    Inconsistent(String),
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
}

impl StoreError {
    /// Maps constraint violations to what they mean here.
    fn from_db(e: sqlx::Error) -> StoreError {
        if let Some(db) = e.as_database_error() {
            match (db.code().as_deref(), db.constraint()) {
                (Some("23505"), Some("seats_pkey")) => return StoreError::SeatTaken,
                (Some("23505"), Some("seats_table_id_player_key")) => {
                    return StoreError::AlreadySeated
                }
                (Some("23505"), Some("hands_pkey")) => return StoreError::HandAlreadyApplied(0),
                (Some("23514"), Some("accounts_balance_check")) => {
                    return StoreError::InsufficientFunds
                }
                (Some("22003"), _) => return StoreError::BadAmount("too large".into()),
                _ => {}
            }
        }
        StoreError::Db(e)
    }
}

fn db_chips(c: Chips) -> Result<i64, StoreError> {
    i64::try_from(c.0).map_err(|_| StoreError::BadAmount(format!("{} chips", c.0)))
}

fn chips_from_db(v: i64) -> Chips {
    Chips(u64::try_from(v).unwrap_or(0))
}

fn delta(from: Chips, to: Chips) -> Result<i64, StoreError> {
    let d = i128::from(to.0) - i128::from(from.0);
    i64::try_from(d).map_err(|_| StoreError::BadAmount("delta".into()))
}

#[derive(Debug, Clone, Serialize)]
pub struct TableRow {
    pub id: TableId,
    pub environment: String,
    pub state: String,
    pub state_reason: Option<String>,
    pub config: TableConfig,
    pub owner_instance: Option<String>,
    pub fence: Fence,
    pub hand_no: u64,
    pub button: Option<SeatNo>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct SeatRow {
    pub seat: SeatNo,
    pub player: String,
    pub stack: Chips,
}

#[derive(Debug, Clone, Serialize)]
pub struct Audit {
    pub wallets: i128,
    pub stacks: i128,
    pub granted: i128,
    pub delta: i128,
}

#[derive(Debug, Clone, Serialize)]
pub struct TableEvent {
    pub at: chrono::DateTime<chrono::Utc>,
    pub from: Option<String>,
    pub to: String,
    pub reason: Option<String>,
    pub owner: Option<String>,
    pub fence: Option<i64>,
}

/// A player whose seat is vacated and whose stack goes back to the wallet.
#[derive(Debug, Clone)]
pub struct CashOut {
    pub seat: SeatNo,
    pub player: PlayerId,
    pub stack: Chips,
}

const TABLE_COLUMNS: &str =
    "id, environment, state, state_reason, config, owner_instance, owner_fencing_token, hand_no, button";

fn table_row(r: &sqlx::postgres::PgRow) -> Result<TableRow, StoreError> {
    let id: String = r.try_get("id")?;
    let config: serde_json::Value = r.try_get("config")?;
    let config: TableConfig = serde_json::from_value(config)
        .map_err(|e| StoreError::Inconsistent(format!("table {id} config: {e}")))?;
    let button: Option<i16> = r.try_get("button")?;
    Ok(TableRow {
        id: TableId::parse(&id)
            .ok_or_else(|| StoreError::Inconsistent(format!("table id {id:?}")))?,
        environment: r.try_get("environment")?,
        state: r.try_get("state")?,
        state_reason: r.try_get("state_reason")?,
        config,
        owner_instance: r.try_get("owner_instance")?,
        fence: Fence::from_db(r.try_get("owner_fencing_token")?),
        hand_no: u64::try_from(r.try_get::<i64, _>("hand_no")?).unwrap_or(0),
        button: button.and_then(|b| SeatNo::try_from(b).ok()),
    })
}

#[derive(Clone)]
pub struct Store {
    pool: PgPool,
}

impl Store {
    pub fn connect_lazy(
        url: &str,
        max_connections: u32,
        acquire_timeout: Duration,
    ) -> Result<Store, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(acquire_timeout)
            .connect_lazy(url)?;
        Ok(Store { pool })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Applies the embedded migrations; sqlx holds an advisory lock while it
    /// does, so instances starting together migrate once.
    pub async fn migrate(&self) -> Result<(), sqlx::migrate::MigrateError> {
        MIGRATOR.run(&self.pool).await
    }

    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    pub async fn create_table(
        &self,
        env: &str,
        id: &TableId,
        config: &TableConfig,
    ) -> Result<TableRow, StoreError> {
        let config =
            serde_json::to_value(config).map_err(|e| StoreError::Inconsistent(e.to_string()))?;
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query(&format!(
            "INSERT INTO tables (id, environment, config, state, state_reason) \
             VALUES ($1, $2, $3, 'released', 'created') RETURNING {TABLE_COLUMNS}"
        ))
        .bind(id.as_str())
        .bind(env)
        .bind(config)
        .fetch_one(&mut *tx)
        .await?;
        // Born released: no other instance's revive scan picks it up before
        // its creator has taken the lease (an abandoned creation is hosted
        // by its first join).
        insert_event(&mut tx, id, None, "released", Some("created"), None, None).await?;
        tx.commit().await?;
        table_row(&row)
    }

    pub async fn table(&self, id: &TableId) -> Result<Option<TableRow>, StoreError> {
        let row = sqlx::query(&format!("SELECT {TABLE_COLUMNS} FROM tables WHERE id = $1"))
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(table_row).transpose()
    }

    pub async fn tables(&self, env: &str) -> Result<Vec<TableRow>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {TABLE_COLUMNS} FROM tables WHERE environment = $1 ORDER BY created_at, id"
        ))
        .bind(env)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(table_row).collect()
    }

    /// Tables a starting or surviving instance should host: open or draining
    /// ones, and those released by a shutdown (an idle-evicted table waits
    /// for its next join instead).
    pub async fn revivable(&self, env: &str) -> Result<Vec<TableId>, StoreError> {
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM tables WHERE environment = $1 \
             AND (state IN ('open', 'draining') OR (state = 'released' AND state_reason = 'shutdown')) \
             ORDER BY id",
        )
        .bind(env)
        .fetch_all(&self.pool)
        .await?;
        Ok(ids.iter().filter_map(|s| TableId::parse(s)).collect())
    }

    pub async fn seats(&self, id: &TableId) -> Result<Vec<SeatRow>, StoreError> {
        let rows =
            sqlx::query("SELECT seat, player, stack FROM seats WHERE table_id = $1 ORDER BY seat")
                .bind(id.as_str())
                .fetch_all(&self.pool)
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

    /// The highest token Postgres has seen for the table: the floor below
    /// which Redis must never issue a fence.
    pub async fn fence_floor(&self, id: &TableId) -> Result<Fence, StoreError> {
        let v: Option<i64> =
            sqlx::query_scalar("SELECT owner_fencing_token FROM tables WHERE id = $1")
                .bind(id.as_str())
                .fetch_optional(&self.pool)
                .await?;
        v.map(Fence::from_db).ok_or(StoreError::TableNotFound)
    }

    /// Records a freshly acquired fence as the table's current one. Zero rows
    /// means a newer owner has stamped already: the caller must release and
    /// refuse. A table revived after a shutdown or drain becomes open again.
    pub async fn stamp(
        &self,
        id: &TableId,
        fence: Fence,
        owner: &str,
        recover: bool,
    ) -> Result<TableRow, StoreError> {
        let mut tx = self.pool.begin().await?;
        let current = lock_table(&mut tx, id).await?;
        if current.fence >= fence {
            return Err(StoreError::StaleOwnerBoundaryWrite {
                table: id.clone(),
                fence,
                current: current.fence,
            });
        }
        let reopen = matches!(current.state.as_str(), "draining" | "released")
            || (recover && current.state == "frozen");
        let row = sqlx::query(&format!(
            "UPDATE tables SET owner_fencing_token = $2, owner_instance = $3, updated_at = now(), \
             state = CASE WHEN $4 THEN 'open' ELSE state END, \
             state_reason = CASE WHEN $4 THEN NULL ELSE state_reason END \
             WHERE id = $1 AND owner_fencing_token < $2 RETURNING {TABLE_COLUMNS}"
        ))
        .bind(id.as_str())
        .bind(fence.as_db())
        .bind(owner)
        .bind(reopen)
        .fetch_one(&mut *tx)
        .await?;
        let reason = match (reopen, recover) {
            (true, true) => "recovered",
            (true, false) if current.reason.as_deref() == Some("created") => "hosted",
            (true, false) => "revived",
            _ => "acquired",
        };
        let to = if reopen {
            "open"
        } else {
            current.state.as_str()
        };
        insert_event(
            &mut tx,
            id,
            Some(&current.state),
            to,
            Some(reason),
            Some(owner),
            Some(fence),
        )
        .await?;
        tx.commit().await?;
        table_row(&row)
    }

    /// A fenced state transition (frozen, draining, released, ...).
    pub async fn transition(
        &self,
        id: &TableId,
        fence: Fence,
        owner: &str,
        to: &str,
        reason: Option<&str>,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        let current = lock_fenced(&mut tx, id, fence).await?;
        set_state(&mut tx, id, to, reason).await?;
        insert_event(
            &mut tx,
            id,
            Some(&current.state),
            to,
            reason,
            Some(owner),
            Some(fence),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Wallet → stack, fenced. The table must be open.
    pub async fn buy_in(
        &self,
        id: &TableId,
        fence: Fence,
        seat: SeatNo,
        player: &PlayerId,
        amount: Chips,
    ) -> Result<Chips, StoreError> {
        let amount_db = db_chips(amount)?;
        let mut tx = self.pool.begin().await?;
        let current = lock_fenced(&mut tx, id, fence).await?;
        if current.state != "open" {
            return Err(StoreError::WrongState(current.state));
        }
        let balance: Option<i64> = sqlx::query_scalar(
            "UPDATE accounts SET balance = balance - $2, updated_at = now() \
             WHERE player = $1 AND balance >= $2 RETURNING balance",
        )
        .bind(&player.0)
        .bind(amount_db)
        .fetch_optional(&mut *tx)
        .await
        .map_err(StoreError::from_db)?;
        let balance = balance.ok_or(StoreError::InsufficientFunds)?;
        sqlx::query("INSERT INTO seats (table_id, seat, player, stack) VALUES ($1, $2, $3, $4)")
            .bind(id.as_str())
            .bind(i16::from(seat))
            .bind(&player.0)
            .bind(amount_db)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::from_db)?;
        insert_ledger(
            &mut tx, "buy_in", &player.0, id, None, fence, -amount_db, amount_db,
        )
        .await?;
        tx.commit().await?;
        Ok(chips_from_db(balance))
    }

    /// Stack → wallet for the listed seats, fenced; the stack must be what
    /// the table says it is.
    pub async fn cash_out(
        &self,
        id: &TableId,
        fence: Fence,
        outs: &[CashOut],
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        lock_fenced(&mut tx, id, fence).await?;
        cash_out_in(&mut tx, id, fence, outs, "cash_out").await?;
        tx.commit().await?;
        Ok(())
    }

    /// The boundary write at the end of a hand: one transaction that checks
    /// the fence, records the hand (its primary key makes a second apply
    /// impossible), moves every stack from its start to its end value, writes
    /// the ledger, and cashes out players who left during the hand.
    pub async fn write_hand(
        &self,
        id: &TableId,
        fence: Fence,
        owner: &str,
        summary: &HandSummary,
        button: Option<SeatNo>,
        outs: &[CashOut],
    ) -> Result<(), StoreError> {
        let hand_db =
            i64::try_from(summary.hand).map_err(|_| StoreError::BadAmount("hand number".into()))?;
        let result =
            serde_json::to_value(summary).map_err(|e| StoreError::Inconsistent(e.to_string()))?;
        // Chips move between seats only: a summary that creates or destroys
        // chips is refused before it can touch a wallet or a stack (I3).
        let mut net: i128 = 0;
        for s in &summary.seats {
            net += i128::from(delta(s.start_stack, s.end_stack)?);
        }
        if net != 0 {
            return Err(StoreError::Inconsistent(format!(
                "hand {} does not conserve chips: stacks change by {net}",
                summary.hand
            )));
        }
        let mut tx = self.pool.begin().await?;
        lock_fenced(&mut tx, id, fence).await?;
        sqlx::query("INSERT INTO hands (table_id, hand_no, fence, owner, result) VALUES ($1, $2, $3, $4, $5)")
            .bind(id.as_str())
            .bind(hand_db)
            .bind(fence.as_db())
            .bind(owner)
            .bind(result)
            .execute(&mut *tx)
            .await
            .map_err(|e| match StoreError::from_db(e) {
                StoreError::HandAlreadyApplied(_) => StoreError::HandAlreadyApplied(summary.hand),
                other => other,
            })?;
        for s in &summary.seats {
            let d = delta(s.start_stack, s.end_stack)?;
            let updated = sqlx::query(
                "UPDATE seats SET stack = $4 WHERE table_id = $1 AND seat = $2 AND player = $3 AND stack = $5",
            )
            .bind(id.as_str())
            .bind(i16::from(s.seat))
            .bind(&s.player.0)
            .bind(db_chips(s.end_stack)?)
            .bind(db_chips(s.start_stack)?)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::from_db)?;
            if updated.rows_affected() != 1 {
                return Err(StoreError::Inconsistent(format!(
                    "seat {} ({}) did not hold {} chips at the start of hand {}",
                    s.seat, s.player.0, s.start_stack, summary.hand
                )));
            }
            if d != 0 {
                insert_ledger(&mut tx, "hand", &s.player.0, id, Some(hand_db), fence, 0, d).await?;
            }
        }
        sqlx::query("UPDATE tables SET hand_no = GREATEST(hand_no, $2), button = $3, updated_at = now() WHERE id = $1")
            .bind(id.as_str())
            .bind(hand_db)
            .bind(button.map(i16::from))
            .execute(&mut *tx)
            .await?;
        cash_out_in(&mut tx, id, fence, outs, "cash_out").await?;
        tx.commit().await?;
        Ok(())
    }

    /// Burns a voided hand's number so it is never dealt twice.
    pub async fn record_void(
        &self,
        id: &TableId,
        fence: Fence,
        hand: u64,
    ) -> Result<(), StoreError> {
        let hand_db =
            i64::try_from(hand).map_err(|_| StoreError::BadAmount("hand number".into()))?;
        let mut tx = self.pool.begin().await?;
        lock_fenced(&mut tx, id, fence).await?;
        sqlx::query(
            "UPDATE tables SET hand_no = GREATEST(hand_no, $2), updated_at = now() WHERE id = $1",
        )
        .bind(id.as_str())
        .bind(hand_db)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Disposes a frozen table in one fenced transaction, each step audited:
    /// `frozen → escape` (the in-flight hand is void: stacks stay at the last
    /// boundary, which is what the seats hold), `→ custody` (every stack goes
    /// back to its wallet, with ledger rows), `→ closed`. Returns what each
    /// player got back.
    pub async fn dispose(
        &self,
        id: &TableId,
        fence: Fence,
        owner: &str,
    ) -> Result<Vec<(String, Chips)>, StoreError> {
        let mut tx = self.pool.begin().await?;
        let current = lock_fenced(&mut tx, id, fence).await?;
        if current.state != "frozen" {
            return Err(StoreError::WrongState(current.state));
        }
        let steps = [
            ("frozen", "escape", "in-flight hand voided"),
            ("escape", "custody", "stacks returned to wallets"),
        ];
        set_state(&mut tx, id, steps[0].1, Some(steps[0].2)).await?;
        insert_event(
            &mut tx,
            id,
            Some(steps[0].0),
            steps[0].1,
            Some(steps[0].2),
            Some(owner),
            Some(fence),
        )
        .await?;
        let rows =
            sqlx::query("SELECT seat, player, stack FROM seats WHERE table_id = $1 ORDER BY seat")
                .bind(id.as_str())
                .fetch_all(&mut *tx)
                .await?;
        let mut outs = Vec::with_capacity(rows.len());
        for r in &rows {
            outs.push(CashOut {
                seat: SeatNo::try_from(r.try_get::<i16, _>("seat")?)
                    .map_err(|_| StoreError::Inconsistent("seat number".into()))?,
                player: PlayerId(r.try_get("player")?),
                stack: chips_from_db(r.try_get("stack")?),
            });
        }
        cash_out_in(&mut tx, id, fence, &outs, "custody").await?;
        set_state(&mut tx, id, steps[1].1, Some(steps[1].2)).await?;
        insert_event(
            &mut tx,
            id,
            Some(steps[1].0),
            steps[1].1,
            Some(steps[1].2),
            Some(owner),
            Some(fence),
        )
        .await?;
        set_state(&mut tx, id, "closed", Some("disposed")).await?;
        insert_event(
            &mut tx,
            id,
            Some("custody"),
            "closed",
            Some("disposed"),
            Some(owner),
            Some(fence),
        )
        .await?;
        tx.commit().await?;
        Ok(outs.into_iter().map(|o| (o.player.0, o.stack)).collect())
    }

    pub async fn grant(&self, player: &str, chips: Chips) -> Result<Chips, StoreError> {
        let amount = db_chips(chips)?;
        let mut tx = self.pool.begin().await?;
        let balance: i64 = sqlx::query_scalar(
            "INSERT INTO accounts (player, balance, granted) VALUES ($1, $2, $2) \
             ON CONFLICT (player) DO UPDATE SET balance = accounts.balance + $2, \
             granted = accounts.granted + $2, updated_at = now() RETURNING balance",
        )
        .bind(player)
        .bind(amount)
        .fetch_one(&mut *tx)
        .await
        .map_err(StoreError::from_db)?;
        sqlx::query("INSERT INTO ledger (kind, player, wallet_delta) VALUES ('grant', $1, $2)")
            .bind(player)
            .bind(amount)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(chips_from_db(balance))
    }

    pub async fn balance(&self, player: &str) -> Result<Option<Chips>, StoreError> {
        let v: Option<i64> = sqlx::query_scalar("SELECT balance FROM accounts WHERE player = $1")
            .bind(player)
            .fetch_optional(&self.pool)
            .await?;
        Ok(v.map(chips_from_db))
    }

    /// Wallets + stacks − grants, read in one snapshot.
    pub async fn audit(&self) -> Result<Audit, StoreError> {
        let row = sqlx::query(
            "SELECT (SELECT COALESCE(SUM(balance), 0) FROM accounts)::TEXT AS wallets, \
                    (SELECT COALESCE(SUM(stack), 0) FROM seats)::TEXT AS stacks, \
                    (SELECT COALESCE(SUM(granted), 0) FROM accounts)::TEXT AS granted",
        )
        .fetch_one(&self.pool)
        .await?;
        let num = |name: &str| -> Result<i128, StoreError> {
            let s: String = row.try_get(name)?;
            s.parse()
                .map_err(|_| StoreError::Inconsistent(format!("{name} = {s}")))
        };
        let (wallets, stacks, granted) = (num("wallets")?, num("stacks")?, num("granted")?);
        Ok(Audit {
            wallets,
            stacks,
            granted,
            delta: wallets + stacks - granted,
        })
    }

    /// How many tables of the environment are in each state.
    pub async fn count_by_state(&self, env: &str) -> Result<Vec<(String, i64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT state, COUNT(*) AS n FROM tables WHERE environment = $1 GROUP BY state",
        )
        .bind(env)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("state")?, r.try_get("n")?)))
            .collect()
    }

    pub async fn events(&self, id: &TableId) -> Result<Vec<TableEvent>, StoreError> {
        let rows = sqlx::query(
            "SELECT at, from_state, to_state, reason, owner, fence FROM table_events WHERE table_id = $1 ORDER BY id",
        )
        .bind(id.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(TableEvent {
                    at: r.try_get("at")?,
                    from: r.try_get("from_state")?,
                    to: r.try_get("to_state")?,
                    reason: r.try_get("reason")?,
                    owner: r.try_get("owner")?,
                    fence: r.try_get("fence")?,
                })
            })
            .collect()
    }
}

struct Locked {
    state: String,
    reason: Option<String>,
    fence: Fence,
}

async fn lock_table(
    tx: &mut Transaction<'_, Postgres>,
    id: &TableId,
) -> Result<Locked, StoreError> {
    let row = sqlx::query(
        "SELECT state, state_reason, owner_fencing_token FROM tables WHERE id = $1 FOR UPDATE",
    )
    .bind(id.as_str())
    .fetch_optional(&mut **tx)
    .await?
    .ok_or(StoreError::TableNotFound)?;
    Ok(Locked {
        state: row.try_get("state")?,
        reason: row.try_get("state_reason")?,
        fence: Fence::from_db(row.try_get("owner_fencing_token")?),
    })
}

async fn lock_fenced(
    tx: &mut Transaction<'_, Postgres>,
    id: &TableId,
    fence: Fence,
) -> Result<Locked, StoreError> {
    let locked = lock_table(tx, id).await?;
    if locked.fence != fence {
        return Err(StoreError::StaleOwnerBoundaryWrite {
            table: id.clone(),
            fence,
            current: locked.fence,
        });
    }
    Ok(locked)
}

async fn set_state(
    tx: &mut Transaction<'_, Postgres>,
    id: &TableId,
    to: &str,
    reason: Option<&str>,
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

async fn cash_out_in(
    tx: &mut Transaction<'_, Postgres>,
    id: &TableId,
    fence: Fence,
    outs: &[CashOut],
    kind: &str,
) -> Result<(), StoreError> {
    for out in outs {
        let stack = db_chips(out.stack)?;
        let deleted = sqlx::query(
            "DELETE FROM seats WHERE table_id = $1 AND seat = $2 AND player = $3 AND stack = $4",
        )
        .bind(id.as_str())
        .bind(i16::from(out.seat))
        .bind(&out.player.0)
        .bind(stack)
        .execute(&mut **tx)
        .await?;
        if deleted.rows_affected() != 1 {
            return Err(StoreError::Inconsistent(format!(
                "seat {} ({}) does not hold {} chips",
                out.seat, out.player.0, out.stack
            )));
        }
        sqlx::query(
            "UPDATE accounts SET balance = balance + $2, updated_at = now() WHERE player = $1",
        )
        .bind(&out.player.0)
        .bind(stack)
        .execute(&mut **tx)
        .await
        .map_err(StoreError::from_db)?;
        insert_ledger(tx, kind, &out.player.0, id, None, fence, stack, -stack).await?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn insert_ledger(
    tx: &mut Transaction<'_, Postgres>,
    kind: &str,
    player: &str,
    id: &TableId,
    hand: Option<i64>,
    fence: Fence,
    wallet_delta: i64,
    stack_delta: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO ledger (kind, player, table_id, hand_no, fence, wallet_delta, stack_delta) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(kind)
    .bind(player)
    .bind(id.as_str())
    .bind(hand)
    .bind(fence.as_db())
    .bind(wallet_delta)
    .bind(stack_delta)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

async fn insert_event(
    tx: &mut Transaction<'_, Postgres>,
    id: &TableId,
    from: Option<&str>,
    to: &str,
    reason: Option<&str>,
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
