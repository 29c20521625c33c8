//! The lease scripts against a real Redis: acquire, renew, release, the fence
//! floor, expiry, and a Redis that is down or hung.
//!
//! Every test works in its own environment namespace on the shared Redis
//! (`common::unique_env()`), or on a private `redis-server` when it needs to
//! stop or pause it, and deletes its keys when it ends.

mod common;

use std::time::{Duration, Instant};

use pitboss::lease::{HeldLease, LeaseClient, LeaseError, RenewOutcome};
use pitboss::types::{Fence, TableId};
use redis::aio::MultiplexedConnection;

const OP_TIMEOUT: Duration = Duration::from_millis(500);
const LONG_TTL: Duration = Duration::from_secs(10);

/// One test's namespace on the shared Redis, plus a raw connection to look at
/// (and tamper with) the keys behind the client's back.
struct Ns {
    url: String,
    env: String,
    raw: MultiplexedConnection,
}

impl Ns {
    async fn new() -> Ns {
        let url = common::shared_redis_url();
        let raw = common::redis_conn(&url).await;
        Ns {
            url,
            env: common::unique_env(),
            raw,
        }
    }

    async fn client(&self, owner: &str, ttl: Duration) -> LeaseClient {
        LeaseClient::connect(&self.url, &self.env, owner, ttl, OP_TIMEOUT)
            .await
            .unwrap_or_else(|e| panic!("connect lease client {owner}: {e}"))
    }

    fn lease_key(&self, t: &TableId) -> String {
        common::lease_key(&self.env, t.as_str())
    }

    fn fence_key(&self, t: &TableId) -> String {
        common::fence_key(&self.env, t.as_str())
    }

    async fn get(&mut self, key: &str) -> Option<String> {
        redis::cmd("GET")
            .arg(key)
            .query_async(&mut self.raw)
            .await
            .expect("GET")
    }

    async fn pttl(&mut self, key: &str) -> i64 {
        redis::cmd("PTTL")
            .arg(key)
            .query_async(&mut self.raw)
            .await
            .expect("PTTL")
    }

    async fn del(&mut self, key: &str) {
        let _: i64 = redis::cmd("DEL")
            .arg(key)
            .query_async(&mut self.raw)
            .await
            .expect("DEL");
    }

    async fn set_px(&mut self, key: &str, value: &str, ttl_ms: u64) {
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg(value)
            .arg("PX")
            .arg(ttl_ms)
            .query_async(&mut self.raw)
            .await
            .expect("SET PX");
    }

    /// Lease value, lease PTTL, fence counter, fence counter PTTL.
    async fn state(&mut self, t: &TableId) -> (Option<String>, i64, Option<String>, i64) {
        let lk = self.lease_key(t);
        let fk = self.fence_key(t);
        (
            self.get(&lk).await,
            self.pttl(&lk).await,
            self.get(&fk).await,
            self.pttl(&fk).await,
        )
    }

    async fn cleanup(&self) {
        common::clear_env_keys(&self.url, &self.env).await;
    }
}

fn held(table: &TableId, fence: u64) -> HeldLease {
    HeldLease {
        table: table.clone(),
        fence: Fence(fence),
    }
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).expect("ttl fits in i64")
}

#[tokio::test]
async fn acquiring_a_free_lease_yields_fence_1_and_sets_owner_value_with_px_ttl_and_counter() {
    let mut ns = Ns::new().await;
    let a = ns.client("inst-a", LONG_TTL).await;
    let t = TableId::generate();

    let fence = a.acquire(&t, Fence(0)).await.expect("acquire a free lease");
    assert_eq!(fence, Fence(1));

    let (value, pttl, counter, counter_pttl) = ns.state(&t).await;
    assert_eq!(value.as_deref(), Some("inst-a|1"));
    assert!(
        pttl > 0 && pttl <= ms(LONG_TTL),
        "lease PTTL {pttl} not in (0, {}]",
        ms(LONG_TTL)
    );
    assert_eq!(counter.as_deref(), Some("1"), "fence counter");
    assert_eq!(counter_pttl, -1, "the fence counter must never expire");
    assert_eq!(a.lease_key(&t), ns.lease_key(&t));
    assert_eq!(a.fence_key(&t), ns.fence_key(&t));

    ns.cleanup().await;
}

#[tokio::test]
async fn a_second_owner_is_refused_naming_the_first_owner_and_nothing_changes() {
    let mut ns = Ns::new().await;
    let a = ns.client("inst-a", LONG_TTL).await;
    let b = ns.client("inst-b", LONG_TTL).await;
    let t = TableId::generate();
    assert_eq!(a.acquire(&t, Fence(0)).await.unwrap(), Fence(1));
    // Let the TTL run down a little so a refresh by the refused call would show.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (value_before, pttl_before, counter_before, _) = ns.state(&t).await;

    match b.acquire(&t, Fence(0)).await {
        Err(LeaseError::OwnedElsewhere { owner, ttl_ms }) => {
            assert_eq!(owner, "inst-a");
            assert!(
                ttl_ms > 0 && ttl_ms <= ms(LONG_TTL),
                "remaining ttl {ttl_ms} not in (0, {}]",
                ms(LONG_TTL)
            );
        }
        other => panic!("expected OwnedElsewhere, got {other:?}"),
    }
    // Also with a floor: a refusal must not touch the counter either.
    assert!(matches!(
        b.acquire(&t, Fence(50)).await,
        Err(LeaseError::OwnedElsewhere { .. })
    ));

    let (value_after, pttl_after, counter_after, _) = ns.state(&t).await;
    assert_eq!(value_after, value_before, "lease value changed");
    assert_eq!(counter_after, counter_before, "fence counter changed");
    assert!(
        pttl_after > 0 && pttl_after <= pttl_before,
        "lease TTL was refreshed by a refused acquire: {pttl_before} -> {pttl_after}"
    );

    ns.cleanup().await;
}

#[tokio::test]
async fn the_same_owner_reacquiring_bumps_the_fence_and_the_superseded_value_renews_as_foreign() {
    let mut ns = Ns::new().await;
    let old = ns.client("inst-a", LONG_TTL).await;
    let t = TableId::generate();
    assert_eq!(old.acquire(&t, Fence(0)).await.unwrap(), Fence(1));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let pttl_before = ns.pttl(&ns.lease_key(&t)).await;

    // The restarted process: same owner id, new client.
    let restarted = ns.client("inst-a", LONG_TTL).await;
    assert_eq!(restarted.acquire(&t, Fence(0)).await.unwrap(), Fence(2));
    let (value, pttl, counter, _) = ns.state(&t).await;
    assert_eq!(value.as_deref(), Some("inst-a|2"));
    assert_eq!(counter.as_deref(), Some("2"));
    assert!(
        pttl > pttl_before,
        "re-acquire must refresh the TTL: {pttl_before} -> {pttl}"
    );

    // The superseded process still holds fence 1: it must see Foreign.
    assert_eq!(
        old.renew_all(&[held(&t, 1)]).await.unwrap(),
        vec![RenewOutcome::Foreign]
    );
    assert_eq!(
        ns.get(&ns.lease_key(&t)).await.as_deref(),
        Some("inst-a|2"),
        "a foreign renew must not change the value"
    );
    assert_eq!(
        restarted.renew_all(&[held(&t, 2)]).await.unwrap(),
        vec![RenewOutcome::Renewed]
    );

    ns.cleanup().await;
}

#[tokio::test]
async fn renew_all_reports_renewed_gone_and_foreign_per_table_and_extends_the_pttl() {
    let mut ns = Ns::new().await;
    let a = ns.client("inst-a", LONG_TTL).await;
    let (t1, t2, t3) = (
        TableId::generate(),
        TableId::generate(),
        TableId::generate(),
    );
    for t in [&t1, &t2, &t3] {
        assert_eq!(a.acquire(t, Fence(0)).await.unwrap(), Fence(1));
    }
    ns.del(&ns.lease_key(&t2)).await;
    ns.set_px(&ns.lease_key(&t3), "inst-b|9", 60_000).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pttl_before = ns.pttl(&ns.lease_key(&t1)).await;
    assert!(pttl_before <= ms(LONG_TTL) - 250, "pttl {pttl_before}");

    let outcomes = a
        .renew_all(&[held(&t1, 1), held(&t2, 1), held(&t3, 1)])
        .await
        .expect("renew_all");
    assert_eq!(
        outcomes,
        vec![
            RenewOutcome::Renewed,
            RenewOutcome::Gone,
            RenewOutcome::Foreign
        ]
    );

    let pttl_after = ns.pttl(&ns.lease_key(&t1)).await;
    assert!(
        pttl_after > pttl_before && pttl_after <= ms(LONG_TTL),
        "renew must extend the PTTL back to at most the TTL: {pttl_before} -> {pttl_after}"
    );
    assert_eq!(
        ns.get(&ns.lease_key(&t1)).await.as_deref(),
        Some("inst-a|1")
    );
    assert_eq!(
        ns.get(&ns.lease_key(&t2)).await,
        None,
        "a renew must not recreate a gone lease"
    );
    assert_eq!(
        ns.get(&ns.lease_key(&t3)).await.as_deref(),
        Some("inst-b|9"),
        "a renew must not touch a foreign lease"
    );
    assert!(
        ns.pttl(&ns.lease_key(&t3)).await > ms(LONG_TTL),
        "the foreign lease's TTL must not be reset to ours"
    );
    assert_eq!(a.renew_all(&[]).await.unwrap(), Vec::<RenewOutcome>::new());

    ns.cleanup().await;
}

#[tokio::test]
async fn release_all_deletes_only_leases_still_ours_and_never_the_fence_counter() {
    let mut ns = Ns::new().await;
    let a = ns.client("inst-a", LONG_TTL).await;
    let b = ns.client("inst-b", LONG_TTL).await;
    let (mine, taken, superseded) = (
        TableId::generate(),
        TableId::generate(),
        TableId::generate(),
    );
    assert_eq!(a.acquire(&mine, Fence(0)).await.unwrap(), Fence(1));
    assert_eq!(a.acquire(&taken, Fence(0)).await.unwrap(), Fence(1));
    assert_eq!(a.acquire(&superseded, Fence(0)).await.unwrap(), Fence(1));
    // `taken` lapsed and inst-b took it over.
    ns.del(&ns.lease_key(&taken)).await;
    assert_eq!(b.acquire(&taken, Fence(0)).await.unwrap(), Fence(2));
    // `superseded` was re-taken by a restart of inst-a itself.
    let restarted = ns.client("inst-a", LONG_TTL).await;
    assert_eq!(
        restarted.acquire(&superseded, Fence(0)).await.unwrap(),
        Fence(2)
    );

    let released = a
        .release_all(&[held(&mine, 1), held(&taken, 1), held(&superseded, 1)])
        .await
        .expect("release_all");
    assert_eq!(released, 1, "only `mine` was still ours");

    assert_eq!(ns.get(&ns.lease_key(&mine)).await, None);
    assert_eq!(
        ns.get(&ns.lease_key(&taken)).await.as_deref(),
        Some("inst-b|2")
    );
    assert_eq!(
        ns.get(&ns.lease_key(&superseded)).await.as_deref(),
        Some("inst-a|2")
    );
    assert_eq!(ns.get(&ns.fence_key(&mine)).await.as_deref(), Some("1"));
    assert_eq!(ns.get(&ns.fence_key(&taken)).await.as_deref(), Some("2"));
    assert_eq!(
        ns.get(&ns.fence_key(&superseded)).await.as_deref(),
        Some("2")
    );

    // A later acquire of the released table continues the counter.
    assert_eq!(b.acquire(&mine, Fence(0)).await.unwrap(), Fence(2));
    assert_eq!(a.release_all(&[]).await.unwrap(), 0);

    ns.cleanup().await;
}

#[tokio::test]
async fn after_the_fence_counter_is_lost_acquire_issues_a_token_above_the_floor() {
    let mut ns = Ns::new().await;
    let a = ns.client("inst-a", LONG_TTL).await;
    let t = TableId::generate();
    assert_eq!(a.acquire(&t, Fence(0)).await.unwrap(), Fence(1));
    assert_eq!(a.release_all(&[held(&t, 1)]).await.unwrap(), 1);

    // Redis lost its data: the counter (and any lease) is gone, while
    // Postgres has already seen token 7.
    ns.del(&ns.fence_key(&t)).await;
    ns.del(&ns.lease_key(&t)).await;
    let fence = a.acquire(&t, Fence(7)).await.expect("acquire above floor");
    assert_eq!(fence, Fence(8));
    assert_eq!(ns.get(&ns.lease_key(&t)).await.as_deref(), Some("inst-a|8"));
    assert_eq!(ns.get(&ns.fence_key(&t)).await.as_deref(), Some("8"));

    // A counter above a stale floor wins over the floor.
    assert_eq!(a.acquire(&t, Fence(3)).await.unwrap(), Fence(9));
    // A floor above the counter wins over the counter, even for a re-acquire.
    assert_eq!(a.acquire(&t, Fence(20)).await.unwrap(), Fence(21));

    ns.cleanup().await;
}

#[tokio::test]
async fn after_the_ttl_passes_without_renew_another_owner_can_acquire() {
    let mut ns = Ns::new().await;
    let ttl = Duration::from_millis(500);
    let a = ns.client("inst-a", ttl).await;
    let b = ns.client("inst-b", ttl).await;
    let (t, lapsed) = (TableId::generate(), TableId::generate());
    assert_eq!(a.acquire(&t, Fence(0)).await.unwrap(), Fence(1));
    assert_eq!(a.acquire(&lapsed, Fence(0)).await.unwrap(), Fence(1));
    assert!(matches!(
        b.acquire(&t, Fence(0)).await,
        Err(LeaseError::OwnedElsewhere { .. })
    ));

    tokio::time::sleep(ttl + Duration::from_millis(150)).await;

    assert_eq!(ns.get(&ns.lease_key(&t)).await, None, "lease should expire");
    assert_eq!(b.acquire(&t, Fence(0)).await.unwrap(), Fence(2));
    assert_eq!(
        b.holder(&t).await.unwrap(),
        Some(("inst-b".to_string(), Fence(2)))
    );
    // The old owner wakes up: one lease was taken over, the other just lapsed.
    assert_eq!(
        a.renew_all(&[held(&t, 1), held(&lapsed, 1)]).await.unwrap(),
        vec![RenewOutcome::Foreign, RenewOutcome::Gone]
    );
    assert_eq!(ns.get(&ns.lease_key(&lapsed)).await, None);

    ns.cleanup().await;
}

#[tokio::test]
async fn claimable_reports_free_and_own_leases_and_holder_returns_owner_and_fence() {
    let ns = Ns::new().await;
    let a = ns.client("inst-a", LONG_TTL).await;
    let b = ns.client("inst-b", LONG_TTL).await;
    let (leased, never, released) = (
        TableId::generate(),
        TableId::generate(),
        TableId::generate(),
    );
    assert_eq!(a.acquire(&leased, Fence(4)).await.unwrap(), Fence(5));
    assert_eq!(a.acquire(&released, Fence(0)).await.unwrap(), Fence(1));
    assert_eq!(a.release_all(&[held(&released, 1)]).await.unwrap(), 1);

    // Free leases and this owner's own (a restart re-takes them) are
    // claimable; another owner's is not.
    assert_eq!(
        a.claimable(&[leased.clone(), never.clone(), released.clone()])
            .await
            .unwrap(),
        vec![true, true, true]
    );
    assert_eq!(
        b.claimable(&[leased.clone(), never.clone(), released.clone()])
            .await
            .unwrap(),
        vec![false, true, true]
    );
    assert_eq!(a.claimable(&[]).await.unwrap(), Vec::<bool>::new());

    assert_eq!(
        a.holder(&leased).await.unwrap(),
        Some(("inst-a".to_string(), Fence(5)))
    );
    assert_eq!(a.holder(&never).await.unwrap(), None);
    assert_eq!(a.holder(&released).await.unwrap(), None);

    ns.cleanup().await;
}

/// Every lease operation, each expected to fail (not hang) within `bound`.
async fn assert_every_operation_fails_fast(client: &LeaseClient, t: &TableId, bound: Duration) {
    let started = Instant::now();
    let r = client.acquire(t, Fence(0)).await;
    let took = started.elapsed();
    assert!(r.is_err(), "acquire succeeded against a dead redis: {r:?}");
    assert!(took < bound, "acquire took {took:?}");

    let started = Instant::now();
    let r = client.renew_all(&[held(t, 1)]).await;
    let took = started.elapsed();
    assert!(
        r.is_err(),
        "renew_all succeeded against a dead redis: {r:?}"
    );
    assert!(took < bound, "renew_all took {took:?}");

    let started = Instant::now();
    let r = client.release_all(&[held(t, 1)]).await;
    let took = started.elapsed();
    assert!(
        r.is_err(),
        "release_all succeeded against a dead redis: {r:?}"
    );
    assert!(took < bound, "release_all took {took:?}");

    let started = Instant::now();
    let r = client.holder(t).await;
    let took = started.elapsed();
    assert!(r.is_err(), "holder succeeded against a dead redis: {r:?}");
    assert!(took < bound, "holder took {took:?}");

    let started = Instant::now();
    let r = client.claimable(std::slice::from_ref(t)).await;
    let took = started.elapsed();
    assert!(
        r.is_err(),
        "claimable succeeded against a dead redis: {r:?}"
    );
    assert!(took < bound, "claimable took {took:?}");
}

#[tokio::test]
async fn a_lease_client_whose_redis_is_down_fails_within_about_op_timeout() {
    let mut redis = common::PrivateRedis::start().await;
    let env = common::unique_env();
    let client = LeaseClient::connect(&redis.url(), &env, "inst-a", LONG_TTL, OP_TIMEOUT)
        .await
        .expect("connect to the private redis");
    let t = TableId::generate();
    assert_eq!(client.acquire(&t, Fence(0)).await.unwrap(), Fence(1));

    redis.stop().await;
    assert_every_operation_fails_fast(&client, &t, Duration::from_secs(5)).await;

    // A client that connects while Redis is down fails too, and promptly.
    let started = Instant::now();
    let r = LeaseClient::connect(&redis.url(), &env, "inst-b", LONG_TTL, OP_TIMEOUT).await;
    let took = started.elapsed();
    assert!(r.is_err(), "connect succeeded against a dead redis");
    assert!(took < Duration::from_secs(5), "connect took {took:?}");
}

#[tokio::test]
async fn a_lease_client_whose_redis_hangs_times_out_instead_of_hanging() {
    let redis = common::PrivateRedis::start().await;
    let env = common::unique_env();
    let client = LeaseClient::connect(&redis.url(), &env, "inst-a", LONG_TTL, OP_TIMEOUT)
        .await
        .expect("connect to the private redis");
    let t = TableId::generate();
    assert_eq!(client.acquire(&t, Fence(0)).await.unwrap(), Fence(1));

    // SIGSTOP: the socket stays open but nothing answers.
    redis.pause();
    let started = Instant::now();
    let r = client.renew_all(&[held(&t, 1)]).await;
    let took = started.elapsed();
    redis.resume();
    // Our own timeout and the connection's response timeout are both
    // `op_timeout`; whichever fires first, the answer is a timeout error.
    let timed_out = match &r {
        Err(LeaseError::Timeout(d)) => *d == OP_TIMEOUT,
        Err(LeaseError::Redis(e)) => e.is_timeout(),
        _ => false,
    };
    assert!(timed_out, "expected a timeout error, got {r:?}");
    assert!(
        took >= OP_TIMEOUT && took < Duration::from_secs(5),
        "renew_all against a hung redis took {took:?}"
    );
}

/// Lua numbers are doubles, exact only up to 2^53; the script compares and
/// increments fences without them, so tokens stay exact over all of u63.
#[tokio::test]
async fn acquire_above_2_pow_53_still_issues_a_token_above_the_floor() {
    let ns = Ns::new().await;
    let a = ns.client("inst-a", LONG_TTL).await;
    let t = TableId::generate();
    let floor = (1u64 << 53) + 1;
    let first = a.acquire(&t, Fence(floor)).await;
    let second = a.acquire(&t, Fence(0)).await;
    ns.cleanup().await;
    let first = first.expect("acquire above a large floor");
    assert!(first > Fence(floor), "issued {first:?} for floor {floor}");
    let second = second.expect("re-acquire");
    assert!(
        second > first,
        "re-acquire issued {second:?} after {first:?}"
    );
}

#[tokio::test]
async fn scripts_are_called_by_sha_and_reloaded_when_the_server_forgot_them() {
    let redis = common::PrivateRedis::start().await;
    let env = common::unique_env();
    let client = LeaseClient::connect(&redis.url(), &env, "inst-a", LONG_TTL, OP_TIMEOUT)
        .await
        .expect("connect to the private redis");
    let mut raw = common::redis_conn(&redis.url()).await;
    let (a, b) = (TableId::generate(), TableId::generate());
    assert_eq!(client.acquire(&a, Fence(0)).await.unwrap(), Fence(1));
    assert_eq!(client.acquire(&b, Fence(0)).await.unwrap(), Fence(1));
    let calls = |info: &str, cmd: &str| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{cmd}:calls=")))
            .and_then(|rest| rest.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };

    // A server that lost its script cache (a restart, SCRIPT FLUSH) answers
    // NOSCRIPT; the batched renew and release load the script and go on.
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut raw)
        .await
        .expect("SCRIPT FLUSH");
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut raw)
        .await
        .expect("CONFIG RESETSTAT");
    let leases = [held(&a, 1), held(&b, 1)];
    assert_eq!(
        client.renew_all(&leases).await.expect("renew after flush"),
        vec![RenewOutcome::Renewed, RenewOutcome::Renewed]
    );
    assert_eq!(
        client.renew_all(&leases).await.expect("renew again"),
        vec![RenewOutcome::Renewed, RenewOutcome::Renewed]
    );
    assert_eq!(client.release_all(&leases).await.expect("release"), 2);

    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut raw)
        .await
        .expect("INFO commandstats");
    assert_eq!(
        calls(&info, "eval"),
        0,
        "no script text sent with a call:\n{info}"
    );
    assert_eq!(
        calls(&info, "script|load"),
        2,
        "renew and release each loaded once:\n{info}"
    );
}
