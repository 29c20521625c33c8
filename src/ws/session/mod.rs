//! One actor per WebSocket connection: validates every frame, forwards typed
//! commands to the tables hosted here and raw frames to the owners of tables
//! hosted elsewhere (relay), passes back what they send, and follows a
//! table to its new owner when it changes.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_http::ws::{CloseCode, CloseReason, Frame, Item as Fragment, ProtocolError};
use tokio::net::TcpStream;
use tracing::debug;

use crate::actors::table::{Outbound, SessionId, Unsubscribe};
use crate::actors::table_manager::TableManager;
use crate::chips::PlayerId;
use crate::instruments;
use crate::protocol::{self, ClientError, ClientFrame, ServerFrame};
use crate::runtime::Runtime;
use crate::types::{ErrorCode, TableId};
use crate::ws::backlog::Backlog;
use crate::ws::socket::{self, WriteError, Writer};

mod routes;

use routes::{Route, Search};

static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

/// Token bucket for inbound frames.
struct RateLimit {
    tokens: f64,
    last: Instant,
    per_sec: f64,
    burst: f64,
    strikes: u32,
}

impl RateLimit {
    fn allow(&mut self, now: Instant) -> bool {
        let refill = now.duration_since(self.last).as_secs_f64() * self.per_sec;
        self.tokens = (self.tokens + refill).min(self.burst);
        self.last = now;
        if self.tokens >= self.burst {
            // Calm long enough to refill the whole burst: earlier strikes
            // are forgiven, so an occasional burst never adds up to a close.
            self.strikes = 0;
        }
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            self.strikes += 1;
            false
        }
    }
}

pub struct WsSession {
    id: SessionId,
    player: PlayerId,
    rt: Arc<Runtime>,
    manager: Addr<TableManager>,
    tables: HashMap<TableId, Route>,
    /// This connection is another instance's relay for one player: it never
    /// relays further (a table hosted elsewhere is answered `owned_elsewhere`
    /// and the relaying instance looks again), and it closes with 1012 when
    /// its table leaves this process.
    relayed: bool,
    /// Numbers this connection's relays, so a late report of a replaced
    /// relay is ignored.
    generation: u64,
    /// Per relayed table, the highest `seq` its relays have passed to this
    /// connection (events and snapshots), across relays replaced.
    told: HashMap<TableId, Arc<AtomicU64>>,
    last_heard: Instant,
    rate: RateLimit,
    backlog: Arc<Backlog>,
    /// A message arriving in fragments (continuation frames): whether it is
    /// text, and its bytes so far.
    fragments: Option<(bool, Vec<u8>)>,
    writer: Writer,
}

/// Who a connection plays for, known before its upgrade is answered; it
/// becomes a session once the socket is handed over.
pub struct Admitted {
    pub player: PlayerId,
    pub rt: Arc<Runtime>,
    pub manager: Addr<TableManager>,
    /// Another instance's relay for one player (`/ws/relay`).
    pub relayed: bool,
}

impl Admitted {
    /// Runs the session on the upgraded socket. `leftover` is what the
    /// client sent after its upgrade request.
    pub fn start(self, io: TcpStream, leftover: &[u8]) {
        let io = Rc::new(io);
        let frames = socket::frames(io.clone(), leftover, self.rt.settings.ws.max_frame_bytes);
        let session = WsSession::new(self, io);
        WsSession::create(move |ctx| {
            ctx.add_stream(frames);
            session
        });
    }
}

impl WsSession {
    fn new(who: Admitted, io: Rc<TcpStream>) -> WsSession {
        let ws = &who.rt.settings.ws;
        let rate = RateLimit {
            tokens: f64::from(ws.rate_burst),
            last: Instant::now(),
            per_sec: f64::from(ws.rate_per_sec),
            burst: f64::from(ws.rate_burst),
            strikes: 0,
        };
        let backlog = Arc::new(Backlog::default());
        WsSession {
            id: NEXT_SESSION.fetch_add(1, Ordering::Relaxed),
            player: who.player,
            rt: who.rt,
            manager: who.manager,
            tables: HashMap::new(),
            relayed: who.relayed,
            generation: 0,
            told: HashMap::new(),
            last_heard: Instant::now(),
            rate,
            writer: Writer::new(io, backlog.clone()),
            backlog,
            fragments: None,
        }
    }

    /// Whether any table this connection watches is hosted here (a drain
    /// waits for those to finish their hands).
    fn has_local_tables(&self) -> bool {
        self.tables.values().any(|r| matches!(r, Route::Local(_)))
    }

    /// A table leaves this connection while the process drains (or at any
    /// time, for a subscription that ended): the connection closes once it
    /// watches nothing hosted here, as a drain requires.
    fn forget_table(&mut self, table: &TableId, ctx: &mut Context<Self>) {
        self.tables.remove(table);
        if self.rt.is_draining() && !self.has_local_tables() {
            self.close_for_shutdown(ctx);
        }
    }

    /// How long a search for a table's new owner may go on: long enough for
    /// a drain to finish its hands and for a crashed owner's lease to lapse
    /// and its liveness to go stale.
    fn search_budget(&self) -> Duration {
        let s = &self.rt.settings;
        Duration::from_millis(s.shutdown.drain_timeout_ms)
            .saturating_add(self.rt.ttl().saturating_mul(3))
            .saturating_add(Duration::from_secs(5))
    }

    /// Sends a frame of the session's own (pong, error); table frames come
    /// through `Outbound`, accounted in the backlog.
    fn send_text(&mut self, text: &str, ctx: &mut Context<Self>) {
        metrics::counter!(instruments::WS_FRAMES_OUT).increment(1);
        let sent = self.writer.text(text, 0, self.queue_cap());
        self.after_write(sent, ctx);
    }

    /// Bytes queued for a client that does not read before it is dropped.
    fn queue_cap(&self) -> u64 {
        self.rt.settings.ws.outbound_queue_bytes
    }

    /// A write failed: the client is gone, or it reads too slowly to keep.
    fn after_write(&mut self, sent: Result<(), WriteError>, ctx: &mut Context<Self>) {
        match sent {
            Ok(()) => {}
            Err(WriteError::Broken) => ctx.stop(),
            Err(WriteError::TooSlow) => {
                metrics::counter!(instruments::WS_SLOW_CLIENTS_DROPPED).increment(1);
                tracing::warn!(player = %self.player.0, "client too slow to read; closing");
                self.close_with(ctx, CloseCode::Policy, "too_slow");
            }
        }
    }

    fn reject(&mut self, ctx: &mut Context<Self>, table: Option<&TableId>, e: &ClientError) {
        metrics::counter!(instruments::WS_FRAMES_REJECTED, "code" => e.code.as_str()).increment(1);
        self.send_text(&e.to_frame(table), ctx);
    }

    /// Closes the connection with a code and a machine-readable reason.
    fn close_with(&self, ctx: &mut Context<Self>, code: CloseCode, reason: &str) {
        self.writer.close(Some(CloseReason {
            code,
            description: Some(reason.into()),
        }));
        ctx.stop();
    }

    fn close_for_shutdown(&self, ctx: &mut Context<Self>) {
        self.close_with(ctx, CloseCode::Restart, "server_shutdown");
    }

    /// Every inbound message (text, binary, ping, a reassembled fragmented
    /// one) spends from the rate limit; past it the client gets
    /// `rate_limited`, and after too many strikes the connection closes.
    fn admit(&mut self, ctx: &mut Context<Self>) -> bool {
        metrics::counter!(instruments::WS_FRAMES_IN).increment(1);
        if self.rate.allow(Instant::now()) {
            return true;
        }
        if self.rate.strikes > self.rt.settings.ws.rate_strikes {
            metrics::counter!(instruments::WS_FRAMES_REJECTED, "code" => "rate_limited")
                .increment(1);
            self.close_with(ctx, CloseCode::Policy, "rate_limited");
        } else {
            self.reject(
                ctx,
                None,
                &ClientError::new(ErrorCode::RateLimited, "too many frames; slow down"),
            );
        }
        false
    }

    fn on_frame(&mut self, text: &str, ctx: &mut Context<Self>) {
        let frame = match protocol::parse(text) {
            Ok(f) => f,
            Err(e) => return self.reject(ctx, None, &e),
        };
        match frame {
            ClientFrame::Ping => self.send_text(&ServerFrame::Pong.to_string(), ctx),
            ClientFrame::Join { table, since } => self.join(table, since, None, ctx),
            other => self.forward(other, text, ctx),
        }
    }
}

impl WsSession {
    fn reject_binary(&mut self, ctx: &mut Context<Self>) {
        self.reject(
            ctx,
            None,
            &ClientError::new(ErrorCode::BadJson, "frames must be JSON text"),
        );
    }

    /// Puts a fragmented message back together, within the same size limit
    /// as a single frame, and handles it like one.
    fn on_fragment(&mut self, item: Fragment, ctx: &mut Context<Self>) {
        let limit = self.rt.settings.ws.max_frame_bytes;
        let (first, chunk, last) = match item {
            Fragment::FirstText(b) => (Some(true), b, false),
            Fragment::FirstBinary(b) => (Some(false), b, false),
            Fragment::Continue(b) => (None, b, false),
            Fragment::Last(b) => (None, b, true),
        };
        match (first, &mut self.fragments) {
            (Some(text), None) => self.fragments = Some((text, chunk.to_vec())),
            (None, Some((_, buf))) => buf.extend_from_slice(&chunk),
            // Out of order; the codec refuses this before it gets here.
            _ => return self.close_with(ctx, CloseCode::Protocol, "bad_fragments"),
        }
        if self
            .fragments
            .as_ref()
            .is_some_and(|(_, b)| b.len() > limit)
        {
            return self.close_with(ctx, CloseCode::Size, "frame_too_large");
        }
        if !last {
            return;
        }
        let Some((text, bytes)) = self.fragments.take() else {
            return;
        };
        if !self.admit(ctx) {
            return;
        }
        match (text, String::from_utf8(bytes)) {
            (true, Ok(text)) => self.on_frame(&text, ctx),
            (true, Err(_)) => self.close_bad_utf8(ctx),
            (false, _) => self.reject_binary(ctx),
        }
    }

    /// A text message that is not UTF-8, in one frame or in fragments: the
    /// WebSocket protocol's answer is to close with 1007.
    fn close_bad_utf8(&self, ctx: &mut Context<Self>) {
        self.close_with(ctx, CloseCode::Invalid, "bad_utf8");
    }
}

impl Actor for WsSession {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        metrics::gauge!(instruments::WS_CONNECTIONS).increment(1.0);
        let ping_every = Duration::from_millis(self.rt.settings.ws.ping_interval_ms);
        let idle_timeout = Duration::from_millis(self.rt.settings.ws.idle_timeout_ms);
        ctx.run_interval(ping_every, move |act, ctx| {
            if act.last_heard.elapsed() > idle_timeout {
                debug!(player = %act.player.0, "websocket client timed out");
                ctx.stop();
                return;
            }
            let sent = act.writer.ping(act.queue_cap());
            act.after_write(sent, ctx);
        });
        // Idle sessions close as soon as a drain starts; sessions at a table
        // stay until their tables have finished their hands.
        let mut shutdown = self.rt.shutdown_signal();
        let watch = async move {
            let _ = shutdown.wait_for(|draining| *draining).await;
        };
        ctx.spawn(watch.into_actor(self).map(|(), act, ctx| {
            if !act.has_local_tables() {
                act.close_for_shutdown(ctx);
            }
        }));
    }

    fn stopped(&mut self, _ctx: &mut Self::Context) {
        metrics::gauge!(instruments::WS_CONNECTIONS).decrement(1.0);
        // What is queued still goes out (a close frame last), then the
        // socket closes.
        self.writer.finish();
        // Relays close with their routes.
        for route in self.tables.values() {
            if let Route::Local(addr) = route {
                addr.do_send(Unsubscribe { session: self.id });
            }
        }
    }
}

impl Handler<Outbound> for WsSession {
    type Result = ();

    fn handle(&mut self, msg: Outbound, ctx: &mut Self::Context) {
        match msg {
            Outbound::Frame(text) => {
                if self.backlog.is_too_slow() {
                    // A table stopped sending to this client while it lagged;
                    // whatever it sees now would have gaps, so end it.
                    self.close_with(ctx, CloseCode::Policy, "too_slow");
                    return;
                }
                // The backlog counts the frame until the kernel takes it.
                metrics::counter!(instruments::WS_FRAMES_OUT).increment(1);
                let sent = self.writer.text(&text, text.len(), self.queue_cap());
                self.after_write(sent, ctx);
            }
            Outbound::Unsubscribed(table) => {
                self.tables.remove(&table);
            }
            Outbound::Released(table) if self.relayed => {
                // The relaying instance finds where the table goes next.
                self.tables.remove(&table);
                self.close_for_shutdown(ctx);
            }
            Outbound::Released(table) => self.forget_table(&table, ctx),
            Outbound::Moved(table) => {
                if self.relayed {
                    self.tables.remove(&table);
                    self.close_with(ctx, CloseCode::Restart, "owner_changed");
                } else if self.rt.is_draining() {
                    self.forget_table(&table, ctx);
                } else {
                    // Another instance hosts it now: follow it there.
                    self.search_later(table, None, Search::new(), ctx);
                }
            }
        }
    }
}

impl StreamHandler<Result<Frame, ProtocolError>> for WsSession {
    fn handle(&mut self, msg: Result<Frame, ProtocolError>, ctx: &mut Self::Context) {
        self.last_heard = Instant::now();
        match msg {
            Ok(Frame::Text(bytes)) => {
                if !self.admit(ctx) {
                    return;
                }
                // A text message that is not UTF-8: the WebSocket protocol's
                // answer is to close with 1007.
                match std::str::from_utf8(&bytes) {
                    Ok(text) => self.on_frame(text, ctx),
                    Err(_) => self.close_bad_utf8(ctx),
                }
            }
            Ok(Frame::Binary(_)) => {
                if self.admit(ctx) {
                    self.reject_binary(ctx);
                }
            }
            Ok(Frame::Ping(p)) => {
                if self.admit(ctx) {
                    let sent = self.writer.pong(&p, self.queue_cap());
                    self.after_write(sent, ctx);
                }
            }
            Ok(Frame::Continuation(item)) => self.on_fragment(item, ctx),
            Ok(Frame::Pong(_)) => {}
            Ok(Frame::Close(reason)) => {
                // The closing handshake: the client's close is answered with
                // its own code.
                self.writer.close(reason);
                ctx.stop();
            }
            Err(ProtocolError::Overflow) => {
                self.close_with(ctx, CloseCode::Size, "frame_too_large");
            }
            // The codec checks the order of fragments: a new message before
            // the last one ended, or a continuation of nothing.
            Err(ProtocolError::ContinuationStarted | ProtocolError::ContinuationNotStarted) => {
                self.close_with(ctx, CloseCode::Protocol, "bad_fragments");
            }
            Err(e) => {
                debug!(error = %e, "websocket protocol error");
                ctx.stop();
            }
        }
    }
}
