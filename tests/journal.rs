//! The journal of commands and its group commit (I15), against a real
//! Postgres: entries of many tables go out in one transaction, each fenced
//! on its own table's row, so a stale table's entry is refused alone while
//! its neighbours commit; a retried entry is recorded once; an entry racing
//! a newer owner's stamp waits for it and is refused.

mod common;

use std::time::Duration;

use futures::future::join_all;
use pitboss::store::{Appended, Entry, EntryKind, JournalSettings, Store, StoreError};
use pitboss::types::{Fence, TableId};

use common::store::{is_stale, stamped_table};
use common::TestDb;

fn act(number: u64, seq: u32) -> Entry {
    Entry {
        number,
        seq,
        kind: EntryKind::Act,
        seat: Some(1),
        decision: Some(u64::from(seq)),
        command: Some(serde_json::json!({"hand": number, "action": "call"})),
        seed: None,
        deadline_ms: None,
        told_after: None,
        spent_ms: None,
    }
}

/// The test database's store, its journal waiting 200 ms for more entries
/// once one has arrived, so that every append a test makes at once joins
/// one batch.
async fn batching_store(db: &TestDb) -> Store {
    db.store("journal-test")
        .await
        .with_journal(JournalSettings {
            window: Duration::from_millis(200),
            ..JournalSettings::default()
        })
}

async fn rows(db: &TestDb, t: &TableId) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM journal WHERE table_id = $1")
        .bind(t.as_str())
        .fetch_one(&db.pool().await)
        .await
        .expect("count journal rows")
}

#[tokio::test]
async fn a_stale_table_in_a_group_commit_is_refused_alone_and_its_neighbours_commit() {
    let db = common::test_db().await;
    let store = batching_store(&db).await;
    let mut tables = Vec::new();
    for _ in 0..5 {
        tables.push(stamped_table(&store).await);
    }
    // A newer owner took table 2 behind its owner's back.
    db.stamp_behind_owner(tables[2].as_str()).await;

    let answers = join_all(
        tables
            .iter()
            .map(|t| store.journal().append(t, Fence(1), act(3, 1))),
    )
    .await;
    for (i, (t, answer)) in tables.iter().zip(&answers).enumerate() {
        if i == 2 {
            let e = answer.as_ref().expect_err("the stale table's entry");
            assert!(is_stale(e, t, 1, 2), "got {e:?}");
            assert_eq!(rows(&db, t).await, 0, "nothing of the stale table lands");
        } else {
            assert_eq!(
                answer.as_ref().ok(),
                Some(&Appended::Committed),
                "table {i}"
            );
            assert_eq!(rows(&db, t).await, 1, "table {i}");
        }
    }
    // One transaction wrote them all: the rows share their xmin.
    let xmins: i64 = sqlx::query_scalar("SELECT COUNT(DISTINCT xmin::text) FROM journal")
        .fetch_one(&db.pool().await)
        .await
        .unwrap();
    assert_eq!(xmins, 1, "one group commit");
    let stored: (
        i64,
        i64,
        i32,
        String,
        Option<i16>,
        Option<i64>,
        serde_json::Value,
    ) = sqlx::query_as(
        "SELECT number, fence, seq, kind, seat, decision, command FROM journal \
             WHERE table_id = $1",
    )
    .bind(tables[0].as_str())
    .fetch_one(&db.pool().await)
    .await
    .unwrap();
    assert_eq!(
        stored,
        (
            3,
            1,
            1,
            "act".into(),
            Some(1),
            Some(1),
            serde_json::json!({"hand": 3, "action": "call"})
        )
    );

    let mut db = db;
    db.drop_db().await;
}

#[tokio::test]
async fn a_retried_entry_is_recorded_once_and_a_deal_keeps_its_seed_server_side() {
    let mut db = common::test_db().await;
    let store = db.store("journal-test").await;
    let t = stamped_table(&store).await;
    let seed = [7u8; 32];
    let start = Entry::start(1, seed, serde_json::json!([[0, "ann", 100]]));
    assert_eq!(
        store
            .journal()
            .append(&t, Fence(1), start.clone())
            .await
            .unwrap(),
        Appended::Committed
    );
    // The same entry again (a retry whose first answer was lost).
    assert_eq!(
        store.journal().append(&t, Fence(1), start).await.unwrap(),
        Appended::AlreadyThere
    );
    assert_eq!(rows(&db, &t).await, 1);
    let (kind, stored): (String, Vec<u8>) =
        sqlx::query_as("SELECT kind, seed FROM journal WHERE table_id = $1")
            .bind(t.as_str())
            .fetch_one(&db.pool().await)
            .await
            .unwrap();
    assert_eq!((kind.as_str(), stored.as_slice()), ("start", &seed[..]));
    db.drop_db().await;
}

#[tokio::test]
async fn an_entry_postgres_refuses_fails_alone_in_its_group_commit() {
    let mut db = common::test_db().await;
    let store = batching_store(&db).await;
    let (bad, good) = (stamped_table(&store).await, stamped_table(&store).await);
    // Only a start carries a seed: the row breaks a constraint.
    let seeded_act = Entry {
        seed: Some([1; 32]),
        ..act(1, 1)
    };
    let (refused, committed) = tokio::join!(
        store.journal().append(&bad, Fence(1), seeded_act),
        store.journal().append(&good, Fence(1), act(1, 1)),
    );
    let err = refused.expect_err("a seed on an act");
    assert!(
        matches!(&err, StoreError::Db(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23514")),
        "got {err:?}"
    );
    assert!(!err.is_transient(), "not tried again");
    assert_eq!(committed.unwrap(), Appended::Committed);
    assert_eq!((rows(&db, &bad).await, rows(&db, &good).await), (0, 1));
    db.drop_db().await;
}

#[tokio::test]
async fn an_entry_racing_a_newer_owners_stamp_waits_for_it_and_is_refused() {
    let mut db = common::test_db().await;
    let store = db.store("journal-test").await;
    let t = stamped_table(&store).await;
    // The newer owner's stamp holds the row (`FOR UPDATE`, as a stamp
    // does) and moves the fence on.
    let mut stamp = db.pool().await.begin().await.unwrap();
    sqlx::query("SELECT id FROM tables WHERE id = $1 FOR UPDATE")
        .bind(t.as_str())
        .execute(&mut *stamp)
        .await
        .unwrap();
    sqlx::query("UPDATE tables SET owner_fencing_token = 2 WHERE id = $1")
        .bind(t.as_str())
        .execute(&mut *stamp)
        .await
        .unwrap();
    let journal = store.journal().clone();
    let entry = tokio::spawn({
        let t = t.clone();
        async move { journal.append(&t, Fence(1), act(1, 1)).await }
    });
    assert!(
        db.one_waits_for_a_lock().await,
        "the entry waits for the stamp"
    );
    stamp.commit().await.unwrap();
    let err = entry
        .await
        .unwrap()
        .expect_err("refused once the stamp landed");
    assert!(is_stale(&err, &t, 1, 2), "got {err:?}");
    assert_eq!(rows(&db, &t).await, 0);
    db.drop_db().await;
}
