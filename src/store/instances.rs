//! The `instances` rows: each process's liveness in Postgres, beside its
//! Redis registration. The takeover rule reads them: an open table of
//! another owner is taken only once that owner has not been seen alive for
//! one TTL, because an absent lease key alone never proves it stopped.

use sqlx::Row;

use super::*;

/// One process of the environment, as its last beat left it.
#[derive(Debug, Clone, Serialize)]
pub struct InstanceRow {
    pub id: String,
    pub incarnation: String,
    pub advertise_url: String,
    pub started_at: chrono::DateTime<chrono::Utc>,
    pub last_seen: chrono::DateTime<chrono::Utc>,
    pub draining: bool,
    /// Whether it was seen within the owner timeout (one TTL).
    pub live: bool,
}

impl Store {
    /// Records that this process is alive now (Postgres' clock). A beat
    /// that lands after this incarnation said it was gone (one already on
    /// its way when the process forgot itself on exit) changes nothing, so
    /// nobody waits a TTL for a process that has left.
    pub async fn beat(
        &self,
        env: &str,
        id: &str,
        incarnation: &str,
        advertise_url: &str,
        draining: bool,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO instances (environment, id, incarnation, advertise_url, draining) \
             VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (environment, id) DO UPDATE SET \
               incarnation = EXCLUDED.incarnation, advertise_url = EXCLUDED.advertise_url, \
               draining = EXCLUDED.draining, last_seen = now(), \
               started_at = CASE WHEN instances.incarnation = EXCLUDED.incarnation \
                            THEN instances.started_at ELSE now() END \
             WHERE instances.incarnation IS DISTINCT FROM EXCLUDED.incarnation \
                OR instances.last_seen <> 'epoch'",
        )
        .bind(env)
        .bind(id)
        .bind(incarnation)
        .bind(advertise_url)
        .bind(draining)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// A process that has stopped says it is gone, so nobody waits a TTL
    /// for it: its row stays (the revive scan finds a gone owner's tables
    /// through it) with a beat that is never recent.
    pub async fn forget_instance(
        &self,
        env: &str,
        id: &str,
        incarnation: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE instances SET last_seen = 'epoch', draining = true \
             WHERE environment = $1 AND id = $2 AND incarnation = $3",
        )
        .bind(env)
        .bind(id)
        .bind(incarnation)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Every process of the environment that has beaten, newest first.
    pub async fn instances(&self, env: &str) -> Result<Vec<InstanceRow>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {INSTANCE_COLUMNS} FROM instances WHERE environment = $1 \
             ORDER BY last_seen DESC, id"
        ))
        .bind(env)
        .bind(self.owner_timeout)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(instance_row).collect()
    }

    /// How many open or draining tables of the environment each owner
    /// holds, as Postgres records it.
    pub async fn owned_counts(
        &self,
        env: &str,
    ) -> Result<std::collections::HashMap<String, i64>, StoreError> {
        let rows = sqlx::query(
            "SELECT owner_instance, COUNT(*) AS n FROM tables \
             WHERE environment = $1 AND state IN ('open', 'draining') AND owner_instance IS NOT NULL \
             GROUP BY owner_instance",
        )
        .bind(env)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("owner_instance")?, r.try_get("n")?)))
            .collect()
    }

    /// What Postgres last recorded of one instance id: its incarnation,
    /// address, and its last beat (Postgres' clock).
    pub async fn instance_seen(
        &self,
        env: &str,
        id: &str,
    ) -> Result<Option<InstanceRow>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {INSTANCE_COLUMNS} FROM instances WHERE environment = $1 AND id = $3"
        ))
        .bind(env)
        .bind(self.owner_timeout)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(instance_row).transpose()
    }

    /// Whether `owner` was seen alive within the owner timeout, by the
    /// instances of `table`'s environment. An owner that never beat (or
    /// said it was gone) is not alive.
    pub async fn owner_alive(&self, table: &TableId, owner: &str) -> Result<bool, StoreError> {
        owner_alive_in(&self.pool, table, owner, self.owner_timeout).await
    }
}

/// The columns of [`InstanceRow`]; `$2` is the owner timeout.
const INSTANCE_COLUMNS: &str =
    "id, incarnation, advertise_url, started_at, last_seen, draining, now() - last_seen < $2 AS live";

fn instance_row(r: &sqlx::postgres::PgRow) -> Result<InstanceRow, StoreError> {
    Ok(InstanceRow {
        id: r.try_get("id")?,
        incarnation: r.try_get("incarnation")?,
        advertise_url: r.try_get("advertise_url")?,
        started_at: r.try_get("started_at")?,
        last_seen: r.try_get("last_seen")?,
        draining: r.try_get("draining")?,
        live: r.try_get("live")?,
    })
}

pub(super) async fn owner_alive_in<'e>(
    exec: impl sqlx::PgExecutor<'e>,
    table: &TableId,
    owner: &str,
    timeout: std::time::Duration,
) -> Result<bool, StoreError> {
    let alive: Option<bool> = sqlx::query_scalar(
        "SELECT now() - i.last_seen < $3 FROM instances i \
         JOIN tables t ON t.environment = i.environment \
         WHERE t.id = $1 AND i.id = $2",
    )
    .bind(table.as_str())
    .bind(owner)
    .bind(timeout)
    .fetch_optional(exec)
    .await?;
    Ok(alive.unwrap_or(false))
}
