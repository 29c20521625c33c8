//! The run's own Postgres database on a shared server, and the two Postgres
//! faults. Only that database is ever exhausted or locked: the server's
//! other databases, and its global connection budget, are left alone.
//!
//! The instances connect as a login role of the run's own, which owns the
//! database. Postgres enforces a database's `CONNECTION LIMIT` on such a
//! role (never on a superuser), so the limit exhausts the run's database
//! alone. Where the role cannot be created, the instances connect as the
//! given user and exhaustion closes the database to new connections
//! (`ALLOW_CONNECTIONS false`) instead.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{bail, Context as _};
use futures::future::BoxFuture;
use rand::Rng;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{Connection, PgConnection};

/// Holder connections an exhaustion opens on top of the instances' own.
const HOLDERS: usize = 2;

pub const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

pub struct ChaosDb {
    admin_url: String,
    pub name: String,
    /// The role the instances connect as, when the run could create one.
    role: Option<String>,
    /// What the instances connect with.
    pub url: String,
    /// The given user on the run's database: checks, monitoring, faults.
    pub pool: PgPool,
    dropped: AtomicBool,
}

/// `url` with its database name replaced by `db`, and its user and password
/// by `login` when given (query string kept).
fn with_database(url: &str, db: &str, login: Option<(&str, &str)>) -> anyhow::Result<String> {
    let mut u = url::Url::parse(url).with_context(|| "the Postgres URL does not parse")?;
    u.set_path(&format!("/{db}"));
    if let Some((user, password)) = login {
        u.set_username(user)
            .map_err(|()| anyhow::anyhow!("the Postgres URL cannot take a user name"))?;
        u.set_password(Some(password))
            .map_err(|()| anyhow::anyhow!("the Postgres URL cannot take a password"))?;
    }
    Ok(u.to_string())
}

fn quoted(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

impl ChaosDb {
    /// Creates `pitboss_chaos_<random>` (and a role of that name) on the
    /// server at `admin_url`. The schema is empty: pitboss migrates it.
    pub async fn create(admin_url: &str) -> anyhow::Result<ChaosDb> {
        let mut rng = rand::thread_rng();
        let name = format!("pitboss_chaos_{:012x}", rng.gen::<u64>() & 0xffff_ffff_ffff);
        let password = format!("{:032x}", rng.gen::<u128>());
        let mut admin = PgConnection::connect(admin_url)
            .await
            .with_context(|| format!("connecting to Postgres at {}", redact(admin_url)))?;
        let create_role = format!(
            "CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD '{password}'",
            quoted(&name)
        );
        let role = match sqlx::raw_sql(&create_role).execute(&mut admin).await {
            Ok(_) => Some(name.clone()),
            Err(e) => {
                eprintln!(
                    "chaos: could not create a role of the run's own ({e}); the instances connect as the given user, and exhaustion closes the database instead"
                );
                None
            }
        };
        let mut create = format!("CREATE DATABASE {}", quoted(&name));
        if let Some(r) = &role {
            create.push_str(&format!(" OWNER {}", quoted(r)));
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            match sqlx::raw_sql(&create).execute(&mut admin).await {
                Ok(_) => break,
                // Concurrent CREATE DATABASE elsewhere on the server can trip
                // over a transient lock on the template.
                Err(_) if attempt < 5 => {
                    tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
                }
                Err(e) => {
                    if let Some(r) = &role {
                        let _ = sqlx::raw_sql(&format!("DROP ROLE IF EXISTS {}", quoted(r)))
                            .execute(&mut admin)
                            .await;
                    }
                    return Err(e).context(format!("CREATE DATABASE {name}"));
                }
            }
        }
        let _ = admin.close().await;
        let url = match &role {
            Some(r) => with_database(admin_url, &name, Some((r, &password)))?,
            None => with_database(admin_url, &name, None)?,
        };
        let pool = PgPoolOptions::new()
            .max_connections(3)
            .acquire_timeout(Duration::from_secs(10))
            .connect_lazy(&with_database(admin_url, &name, None)?)
            .context("a pool on the run's database")?;
        Ok(ChaosDb {
            admin_url: admin_url.to_string(),
            name,
            role,
            url,
            pool,
            dropped: AtomicBool::new(false),
        })
    }

    async fn admin(&self) -> anyhow::Result<PgConnection> {
        PgConnection::connect(&self.admin_url)
            .await
            .context("connecting to the Postgres server")
    }

    /// Exhausts the run's database for `hold`: no instance can open a new
    /// connection, and the connections of `victim` (an instance id, which
    /// pitboss sets as `application_name`) are ended, so its pool has to
    /// reconnect into a full database. Returns what was done.
    pub fn exhaust<'a>(
        &'a self,
        victim: &'a str,
        hold: Duration,
    ) -> BoxFuture<'a, anyhow::Result<String>> {
        // Boxed where its lifetimes are known: the compiler cannot prove a
        // future holding sqlx executors `Send` for every lifetime once it
        // is nested inside a spawned task.
        Box::pin(self.exhaust_now(victim, hold))
    }

    async fn exhaust_now(&self, victim: &str, hold: Duration) -> anyhow::Result<String> {
        let mut admin = self.admin().await?;
        let db = quoted(&self.name);
        let mut holders = Vec::new();
        let what = match &self.role {
            Some(_) => {
                let others: i64 = sqlx::query_scalar(
                    "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = $1 \
                     AND application_name IS DISTINCT FROM $2",
                )
                .bind(self.name.clone())
                .bind(victim.to_string())
                .fetch_one(&mut admin)
                .await?;
                let limit = others + HOLDERS as i64;
                sqlx::query(&format!("ALTER DATABASE {db} CONNECTION LIMIT {limit}"))
                    .execute(&mut admin)
                    .await?;
                // The given user is a superuser on the default set-up: the
                // limit does not apply to it, but its connections count.
                let holder_url = with_database(&self.admin_url, &self.name, None)?;
                for _ in 0..HOLDERS {
                    match PgConnection::connect(&holder_url).await {
                        Ok(c) => holders.push(c),
                        Err(e) => eprintln!("chaos: a holder connection failed: {e}"),
                    }
                }
                format!(
                    "connection limit {limit} ({others} others + {} held)",
                    holders.len()
                )
            }
            None => {
                sqlx::query(&format!("ALTER DATABASE {db} ALLOW_CONNECTIONS false"))
                    .execute(&mut admin)
                    .await?;
                "closed to new connections".to_string()
            }
        };
        let ended: Vec<bool> = sqlx::query_scalar(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = $1 AND application_name = $2",
        )
        .bind(self.name.clone())
        .bind(victim.to_string())
        .fetch_all(&mut admin)
        .await
        .unwrap_or_default();
        tokio::time::sleep(hold).await;
        for h in holders {
            let _ = h.close().await;
        }
        let restore = match &self.role {
            Some(_) => format!("ALTER DATABASE {db} CONNECTION LIMIT -1"),
            None => format!("ALTER DATABASE {db} ALLOW_CONNECTIONS true"),
        };
        // The restore must land, or the database stays exhausted.
        let mut tries = 0;
        loop {
            let done = sqlx::query(&restore).execute(&mut admin).await.map(|_| ());
            match done {
                Ok(()) => break,
                Err(e) if tries >= 10 => bail!("could not lift the exhaustion ({restore}): {e}"),
                Err(_) => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    admin = self.admin().await?;
                }
            }
        }
        let _ = admin.close().await;
        Ok(format!(
            "{what}; {} connections of {victim} ended",
            ended.len()
        ))
    }

    /// Holds the row of `table` in `tables` with `SELECT … FOR UPDATE` for
    /// `hold`, as a stuck transaction would: boundary writes of that table
    /// wait for it up to their lock budget.
    pub fn hold_row_lock<'a>(
        &'a self,
        table: &'a str,
        hold: Duration,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(self.hold_row_lock_now(table, hold))
    }

    async fn hold_row_lock_now(&self, table: &str, hold: Duration) -> anyhow::Result<()> {
        let url = with_database(&self.admin_url, &self.name, None)?;
        let mut conn = PgConnection::connect(&url).await?;
        let mut tx = conn.begin().await?;
        sqlx::query("SET LOCAL lock_timeout = '5s'")
            .execute(&mut *tx)
            .await?;
        sqlx::query("SELECT 1 FROM tables WHERE id = $1 FOR UPDATE")
            .bind(table.to_string())
            .execute(&mut *tx)
            .await
            .context("taking the row lock")?;
        tokio::time::sleep(hold).await;
        tx.rollback().await?;
        let _ = conn.close().await;
        Ok(())
    }

    /// Drops the database and the role, ending any connection still open.
    /// Failures are reported, never fatal: the run's result stands.
    pub async fn drop_all(&self) {
        if self.dropped.swap(true, Ordering::Relaxed) {
            return;
        }
        self.pool.close().await;
        if let Err(e) = self.try_drop().await {
            eprintln!(
                "chaos: warning: could not drop database {} (drop it by hand): {e:#}",
                self.name
            );
        }
    }

    async fn try_drop(&self) -> anyhow::Result<()> {
        let mut admin = self.admin().await?;
        sqlx::query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = $1 AND pid <> pg_backend_pid()",
        )
        .bind(self.name.clone())
        .execute(&mut admin)
        .await?;
        let db = quoted(&self.name);
        sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
            .execute(&mut admin)
            .await?;
        if let Some(r) = &self.role {
            sqlx::raw_sql(&format!("DROP ROLE IF EXISTS {}", quoted(r)))
                .execute(&mut admin)
                .await?;
        }
        let _ = admin.close().await;
        Ok(())
    }
}

/// A URL as it may be printed: without its password.
pub fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_url_gets_its_name_and_login_replaced_and_keeps_its_query() {
        let base = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable";
        assert_eq!(
            with_database(base, "d1", None).expect("url"),
            "postgres://postgres@127.0.0.1:5432/d1?sslmode=disable"
        );
        assert_eq!(
            with_database(base, "d1", Some(("r1", "pw"))).expect("url"),
            "postgres://r1:pw@127.0.0.1:5432/d1?sslmode=disable"
        );
        assert_eq!(redact("postgres://r1:pw@h:1/d"), "postgres://r1:***@h:1/d");
        assert_eq!(quoted("a\"b"), "\"a\"\"b\"");
    }
}
