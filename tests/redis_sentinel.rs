//! pitboss on a Sentinel-watched Redis (`redis.sentinel_nodes`,
//! `redis.sentinel_master`): when the master dies, the Sentinel promotes its
//! replica; the tables pause while no master answers, then resume on the
//! new one, with nothing frozen and the same owner.

mod common;
mod play;

use std::time::Duration;

use common::{test_db, unique_env, RedisSentinel, Server, ServerConfig, SENTINEL_MASTER};
use play::Policy;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sentinel_failover_pauses_the_tables_and_they_resume_on_the_promoted_replica() {
    let db = test_db().await;
    let mut redis = RedisSentinel::start().await;
    let old_master = redis.master.port;
    let cfg = ServerConfig::new(&db, &unique_env())
        // Not used while Sentinels are set.
        .with_redis(&redis.master.url())
        .with_ttl_ms(1500)
        .with_env("PITBOSS__REDIS__SENTINEL_NODES", &redis.sentinel_url())
        .with_env("PITBOSS__REDIS__SENTINEL_MASTER", SENTINEL_MASTER)
        .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "50")
        .with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "5000");
    let a = Server::start(cfg.with_instance("sentinel-a")).await;
    let (t, alice, bob) = play::heads_up(&a, 200).await;
    let mut players = play::play_hands(
        vec![(alice, Policy::CheckCall), (bob, Policy::CheckCall)],
        &t,
        1,
        Duration::from_secs(20),
    )
    .await;
    let fence = a.table(&t).await["fence"].as_u64().expect("fence");

    redis.master.kill().await;
    let paused = players[0]
        .client
        .recv_type("paused", Duration::from_secs(10))
        .await
        .unwrap_or_else(|| panic!("the table paused: {:?}", players[0].client.seen.last()));
    assert_eq!(paused["reason"], "redis_unreachable", "{paused}");
    let promoted = common::eventually(Duration::from_secs(20), Duration::from_millis(100), || {
        let redis = &redis;
        async move { redis.master_port().await != old_master }
    })
    .await;
    assert!(promoted, "the sentinel promoted the replica");
    assert_eq!(redis.master_port().await, redis.replica.port);
    players[0]
        .client
        .recv_type("resumed", Duration::from_secs(15))
        .await
        .unwrap_or_else(|| panic!("the table resumed: {:?}", players[0].client.seen.last()));

    play::play_on_unfrozen(players, &t, 2).await;
    play::no_freeze_recorded(&a, &t).await;
    let view = a.table(&t).await;
    assert_eq!(view["owner"], "sentinel-a", "{view}");
    assert!(view["fence"].as_u64() >= Some(fence), "{view}");
    assert_eq!(a.audit().await["delta"], 0);
}
