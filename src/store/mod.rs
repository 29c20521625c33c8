//! Postgres: tables, wallets, seats, hands, ledger, state transitions.
//!
//! Every write to a table's rows is fenced: it locks the table row
//! (`FOR NO KEY UPDATE`; `FOR UPDATE` for what moves the fence), compares
//! the owner's fencing token with the caller's, and only then writes, in one
//! transaction. The row lock serialises boundary writes against a new
//! owner's stamp, so a stale owner can never land a write after a newer
//! owner has stamped the table. The journal's group commit holds the row
//! `FOR KEY SHARE`: it waits only for what moves the fence.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::Row;

use crate::chips::{Chips, PlayerId, SeatNo};
use crate::games::GameKind;
use crate::games::{SeatResult, Settlement};
use crate::types::{
    recorded_freeze, Fence, FreezeReason, LedgerKind, StateReason, TableId, TableState,
};

mod chips;
mod fenced;
mod instances;
mod journal;
mod tables;
mod tx;

pub use fenced::TableStore;
pub use instances::InstanceRow;
pub use journal::{Appended, Entry, EntryKind, Journal, JournalSettings};

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
        /// Why the row is frozen, when Postgres records it frozen (an
        /// operator's freeze moves the fence too): the refused owner tells
        /// its clients that reason rather than looking for a newer owner.
        frozen: Option<FreezeReason>,
    },
    #[error("table not found")]
    TableNotFound,
    /// The table is open under another owner that was seen alive within
    /// the owner timeout: it may still be dealing (the takeover rule).
    #[error("table is open under {owner}, which is alive")]
    OwnerAlive { owner: String },
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
    WrongState(TableState),
    #[error("amount out of range: {0}")]
    BadAmount(String),
    #[error("stored data disagrees with the table: {0}")]
    Inconsistent(String),
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
}

impl StoreError {
    /// Refused for now, and certainly without effect: no connection could
    /// be had, or Postgres aborted the transaction (a statement or lock
    /// budget, a serialization failure or deadlock, too many connections,
    /// not accepting connections yet). Unlike a connection lost mid-way,
    /// which may have committed.
    pub fn is_refused_for_now(&self) -> bool {
        match self {
            StoreError::Db(sqlx::Error::PoolTimedOut) => true,
            StoreError::Db(sqlx::Error::Database(db)) => matches!(
                db.code().as_deref(),
                Some("57014" | "55P03" | "40001" | "40P01" | "53300" | "57P03")
            ),
            _ => false,
        }
    }

    /// A failure that may pass if the same write is tried again: the pool
    /// or the server could not be reached, a budget ran out, the
    /// connection broke. Everything else (a stale fence, a rule of the
    /// data) would fail the same way again.
    pub fn is_transient(&self) -> bool {
        let StoreError::Db(e) = self else {
            return false;
        };
        match e {
            sqlx::Error::PoolTimedOut
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::WorkerCrashed => true,
            sqlx::Error::Database(db) => matches!(
                db.code().as_deref(),
                // statement or lock timeout, serialization or deadlock,
                // too many connections, an admin's terminate, the server
                // shutting down or not accepting connections (55000 at
                // connect), a broken connection, an idle transaction
                // ended by its budget.
                Some(
                    "57014"
                        | "55P03"
                        | "40001"
                        | "40P01"
                        | "53300"
                        | "57P01"
                        | "57P02"
                        | "57P03"
                        | "08000"
                        | "08003"
                        | "08006"
                        | "08001"
                        | "08004"
                        | "25P03"
                        | "55000"
                )
            ),
            _ => false,
        }
    }

    /// Maps constraint violations to what they mean here.
    pub(crate) fn from_db(e: sqlx::Error) -> StoreError {
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

pub(crate) fn db_chips(c: Chips) -> Result<i64, StoreError> {
    i64::try_from(c.0).map_err(|_| StoreError::BadAmount(format!("{} chips", c.0)))
}

pub(crate) fn chips_from_db(v: i64) -> Chips {
    Chips(u64::try_from(v).unwrap_or(0))
}

pub(crate) fn delta(from: Chips, to: Chips) -> Result<i64, StoreError> {
    let d = i128::from(to.0) - i128::from(from.0);
    i64::try_from(d).map_err(|_| StoreError::BadAmount("delta".into()))
}

#[derive(Debug, Clone, Serialize)]
pub struct TableRow {
    pub id: TableId,
    pub environment: String,
    pub state: TableState,
    pub state_reason: Option<StateReason>,
    /// The game the table plays.
    pub game_kind: GameKind,
    /// The game's config, as that game validated it at creation.
    pub config: serde_json::Value,
    pub owner_instance: Option<String>,
    pub fence: Fence,
    /// The number of the last boundary recorded (or voided).
    pub hand_no: u64,
    /// What the game keeps across boundaries (`Game::boundary_state`).
    pub game_state: serde_json::Value,
}

/// A settled boundary as it is recorded: its number, each seat's stack from
/// its start to its end value, the game's result and the state the game
/// keeps across boundaries.
#[derive(Debug, Clone)]
pub struct Boundary {
    pub number: u64,
    pub seats: Vec<SeatResult>,
    pub result: serde_json::Value,
    pub state: serde_json::Value,
}

impl Boundary {
    /// A game's settlement as it is recorded, with the state the game keeps
    /// across boundaries.
    pub fn of<R: Serialize>(
        settlement: Settlement<R>,
        state: serde_json::Value,
    ) -> Result<Boundary, serde_json::Error> {
        Ok(Boundary {
            number: settlement.number,
            result: serde_json::to_value(&settlement.result)?,
            seats: settlement.seats,
            state,
        })
    }
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
    pub from: Option<TableState>,
    pub to: TableState,
    pub reason: Option<StateReason>,
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

pub(crate) const TABLE_COLUMNS: &str =
    "id, environment, state, state_reason, game_kind, config, owner_instance, owner_fencing_token, hand_no, game_state";

pub(crate) fn table_row(r: &sqlx::postgres::PgRow) -> Result<TableRow, StoreError> {
    let id: String = r.try_get("id")?;
    let config: serde_json::Value = r.try_get("config")?;
    let kind: String = r.try_get("game_kind")?;
    let game_kind = GameKind::parse(&kind)
        .ok_or_else(|| StoreError::Inconsistent(format!("table {id} plays {kind:?}")))?;
    Ok(TableRow {
        id: TableId::parse(&id)
            .ok_or_else(|| StoreError::Inconsistent(format!("table id {id:?}")))?,
        environment: r.try_get("environment")?,
        state: r.try_get("state")?,
        state_reason: r.try_get("state_reason")?,
        game_kind,
        config,
        owner_instance: r.try_get("owner_instance")?,
        fence: Fence::from_db(r.try_get("owner_fencing_token")?),
        hand_no: u64::try_from(r.try_get::<i64, _>("hand_no")?).unwrap_or(0),
        game_state: r.try_get("game_state")?,
    })
}

/// Bounds on every Postgres wait (I11), set on each connection.
#[derive(Debug, Clone, Copy)]
pub struct Budgets {
    pub statement: Duration,
    pub lock: Duration,
    pub idle_in_transaction: Duration,
}

impl Default for Budgets {
    fn default() -> Budgets {
        Budgets {
            statement: Duration::from_secs(5),
            lock: Duration::from_secs(2),
            idle_in_transaction: Duration::from_secs(10),
        }
    }
}

#[derive(Clone)]
pub struct Store {
    pool: PgPool,
    /// How long an owner must have been unseen before its open tables may
    /// be taken: one lease TTL.
    owner_timeout: Duration,
    /// This process's incarnation, stamped on the tables it takes, so its
    /// revive scan can tell its own hosted tables from those an earlier
    /// process of its id left behind.
    incarnation: Option<String>,
    /// The process's journal writer, started on first use.
    journal: Arc<std::sync::OnceLock<Journal>>,
    journal_settings: JournalSettings,
}

impl Store {
    /// A pool that connects on first use. Every connection carries the
    /// budgets and `application_name` (the instance id), so an operator's
    /// `pg_stat_activity` shows which process holds what. TLS follows the
    /// URL's `sslmode` (`require`, `verify-ca`, `verify-full`, with
    /// `sslrootcert` for a private CA).
    pub fn connect_lazy(
        url: &str,
        application_name: &str,
        max_connections: u32,
        acquire_timeout: Duration,
        budgets: Budgets,
    ) -> Result<Store, StoreError> {
        let ms = |d: Duration| d.as_millis().to_string();
        let options = url
            .parse::<PgConnectOptions>()?
            .application_name(application_name)
            .options([
                ("statement_timeout", ms(budgets.statement)),
                ("lock_timeout", ms(budgets.lock)),
                (
                    "idle_in_transaction_session_timeout",
                    ms(budgets.idle_in_transaction),
                ),
            ]);
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(acquire_timeout)
            .connect_lazy_with(options);
        Ok(Store {
            pool,
            owner_timeout: Duration::from_secs(15),
            incarnation: None,
            journal: Arc::default(),
            journal_settings: JournalSettings::default(),
        })
    }

    /// Sizes the journal's group commit (before its first use).
    pub fn with_journal(mut self, settings: JournalSettings) -> Store {
        self.journal_settings = settings;
        self
    }

    /// The process's journal writer, started on the current Tokio runtime
    /// at first use.
    pub fn journal(&self) -> &Journal {
        self.journal
            .get_or_init(|| Journal::start(self.pool.clone(), self.journal_settings))
    }

    /// The journal of the hand (or game) in progress at `table`, whose last
    /// recorded boundary is `boundary` ([`journal::in_progress`]); empty when
    /// nothing is in progress.
    pub async fn journal_in_progress(
        &self,
        table: &TableId,
        boundary: u64,
    ) -> Result<Vec<Entry>, StoreError> {
        journal::in_progress(&self.pool, table, boundary).await
    }

    /// Sets the incarnation this process stamps on the tables it takes.
    pub fn with_incarnation(mut self, incarnation: &str) -> Store {
        self.incarnation = Some(incarnation.to_string());
        self
    }

    /// Sets how long an owner must have been unseen before another
    /// process may take its open tables (the lease TTL).
    pub fn with_owner_timeout(mut self, ttl: Duration) -> Store {
        self.owner_timeout = ttl;
        self
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Applies the embedded migrations; sqlx holds an advisory lock while it
    /// does, so instances starting together migrate once. The budgets are
    /// lifted on the migrating connection: waiting for another instance's
    /// migration is expected, not a stuck lock.
    pub async fn migrate(&self) -> Result<(), sqlx::migrate::MigrateError> {
        let mut conn = self.pool.acquire().await?;
        sqlx::raw_sql("SET statement_timeout = 0; SET lock_timeout = 0")
            .execute(&mut *conn)
            .await?;
        let result = MIGRATOR.run(&mut *conn).await;
        // Back to the connection's own budgets before the pool reuses it.
        sqlx::raw_sql("RESET statement_timeout; RESET lock_timeout")
            .execute(&mut *conn)
            .await?;
        result
    }

    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }
}
