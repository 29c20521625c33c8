//! pitboss: an actor-based game-server runtime in which every poker table
//! has exactly one owner, and a stale owner can never pay anyone.
//!
//! # Layout
//!
//! - [`games`]: the trait every game implements, and the games behind it.
//! - [`game`]: the hold'em rules, pure and deterministic.
//! - [`lease`]: Redis ownership leases and fencing tokens.
//! - [`peers`]: the other instances of the environment, for relays and moves.
//! - [`store`]: Postgres; every write to a table's rows is fenced.
//! - [`actors`]: `TableManager`, `Table`, `Heartbeat`.
//! - [`protocol`]: the WebSocket frames both ways and their coded errors.
//! - [`ws`]: the WebSocket transport: the endpoint and per-connection session actor.
//! - [`http`]: health, readiness, metrics and the admin API.
//! - [`config`], [`telemetry`], [`startup`], [`shutdown`]: the process.

pub mod actors;
pub mod auth;
pub mod chips;
pub mod cli;
pub mod config;
pub mod games;
pub mod http;
pub mod instruments;
pub mod lease;
pub mod peers;
pub mod protocol;
pub mod runtime;
pub mod shutdown;
pub mod startup;
pub mod store;
pub mod telemetry;
pub mod types;
pub mod ws;
