//! Relay (I13): a client connected here plays at a table another instance
//! hosts through one upstream WebSocket per (connection, table), opened to
//! the owner's `/ws/relay` on the player's behalf. The owner does every
//! check and decides what the player may see (hole cards stay private
//! there); this side only carries frames both ways, keeps the client's own
//! limits, and notices when the owner goes away so its session can find the
//! new one.
//!
//! Between instances a relay connection is authenticated by a credential
//! signed with the environment's player-token secret and bound to the two
//! instance ids, the player and the time (see [`crate::auth::RelayClaim`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio::task::AbortHandle;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tracing::{debug, warn};
use url::Url;

use crate::actors::table::Outbound;
use crate::auth::{now_unix_ms, RelayClaim};
use crate::chips::PlayerId;
use crate::instruments;
use crate::protocol::ClientError;
use crate::runtime::Runtime;
use crate::types::{ErrorCode, TableId};
use crate::ws::backlog::Backlog;

/// Frames one client may have queued towards one relayed table.
const QUEUE: usize = 64;
/// How long opening the upstream connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The largest frame accepted from an owner (a snapshot is a few KiB).
const MAX_UPSTREAM_FRAME: usize = 1 << 20;

/// The client side of one relayed table: frames go up through `send`;
/// dropping it closes the upstream connection.
pub struct Upstream {
    tx: mpsc::Sender<String>,
    task: AbortHandle,
}

impl Upstream {
    pub fn send(&self, text: &str) -> Result<(), ClientError> {
        self.tx.try_send(text.to_owned()).map_err(|e| match e {
            TrySendError::Full(_) => ClientError::new(
                ErrorCode::RateLimited,
                "too many frames on their way to this table; slow down",
            ),
            TrySendError::Closed(_) => owner_changing(),
        })
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What a frame for a table gets while its new owner is being looked for.
pub fn owner_changing() -> ClientError {
    ClientError::new(
        ErrorCode::Unavailable,
        "the table's owner is changing; try again",
    )
}

/// A relay ended; its session decides what comes next.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct RelayEnded {
    pub table: TableId,
    pub generation: u64,
    pub how: Ending,
    /// Client frames still queued that never reached the owner.
    pub dropped: usize,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Ending {
    /// The owner went away, refused the connection, or handed the table on:
    /// find the owner again and rejoin after `since`. `joined`: the owner
    /// had accepted the join (so this is a change of owner, not a failed
    /// attempt at one).
    Lost { since: Option<u64>, joined: bool },
    /// The owner ended the subscription (join refused, table frozen or
    /// released); what it said has been forwarded.
    Ended,
    /// The owner closed for a reason that ends the client's connection too
    /// (too slow to read, over a limit).
    Close { code: u16, reason: String },
}

/// What a relay needs to start.
pub struct RelayStart {
    pub rt: Arc<Runtime>,
    pub table: TableId,
    pub player: PlayerId,
    /// The instance Redis names as the lease holder.
    pub owner: String,
    pub since: Option<u64>,
    pub generation: u64,
    pub out: Recipient<Outbound>,
    pub ended: Recipient<RelayEnded>,
    pub backlog: Arc<Backlog>,
    /// The highest `seq` this connection's relays of the table have passed
    /// on (shared with the relays before and after this one).
    pub told: Arc<AtomicU64>,
}

pub fn start(args: RelayStart) -> Upstream {
    let (tx, rx) = mpsc::channel(QUEUE);
    let task = actix::spawn(run(args, rx)).abort_handle();
    Upstream { tx, task }
}

/// Counts open relays while it lives (also when its task is aborted).
struct Open;

impl Open {
    fn new() -> Open {
        metrics::gauge!(instruments::RELAYS_OPEN).increment(1.0);
        Open
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        metrics::gauge!(instruments::RELAYS_OPEN).decrement(1.0);
    }
}

async fn run(args: RelayStart, mut rx: mpsc::Receiver<String>) {
    let _open = Open::new();
    let how = relay(&args, &mut rx).await;
    let mut dropped = 0;
    while rx.try_recv().is_ok() {
        dropped += 1;
    }
    debug!(table_id = %args.table, owner = %args.owner, how = ?how, "relay ended");
    args.ended.do_send(RelayEnded {
        table: args.table.clone(),
        generation: args.generation,
        how,
        dropped,
    });
}

/// The fields of an owner's frame the relay looks at.
#[derive(Deserialize)]
struct Peek {
    #[serde(rename = "type")]
    kind: String,
    seq: Option<u64>,
    code: Option<String>,
}

async fn relay(args: &RelayStart, rx: &mut mpsc::Receiver<String>) -> Ending {
    let mut since = args.since;
    let mut joined = false;
    let lost = |since, joined| Ending::Lost { since, joined };
    let Some(url) = owner_url(args).await else {
        return lost(since, joined);
    };
    let config = WebSocketConfig {
        max_message_size: Some(MAX_UPSTREAM_FRAME),
        max_frame_size: Some(MAX_UPSTREAM_FRAME),
        ..WebSocketConfig::default()
    };
    let connect = tokio_tungstenite::connect_async_with_config(url.as_str(), Some(config), true);
    let mut ws = match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
        Ok(Ok((ws, _))) => ws,
        Ok(Err(e)) => {
            debug!(table_id = %args.table, owner = %args.owner, error = %e, "could not open the relay to the owner");
            return lost(since, joined);
        }
        Err(_) => {
            debug!(table_id = %args.table, owner = %args.owner, "relay to the owner timed out");
            return lost(since, joined);
        }
    };
    let mut join = serde_json::json!({"type": "join", "table": args.table.as_str()});
    if let Some(n) = since {
        join["since"] = n.into();
    }
    if ws.send(Message::Text(join.to_string())).await.is_err() {
        return lost(since, joined);
    }
    let cap = args.rt.settings.ws.outbound_queue_bytes;
    loop {
        tokio::select! {
            inbound = ws.next() => match inbound {
                Some(Ok(Message::Text(text))) => {
                    let Ok(peek) = serde_json::from_str::<Peek>(&text) else {
                        warn!(table_id = %args.table, owner = %args.owner, "owner sent a frame that is not JSON; dropped");
                        continue;
                    };
                    let mut ends = false;
                    let mut told = None;
                    match (peek.kind.as_str(), peek.code.as_deref()) {
                        ("snapshot" | "event", _) => {
                            joined = true;
                            since = peek.seq.or(since);
                            told = peek.seq;
                        }
                        // Said before the join was accepted: the owner moved
                        // on meanwhile, or cannot host it right now.
                        ("error", Some("owned_elsewhere" | "draining" | "unavailable")) if !joined => {
                            let _ = ws.close(None).await;
                            return lost(since, joined);
                        }
                        // The join was refused (an act's answer has another
                        // code; a rejoin with nothing to replay sends nothing).
                        ("error", Some("table_not_found" | "table_frozen" | "too_slow")) if !joined => {
                            ends = true;
                        }
                        ("frozen" | "released", _) => ends = true,
                        ("pong", _) => continue,
                        _ => {}
                    }
                    if !args.backlog.admit(text.len(), cap) {
                        return Ending::Close { code: 1008, reason: "too_slow".into() };
                    }
                    if !args.out.connected() {
                        // The client's session is gone.
                        return Ending::Ended;
                    }
                    // Like a table's fan-out: the backlog, not the mailbox's
                    // capacity, bounds what waits for a slow client.
                    if let Some(seq) = told {
                        args.told.fetch_max(seq, Ordering::Relaxed);
                    }
                    args.out.do_send(Outbound::Frame(Arc::from(text.as_str())));
                    if ends {
                        let _ = ws.close(None).await;
                        return Ending::Ended;
                    }
                }
                Some(Ok(Message::Close(frame))) => {
                    return match frame.map(|f| (u16::from(f.code), f.reason.to_string())) {
                        Some((code @ (1008 | 1009), reason)) => Ending::Close { code, reason },
                        // Restart (drain, move), going away, an error: the
                        // table goes on somewhere.
                        _ => lost(since, joined),
                    };
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    debug!(table_id = %args.table, owner = %args.owner, error = %e, "relay connection failed");
                    return lost(since, joined);
                }
                None => return lost(since, joined),
            },
            outbound = rx.recv() => match outbound {
                Some(text) => {
                    if ws.send(Message::Text(text)).await.is_err() {
                        return lost(since, joined);
                    }
                }
                None => {
                    let _ = ws.close(None).await;
                    return Ending::Ended;
                }
            },
        }
    }
}

/// The owner's relay address with a fresh credential, if Postgres knows it
/// as a live instance that is not draining.
async fn owner_url(args: &RelayStart) -> Option<Url> {
    let rt = &args.rt;
    let me = rt.instance_id();
    if args.owner == me {
        return None;
    }
    let peer = match rt.peers.live(&args.owner).await {
        Ok(peer) => peer,
        Err(e) => {
            debug!(owner = %args.owner, error = %e, "the owner cannot be reached");
            return None;
        }
    };
    let mut url = match peer.relay_url() {
        Ok(url) => url,
        Err(e) => {
            warn!(owner = %args.owner, error = %e, "owner advertises an address a relay cannot use");
            return None;
        }
    };
    let claim = RelayClaim {
        from: me.to_string(),
        to: args.owner.clone(),
        player: args.player.0.clone(),
        at_ms: now_unix_ms(),
    };
    let sig = rt.signer.sign_relay(&claim);
    url.query_pairs_mut()
        .clear()
        .append_pair("player", &claim.player)
        .append_pair("from", &claim.from)
        .append_pair("at", &claim.at_ms.to_string())
        .append_pair("sig", &sig);
    Some(url)
}
