//! Operating pitboss, frozen tables: disposing of one returns every stack
//! to its wallet with delta 0, recovering one hosts it again under a higher
//! fence with its seats, and automatic recovery is off by default and
//! recovers after the cooldown when set.

mod common;
mod play;

use std::time::Duration;

use common::{lease_key, mint_token, test_db, unique_env, Server, ServerConfig, WsClient};
use play::{spawn_forever, wait_state, Player, Policy};
use serde_json::{json, Value};

const SECS: fn(u64) -> Duration = Duration::from_secs;

/// Freezes `table` as an operator would, through the admin API.
async fn freeze(server: &Server, table: &str) -> Value {
    let (status, view) = server
        .admin_post(
            &format!("/admin/tables/{table}/freeze"),
            json!({"reason": "operator"}),
        )
        .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["state"], "frozen", "{view}");
    // The owner's copy stops at once; wait until it has.
    common::eventually_value(SECS(5), || async {
        let v = server.table(table).await;
        (v["hosted_here"] == false).then_some(v)
    })
    .await
    .expect("the owner's copy stopped")
}

/// Makes every hand write of the test database fail for good (a check no
/// hand satisfies), so the next hand's end freezes its table with
/// `store_error`; dropped again by [`allow_hands`].
async fn refuse_hands(pool: &sqlx::PgPool) {
    sqlx::query(
        "ALTER TABLE hands ADD CONSTRAINT test_refuses_hands CHECK (hand_no < 0) NOT VALID",
    )
    .execute(pool)
    .await
    .expect("add the check");
}

async fn allow_hands(pool: &sqlx::PgPool) {
    sqlx::query("ALTER TABLE hands DROP CONSTRAINT test_refuses_hands")
        .execute(pool)
        .await
        .expect("drop the check");
}

/// Two players at a new table of `server` play until its next hand's write
/// fails for good and the table freezes with `store_error`.
async fn freeze_by_store_error(server: &Server) -> (String, Value) {
    let (t, alice, bob) = play::heads_up(server, 100).await;
    let tasks = [
        spawn_forever(alice, &t, Policy::CheckCall, SECS(10)),
        spawn_forever(bob, &t, Policy::CheckCall, SECS(10)),
    ];
    let view = wait_state(server, &t, "frozen", SECS(10))
        .await
        .expect("the table froze");
    assert_eq!(view["state_reason"], "store_error", "{view}");
    for task in tasks {
        task.await.expect("player");
    }
    (t, view)
}

#[tokio::test]
async fn disposing_a_frozen_table_returns_every_stack_to_its_wallet_with_delta_zero() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(
        ServerConfig::new(&db, &env).with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "60000"),
    )
    .await;
    let t = play::new_table(&server).await;
    server.grant("alice", 1000).await;
    server.grant("bob", 1000).await;
    let mut alice = Player::sit(&server, &t, "alice", 0, 150).await;
    let _bob = Player::sit(&server, &t, "bob", 1, 120).await;
    // A hand is in progress (blinds posted) when the lease goes.
    alice
        .client
        .recv_event("turn", SECS(10))
        .await
        .expect("a hand in progress");

    // An open table cannot be disposed.
    let (status, body) = server
        .admin_post(&format!("/admin/tables/{t}/dispose"), json!({}))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("not_frozen")),
        "{body}"
    );

    freeze(&server, &t).await;

    // While another live owner holds the lease, disposal is refused and
    // changes nothing.
    let mut redis = common::redis_conn(&common::shared_redis_url()).await;
    let _: () = redis::cmd("SET")
        .arg(lease_key(&env, &t))
        .arg("inst-elsewhere|99")
        .arg("PX")
        .arg(5000)
        .query_async(&mut redis)
        .await
        .expect("SET");
    let (status, body) = server
        .admin_post(&format!("/admin/tables/{t}/dispose"), json!({}))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("owned_elsewhere")),
        "{body}"
    );
    assert_eq!(body["error"]["owner"], "inst-elsewhere", "{body}");
    assert_eq!(server.table(&t).await["state"], "frozen");
    let _: i64 = redis::cmd("DEL")
        .arg(lease_key(&env, &t))
        .query_async(&mut redis)
        .await
        .expect("DEL");

    let (status, body) = server
        .admin_post(&format!("/admin/tables/{t}/dispose"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "closed");
    assert_eq!(body["delta"], 0, "{body}");
    let mut returned: Vec<(String, u64)> = body["returned"]
        .as_array()
        .expect("returned")
        .iter()
        .map(|r| {
            (
                r["player"].as_str().expect("player").to_string(),
                r["chips"].as_u64().expect("chips"),
            )
        })
        .collect();
    returned.sort();
    // The in-flight hand is void: the buy-ins come back whole.
    assert_eq!(
        returned,
        vec![("alice".to_string(), 150), ("bob".to_string(), 120)]
    );
    for p in ["alice", "bob"] {
        let (_, w) = server.admin_get(&format!("/admin/players/{p}")).await;
        assert_eq!(w["balance"], 1000, "{w}");
    }
    let view = server.table(&t).await;
    assert_eq!(view["state"], "closed");
    assert!(
        view["seats"].as_array().is_some_and(Vec::is_empty),
        "{view}"
    );
    let (_, events) = server.admin_get(&format!("/admin/tables/{t}/events")).await;
    let path: Vec<&str> = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["to"].as_str())
        .collect();
    assert!(
        path.ends_with(&["frozen", "escape", "custody", "closed"]),
        "{path:?}"
    );
    for e in events["events"].as_array().expect("events") {
        assert!(
            e["at"].is_string() && e.get("owner").is_some() && e.get("fence").is_some(),
            "{e}"
        );
    }
    // A closed table is gone for players and cannot be disposed twice.
    let (status, _) = server
        .admin_post(&format!("/admin/tables/{t}/dispose"), json!({}))
        .await;
    assert_eq!(status, 409);
    assert_eq!(server.audit().await["delta"], 0);
}

#[tokio::test]
async fn recovering_a_frozen_table_hosts_it_again_under_a_higher_fence_with_its_seats() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(
        ServerConfig::new(&db, &env).with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "50"),
    )
    .await;
    let (t, alice, bob) = play::heads_up(&server, 100).await;
    let tasks = [
        spawn_forever(alice, &t, Policy::CheckCall, SECS(15)),
        spawn_forever(bob, &t, Policy::CheckCall, SECS(15)),
    ];
    let frozen = freeze(&server, &t).await;
    for task in tasks {
        task.await.expect("player");
    }
    let (status, view) = server
        .admin_post(&format!("/admin/tables/{t}/recover"), json!({}))
        .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["state"], "open");
    assert_eq!(view["hosted_here"], true);
    assert!(
        view["fence"].as_u64() > frozen["fence"].as_u64(),
        "{view} after {frozen}"
    );
    assert_eq!(
        view["seats"], frozen["seats"],
        "stacks as at the last boundary"
    );
    // Players come back and the table deals again.
    let mut c = WsClient::connect(&server, &mint_token("alice"))
        .await
        .expect("connect");
    c.send(json!({"type": "join", "table": t})).await;
    c.recv_type("snapshot", SECS(5)).await.expect("snapshot");
    let started = c
        .recv_event("hand_started", SECS(10))
        .await
        .expect("a new hand after recovery");
    assert!(
        started["hand"].as_u64() > frozen["hand_no"].as_u64(),
        "{started}"
    );
    let (_, events) = server.admin_get(&format!("/admin/tables/{t}/events")).await;
    assert!(
        events["events"]
            .as_array()
            .expect("events")
            .iter()
            .any(|e| e["reason"] == "recovered"),
        "{events}"
    );
}

#[tokio::test]
async fn automatic_recovery_is_off_by_default_and_recovers_after_the_cooldown_when_set() {
    let db = test_db().await;
    let env = unique_env();
    let loud = Server::start(ServerConfig::new(&db, &env).with_instance("inst-loud")).await;
    let pool = db.pool().await;
    refuse_hands(&pool).await;
    let (t1, _) = freeze_by_store_error(&loud).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        loud.table(&t1).await["state"],
        "frozen",
        "a freeze stays loud by default"
    );
    drop(loud);

    let env2 = unique_env();
    let auto = Server::start(
        ServerConfig::new(&db, &env2)
            .with_instance("inst-auto")
            .with_env("PITBOSS__TABLE__AUTO_RECOVER_AFTER_MS", "300"),
    )
    .await;
    let (t2, frozen) = freeze_by_store_error(&auto).await;
    // Another owner holds the lease for a second: the first attempts are
    // refused and retried until it lapses.
    let mut redis = common::redis_conn(&common::shared_redis_url()).await;
    let _: () = redis::cmd("SET")
        .arg(lease_key(&env2, &t2))
        .arg("inst-other|99")
        .arg("PX")
        .arg(1000)
        .query_async(&mut redis)
        .await
        .expect("SET");
    allow_hands(&pool).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        auto.table(&t2).await["state"],
        "frozen",
        "not while another owner holds it"
    );
    // Postgres says open as soon as the recovery's stamp commits; the
    // table is hosted a moment later, when the manager starts it.
    let back = common::eventually_value(SECS(5), || async {
        let v = auto.table(&t2).await;
        (v["state"] == "open" && v["hosted_here"] == true).then_some(v)
    })
    .await
    .expect("recovered automatically and hosted here");
    assert!(back["fence"].as_u64() > frozen["fence"].as_u64(), "{back}");
}
