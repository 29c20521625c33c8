//! Postgres: a fresh database of its own for every test, dropped afterwards.

use std::time::Duration;

use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{Connection, PgConnection};

const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// The Postgres the test databases are created on: `PITBOSS_TEST_PG_URL` or
/// the local one. Connect to it to look at databases from the outside.
pub fn admin_pg_url() -> String {
    std::env::var("PITBOSS_TEST_PG_URL").unwrap_or_else(|_| DEFAULT_PG_URL.into())
}

/// `url` with its database name replaced by `db` (query string kept).
pub fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let authority_start = base.find("://").map(|i| i + 3).unwrap_or(0);
    let root = match base[authority_start..].find('/') {
        Some(i) => &base[..authority_start + i],
        None => base,
    };
    match query {
        Some(q) => format!("{root}/{db}?{q}"),
        None => format!("{root}/{db}"),
    }
}

/// A database of its own for one test, created from `PITBOSS_TEST_PG_URL`.
/// It is dropped by `drop_db` or, failing that, when the handle drops (set
/// `PITBOSS_TEST_KEEP_DB=1` to keep it for a post-mortem).
pub struct TestDb {
    pub name: String,
    pub url: String,
    admin_url: String,
    pool: PgPool,
    dropped: bool,
}

/// Creates `pitboss_t_<uuid>` on the test Postgres. The schema is empty: the
/// pitboss binary applies its migrations when a server starts.
pub async fn test_db() -> TestDb {
    let admin_url = admin_pg_url();
    let name = format!("pitboss_t_{}", uuid::Uuid::new_v4().simple());
    let mut admin = PgConnection::connect(&admin_url).await.unwrap_or_else(|e| {
        panic!("connect to test Postgres at {admin_url} (run scripts/services.sh?): {e}")
    });
    let create = format!("CREATE DATABASE \"{name}\"");
    let mut attempt = 0;
    loop {
        attempt += 1;
        match sqlx::raw_sql(&create).execute(&mut admin).await {
            Ok(_) => break,
            // Concurrent CREATE DATABASE can trip over a transient lock on
            // the template; another try a moment later succeeds.
            Err(e) if attempt < 5 => {
                eprintln!("CREATE DATABASE {name} failed (attempt {attempt}): {e}; retrying");
                tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
            }
            Err(e) => panic!("CREATE DATABASE {name}: {e}"),
        }
    }
    let _ = admin.close().await;
    let url = with_database(&admin_url, &name);
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(10))
        .connect_lazy(&url)
        .unwrap_or_else(|e| panic!("bad test database url {url}: {e}"));
    TestDb {
        name,
        url,
        admin_url,
        pool,
        dropped: false,
    }
}

impl TestDb {
    /// A pool on this database. It connects lazily, so it sees the schema
    /// the server migrated once a server has started.
    pub async fn pool(&self) -> PgPool {
        self.pool.clone()
    }

    /// Holds the row lock on table `id` until the returned transaction ends,
    /// as a fenced write stuck elsewhere would (`FOR NO KEY UPDATE`): buy-ins,
    /// cash-outs, boundary writes and stamps wait behind it; the journal
    /// does not.
    #[allow(dead_code)] // not every test binary locks rows
    pub async fn lock_table_row(&self, id: &str) -> sqlx::Transaction<'static, sqlx::Postgres> {
        let mut tx = self.pool.begin().await.expect("begin");
        sqlx::query("SELECT id FROM tables WHERE id = $1 FOR NO KEY UPDATE")
            .bind(id)
            .execute(&mut *tx)
            .await
            .expect("lock the row");
        tx
    }

    /// pitboss's store on this database, migrated.
    #[allow(dead_code)] // not every test binary uses the store directly
    pub async fn store(&self, application_name: &str) -> pitboss::store::Store {
        let store = pitboss::store::Store::connect_lazy(
            &self.url,
            application_name,
            5,
            Duration::from_secs(5),
            pitboss::store::Budgets::default(),
        )
        .expect("store");
        store.migrate().await.expect("migrate the test database");
        store
    }

    /// Waits until exactly one statement on this database waits for a lock
    /// (a write queued behind `lock_table_row`); false after 10 s.
    #[allow(dead_code)] // not every test binary locks rows
    pub async fn one_waits_for_a_lock(&self) -> bool {
        super::eventually(
            Duration::from_secs(10),
            Duration::from_millis(20),
            || async {
                let n: i64 = sqlx::query_scalar(
                    "SELECT COUNT(*) FROM pg_stat_activity \
                 WHERE datname = current_database() AND wait_event_type = 'Lock'",
                )
                .fetch_one(&self.pool)
                .await
                .expect("pg_stat_activity");
                n == 1
            },
        )
        .await
    }

    /// Moves table `id`'s fence on in Postgres, as a newer owner's stamp
    /// would, behind its hosting owner's back.
    #[allow(dead_code)] // not every test binary stamps
    pub async fn stamp_behind_owner(&self, id: &str) {
        sqlx::query(
            "UPDATE tables SET owner_fencing_token = owner_fencing_token + 1 WHERE id = $1",
        )
        .bind(id)
        .execute(&self.pool)
        .await
        .expect("stamp behind the owner's back");
    }

    /// Drops the database (terminating any connection still on it).
    /// Best-effort: a failure is reported on stderr, never panics.
    pub async fn drop_db(&mut self) {
        if self.dropped {
            return;
        }
        self.dropped = true;
        self.pool.close().await;
        drop_database(&self.admin_url, &self.name).await;
    }
}

/// Drops `name`; a failure is reported on stderr.
async fn drop_database(admin_url: &str, name: &str) {
    if let Err(e) = try_drop_database(admin_url, name).await {
        eprintln!("warning: could not drop test database {name}: {e}");
    }
}

async fn try_drop_database(admin_url: &str, name: &str) -> Result<(), sqlx::Error> {
    let mut admin = PgConnection::connect(admin_url).await?;
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = $1 AND pid <> pg_backend_pid()",
    )
    .bind(name)
    .execute(&mut admin)
    .await?;
    let plain = format!("DROP DATABASE IF EXISTS \"{name}\"");
    if sqlx::raw_sql(&plain).execute(&mut admin).await.is_err() {
        // A connection that arrived after the terminate; FORCE (PG 13+)
        // ends it as part of the drop.
        let forced = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
        sqlx::raw_sql(&forced).execute(&mut admin).await?;
    }
    let _ = admin.close().await;
    Ok(())
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if self.dropped || std::env::var_os("PITBOSS_TEST_KEEP_DB").is_some() {
            return;
        }
        self.dropped = true;
        let admin_url = self.admin_url.clone();
        let name = self.name.clone();
        // Drop cannot await and may run inside the test's runtime, so the
        // cleanup gets a thread and a runtime of its own.
        let cleanup = std::thread::spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("warning: no runtime to drop test database {name}: {e}");
                    return;
                }
            };
            rt.block_on(drop_database(&admin_url, &name));
        });
        let _ = cleanup.join();
    }
}
