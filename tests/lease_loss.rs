//! A hosted table whose lease vanishes is taken again by its owner, loudly
//! but without a freeze, and one whose lease cannot be proven pauses and
//! resumes (I4); a lost renew for a table already released is benign (I5);
//! a Redis that lost its data never hands out a fence Postgres has already
//! seen.

mod common;
mod play;

use std::time::{Duration, Instant};

use common::{lease_key, test_db, unique_env, PrivateRedis, Server, ServerConfig};
use play::{metric, paused_then_resumed, spawn_forever, wait_state, Player, Policy};
use serde_json::Value;

/// Hands dealt 50 ms apart to players who may act as fast as that (the
/// rate limit is not what these tests are about).
fn fast_play(cfg: ServerConfig) -> ServerConfig {
    cfg.with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "50")
        .with_env("PITBOSS__WS__RATE_PER_SEC", "500")
        .with_env("PITBOSS__WS__RATE_BURST", "1000")
}

/// Two players at `server` playing check/call hands in the background.
async fn busy_table(server: &Server) -> (String, Vec<tokio::task::JoinHandle<Player>>) {
    let t = play::new_table(server).await;
    server.grant("alice", 1000).await;
    server.grant("bob", 1000).await;
    let alice = Player::sit(server, &t, "alice", 0, 100).await;
    let bob = Player::sit(server, &t, "bob", 1, 100).await;
    let tasks = vec![
        spawn_forever(alice, &t, Policy::CheckCall, Duration::from_secs(20)),
        spawn_forever(bob, &t, Policy::CheckCall, Duration::from_secs(20)),
    ];
    // Let a hand or two go by so the freeze lands on a live table.
    let pool_wait = Instant::now();
    while server.table(&t).await["hand_no"].as_u64().unwrap_or(0) < 1
        && pool_wait.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (t, tasks)
}

#[tokio::test]
async fn a_deleted_lease_key_is_reasserted_and_play_goes_on_without_a_freeze() {
    let db = test_db().await;
    let env = unique_env();
    let ttl_ms = 1500;
    let server = Server::start(fast_play(ServerConfig::new(&db, &env).with_ttl_ms(ttl_ms))).await;
    let (t, tasks) = busy_table(&server).await;
    let before = server.table(&t).await;
    let fence = before["fence"].as_u64().expect("fence");

    let mut redis = common::redis_conn(&common::shared_redis_url()).await;
    let deleted: i64 = redis::cmd("DEL")
        .arg(lease_key(&env, &t))
        .query_async(&mut redis)
        .await
        .expect("DEL");
    assert_eq!(deleted, 1, "the lease key existed");

    // Within one renew period plus slack the owner has taken it again,
    // under a higher fence that Postgres records too.
    let reasserted = common::eventually(
        Duration::from_millis(ttl_ms / 3 + 1500),
        Duration::from_millis(25),
        || async {
            let value: Option<String> = redis::cmd("GET")
                .arg(lease_key(&env, &t))
                .query_async(&mut common::redis_conn(&common::shared_redis_url()).await)
                .await
                .expect("GET");
            value.is_some_and(|v| v == format!("inst-a|{}", fence + 1))
                && server.table(&t).await["fence"] == fence + 1
        },
    )
    .await;
    assert!(reasserted, "the lease is back under fence {}", fence + 1);
    let view = server.table(&t).await;
    assert_eq!(view["state"], "open", "{view}");
    assert_eq!(view["hosted_here"], true, "{view}");
    assert_eq!(view["fence"], fence + 1, "{view}");
    let hand_then = view["hand_no"].as_u64().expect("hand_no");
    // Play goes on: more hands are recorded under the new fence.
    assert!(
        common::eventually(
            Duration::from_secs(10),
            Duration::from_millis(50),
            || async { server.table(&t).await["hand_no"].as_u64() > Some(hand_then + 1) }
        )
        .await,
        "hands go on after the re-assert"
    );
    let pool = db.pool().await;
    let late_fences: Vec<i64> =
        sqlx::query_scalar("SELECT fence FROM hands WHERE table_id = $1 AND hand_no > $2")
            .bind(&t)
            .bind(hand_then as i64 + 1)
            .fetch_all(&pool)
            .await
            .expect("hands");
    assert!(
        !late_fences.is_empty() && late_fences.iter().all(|f| *f == fence as i64 + 1),
        "{late_fences:?}"
    );
    let (_, events) = server.admin_get(&format!("/admin/tables/{t}/events")).await;
    let kinds: Vec<(&str, &str)> = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| {
            (
                e["to"].as_str().unwrap_or(""),
                e["reason"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(kinds.contains(&("open", "reasserted")), "{events}");
    assert!(!kinds.iter().any(|(to, _)| *to == "frozen"), "{events}");

    // Loud for the operator: the loss and the re-assert are counted.
    let (_, text) = server.get("/metrics").await;
    assert_eq!(
        metric(&text, r#"pitboss_leases_lost_total{reason="gone"}"#),
        1.0,
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            r#"pitboss_lease_reasserts_total{result="reasserted"}"#
        ),
        1.0,
        "{text}"
    );
    assert_eq!(server.audit().await["delta"], 0);
    drop(server);
    for task in tasks {
        let p = task.await.expect("player task");
        assert!(
            !p.client.seen.iter().any(|v| v["type"] == "frozen"),
            "{} was never told frozen",
            p.name
        );
    }
}

#[tokio::test]
async fn after_redis_loses_its_data_the_owner_reasserts_above_every_fence_postgres_has_seen() {
    let db = test_db().await;
    let env = unique_env();
    let redis = PrivateRedis::start().await;
    let cfg = ServerConfig::new(&db, &env)
        .with_redis(&redis.url())
        .with_ttl_ms(1500);
    let a = Server::start(cfg.clone()).await;
    let t = play::new_table(&a).await;
    drop(a);
    // Two same-id restarts bump the fence to 3.
    let a = Server::start(cfg.clone()).await;
    assert!(
        common::eventually(
            Duration::from_secs(3),
            Duration::from_millis(50),
            || async { a.table(&t).await["fence"] == 2 }
        )
        .await
    );
    drop(a);
    let a = Server::start(cfg).await;
    assert!(
        common::eventually(
            Duration::from_secs(3),
            Duration::from_millis(50),
            || async { a.table(&t).await["fence"] == 3 }
        )
        .await
    );

    let mut conn = common::redis_conn(&redis.url()).await;
    let _: () = redis::cmd("FLUSHALL")
        .query_async(&mut conn)
        .await
        .expect("FLUSHALL the private redis");
    // The counter is gone, yet the re-asserted fence rises above 3: the
    // floor comes from Postgres.
    assert!(
        common::eventually(
            Duration::from_secs(3),
            Duration::from_millis(25),
            || async { a.table(&t).await["fence"].as_u64() > Some(3) }
        )
        .await,
        "re-asserted: {}",
        a.table(&t).await
    );
    let view = a.table(&t).await;
    assert_eq!(view["state"], "open", "{view}");
    assert_eq!(view["hosted_here"], true, "{view}");
    let fence = view["fence"].as_u64().expect("fence");
    let counter: String = redis::cmd("GET")
        .arg(common::fence_key(&env, &t))
        .query_async(&mut conn)
        .await
        .expect("counter");
    assert_eq!(counter, fence.to_string());
    let lease: String = redis::cmd("GET")
        .arg(lease_key(&env, &t))
        .query_async(&mut conn)
        .await
        .expect("lease");
    assert_eq!(lease, format!("inst-a|{fence}"));
}

#[tokio::test]
async fn tables_pause_by_the_local_deadline_when_redis_hangs_and_resume_when_it_answers() {
    let db = test_db().await;
    let env = unique_env();
    let redis = PrivateRedis::start().await;
    let ttl_ms = 1500;
    let server = Server::start(
        fast_play(
            ServerConfig::new(&db, &env)
                .with_redis(&redis.url())
                .with_ttl_ms(ttl_ms),
        )
        .with_env("PITBOSS__REDIS__OP_TIMEOUT_MS", "300"),
    )
    .await;
    let (t, tasks) = busy_table(&server).await;
    let fence = server.table(&t).await["fence"].as_u64().expect("fence");
    // SIGSTOP: connections are accepted but nothing answers.
    redis.pause();
    // Past the local deadline, and well past it.
    tokio::time::sleep(Duration::from_millis(ttl_ms * 2)).await;
    let (status, _) = server.get("/readyz").await;
    assert_eq!(status, 503, "not ready without Redis");
    let view = server.table(&t).await;
    assert_eq!(view["state"], "open", "paused, not frozen: {view}");
    let hand_while_paused = view["hand_no"].clone();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        server.table(&t).await["hand_no"],
        hand_while_paused,
        "no hand is recorded while paused"
    );
    redis.resume();
    let view = common::eventually_value(Duration::from_secs(5), || async {
        let v = server.table(&t).await;
        (v["fence"].as_u64() > Some(fence) && v["hand_no"].as_u64() > hand_while_paused.as_u64())
            .then_some(v)
    })
    .await
    .expect("re-asserted under a higher fence and dealing again");
    assert_eq!(view["state"], "open", "{view}");
    // It was the local deadline that stopped play, and a re-assert that
    // ended the pause.
    let (_, text) = server.get("/metrics").await;
    assert!(
        metric(&text, r#"pitboss_leases_lost_total{reason="deadline"}"#) >= 1.0,
        "{text}"
    );
    assert!(
        metric(
            &text,
            r#"pitboss_lease_reasserts_total{result="reasserted"}"#
        ) >= 1.0,
        "{text}"
    );
    drop(server);

    for task in tasks {
        let p = task.await.expect("player task");
        let (paused, resumed) = paused_then_resumed(&p, "redis_unreachable");
        let seen = &p.client.seen;
        assert_eq!(
            seen[resumed + 1]["type"],
            "snapshot",
            "a snapshot follows resumed"
        );
        let dealt_while_paused: Vec<&Value> = seen[paused..resumed]
            .iter()
            .filter(|v| v["kind"] == "hand_started")
            .collect();
        assert!(dealt_while_paused.is_empty(), "{dealt_while_paused:?}");
    }
}

#[tokio::test]
async fn a_table_released_by_idle_eviction_does_not_freeze_and_is_hosted_again_on_the_next_join() {
    let db = test_db().await;
    let env = unique_env();
    let ttl_ms = 900;
    let server = Server::start(
        ServerConfig::new(&db, &env)
            .with_ttl_ms(ttl_ms)
            .with_env("PITBOSS__TABLE__IDLE_EVICT_MS", "200"),
    )
    .await;
    let t = play::new_table(&server).await;
    // A watcher (nobody seated) is told when the table is released.
    let mut watcher = common::WsClient::connect(&server, &common::mint_token("watcher"))
        .await
        .expect("connect");
    watcher
        .send(serde_json::json!({"type": "join", "table": t}))
        .await;
    let released = watcher
        .recv_type("released", Duration::from_secs(5))
        .await
        .unwrap_or_else(|| panic!("a released frame: {:?}", watcher.seen));
    assert_eq!(released["reason"], "idle", "{released}");
    let view = wait_state(&server, &t, "released", Duration::from_secs(5))
        .await
        .expect("evicted");
    assert_eq!(view["state_reason"], "idle", "{view}");
    // Several renew periods later: still released, never frozen, no loss.
    tokio::time::sleep(Duration::from_millis(ttl_ms * 2)).await;
    let view = server.table(&t).await;
    assert_eq!(view["state"], "released", "{view}");
    let (_, events) = server.admin_get(&format!("/admin/tables/{t}/events")).await;
    let states: Vec<&str> = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["to"].as_str())
        .collect();
    assert!(!states.contains(&"frozen"), "{events}");
    let (_, text) = server.get("/metrics").await;
    for reason in ["gone", "foreign", "deadline"] {
        let series = format!("pitboss_leases_lost_total{{reason=\"{reason}\"}}");
        assert!(text.contains(&series), "{series} exported: {text}");
        assert_eq!(
            metric(&text, &series),
            0.0,
            "no lease counted as lost: {text}"
        );
    }
    let mut redis = common::redis_conn(&common::shared_redis_url()).await;
    let exists: i64 = redis::cmd("EXISTS")
        .arg(lease_key(&env, &t))
        .query_async(&mut redis)
        .await
        .expect("EXISTS");
    assert_eq!(exists, 0, "the evicted table's lease was released");

    // The next join hosts it again, under a new fence.
    let mut c = common::WsClient::connect(&server, &common::mint_token("alice"))
        .await
        .expect("connect");
    c.send(serde_json::json!({"type": "join", "table": t}))
        .await;
    let snap = c
        .recv_type("snapshot", Duration::from_secs(5))
        .await
        .expect("snapshot");
    assert_eq!(snap["state"]["fence"], 2, "{snap}");
    let (_, events) = server.admin_get(&format!("/admin/tables/{t}/events")).await;
    let revived = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .any(|e| e["to"] == "open" && e["reason"] == "revived" && e["fence"] == 2);
    assert!(revived, "{events}");
}

#[tokio::test]
async fn a_foreign_value_in_the_lease_key_pauses_the_table_as_contested_until_it_lapses_and_freezes_nothing(
) {
    let db = test_db().await;
    let env = unique_env();
    let ttl_ms = 1500;
    let server = Server::start(fast_play(ServerConfig::new(&db, &env).with_ttl_ms(ttl_ms))).await;
    let (t, tasks) = busy_table(&server).await;
    let fence = server.table(&t).await["fence"].as_u64().expect("fence");

    // Redis names another holder for 3 s, but Postgres never hears of it:
    // the owner may not deal (it cannot prove its lease), yet nothing shows
    // that anyone else owns the table.
    let mut redis = common::redis_conn(&common::shared_redis_url()).await;
    let _: () = redis::cmd("SET")
        .arg(lease_key(&env, &t))
        .arg("inst-other|999999")
        .arg("PX")
        .arg(3000)
        .query_async(&mut redis)
        .await
        .expect("SET");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let view = server.table(&t).await;
    assert_eq!(view["state"], "open", "not frozen: {view}");
    let hand_while_contested = view["hand_no"].clone();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        server.table(&t).await["hand_no"],
        hand_while_contested,
        "no hand is recorded while the lease is contested"
    );
    // Once the foreign value lapses, the owner re-asserts and plays on.
    let view = common::eventually_value(Duration::from_secs(5), || async {
        let v = server.table(&t).await;
        (v["fence"].as_u64() > Some(fence) && v["hand_no"].as_u64() > hand_while_contested.as_u64())
            .then_some(v)
    })
    .await
    .expect("re-asserted and dealing again");
    assert_eq!(view["hosted_here"], true, "{view}");
    let (_, text) = server.get("/metrics").await;
    assert!(
        metric(
            &text,
            r#"pitboss_lease_reasserts_total{result="contested"}"#
        ) >= 1.0,
        "{text}"
    );
    assert_eq!(
        metric(&text, r#"pitboss_lease_reasserts_total{result="refused"}"#),
        0.0,
        "{text}"
    );
    // The pause says what happened: another owner's value, not Redis.
    assert!(
        metric(&text, r#"pitboss_table_pauses_total{reason="contested"}"#) >= 1.0,
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            r#"pitboss_table_pauses_total{reason="redis_unreachable"}"#
        ),
        0.0,
        "{text}"
    );
    play::no_freeze_recorded(&server, &t).await;
    assert_eq!(server.audit().await["delta"], 0);
    drop(server);
    for task in tasks {
        let p = task.await.expect("player task");
        paused_then_resumed(&p, "contested");
        assert!(
            !p.client
                .seen
                .iter()
                .any(|v| v["type"] == "paused" && v["reason"] != "contested"),
            "{} was told only contested",
            p.name
        );
    }
}
