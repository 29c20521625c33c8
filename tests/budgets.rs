//! Every Postgres wait is bounded (I11): a row lock held by someone else
//! (a paused process, a stuck transaction) makes a join answer
//! `unavailable` within the lock budget instead of hanging, and the table
//! stays hostable, not frozen.

mod common;
mod play;

use std::time::{Duration, Instant};

use common::{mint_token, test_db, unique_env, Server, ServerConfig, WsClient};
use serde_json::json;

const SECS: fn(u64) -> Duration = Duration::from_secs;

#[tokio::test]
async fn a_row_lock_held_elsewhere_gets_a_join_answered_within_seconds_and_the_table_stays_hostable(
) {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(
        ServerConfig::new(&db, &env)
            // Released at once once nobody sits, so the join below must
            // take the lease and stamp the table again.
            .with_env("PITBOSS__TABLE__IDLE_EVICT_MS", "200")
            .with_env("PITBOSS__DATABASE__LOCK_TIMEOUT_MS", "1000"),
    )
    .await;
    let t = server.create_table(common::table_config()).await["id"]
        .as_str()
        .expect("id")
        .to_string();
    let released = common::eventually(SECS(5), Duration::from_millis(50), || async {
        server.table(&t).await["state"] == "released"
    })
    .await;
    assert!(released, "{}", server.table(&t).await);

    // Another transaction holds the table's row lock and does not let go.
    let holder = db.lock_table_row(&t).await;

    let locked = Instant::now();

    // Held for 20 s: every join meanwhile is answered within 5 s.
    let mut c = WsClient::connect(&server, &mint_token("alice"))
        .await
        .expect("connect");
    let mut answered = 0;
    while locked.elapsed() < SECS(15) {
        let asked = Instant::now();
        c.send(json!({"type": "join", "table": t})).await;
        let answer = c
            .recv_json(SECS(5))
            .await
            .unwrap_or_else(|| panic!("no answer within 5 s: {:?}", c.seen));
        assert_eq!(
            (answer["type"].as_str(), answer["code"].as_str()),
            (Some("error"), Some("unavailable")),
            "{answer}"
        );
        assert!(
            asked.elapsed() < SECS(5),
            "answered after {:?}",
            asked.elapsed()
        );
        answered += 1;
        tokio::time::sleep(SECS(2)).await;
    }
    assert!(
        answered >= 4,
        "{answered} joins answered while the lock was held"
    );
    tokio::time::sleep(SECS(20).saturating_sub(locked.elapsed())).await;

    // Once the lock goes, the same table is hosted on the next join.
    holder.rollback().await.expect("release the lock");
    c.send(json!({"type": "join", "table": t})).await;
    let snapshot = c.recv_type("snapshot", SECS(5)).await;
    assert!(snapshot.is_some(), "hosted after the lock: {:?}", c.seen);
    let view = server.table(&t).await;
    assert_eq!(view["state"], "open", "{view}");
    assert_eq!(view["hosted_here"], true, "{view}");
    play::no_freeze_recorded(&server, &t).await;
}
