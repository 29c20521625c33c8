//! An operator's freeze (`POST /admin/tables/{id}/freeze`) works on any
//! instance: it is recorded at once, and the owner stops its copy, at once
//! when it is the instance asked, else within one renew period; nothing the
//! owner writes afterwards lands.

mod common;
mod play;

use std::time::Duration;

use common::{test_db, unique_env, Server, ServerConfig};
use play::{spawn_forever, Policy};
use serde_json::json;

const SECS: fn(u64) -> Duration = Duration::from_secs;

async fn hands_written(db: &common::TestDb, table: &str) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM hands WHERE table_id = $1")
        .bind(table)
        .fetch_one(&db.pool().await)
        .await
        .expect("count hands")
}

#[tokio::test]
async fn an_operator_freeze_on_another_instance_stops_the_owner_within_a_renew_period() {
    let db = test_db().await;
    let env = unique_env();
    let ttl_ms = 1500;
    let cfg = ServerConfig::new(&db, &env)
        .with_ttl_ms(ttl_ms)
        .with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "300")
        .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "50");
    let a = Server::start(cfg.clone().with_instance("inst-a")).await;
    let b = Server::start(cfg.with_instance("inst-b")).await;
    let (t, mut alice, bob) = play::heads_up(&a, 100).await;
    let bob_task = spawn_forever(bob, &t, Policy::CheckCall, SECS(30));
    alice
        .client
        .recv_event("hand_ended", SECS(10))
        .await
        .expect("hands are being played on A");

    let (status, view) = b
        .admin_post(
            &format!("/admin/tables/{t}/freeze"),
            json!({"reason": "operator"}),
        )
        .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(
        (view["state"].as_str(), view["state_reason"].as_str()),
        (Some("frozen"), Some("operator")),
        "{view}"
    );
    let written = hands_written(&db, &t).await;

    let frozen = alice
        .client
        .recv_type("frozen", Duration::from_millis(ttl_ms * 2))
        .await
        .unwrap_or_else(|| panic!("A's players are told: {:?}", alice.client.seen));
    assert_eq!(frozen["reason"], "operator");
    bob_task.abort();
    tokio::time::sleep(Duration::from_millis(ttl_ms)).await;
    assert_eq!(
        hands_written(&db, &t).await,
        written,
        "no hand landed after the freeze"
    );
    let view = a.table(&t).await;
    assert_eq!(view["hosted_here"], false, "{view}");
    assert_eq!(
        (view["state"].as_str(), view["state_reason"].as_str()),
        (Some("frozen"), Some("operator")),
        "{view}"
    );
    assert_eq!(a.audit().await["delta"], 0);
}

#[tokio::test]
async fn an_operator_freeze_on_the_owner_stops_the_table_at_once_and_bad_requests_change_nothing() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(
        ServerConfig::new(&db, &env).with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "60000"),
    )
    .await;
    let (t, mut alice, _bob) = play::heads_up(&server, 100).await;
    alice
        .client
        .recv_event("turn", SECS(10))
        .await
        .expect("a hand is in progress");

    for (path, body, status, code) in [
        (
            format!("/admin/tables/{t}/freeze"),
            json!({"reason": "melted"}),
            400,
            "bad_field",
        ),
        (
            format!("/admin/tables/{t}/freeze"),
            json!({"why": "x"}),
            400,
            "bad_field",
        ),
        (
            "/admin/tables/tbl_nope/freeze".to_string(),
            json!({}),
            404,
            "table_not_found",
        ),
    ] {
        let (got, v) = server.admin_post(&path, body).await;
        assert_eq!(
            (got, v["error"]["code"].as_str()),
            (status, Some(code)),
            "{v}"
        );
    }
    assert_eq!(server.table(&t).await["state"], "open");

    let (status, view) = server
        .admin_post(&format!("/admin/tables/{t}/freeze"), json!({}))
        .await;
    assert_eq!(status, 200, "{view}");
    let frozen = alice
        .client
        .recv_type("frozen", SECS(2))
        .await
        .unwrap_or_else(|| panic!("told at once: {:?}", alice.client.seen));
    assert_eq!(frozen["reason"], "operator");
    // The hand in progress never happened: stacks stay at the last boundary.
    let seats = server.table(&t).await["seats"].clone();
    assert_eq!(seats[0]["stack"], 100, "{seats}");
    assert_eq!(seats[1]["stack"], 100, "{seats}");
    // Freezing a frozen table again is harmless.
    let (status, again) = server
        .admin_post(
            &format!("/admin/tables/{t}/freeze"),
            json!({"reason": "operator"}),
        )
        .await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["fence"], view["fence"], "no second fence bump");
}
