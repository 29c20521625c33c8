//! Chip movements: buy-ins, cash-outs, hand results, grants and the audit.

use sqlx::Row;

use super::tx::{cash_out_in, first_not_returned, lock_fenced};
use super::*;

impl Store {
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
        if current.state != TableState::Open {
            return Err(StoreError::WrongState(current.state));
        }
        if amount.is_zero() {
            // A seat without a stake (a chess table without one) needs no
            // wallet chips, only the player's account.
            sqlx::query("INSERT INTO accounts (player) VALUES ($1) ON CONFLICT DO NOTHING")
                .bind(&player.0)
                .execute(&mut *tx)
                .await?;
        }
        // Wallet, seat and ledger in one statement: no seat and no ledger
        // row without the chips, and a taken seat (or a player seated
        // already) fails the whole statement on the seats' unique keys.
        let balance: Option<i64> = sqlx::query_scalar(
            "WITH paid AS ( \
                 UPDATE accounts SET balance = balance - $2, updated_at = now() \
                 WHERE player = $1 AND balance >= $2 RETURNING balance), \
             seated AS ( \
                 INSERT INTO seats (table_id, seat, player, stack) \
                 SELECT $3, $4, $1, $2 FROM paid RETURNING player), \
             logged AS ( \
                 INSERT INTO ledger (kind, player, table_id, hand_no, fence, wallet_delta, stack_delta) \
                 SELECT $5, player, $3, NULL, $6, -$2::int8, $2 FROM seated) \
             SELECT balance FROM paid",
        )
        .bind(&player.0)
        .bind(amount_db)
        .bind(id.as_str())
        .bind(i16::from(seat))
        .bind(LedgerKind::BuyIn)
        .bind(fence.as_db())
        .fetch_optional(&mut *tx)
        .await
        .map_err(StoreError::from_db)?;
        let balance = balance.ok_or(StoreError::InsufficientFunds)?;
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
        cash_out_in(&mut tx, id, fence, outs, LedgerKind::CashOut).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Whether none of these players holds a seat at the table any more:
    /// how a retried cash-out recognises that an earlier try committed.
    pub async fn all_vacated(&self, id: &TableId, outs: &[CashOut]) -> Result<bool, StoreError> {
        let players: Vec<&str> = outs.iter().map(|o| o.player.0.as_str()).collect();
        let seated: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM seats WHERE table_id = $1 AND player = ANY($2)",
        )
        .bind(id.as_str())
        .bind(&players)
        .fetch_one(&self.pool)
        .await?;
        Ok(seated == 0)
    }

    /// The boundary write at a hand's or a game's end: one transaction
    /// that checks the fence, records the boundary (its primary key makes a
    /// second apply impossible), moves every stack from its start to its
    /// end value, writes the ledger, keeps the game's state across
    /// boundaries, and cashes out players who left during it.
    pub async fn write_boundary(
        &self,
        id: &TableId,
        fence: Fence,
        owner: &str,
        boundary: &Boundary,
        outs: &[CashOut],
    ) -> Result<(), StoreError> {
        let hand_db = i64::try_from(boundary.number)
            .map_err(|_| StoreError::BadAmount("boundary number".into()))?;
        // The seats' columns for the statements below, and their deltas.
        let n = boundary.seats.len();
        let (mut seats, mut players, mut ends, mut starts) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        let (mut moved, mut deltas) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let mut net: i128 = 0;
        for s in &boundary.seats {
            seats.push(i16::from(s.seat));
            players.push(s.player.0.as_str());
            ends.push(db_chips(s.end)?);
            starts.push(db_chips(s.start)?);
            let d = delta(s.start, s.end)?;
            net += i128::from(d);
            if d != 0 {
                moved.push(s.player.0.as_str());
                deltas.push(d);
            }
        }
        // Chips move between seats only: a settlement that creates or
        // destroys chips is refused before it can touch a wallet or a stack
        // (I3).
        if net != 0 {
            return Err(StoreError::Inconsistent(format!(
                "boundary {} does not conserve chips: stacks change by {net}",
                boundary.number
            )));
        }
        let mut tx = self.pool.begin().await?;
        lock_fenced(&mut tx, id, fence).await?;
        // The journal keeps the commands of the boundary just reached (a
        // reconnect may be answered from them) and of nothing older: what
        // is older is settled in its boundary row.
        sqlx::query("DELETE FROM journal WHERE table_id = $1 AND number < $2")
            .bind(id.as_str())
            .bind(hand_db)
            .execute(&mut *tx)
            .await?;
        sqlx::query("INSERT INTO hands (table_id, hand_no, fence, owner, result) VALUES ($1, $2, $3, $4, $5)")
            .bind(id.as_str())
            .bind(hand_db)
            .bind(fence.as_db())
            .bind(owner)
            .bind(&boundary.result)
            .execute(&mut *tx)
            .await
            .map_err(|e| match StoreError::from_db(e) {
                StoreError::HandAlreadyApplied(_) => StoreError::HandAlreadyApplied(boundary.number),
                other => other,
            })?;
        // Every seat's stack from its start to its end value in one
        // statement, each row only if it still holds the start value, and
        // the ledger rows of the seats whose stack changed in another.
        let updated: Vec<i16> = sqlx::query_scalar(
            "UPDATE seats AS s SET stack = v.end_stack \
             FROM UNNEST($2::int2[], $3::text[], $4::int8[], $5::int8[]) AS v(seat, player, end_stack, start_stack) \
             WHERE s.table_id = $1 AND s.seat = v.seat AND s.player = v.player AND s.stack = v.start_stack \
             RETURNING s.seat",
        )
        .bind(id.as_str())
        .bind(&seats)
        .bind(&players)
        .bind(&ends)
        .bind(&starts)
        .fetch_all(&mut *tx)
        .await
        .map_err(StoreError::from_db)?;
        if updated.len() != n {
            return Err(seat_not_at_start(&updated, boundary));
        }
        if !moved.is_empty() {
            sqlx::query(
                "INSERT INTO ledger (kind, player, table_id, hand_no, fence, wallet_delta, stack_delta) \
                 SELECT $1, v.player, $2, $3, $4, 0, v.delta \
                 FROM UNNEST($5::text[], $6::int8[]) WITH ORDINALITY AS v(player, delta, n) ORDER BY v.n",
            )
            .bind(LedgerKind::Hand)
            .bind(id.as_str())
            .bind(hand_db)
            .bind(fence.as_db())
            .bind(&moved)
            .bind(&deltas)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query("UPDATE tables SET hand_no = GREATEST(hand_no, $2), game_state = $3, updated_at = now() WHERE id = $1")
            .bind(id.as_str())
            .bind(hand_db)
            .bind(&boundary.state)
            .execute(&mut *tx)
            .await?;
        cash_out_in(&mut tx, id, fence, outs, LedgerKind::CashOut).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Burns a voided hand's number so it is never dealt twice, and cashes
    /// out the players the void vacated (at their stacks from before the
    /// hand, which is what their seats hold).
    pub async fn record_void(
        &self,
        id: &TableId,
        fence: Fence,
        hand: u64,
        outs: &[CashOut],
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
        cash_out_in(&mut tx, id, fence, outs, LedgerKind::CashOut).await?;
        tx.commit().await?;
        Ok(())
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
        sqlx::query("INSERT INTO ledger (kind, player, wallet_delta) VALUES ($1, $2, $3)")
            .bind(LedgerKind::Grant)
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
}

/// The refusal of a hand whose seats did not all hold their start stacks:
/// names the first seat the update did not find as the summary says.
fn seat_not_at_start(updated: &[i16], boundary: &Boundary) -> StoreError {
    StoreError::Inconsistent(
        match first_not_returned(&boundary.seats, |s| s.seat, updated) {
            Some(s) => format!(
                "seat {} ({}) did not hold {} chips at the start of hand {}",
                s.seat, s.player.0, s.start, boundary.number
            ),
            None => format!("hand {} lists one seat twice", boundary.number),
        },
    )
}
