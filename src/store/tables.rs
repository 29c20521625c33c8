//! The `tables` rows: creation, reads, the fence stamp, state transitions,
//! disposal and the audit trail of transitions.

use sqlx::Row;

use super::instances::owner_alive_in;
use super::tx::{
    cash_out_in, insert_event, lock_fenced, lock_fenced_as, lock_table, move_state, seat_rows,
    void_in_progress, RowLock, Step,
};
use super::*;

impl Store {
    /// Creates a table of game `kind` with the config that game validated.
    pub async fn create_table<C: Serialize + Sync>(
        &self,
        env: &str,
        id: &TableId,
        kind: GameKind,
        config: &C,
    ) -> Result<TableRow, StoreError> {
        let config =
            serde_json::to_value(config).map_err(|e| StoreError::Inconsistent(e.to_string()))?;
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query(&format!(
            "INSERT INTO tables (id, environment, game_kind, config, state, state_reason) \
             VALUES ($1, $2, $3, $4, 'released', 'created') RETURNING {TABLE_COLUMNS}"
        ))
        .bind(id.as_str())
        .bind(env)
        .bind(kind.as_str())
        .bind(config)
        .fetch_one(&mut *tx)
        .await?;
        // Born released: no other instance's revive scan picks it up before
        // its creator has taken the lease (an abandoned creation is hosted
        // by its first join).
        insert_event(
            &mut tx,
            id,
            None,
            TableState::Released,
            Some(StateReason::Created),
            None,
            None,
        )
        .await?;
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
    /// ones, those released by a shutdown (an idle-evicted table waits for
    /// its next join instead), and those moved to it (or moved to an
    /// instance that has not been seen alive for a TTL).
    ///
    /// An open or draining table is offered to `me` only if it is its own
    /// or its owner has not been seen alive for a TTL (the takeover rule);
    /// a live owner whose lease key vanished re-asserts it instead.
    /// `own_earlier`: also this id's own open tables stamped by an earlier
    /// incarnation (a restart); a process asks until none are left, since
    /// no new ones can appear once it runs. Answers the tables, and how many
    /// of them that second question found.
    pub async fn revivable(
        &self,
        env: &str,
        me: &str,
        own_earlier: bool,
    ) -> Result<(Vec<TableId>, usize), StoreError> {
        // Index probes only, so a scan costs what may need an owner and not
        // what is hosted: tables released by a drain or moved here; tables
        // of owners unseen for a TTL (driven from `instances`).
        let mut ids: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM tables \
             WHERE environment = $1 AND state = 'released' AND state_reason = 'shutdown' \
             UNION \
             SELECT id FROM tables \
             WHERE environment = $1 AND state = 'released' AND state_reason = 'moved' \
               AND owner_instance = $2 \
             UNION \
             SELECT t.id FROM instances i \
             JOIN tables t ON t.environment = i.environment AND t.owner_instance = i.id \
               AND t.state = 'released' AND t.state_reason = 'moved' \
             WHERE i.environment = $1 AND i.id <> $2 AND i.last_seen <= now() - $3::interval \
             UNION \
             SELECT t.id FROM instances i \
             JOIN tables t ON t.environment = i.environment AND t.owner_instance = i.id \
               AND t.state IN ('open', 'draining') \
             WHERE i.environment = $1 AND i.id <> $2 AND i.last_seen <= now() - $3::interval",
        )
        .bind(env)
        .bind(me)
        .bind(self.owner_timeout)
        .fetch_all(&self.pool)
        .await?;
        let mut own_found = 0;
        if own_earlier {
            // Reads every open table of this id, which is why it runs only
            // until a restart's tables have all been taken back.
            let own: Vec<String> = sqlx::query_scalar(
                "SELECT id FROM tables \
                 WHERE environment = $1 AND state IN ('open', 'draining') AND owner_instance = $2 \
                   AND owner_incarnation IS DISTINCT FROM $3",
            )
            .bind(env)
            .bind(me)
            .bind(self.incarnation.as_deref())
            .fetch_all(&self.pool)
            .await?;
            own_found = own.len();
            ids.extend(own);
        }
        ids.sort();
        ids.dedup();
        Ok((
            ids.iter().filter_map(|s| TableId::parse(s)).collect(),
            own_found,
        ))
    }

    pub async fn seats(&self, id: &TableId) -> Result<Vec<SeatRow>, StoreError> {
        seat_rows(&self.pool, id).await
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
                frozen: current.frozen(),
            });
        }
        // The takeover rule (I1): an open or draining table of another
        // owner is taken only once that owner has not been seen alive for a
        // TTL. Checked under the row lock, so it holds against a racing
        // stamp; a frozen table deals nowhere, so a recover needs no check.
        let takeover = matches!(current.state, TableState::Open | TableState::Draining)
            && current.owner.as_deref().is_some_and(|o| o != owner);
        if takeover {
            let previous = current.owner.clone().unwrap_or_default();
            if owner_alive_in(&mut *tx, id, &previous, self.owner_timeout).await? {
                return Err(StoreError::OwnerAlive { owner: previous });
            }
        }
        let reopen = matches!(current.state, TableState::Draining | TableState::Released)
            || (recover && current.state == TableState::Frozen);
        let row = sqlx::query(&format!(
            "UPDATE tables SET owner_fencing_token = $2, owner_instance = $3, updated_at = now(), \
             state = CASE WHEN $4 THEN 'open' ELSE state END, \
             state_reason = CASE WHEN $4 THEN NULL ELSE state_reason END, \
             owner_incarnation = $5 \
             WHERE id = $1 AND owner_fencing_token < $2 RETURNING {TABLE_COLUMNS}"
        ))
        .bind(id.as_str())
        .bind(fence.as_db())
        .bind(owner)
        .bind(reopen)
        .bind(self.incarnation.as_deref())
        .fetch_one(&mut *tx)
        .await?;
        let reason = match (reopen, recover) {
            (_, false) if takeover => StateReason::TakenOver,
            (true, true) => StateReason::Recovered,
            (true, false) if current.reason == Some(StateReason::Created) => StateReason::Hosted,
            (true, false) => StateReason::Revived,
            _ => StateReason::Acquired,
        };
        let to = if reopen {
            TableState::Open
        } else {
            current.state
        };
        insert_event(
            &mut tx,
            id,
            Some(current.state),
            to,
            Some(reason),
            Some(owner),
            Some(fence),
        )
        .await?;
        tx.commit().await?;
        table_row(&row)
    }

    /// Moves this owner's table from `old` to `new` (a fence it acquired
    /// again after its lease key vanished or Redis was unreachable), only if
    /// Postgres still holds `old` with this owner: continuity, nobody
    /// stamped in between. Anything else is refused as stale.
    pub async fn reassert(
        &self,
        id: &TableId,
        old: Fence,
        new: Fence,
        owner: &str,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        let current = lock_fenced_as(&mut tx, id, old, RowLock::Fence).await?;
        if current.owner.as_deref() != Some(owner) || new <= old {
            return Err(StoreError::StaleOwnerBoundaryWrite {
                table: id.clone(),
                fence: old,
                current: current.fence,
                frozen: current.frozen(),
            });
        }
        if !matches!(current.state, TableState::Open | TableState::Draining) {
            return Err(StoreError::WrongState(current.state));
        }
        sqlx::query("UPDATE tables SET owner_fencing_token = $2, updated_at = now() WHERE id = $1")
            .bind(id.as_str())
            .bind(new.as_db())
            .execute(&mut *tx)
            .await?;
        insert_event(
            &mut tx,
            id,
            Some(current.state),
            current.state,
            Some(StateReason::Reasserted),
            Some(owner),
            Some(new),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// An operator's freeze, from any instance: the table becomes `frozen`
    /// (`operator`) and its fence moves past the owner's, so nothing the
    /// owner writes lands any more; the owner learns of it at its next
    /// fence check and stops. Idempotent on a frozen table. Returns the
    /// row, or `WrongState` for a table already being disposed or closed.
    pub async fn freeze_by_operator(&self, id: &TableId, by: &str) -> Result<TableRow, StoreError> {
        let mut tx = self.pool.begin().await?;
        let current = lock_table(&mut tx, id).await?;
        match current.state {
            TableState::Frozen => {}
            s if s.is_hostable() => {
                let fence = Fence(current.fence.0.saturating_add(1));
                sqlx::query(
                    "UPDATE tables SET owner_fencing_token = $2, updated_at = now() WHERE id = $1",
                )
                .bind(id.as_str())
                .bind(fence.as_db())
                .execute(&mut *tx)
                .await?;
                let step = Step {
                    from: current.state,
                    to: TableState::Frozen,
                    reason: StateReason::Operator,
                    owner: by,
                    fence,
                };
                move_state(&mut tx, id, step).await?;
                // An operator's freeze voids the hand in progress (the
                // players' stacks are the last boundary's, which is what
                // the seats hold).
                void_in_progress(&mut tx, id, None).await?;
            }
            other => return Err(StoreError::WrongState(other)),
        }
        let row = sqlx::query(&format!("SELECT {TABLE_COLUMNS} FROM tables WHERE id = $1"))
            .bind(id.as_str())
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        table_row(&row)
    }

    /// The state and fence Postgres holds for each of these tables, for an
    /// owner checking that nobody has stamped or frozen them behind its back.
    pub async fn fences(
        &self,
        ids: &[TableId],
    ) -> Result<Vec<(TableId, TableState, Option<StateReason>, Fence)>, StoreError> {
        let ids: Vec<&str> = ids.iter().map(TableId::as_str).collect();
        let rows = sqlx::query(
            "SELECT id, state, state_reason, owner_fencing_token FROM tables WHERE id = ANY($1)",
        )
        .bind(&ids)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let id: String = r.try_get("id")?;
                Ok((
                    TableId::parse(&id)
                        .ok_or_else(|| StoreError::Inconsistent(format!("table id {id:?}")))?,
                    r.try_get("state")?,
                    r.try_get("state_reason")?,
                    Fence::from_db(r.try_get("owner_fencing_token")?),
                ))
            })
            .collect()
    }

    /// A fenced state transition (frozen, draining, released, ...).
    pub async fn transition(
        &self,
        id: &TableId,
        fence: Fence,
        owner: &str,
        to: TableState,
        reason: impl Into<StateReason>,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        let current = lock_fenced(&mut tx, id, fence).await?;
        let step = Step {
            from: current.state,
            to,
            reason: reason.into(),
            owner,
            fence,
        };
        move_state(&mut tx, id, step).await?;
        tx.commit().await?;
        Ok(())
    }

    /// A fenced freeze of a table whose hand `number` was told void (its
    /// result could not be recorded): the hand's journal goes and its
    /// number is burnt with the freeze, so a recovery never resumes what
    /// the players were told is void.
    pub async fn freeze_voided(
        &self,
        id: &TableId,
        fence: Fence,
        owner: &str,
        reason: impl Into<StateReason>,
        number: u64,
    ) -> Result<(), StoreError> {
        let number =
            i64::try_from(number).map_err(|_| StoreError::BadAmount("hand number".into()))?;
        let mut tx = self.pool.begin().await?;
        let current = lock_fenced(&mut tx, id, fence).await?;
        void_in_progress(&mut tx, id, Some(number)).await?;
        let step = Step {
            from: current.state,
            to: TableState::Frozen,
            reason: reason.into(),
            owner,
            fence,
        };
        move_state(&mut tx, id, step).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Releases a table for a move: a fenced transition to `released`
    /// (reason `moved`) that names `target` as its owner-to-be, so the
    /// revive scans of other instances leave it to the target.
    pub async fn release_to(
        &self,
        id: &TableId,
        fence: Fence,
        owner: &str,
        target: &str,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        let current = lock_fenced(&mut tx, id, fence).await?;
        let step = Step {
            from: current.state,
            to: TableState::Released,
            reason: StateReason::Moved,
            owner,
            fence,
        };
        move_state(&mut tx, id, step).await?;
        sqlx::query("UPDATE tables SET owner_instance = $2 WHERE id = $1")
            .bind(id.as_str())
            .bind(target)
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
        if current.state != TableState::Frozen {
            return Err(StoreError::WrongState(current.state));
        }
        let step = |from, to, reason| Step {
            from,
            to,
            reason,
            owner,
            fence,
        };
        move_state(
            &mut tx,
            id,
            step(
                TableState::Frozen,
                TableState::Escape,
                StateReason::HandVoided,
            ),
        )
        .await?;
        let outs: Vec<CashOut> = seat_rows(&mut *tx, id)
            .await?
            .into_iter()
            .map(|s| CashOut {
                seat: s.seat,
                player: PlayerId(s.player),
                stack: s.stack,
            })
            .collect();
        cash_out_in(&mut tx, id, fence, &outs, LedgerKind::Custody).await?;
        move_state(
            &mut tx,
            id,
            step(
                TableState::Escape,
                TableState::Custody,
                StateReason::StacksReturned,
            ),
        )
        .await?;
        move_state(
            &mut tx,
            id,
            step(
                TableState::Custody,
                TableState::Closed,
                StateReason::Disposed,
            ),
        )
        .await?;
        tx.commit().await?;
        Ok(outs.into_iter().map(|o| (o.player.0, o.stack)).collect())
    }

    /// How many tables of the environment are in each state.
    pub async fn count_by_state(&self, env: &str) -> Result<Vec<(TableState, i64)>, StoreError> {
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
