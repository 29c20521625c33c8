//! Moving a table between instances (`POST /admin/tables/{id}/move`): the
//! owner finishes the hand in progress, releases the table to the target,
//! the target hosts it at once, and every client (relayed or direct) plays
//! on without reconnecting. A move that cannot be made is refused with a
//! clear code and changes nothing.

mod common;
mod play;

use std::time::Duration;

use common::{test_db, unique_env, Server, ServerConfig};
use play::{Player, Policy};
use serde_json::{json, Value};

async fn three() -> (common::TestDb, Server, Server, Server) {
    let db = test_db().await;
    let env = unique_env();
    let cfg = ServerConfig::new(&db, &env)
        .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "50")
        .with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "5000");
    let a = Server::start(cfg.clone().with_instance("move-a")).await;
    let b = Server::start(cfg.clone().with_instance("move-b")).await;
    let c = Server::start(cfg.with_instance("move-c")).await;
    (db, a, b, c)
}

fn snapshot_owners(p: &Player, table: &str) -> Vec<String> {
    p.client
        .seen
        .iter()
        .filter(|v| v["type"] == "snapshot" && v["table"] == table)
        .filter_map(|v| v["state"]["owner"].as_str().map(String::from))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_moved_table_is_hosted_by_its_target_and_every_client_plays_on() {
    let (db, a, b, c) = three().await;
    let t = play::new_table(&a).await;
    a.grant("alice", 1000).await;
    a.grant("bob", 1000).await;
    // alice plays through B (relayed to A); bob is connected to A itself.
    let alice = Player::sit(&b, &t, "alice", 0, 200).await;
    let bob = Player::sit(&a, &t, "bob", 1, 200).await;
    let fence_before = a.table(&t).await["fence"].as_u64().expect("fence");

    let hands = 6;
    let table = t.clone();
    let playing = tokio::spawn(async move {
        play::play_hands(
            vec![(alice, Policy::CheckCall), (bob, Policy::CheckCall)],
            &table,
            hands,
            Duration::from_secs(60),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Asked of B, which neither hosts the table nor is its target.
    let (status, view) = b
        .admin_post(&format!("/admin/tables/{t}/move"), json!({"to": "move-c"}))
        .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["owner"], "move-c", "{view}");
    assert_eq!(view["state"], "open", "{view}");
    assert!(view["fence"].as_u64() > Some(fence_before), "{view}");
    let hosted = c.table(&t).await;
    assert_eq!(hosted["hosted_here"], true, "{hosted}");
    assert_eq!(a.table(&t).await["hosted_here"], false);

    let players = playing.await.expect("players");
    for p in &players {
        assert!(p.client.closed.is_none(), "{} was disconnected", p.name);
        assert!(
            p.hands_ended().len() >= hands,
            "{} played on after the move: {:?}",
            p.name,
            p.hands_ended()
        );
        let owners = snapshot_owners(p, &t);
        assert_eq!(
            owners.first().map(String::as_str),
            Some("move-a"),
            "{owners:?}"
        );
        assert_eq!(
            owners.last().map(String::as_str),
            Some("move-c"),
            "{owners:?}"
        );
        assert!(
            !p.client.seen.iter().any(|v| v["type"] == "frozen"),
            "{}",
            p.name
        );
    }
    // Postgres tells the story: released to C, then hosted by C.
    let (_, events) = a.admin_get(&format!("/admin/tables/{t}/events")).await;
    let events = events["events"].as_array().expect("events").clone();
    let moved = events
        .iter()
        .position(|e| e["to"] == "released" && e["reason"] == "moved")
        .unwrap_or_else(|| panic!("a release for the move: {events:?}"));
    assert!(
        events[moved..]
            .iter()
            .any(|e| e["to"] == "open" && e["owner"] == "move-c"),
        "{events:?}"
    );
    let hands_twice: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM (SELECT hand_no FROM hands WHERE table_id = $1 \
         GROUP BY hand_no HAVING COUNT(*) > 1) d",
    )
    .bind(&t)
    .fetch_one(&db.pool().await)
    .await
    .expect("count");
    assert_eq!(hands_twice, 0);
    assert_eq!(a.audit().await["delta"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_move_that_cannot_be_made_is_refused_and_changes_nothing() {
    let (_db, a, b, _c) = three().await;
    let t = play::new_table(&a).await;
    let before: Value = a.table(&t).await;
    let path = format!("/admin/tables/{t}/move");

    let (status, body) = b.admin_post(&path, json!({"to": "nobody"})).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("not_live")),
        "{body}"
    );
    let (status, body) = b.admin_post(&path, json!({})).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("bad_field")),
        "{body}"
    );
    let (status, body) = b
        .admin_post(&path, json!({"to": "move-c", "when": 1}))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("bad_field")),
        "{body}"
    );
    let (status, body) = b
        .admin_post("/admin/tables/no-such-table/move", json!({"to": "move-c"}))
        .await;
    assert_eq!(status, 404, "{body}");
    let (status, _) = b
        .request(
            reqwest::Method::POST,
            &path,
            None,
            Some(&json!({"to": "move-c"})),
        )
        .await;
    assert_eq!(status, 401);
    // To the instance that already hosts it: nothing to do.
    let (status, body) = b.admin_post(&path, json!({"to": "move-a"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(a.table(&t).await, before, "nothing changed");

    // A frozen table does not move.
    let (status, _) = a
        .admin_post(&format!("/admin/tables/{t}/freeze"), json!({}))
        .await;
    assert_eq!(status, 200);
    let (status, body) = b.admin_post(&path, json!({"to": "move-c"})).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("not_movable")),
        "{body}"
    );
    assert_eq!(a.table(&t).await["state"], "frozen");
}
