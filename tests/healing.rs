//! Faults nobody would call a loss of ownership heal without an operator,
//! at more than one instance: a vanished lease key, a Redis restarted
//! empty, a Postgres that refuses connections for a while. No table
//! freezes, no hand is dealt by two processes, and nobody is told a result
//! Postgres did not record.

mod common;
mod play;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::{lease_key, test_db, unique_env, PrivateRedis, Server, ServerConfig};
use play::{metric, spawn_forever, Player, Policy};
use serde_json::Value;
use sqlx::{PgPool, Row};
use tokio::task::JoinHandle;

const TTL_MS: u64 = 1500;

fn config(db: &common::TestDb, env: &str, id: &str) -> ServerConfig {
    ServerConfig::new(db, env)
        .with_instance(id)
        .with_ttl_ms(TTL_MS)
        .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "50")
        .with_env("PITBOSS__REDIS__OP_TIMEOUT_MS", "300")
        // The scripted players act as fast as hands are dealt (tens of
        // frames a second); the limit is not what these tests are about.
        .with_env("PITBOSS__WS__RATE_PER_SEC", "500")
        .with_env("PITBOSS__WS__RATE_BURST", "1000")
}

/// A table on `server` with two players playing check/call in the
/// background for `play_for`.
async fn busy_table(
    server: &Server,
    names: [&str; 2],
    play_for: Duration,
) -> (String, Vec<JoinHandle<Player>>) {
    let t = play::new_table(server).await;
    let mut tasks = Vec::new();
    for (seat, name) in names.into_iter().enumerate() {
        server.grant(name, 1000).await;
        let p = Player::sit(server, &t, name, seat as u64, 100).await;
        tasks.push(spawn_forever(p, &t, Policy::CheckCall, play_for));
    }
    assert!(
        common::eventually(
            Duration::from_secs(10),
            Duration::from_millis(50),
            || async { server.table(&t).await["hand_no"].as_u64() >= Some(1) }
        )
        .await,
        "hands are being played"
    );
    (t, tasks)
}

async fn hand_no(server: &Server, table: &str) -> u64 {
    server.table(table).await["hand_no"].as_u64().unwrap_or(0)
}

/// Whether `table` records two more hands at `server` within `within`.
async fn plays_on(server: &Server, table: &str, within: Duration) -> bool {
    let from = hand_no(server, table).await;
    common::eventually(within, Duration::from_millis(50), || async {
        hand_no(server, table).await > from + 1
    })
    .await
}

/// Postgres stops letting anyone into the test database and cuts every
/// connection it has: to pitboss, its pool can no longer get one.
async fn refuse_connections(admin: &PgPool, db: &common::TestDb) {
    let refuse = format!(
        "ALTER DATABASE \"{}\" WITH ALLOW_CONNECTIONS false",
        db.name
    );
    sqlx::query(&refuse).execute(admin).await.expect("refuse");
    sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1")
        .bind(&db.name)
        .execute(admin)
        .await
        .expect("terminate");
}

async fn allow_connections(admin: &PgPool, db: &common::TestDb) {
    let allow = format!("ALTER DATABASE \"{}\" WITH ALLOW_CONNECTIONS true", db.name);
    sqlx::query(&allow).execute(admin).await.expect("allow");
}

/// Every hand Postgres recorded for the table: hand number → (fence, the
/// stacks it ended with).
async fn recorded_hands(pool: &PgPool, table: &str) -> HashMap<u64, (i64, HashMap<u64, u64>)> {
    sqlx::query("SELECT hand_no, fence, result FROM hands WHERE table_id = $1 ORDER BY hand_no")
        .bind(table)
        .fetch_all(pool)
        .await
        .expect("hands")
        .iter()
        .map(|r| {
            let result: Value = r.get("result");
            let stacks = result["seats"]
                .as_array()
                .expect("seats")
                .iter()
                .map(|s| {
                    (
                        s["seat"].as_u64().expect("seat"),
                        s["end_stack"].as_u64().expect("end_stack"),
                    )
                })
                .collect();
            (r.get::<i64, _>("hand_no") as u64, (r.get("fence"), stacks))
        })
        .collect()
}

/// What the players were told holds: nobody saw `frozen`; every
/// `hand_ended` they saw is a hand Postgres recorded, with the same
/// stacks; no hand number ended twice; hand fences never decrease.
async fn assert_told_only_what_was_recorded(
    pool: &PgPool,
    table: &str,
    tasks: Vec<JoinHandle<Player>>,
) -> Vec<Player> {
    let mut finished = Vec::new();
    for task in tasks {
        finished.push(task.await.expect("player task"));
    }
    // Read after the players are done: a result told late must be there.
    let recorded = recorded_hands(pool, table).await;
    let mut players = Vec::new();
    for p in finished {
        assert!(
            !p.client.seen.iter().any(|v| v["type"] == "frozen"),
            "{} was told frozen: {:?}",
            p.name,
            p.client.seen.iter().find(|v| v["type"] == "frozen")
        );
        let ended: Vec<&Value> = p
            .client
            .seen
            .iter()
            .filter(|v| v["kind"] == "hand_ended" && v["table"] == table)
            .collect();
        assert!(!ended.is_empty(), "{} saw hands end", p.name);
        let mut numbers: Vec<u64> = ended.iter().filter_map(|v| v["hand"].as_u64()).collect();
        let told = numbers.len();
        numbers.dedup();
        assert_eq!(numbers.len(), told, "{}: a hand ended twice", p.name);
        for ev in ended {
            let hand = ev["hand"].as_u64().expect("hand");
            let (_, stacks) = recorded.get(&hand).unwrap_or_else(|| {
                panic!(
                    "{} was told hand {hand} ended; Postgres has no such hand",
                    p.name
                )
            });
            assert_eq!(
                &play::stacks_of(ev),
                stacks,
                "hand {hand} as told and as recorded"
            );
        }
        players.push(p);
    }
    let mut fences: Vec<(u64, i64)> = recorded.iter().map(|(h, (f, _))| (*h, *f)).collect();
    fences.sort();
    assert!(
        fences.windows(2).all(|w| w[0].1 <= w[1].1),
        "hand fences never decrease: {fences:?}"
    );
    players
}

#[tokio::test]
async fn with_two_instances_a_deleted_lease_key_is_reasserted_by_its_owner_and_never_taken_by_the_other(
) {
    let db = test_db().await;
    let env = unique_env();
    let a = Server::start(config(&db, &env, "inst-a")).await;
    let b = Server::start(config(&db, &env, "inst-b")).await;
    let (t, tasks) = busy_table(&a, ["alice", "bob"], Duration::from_secs(8)).await;
    let fence = a.table(&t).await["fence"].as_u64().expect("fence");

    // Delete the key again and again while B's revive scan runs every
    // 250-500 ms: B must never take the table of a live owner.
    let mut redis = common::redis_conn(&common::shared_redis_url()).await;
    for _ in 0..5 {
        let _: i64 = redis::cmd("DEL")
            .arg(lease_key(&env, &t))
            .query_async(&mut redis)
            .await
            .expect("DEL");
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    assert!(
        plays_on(&a, &t, Duration::from_secs(5)).await,
        "play goes on at A"
    );

    let view = a.table(&t).await;
    assert_eq!(view["owner"], "inst-a", "{view}");
    assert_eq!(view["hosted_here"], true, "{view}");
    assert_eq!(view["state"], "open", "{view}");
    assert!(
        view["fence"].as_u64() > Some(fence),
        "a higher fence: {view}"
    );
    let (_, text) = b.get("/metrics").await;
    assert_eq!(
        metric(&text, r#"pitboss_lease_acquires_total{result="acquired"}"#),
        0.0,
        "B never took a lease: {text}"
    );
    let (_, text) = a.get("/metrics").await;
    assert!(
        metric(
            &text,
            r#"pitboss_lease_reasserts_total{result="reasserted"}"#
        ) >= 1.0,
        "{text}"
    );
    assert_eq!(
        metric(&text, r#"pitboss_stale_boundary_writes_total"#),
        0.0,
        "no write was refused: nobody else dealt: {text}"
    );
    play::no_freeze_recorded(&a, &t).await;
    let pool = db.pool().await;
    assert_told_only_what_was_recorded(&pool, &t, tasks).await;
    let owners: Vec<String> =
        sqlx::query_scalar("SELECT DISTINCT owner FROM hands WHERE table_id = $1")
            .bind(&t)
            .fetch_all(&pool)
            .await
            .expect("owners");
    assert_eq!(owners, vec!["inst-a".to_string()], "only A dealt");
    assert_eq!(a.audit().await["delta"], 0);
}

#[tokio::test]
async fn two_live_instances_whose_redis_restarts_empty_freeze_nothing_and_deal_again_within_two_ttls(
) {
    let db = test_db().await;
    let env = unique_env();
    let mut redis = PrivateRedis::start().await;
    let a = Server::start(config(&db, &env, "inst-a").with_redis(&redis.url())).await;
    let b = Server::start(config(&db, &env, "inst-b").with_redis(&redis.url())).await;
    let (ta, tasks_a) = busy_table(&a, ["alice", "bob"], Duration::from_secs(8)).await;
    let (tb, tasks_b) = busy_table(&b, ["carol", "dave"], Duration::from_secs(8)).await;
    let pool = db.pool().await;
    let max_fence = |t: &str| {
        let (pool, t) = (pool.clone(), t.to_string());
        async move {
            let f: i64 = sqlx::query_scalar(
                "SELECT GREATEST((SELECT owner_fencing_token FROM tables WHERE id = $1), \
                 COALESCE((SELECT MAX(fence) FROM hands WHERE table_id = $1), 0))",
            )
            .bind(&t)
            .fetch_one(&pool)
            .await
            .expect("fence");
            f as u64
        }
    };
    let (fa, fb) = (max_fence(&ta).await, max_fence(&tb).await);

    // A crash without persistence: the new server knows no lease, no
    // counter, no registration.
    redis.kill().await;
    redis.start_again().await;
    let restarted = std::time::Instant::now();
    let reasserted = common::eventually(
        Duration::from_millis(2 * TTL_MS),
        Duration::from_millis(25),
        || async {
            a.table(&ta).await["fence"].as_u64() > Some(fa)
                && b.table(&tb).await["fence"].as_u64() > Some(fb)
        },
    )
    .await;
    assert!(reasserted, "both owners re-asserted within 2 x TTL");
    let (ha, hb) = (hand_no(&a, &ta).await, hand_no(&b, &tb).await);
    let dealing = common::eventually(
        Duration::from_millis(2 * TTL_MS).saturating_sub(restarted.elapsed()),
        Duration::from_millis(25),
        || async { hand_no(&a, &ta).await > ha && hand_no(&b, &tb).await > hb },
    )
    .await;
    if !dealing {
        for task in tasks_a.into_iter().chain(tasks_b) {
            let p = task.await.expect("player");
            let n = p.client.seen.len();
            eprintln!("{}: {:#?}", p.name, &p.client.seen[n.saturating_sub(8)..]);
        }
        panic!("both tables deal again within 2 x TTL");
    }

    for (server, t, fence, owner) in [(&a, &ta, fa, "inst-a"), (&b, &tb, fb, "inst-b")] {
        let view = server.table(t).await;
        assert_eq!(view["state"], "open", "{view}");
        assert_eq!(view["owner"], owner, "{view}");
        assert_eq!(view["hosted_here"], true, "{view}");
        assert!(
            view["fence"].as_u64() > Some(fence),
            "above every fence Postgres had seen ({fence}): {view}"
        );
        play::no_freeze_recorded(server, t).await;
    }
    assert_told_only_what_was_recorded(&pool, &ta, tasks_a).await;
    assert_told_only_what_was_recorded(&pool, &tb, tasks_b).await;
    let frozen: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM tables WHERE state = 'frozen'")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(frozen, 0);
    assert_eq!(a.audit().await["delta"], 0);
}

#[tokio::test]
async fn a_postgres_refusing_connections_for_seconds_pauses_play_and_nothing_freezes() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(
        config(&db, &env, "inst-a")
            .with_env("PITBOSS__DATABASE__ACQUIRE_TIMEOUT_MS", "500")
            .with_env("PITBOSS__DATABASE__CONNECT_TIMEOUT_MS", "500"),
    )
    .await;
    let (t, tasks) = busy_table(&server, ["alice", "bob"], Duration::from_secs(12)).await;

    // Every connection of the test database is cut and no new one is let
    // in for three seconds: to the process, its pool is exhausted.
    let admin = sqlx::PgPool::connect(&common::admin_pg_url())
        .await
        .expect("admin pool");
    refuse_connections(&admin, &db).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    allow_connections(&admin, &db).await;
    assert!(
        plays_on(&server, &t, Duration::from_secs(6)).await,
        "play goes on once Postgres is back"
    );
    let view = server.table(&t).await;
    assert_eq!(view["state"], "open", "{view}");
    assert_eq!(view["hosted_here"], true, "{view}");
    play::no_freeze_recorded(&server, &t).await;
    let (_, text) = server.get("/metrics").await;
    assert!(
        metric(&text, "pitboss_liveness_errors_total") >= 1.0,
        "the outage was seen: {text}"
    );
    assert_eq!(server.audit().await["delta"], 0);
    drop(server);
    let pool = db.pool().await;
    let players = assert_told_only_what_was_recorded(&pool, &t, tasks).await;
    for p in players {
        play::paused_then_resumed(&p, "store_unreachable");
    }
}

#[tokio::test]
async fn a_drain_that_cannot_write_ends_within_its_hard_deadline_and_releases_every_lease() {
    let db = test_db().await;
    let env = unique_env();
    let a = Server::start(
        config(&db, &env, "inst-a")
            .with_env("PITBOSS__SHUTDOWN__DRAIN_TIMEOUT_MS", "1000")
            .with_env("PITBOSS__DATABASE__STATEMENT_TIMEOUT_MS", "1000")
            .with_env("PITBOSS__DATABASE__ACQUIRE_TIMEOUT_MS", "500"),
    )
    .await;
    // Nobody acts: the hand dealt now is still in progress when the drain
    // starts, and goes with the table (its release write cannot land).
    let (t, mut alice, _bob) = play::heads_up(&a, 100).await;
    alice
        .client
        .recv_event("hand_started", Duration::from_secs(5))
        .await
        .expect("a hand in progress");

    // Postgres refuses this database: nothing the drain writes can land.
    let admin = sqlx::PgPool::connect(&common::admin_pg_url())
        .await
        .expect("admin pool");
    refuse_connections(&admin, &db).await;
    a.sigterm();
    let sent = Instant::now();
    let exited = a.wait_exit(Duration::from_secs(15)).await;
    let took = sent.elapsed();
    allow_connections(&admin, &db).await;
    assert!(exited.is_some(), "the drain ended");
    // drain 1 s + 2 x statement 1 s + 1 s, plus the exit itself.
    assert!(
        took < Duration::from_secs(7),
        "exited {took:?} after SIGTERM"
    );
    // Either the release write failed at once (connections refused) or
    // the hard deadline ended the wait for it.
    assert!(
        a.logs_contain("could not record the table's state")
            || a.logs_contain("event=\"drain_deadline\""),
        "the drain gave up on its write"
    );
    let mut redis = common::redis_conn(&common::shared_redis_url()).await;
    let exists: i64 = redis::cmd("EXISTS")
        .arg(lease_key(&env, &t))
        .query_async(&mut redis)
        .await
        .expect("EXISTS");
    assert_eq!(exists, 0, "its lease was released");

    // Another instance takes the table once A's liveness is a TTL old (A
    // could not even say it was gone), and the chips are all there.
    let b = Server::start(config(&db, &env, "inst-b")).await;
    let view = common::eventually_value(Duration::from_millis(TTL_MS + 3000), || async {
        let v = b.table(&t).await;
        (v["hosted_here"] == true).then_some(v)
    })
    .await
    .expect("B hosts the table");
    assert_eq!(view["state"], "open", "{view}");
    assert_eq!(b.audit().await["delta"], 0);
}
