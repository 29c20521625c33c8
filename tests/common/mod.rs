//! Black-box integration-test harness for pitboss.
//!
//! Tests drive the real `pitboss` binary (`CARGO_BIN_EXE_pitboss`) over HTTP
//! and WebSocket, against a fresh Postgres database per test and either the
//! shared Redis (isolated by a per-test environment name) or a private
//! `redis-server` the test can stop, pause and restart. Apart from the store
//! fixtures (`store`), nothing here drives the pitboss library: the tests see
//! only what an operator or a client sees.
//!
//! Every child process is killed when its handle drops, so a failing test
//! never leaks servers into the next one; each is also started so that it
//! dies with the test process when a timed-out test is killed outright.
//!
//! The pieces, each re-exported here so a test names them `common::…`:
//! - `db`: a Postgres database of the test's own (`test_db`, `TestDb`).
//! - `redis`: per-test key namespaces on the shared Redis (`unique_env`,
//!   `lease_key`, `fence_key`, `clear_env_keys`), connections, and a private
//!   `redis-server` for faults (`PrivateRedis`).
//! - `server`: the `pitboss serve` child (`ServerConfig`, `Server`: start,
//!   signals, exit, logs) and `mint_token`.
//! - `http`: requests to a `Server`, and the admin API calls tests repeat.
//! - `ws`: a player's WebSocket connection (`WsClient`).
//! - `wait`: `eventually`, polling with a deadline.
//! - `process`: what the `redis-server` and `pitboss` children share:
//!   spawning, captured output, signals, kill and reap on drop.
//! - `store`, named `common::store::…`: fixtures for the tests of the fenced
//!   store (`tests/store_fencing*.rs`), which call `pitboss::store` directly.
//!
//! Every test binary compiles this module on its own and uses only part of
//! it, hence `dead_code` is allowed for the whole harness.
#![allow(dead_code)]

mod cluster;
mod db;
mod http;
mod process;
mod redis;
mod sentinel;
mod server;
pub mod store;
mod wait;
mod ws;

// Each test binary names only some of these; the rest are unused there.
#[allow(unused_imports)]
pub use self::{
    cluster::RedisCluster,
    db::{admin_pg_url, test_db, with_database, TestDb},
    http::{rules_config, table_config},
    process::strip_ansi,
    redis::{
        clear_env_keys, fence_key, lease_key, redis_answers, redis_conn, shared_redis_url,
        unique_env, PrivateRedis,
    },
    sentinel::{RedisSentinel, SENTINEL_MASTER},
    server::{
        mint_token, parse_addr_field, Server, ServerConfig, StartFailure, ADMIN_TOKEN, AUTH_SECRET,
    },
    wait::{eventually, eventually_value},
    ws::{refused_status, WsClient, WsError},
};
