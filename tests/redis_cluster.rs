//! pitboss on a Redis Cluster (`redis.cluster_nodes`): three masters of the
//! test's own, two instances, tables whose keys land on every master; a
//! drain hands every table over within about a second; a killed master
//! pauses only the tables whose keys it held, and they resume when it comes
//! back, with nothing frozen and never two dealers.

mod common;
mod play;

use std::time::{Duration, Instant};

use common::{test_db, unique_env, RedisCluster, Server, ServerConfig};
use pitboss::lease::{HeldLease, LeaseClient, RenewOutcome};
use pitboss::types::{Fence, TableId};
use play::{Player, Policy};

fn on_cluster(db: &common::TestDb, cluster: &RedisCluster) -> ServerConfig {
    ServerConfig::new(db, &unique_env())
        // Not used while cluster nodes are set.
        .with_redis(&cluster.nodes[0].url())
        .with_env("PITBOSS__REDIS__CLUSTER_NODES", &cluster.nodes_csv())
        .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "50")
        .with_env("PITBOSS__TABLE__ACTION_TIMEOUT_MS", "5000")
}

/// Leases of `tables` as the renew and release take them, at fence 1.
fn held_at_fence_1(tables: &[TableId]) -> Vec<HeldLease> {
    tables
        .iter()
        .map(|t| HeldLease {
            table: t.clone(),
            fence: Fence(1),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_instances_on_a_redis_cluster_play_and_a_drain_hands_every_table_over() {
    let db = test_db().await;
    let cluster = RedisCluster::start(3).await;
    let cfg = on_cluster(&db, &cluster);
    let env = cfg.environment.clone();
    let a = Server::start(cfg.clone().with_instance("cluster-a")).await;
    let b = Server::start(cfg.with_instance("cluster-b")).await;

    let mut tables = Vec::new();
    for _ in 0..24 {
        tables.push(play::new_table(&a).await);
    }
    // The hash tags spread the tables' keys over every master, and each
    // table's lease and fence counter share a node.
    for i in 0..3 {
        let leases = cluster.keys_on(i, &format!("lease:table:{env}:*")).await;
        assert!(leases > 0, "node {i} holds no lease");
    }
    for t in &tables {
        let lease = cluster.slot_of(&common::lease_key(&env, t)).await;
        let fence = cluster.slot_of(&common::fence_key(&env, t)).await;
        assert_eq!(lease, fence, "{t}'s keys share a slot");
    }

    // Two tables played by clients of B (relayed to A).
    for p in ["alice", "bob", "carol", "dave"] {
        b.grant(p, 1000).await;
    }
    let t1 = tables[0].clone();
    let t2 = tables[1].clone();
    let players = vec![
        (
            Player::sit(&b, &t1, "alice", 0, 200).await,
            Policy::CheckCall,
        ),
        (Player::sit(&b, &t1, "bob", 1, 200).await, Policy::CheckCall),
    ];
    let others = vec![
        (
            Player::sit(&b, &t2, "carol", 0, 200).await,
            Policy::CheckCall,
        ),
        (
            Player::sit(&b, &t2, "dave", 1, 200).await,
            Policy::CheckCall,
        ),
    ];
    let mut played = play::play_hands(players, &t1, 2, Duration::from_secs(30)).await;
    played.extend(play::play_hands(others, &t2, 2, Duration::from_secs(30)).await);
    for p in &played {
        assert!(
            p.hands_ended().len() >= 2,
            "{} played: {:?}",
            p.name,
            p.client.seen.last()
        );
    }

    a.sigterm();
    let status = a.wait_exit(Duration::from_secs(20)).await.expect("A exits");
    assert!(status.success(), "A drained: {status}");
    let exited = Instant::now();
    let all_on_b = common::eventually(Duration::from_secs(10), Duration::from_millis(20), || {
        let (b, tables) = (&b, &tables);
        async move {
            let (_, list) = b.admin_get("/admin/tables").await;
            let rows = list["tables"].as_array().cloned().unwrap_or_default();
            tables.iter().all(|t| {
                rows.iter().any(|r| {
                    r["id"] == t.as_str() && r["owner"] == "cluster-b" && r["state"] == "open"
                })
            })
        }
    })
    .await;
    let took = exited.elapsed();
    assert!(all_on_b, "B hosts every table");
    println!("24 tables on a Redis Cluster hosted by B {took:?} after A's exit");
    assert!(took <= Duration::from_millis(1500), "B took {took:?}");

    // The relayed players follow their table to B and play on.
    let at_t1: Vec<(Player, Policy)> = played.drain(..2).map(|p| (p, Policy::CheckCall)).collect();
    let again = play::play_hands(at_t1, &t1, 1, Duration::from_secs(30)).await;
    for p in &again {
        assert!(p.client.closed.is_none(), "{} kept its connection", p.name);
        assert!(
            p.hands_ended().len() >= 3,
            "{} played on: {:?}",
            p.name,
            p.client.seen.last()
        );
    }
    assert_eq!(b.audit().await["delta"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_cluster_master_pauses_only_its_tables_and_they_resume_when_it_returns() {
    let db = test_db().await;
    let mut cluster = RedisCluster::start(3).await;
    let cfg = on_cluster(&db, &cluster).with_ttl_ms(1500);
    let env = cfg.environment.clone();
    let a = Server::start(cfg.with_instance("cluster-a")).await;

    // Two tables whose keys live on different masters.
    let mut by_node: Vec<Option<String>> = vec![None; 3];
    for _ in 0..30 {
        let t = play::new_table(&a).await;
        let node = cluster.node_of(&common::lease_key(&env, &t)).await;
        by_node[node].get_or_insert(t);
        if by_node.iter().filter(|t| t.is_some()).count() >= 2 {
            break;
        }
    }
    let mut found = by_node
        .iter()
        .enumerate()
        .filter_map(|(i, t)| Some((i, t.clone()?)));
    let (victim, hit) = found.next().expect("a table on one node");
    let (_, spared) = found.next().expect("a table on another node");

    for p in ["alice", "bob", "carol", "dave"] {
        a.grant(p, 1000).await;
    }
    let mut hit_players = vec![
        Player::sit(&a, &hit, "alice", 0, 200).await,
        Player::sit(&a, &hit, "bob", 1, 200).await,
    ];
    let spared_players = vec![
        (
            Player::sit(&a, &spared, "carol", 0, 200).await,
            Policy::CheckCall,
        ),
        (
            Player::sit(&a, &spared, "dave", 1, 200).await,
            Policy::CheckCall,
        ),
    ];

    cluster.nodes[victim].kill().await;
    // The table whose node died pauses once its lease cannot be proven...
    let paused = hit_players[0]
        .client
        .recv_type("paused", Duration::from_secs(5))
        .await
        .unwrap_or_else(|| {
            panic!(
                "the hit table paused: {:?}",
                hit_players[0].client.seen.last()
            )
        });
    assert_eq!(paused["reason"], "redis_unreachable", "{paused}");
    // The instance stays ready: the other masters serve the other tables.
    for _ in 0..15 {
        let (status, body) = a.get("/readyz").await;
        assert_eq!(status, 200, "ready with one master down: {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // ...while the other one deals on.
    let spared_players =
        play::play_hands(spared_players, &spared, 2, Duration::from_secs(30)).await;
    for p in &spared_players {
        assert!(
            p.hands_ended().len() >= 2,
            "{} dealt on: {:?}",
            p.name,
            p.client.seen.last()
        );
    }

    // The node comes back (its slots, no keys): the owner re-asserts its
    // lease above Postgres's fence and the table resumes.
    cluster.nodes[victim].start_again().await;
    cluster.wait_ok().await;
    let resumed = hit_players[0]
        .client
        .recv_type("resumed", Duration::from_secs(15))
        .await
        .unwrap_or_else(|| {
            panic!(
                "the hit table resumed: {:?}",
                hit_players[0].client.seen.last()
            )
        });
    assert_eq!(resumed["table"], hit.as_str());
    play::play_on_unfrozen(hit_players, &hit, 2).await;
    play::no_freeze_recorded(&a, &hit).await;
    let view = a.table(&hit).await;
    assert_eq!(view["owner"], "cluster-a", "{view}");
    assert_eq!(a.audit().await["delta"], 0);
}

#[tokio::test]
async fn a_renew_of_a_thousand_leases_on_a_cluster_answers_each_table_in_its_place() {
    let cluster = RedisCluster::start(3).await;
    let urls: Vec<String> = cluster.nodes.iter().map(|n| n.url()).collect();
    let env = unique_env();
    let ttl = Duration::from_secs(60);
    let lease =
        LeaseClient::connect_cluster(&urls, None, &env, "inst-a", ttl, Duration::from_secs(5))
            .await
            .expect("connect to the cluster");
    let mut raw = redis::cluster::ClusterClient::new(urls.clone())
        .expect("cluster client")
        .get_async_connection()
        .await
        .expect("cluster connection");
    // A thousand tables over three masters: each node's pipeline carries
    // tables scattered through the caller's order, and each reply must
    // land in its table's place.
    let tables: Vec<TableId> = (0..1000).map(|_| TableId::generate()).collect();
    for t in &tables {
        assert_eq!(lease.acquire(t, Fence(0)).await.expect("acquire"), Fence(1));
    }
    let mut want = Vec::new();
    for (i, t) in tables.iter().enumerate() {
        let key = lease.lease_key(t);
        want.push(match i % 7 {
            3 => {
                let () = redis::cmd("SET")
                    .arg(&key)
                    .arg("inst-b|9")
                    .query_async(&mut raw)
                    .await
                    .expect("SET");
                RenewOutcome::Foreign
            }
            5 => {
                let _: i64 = redis::cmd("DEL")
                    .arg(&key)
                    .query_async(&mut raw)
                    .await
                    .expect("DEL");
                RenewOutcome::Gone
            }
            _ => RenewOutcome::Renewed,
        });
    }
    let held = held_at_fence_1(&tables);
    let outcomes = lease.renew_all(&held).await.expect("renew_all");
    assert_eq!(outcomes.len(), want.len());
    for (i, (got, want)) in outcomes.iter().zip(&want).enumerate() {
        assert_eq!(got, want, "table {i} ({})", tables[i]);
    }
}

#[tokio::test]
async fn a_renew_after_a_table_s_slot_moved_to_another_master_still_renews_it() {
    use common::redis_conn;
    let cluster = RedisCluster::start(3).await;
    let urls: Vec<String> = cluster.nodes.iter().map(|n| n.url()).collect();
    let env = unique_env();
    let lease = LeaseClient::connect_cluster(
        &urls,
        None,
        &env,
        "inst-a",
        Duration::from_secs(60),
        Duration::from_secs(5),
    )
    .await
    .expect("connect to the cluster");
    let tables: Vec<TableId> = (0..30).map(|_| TableId::generate()).collect();
    for t in &tables {
        lease.acquire(t, Fence(0)).await.expect("acquire");
    }
    let held = held_at_fence_1(&tables);
    // The first renew reads the slot map and keeps it.
    let all_renewed = vec![RenewOutcome::Renewed; tables.len()];
    assert_eq!(lease.renew_all(&held).await.expect("renew"), all_renewed);

    // Move the first table's slot, with its keys, to another master, the
    // way a resharding does: the kept map now names the old master.
    let moved = &tables[0];
    let key = lease.lease_key(moved);
    let slot = cluster.slot_of(&key).await;
    let from = cluster.node_of(&key).await;
    let to = (from + 1) % 3;
    let id_of = |i: usize| {
        let url = cluster.nodes[i].url();
        async move {
            let mut c = redis_conn(&url).await;
            redis::cmd("CLUSTER")
                .arg("MYID")
                .query_async::<String>(&mut c)
                .await
                .expect("CLUSTER MYID")
        }
    };
    let (from_id, to_id) = (id_of(from).await, id_of(to).await);
    let mut src = redis_conn(&cluster.nodes[from].url()).await;
    let mut dst = redis_conn(&cluster.nodes[to].url()).await;
    let setslot = |state: &str, id: &str| {
        let mut c = redis::cmd("CLUSTER");
        c.arg("SETSLOT").arg(slot).arg(state).arg(id);
        c
    };
    let () = setslot("IMPORTING", &from_id)
        .query_async(&mut dst)
        .await
        .expect("IMPORTING");
    let () = setslot("MIGRATING", &to_id)
        .query_async(&mut src)
        .await
        .expect("MIGRATING");
    let () = redis::cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(cluster.nodes[to].port)
        .arg("")
        .arg(0)
        .arg(5000)
        .arg("KEYS")
        .arg(&key)
        .arg(lease.fence_key(moved))
        .query_async(&mut src)
        .await
        .expect("MIGRATE");
    for i in 0..3 {
        let mut c = redis_conn(&cluster.nodes[i].url()).await;
        let () = setslot("NODE", &to_id)
            .query_async(&mut c)
            .await
            .expect("SETSLOT NODE");
    }
    assert_eq!(cluster.node_of(&key).await, to);

    // The old master answers MOVED for it; the renew sends that table
    // again through the cluster client, and every lease is renewed.
    assert_eq!(lease.renew_all(&held).await.expect("renew"), all_renewed);
    let mut c = redis_conn(&cluster.nodes[to].url()).await;
    let value: Option<String> = redis::cmd("GET")
        .arg(&key)
        .query_async(&mut c)
        .await
        .expect("GET");
    assert_eq!(value.as_deref(), Some("inst-a|1"));
    // And the map read again routes it to its new master from then on.
    assert_eq!(lease.renew_all(&held).await.expect("renew"), all_renewed);
}

/// The seed-node list as `redis-cli --cluster` and managed services print
/// it: `host:port`, no scheme.
fn bare_nodes_csv(cluster: &RedisCluster) -> String {
    cluster
        .nodes
        .iter()
        .map(|n| {
            n.url()
                .strip_prefix("redis://")
                .expect("a redis:// url")
                .to_string()
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn seed_nodes_given_as_host_port_or_as_redis_urls_both_talk_to_the_cluster() {
    let db = test_db().await;
    let cluster = RedisCluster::start(3).await;
    let bare = bare_nodes_csv(&cluster);
    assert!(!bare.contains("://"), "{bare}");
    // One instance on the bare form, one on a list that mixes both.
    let mixed = format!(
        "{},{}",
        cluster.nodes[0]
            .url()
            .strip_prefix("redis://")
            .expect("url"),
        cluster.nodes[1..]
            .iter()
            .map(|n| n.url())
            .collect::<Vec<_>>()
            .join(",")
    );
    for (id, nodes) in [("bare-nodes", bare), ("mixed-nodes", mixed)] {
        let cfg = ServerConfig::new(&db, &unique_env())
            // Not used while cluster nodes are set: a port nothing listens on.
            .with_redis("redis://127.0.0.1:1")
            .with_env("PITBOSS__REDIS__CLUSTER_NODES", &nodes)
            .with_instance(id);
        let env = cfg.environment.clone();
        let server = Server::start(cfg).await;
        // The leases are on the cluster, spread over its masters. Table ids
        // are random, so tables are added until every master holds one (a
        // missing master after 64 tables has odds below 1e-10).
        let mut tables = Vec::new();
        let mut empty = vec![0, 1, 2];
        while !empty.is_empty() && tables.len() < 64 {
            tables.push(play::new_table(&server).await);
            let mut still = Vec::new();
            for i in empty {
                if cluster.keys_on(i, &format!("lease:table:{env}:*")).await == 0 {
                    still.push(i);
                }
            }
            empty = still;
        }
        assert!(
            empty.is_empty(),
            "{id} ({nodes}): nodes {empty:?} hold no lease after {} tables",
            tables.len()
        );
        server.sigterm();
        let status = server.wait_exit(Duration::from_secs(20)).await;
        assert!(status.is_some_and(|s| s.success()), "{id} drained");
    }

    // Neither form: refused at start, exit 2, with the forms it takes.
    let bogus = ServerConfig::new(&db, &unique_env())
        .with_env("PITBOSS__REDIS__CLUSTER_NODES", "bogus")
        .with_instance("bogus-nodes");
    let failed = match Server::try_start(bogus).await {
        Ok(_) => panic!("a cluster_nodes of bogus started"),
        Err(failed) => failed,
    };
    assert_eq!(failed.status.and_then(|s| s.code()), Some(2), "{failed}");
    assert!(
        failed.logs.iter().any(|l| l.contains(
            "redis.cluster_nodes entry 1 is not a node: expected a comma-separated list of host:port, redis://host:port or rediss://host:port"
        )),
        "{failed}"
    );
}
