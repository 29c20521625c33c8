//! One owner per table across instances (I1, I6): a second instance never
//! takes a table the first hosts (its joins are relayed there); a restart with the same instance id re-takes its
//! tables at once under a higher fence; a different id waits out the TTL.

mod common;
mod play;

use std::time::{Duration, Instant};

use common::{mint_token, test_db, unique_env, Server, ServerConfig, WsClient};
use play::metric;
use serde_json::{json, Value};

async fn owned_elsewhere_refusals(server: &Server) -> f64 {
    let (_, text) = server.get("/metrics").await;
    metric(
        &text,
        r#"pitboss_lease_acquires_total{result="owned_elsewhere"}"#,
    )
}

/// Runs `pitboss serve` with `cfg` and checks that it refuses to start
/// because a live process holds its id: exit 2, one line on stderr.
async fn refused_as_in_use(cfg: ServerConfig) {
    let mut second = cfg.command();
    second
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let out = tokio::task::spawn_blocking(move || second.output())
        .await
        .expect("join")
        .expect("run the second process");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {stderr}");
    let expected = format!(
        "instance id {} is in use by a live process",
        cfg.instance_id
    );
    assert!(lines[0].contains(&expected), "{stderr}");
}

async fn join_error(server: &Server, table: &str) -> Value {
    let mut c = WsClient::connect(server, &mint_token("watcher"))
        .await
        .expect("connect");
    c.send(json!({"type": "join", "table": table})).await;
    c.recv_until(
        |v| v["type"] == "error" || v["type"] == "snapshot",
        Duration::from_secs(10),
    )
    .await
    .expect("an answer to join")
}

#[tokio::test]
async fn a_second_instance_relays_to_the_table_the_first_hosts_and_never_takes_it() {
    let db = test_db().await;
    let env = unique_env();
    let cfg = ServerConfig::new(&db, &env);
    let a = Server::start(cfg.clone().with_instance("inst-a")).await;
    let t = play::new_table(&a).await;
    let b = Server::start(cfg.with_instance("inst-b")).await;

    // A join on B is relayed to the owner: the snapshot is A's hosting.
    let snap = join_error(&b, &t).await;
    assert_eq!(snap["type"], "snapshot", "{snap}");
    assert_eq!(snap["state"]["owner"], "inst-a", "{snap}");

    // Across several TTLs B never takes it: A renews its lease and is alive
    // on record, so B's revive scan does not even ask, and every join on B
    // finds the lease held and goes to A.
    tokio::time::sleep(Duration::from_millis(3 * 1500)).await;
    assert!(owned_elsewhere_refusals(&b).await >= 1.0);
    let snap = join_error(&b, &t).await;
    assert_eq!(snap["state"]["owner"], "inst-a", "{snap}");
    let (_, text) = b.get("/metrics").await;
    assert_eq!(
        metric(&text, r#"pitboss_lease_acquires_total{result="acquired"}"#),
        0.0,
        "{text}"
    );

    for (server, here) in [(&a, true), (&b, false)] {
        let (status, list) = server.admin_get("/admin/tables").await;
        assert_eq!(status, 200);
        let tables = list["tables"].as_array().expect("tables");
        assert_eq!(tables.len(), 1, "{list}");
        assert_eq!(tables[0]["owner"], "inst-a", "{list}");
        assert_eq!(tables[0]["fence"], 1, "never re-acquired: {list}");
        assert_eq!(tables[0]["hosted_here"], here, "{list}");
    }
    assert!(matches!(
        join_error(&a, &t).await["type"].as_str(),
        Some("snapshot")
    ));
}

#[tokio::test]
async fn a_restart_with_the_same_instance_id_retakes_its_tables_without_waiting_out_the_ttl_and_another_id_does(
) {
    let db = test_db().await;
    let env = unique_env();
    let ttl_ms = 3000;
    let cfg = ServerConfig::new(&db, &env).with_ttl_ms(ttl_ms);
    let a = Server::start(cfg.clone().with_instance("inst-a")).await;
    let t = play::new_table(&a).await;
    assert_eq!(a.table(&t).await["fence"], 1);

    // SIGKILL: no release, the lease stays live in Redis for a full TTL.
    a.sigkill();
    a.wait_exit(Duration::from_secs(5)).await.expect("a exited");
    let restarted_at = Instant::now();
    let a2 = Server::start(cfg.clone().with_instance("inst-a")).await;
    let retaken = common::eventually(
        Duration::from_millis(ttl_ms / 2),
        Duration::from_millis(50),
        || async {
            let v = a2.table(&t).await;
            v["hosted_here"] == true && v["fence"] == 2
        },
    )
    .await;
    assert!(
        retaken,
        "same id re-took the table within half a TTL of its restart ({:?}): {}",
        restarted_at.elapsed(),
        a2.table(&t).await
    );

    // Now a different id: refused while inst-a's lease is live, hosts the
    // table once the TTL has run out.
    a2.sigkill();
    a2.wait_exit(Duration::from_secs(5))
        .await
        .expect("a2 exited");
    let killed_at = Instant::now();
    let c = Server::start(cfg.with_instance("inst-c")).await;
    let err = join_error(&c, &t).await;
    if killed_at.elapsed() < Duration::from_millis(ttl_ms * 2 / 3) {
        assert_eq!(err["code"], "owned_elsewhere", "{err}");
        assert_eq!(err["owner"], "inst-a", "{err}");
        assert_eq!(c.table(&t).await["owner"], "inst-a");
    }
    let taken = common::eventually(
        Duration::from_millis(ttl_ms * 3),
        Duration::from_millis(50),
        || async {
            let v = c.table(&t).await;
            v["hosted_here"] == true && v["owner"] == "inst-c" && v["fence"] == 3
        },
    )
    .await;
    assert!(
        taken,
        "inst-c hosts the table after the TTL: {}",
        c.table(&t).await
    );
    assert!(
        killed_at.elapsed() >= Duration::from_millis(ttl_ms * 2 / 3),
        "inst-c could not have taken a live lease ({:?} after the kill)",
        killed_at.elapsed()
    );
}

#[tokio::test]
async fn a_second_process_with_a_live_instance_id_refuses_to_start_and_the_first_keeps_its_tables()
{
    let db = test_db().await;
    let env = unique_env();
    let ttl_ms = 1500;
    let cfg = ServerConfig::new(&db, &env)
        .with_ttl_ms(ttl_ms)
        .with_instance("inst-a");
    let a = Server::start(cfg.clone()).await;
    let t = play::new_table(&a).await;
    assert_eq!(a.table(&t).await["fence"], 1);

    let started = Instant::now();
    refused_as_in_use(cfg.clone()).await;
    // It watched the id for about one refresh period before refusing.
    assert!(started.elapsed() < Duration::from_millis(ttl_ms / 3 + 1000 + 3000));

    // The first never noticed: same table, same fence, still hosted.
    tokio::time::sleep(Duration::from_millis(ttl_ms)).await;
    let v = a.table(&t).await;
    assert_eq!(
        (
            v["hosted_here"].as_bool(),
            v["fence"].as_u64(),
            v["owner"].as_str()
        ),
        (Some(true), Some(1), Some("inst-a")),
        "{v}"
    );
    let (status, _) = a.get("/readyz").await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_second_process_refuses_a_live_id_even_when_its_redis_has_no_registration() {
    let db = test_db().await;
    let env = unique_env();
    let ttl_ms = 1500;
    let cfg = ServerConfig::new(&db, &env)
        .with_ttl_ms(ttl_ms)
        .with_instance("inst-a");
    let a = Server::start(cfg.clone()).await;
    let t = play::new_table(&a).await;

    // The second process sees a Redis that knows nothing (as after a Redis
    // that lost its data): only the liveness Postgres recorded shows that
    // a live process holds the id.
    let empty = common::PrivateRedis::start().await;
    refused_as_in_use(cfg.clone().with_redis(&empty.url())).await;
    // It left nothing behind in the Redis it used.
    let mut conn = common::redis_conn(&empty.url()).await;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .expect("KEYS");
    assert!(keys.is_empty(), "{keys:?}");

    let v = a.table(&t).await;
    assert_eq!(
        (
            v["hosted_here"].as_bool(),
            v["fence"].as_u64(),
            v["owner"].as_str()
        ),
        (Some(true), Some(1), Some("inst-a")),
        "{v}"
    );
}

#[tokio::test]
async fn a_killed_process_restarted_with_its_id_retakes_its_tables_within_a_third_of_the_ttl_and_a_second(
) {
    let db = test_db().await;
    let env = unique_env();
    let ttl_ms = 3000;
    let cfg = ServerConfig::new(&db, &env)
        .with_ttl_ms(ttl_ms)
        .with_instance("inst-a");
    let a = Server::start(cfg.clone()).await;
    let t = play::new_table(&a).await;
    a.sigkill();
    a.wait_exit(Duration::from_secs(5)).await.expect("a exited");

    // The registration outlives the kill; the new process sees it stand
    // still for one refresh period and takes the id over.
    let restarted = Instant::now();
    let a2 = Server::start(cfg).await;
    let retaken = common::eventually(
        Duration::from_secs(5),
        Duration::from_millis(25),
        || async {
            let v = a2.table(&t).await;
            v["hosted_here"] == true && v["fence"] == 2
        },
    )
    .await;
    let took = restarted.elapsed();
    assert!(retaken, "{}", a2.table(&t).await);
    // TTL/3 + 1 s of watching, plus the process start and one scan pass.
    assert!(
        took < Duration::from_millis(ttl_ms / 3 + 1000 + 1500),
        "re-took its table {took:?} after the restart"
    );
}

#[tokio::test]
async fn every_instance_lists_the_live_instances_with_their_tables_and_a_killed_one_drops_out() {
    let db = test_db().await;
    let env = unique_env();
    let ttl_ms = 1500;
    let cfg = ServerConfig::new(&db, &env).with_ttl_ms(ttl_ms);
    let a = Server::start(cfg.clone().with_instance("inst-a")).await;
    let b = Server::start(cfg.with_instance("inst-b")).await;
    for _ in 0..2 {
        play::new_table(&a).await;
    }
    play::new_table(&b).await;

    let listed = |v: &Value| -> Vec<(String, u64, String)> {
        let mut out: Vec<(String, u64, String)> = v["instances"]
            .as_array()
            .expect("instances")
            .iter()
            .map(|i| {
                (
                    i["id"].as_str().expect("id").to_string(),
                    i["tables"].as_u64().expect("tables"),
                    i["advertise_url"]
                        .as_str()
                        .expect("advertise_url")
                        .to_string(),
                )
            })
            .collect();
        out.sort();
        out
    };
    for server in [&a, &b] {
        let (status, v) = server.admin_get("/admin/instances").await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(
            listed(&v),
            vec![
                ("inst-a".to_string(), 2, a.http.clone()),
                ("inst-b".to_string(), 1, b.http.clone()),
            ],
            "{v}"
        );
        for i in v["instances"].as_array().expect("instances") {
            assert_eq!(i["draining"], false, "{i}");
            assert!(i["last_seen"].is_string(), "{i}");
            assert_eq!(i["here"], i["id"] == server.cfg.instance_id.as_str(), "{i}");
        }
    }
    let (status, _) = a.get("/admin/instances").await;
    assert_eq!(status, 401, "operators only");

    // A killed instance stops beating and drops out after one TTL.
    b.sigkill();
    b.wait_exit(Duration::from_secs(5)).await.expect("b exited");
    let gone = common::eventually(
        Duration::from_millis(ttl_ms + 2000),
        Duration::from_millis(100),
        || async {
            let (_, v) = a.admin_get("/admin/instances").await;
            listed(&v).iter().all(|(id, _, _)| id != "inst-b")
        },
    )
    .await;
    assert!(gone, "inst-b is no longer listed");
}

#[tokio::test]
async fn the_revive_scan_does_not_look_at_tables_that_are_hosted_but_finds_a_killed_owners() {
    let db = test_db().await;
    let env = unique_env();
    let ttl_ms = 1500;
    let cfg = ServerConfig::new(&db, &env).with_ttl_ms(ttl_ms);
    let a = Server::start(cfg.clone().with_instance("inst-a")).await;
    let b = Server::start(cfg.with_instance("inst-b")).await;
    for _ in 0..4 {
        play::new_table(&a).await;
    }
    let t = play::new_table(&b).await;
    async fn candidates(server: &Server) -> f64 {
        let (_, text) = server.get("/metrics").await;
        metric(&text, "pitboss_revive_candidates")
    }
    // Several scans later, with five tables hosted between them: nothing
    // to look at.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(candidates(&a).await, 0.0);
    assert_eq!(candidates(&b).await, 0.0);

    // B is killed: one TTL after its last beat its table is a candidate,
    // and A takes it.
    b.sigkill();
    b.wait_exit(Duration::from_secs(5)).await.expect("b exited");
    let taken = common::eventually(
        Duration::from_millis(2 * ttl_ms + 2000),
        Duration::from_millis(50),
        || async { a.table(&t).await["hosted_here"] == true },
    )
    .await;
    assert!(taken, "A hosts the killed owner's table");
    let events = a.admin_get(&format!("/admin/tables/{t}/events")).await.1;
    assert!(
        events["events"]
            .as_array()
            .expect("events")
            .iter()
            .any(|e| e["reason"] == "taken_over" && e["owner"] == "inst-a"),
        "{events}"
    );
}

#[tokio::test]
async fn a_beat_that_lands_after_the_process_said_it_was_gone_does_not_bring_it_back() {
    use pitboss::games::GameKind;
    use pitboss::types::{Fence, TableId};

    let db = test_db().await;
    let store = db
        .store("ownership-test")
        .await
        .with_owner_timeout(Duration::from_secs(60));
    let t = TableId::generate();
    store
        .create_table("test", &t, GameKind::HOLDEM, &common::rules_config())
        .await
        .expect("create");
    store
        .stamp(&t, Fence(1), "inst-a", false)
        .await
        .expect("stamp");
    let beat = |incarnation: &'static str| {
        let store = store.clone();
        async move {
            store
                .beat("test", "inst-a", incarnation, "http://127.0.0.1:1", true)
                .await
                .expect("beat")
        }
    };
    beat("one").await;
    assert!(store.owner_alive(&t, "inst-a").await.expect("alive?"));

    // On exit the process says it is gone; a beat of the same process that
    // was already on its way lands afterwards.
    store
        .forget_instance("test", "inst-a", "one")
        .await
        .expect("forget");
    beat("one").await;
    assert!(
        !store.owner_alive(&t, "inst-a").await.expect("alive?"),
        "a late beat revived a process that had left: the next owner would wait a TTL"
    );

    // A new process under the same id beats as usual.
    beat("two").await;
    assert!(store.owner_alive(&t, "inst-a").await.expect("alive?"));
}
