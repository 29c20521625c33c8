//! One actor per WebSocket connection: validates every frame, forwards typed
//! commands to its tables, relays what they send back.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_http::ws::Item as Fragment;
use actix_web_actors::ws;
use tracing::debug;

use crate::actors::table::{
    Act, Backlog, Join, Leave, Outbound, SessionId, Sit, Table, Unsubscribe,
};
use crate::actors::table_manager::{LoadOrCreate, TableManager};
use crate::game::PlayerId;
use crate::instruments;
use crate::protocol::{self, ClientError, ClientFrame, ServerFrame};
use crate::runtime::Runtime;
use crate::types::TableId;

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
    tables: HashMap<TableId, Addr<Table>>,
    last_heard: Instant,
    rate: RateLimit,
    backlog: Arc<Backlog>,
    /// A message arriving in fragments (continuation frames): whether it is
    /// text, and its bytes so far.
    fragments: Option<(bool, Vec<u8>)>,
}

impl WsSession {
    pub fn new(player: PlayerId, rt: Arc<Runtime>, manager: Addr<TableManager>) -> WsSession {
        let ws = &rt.settings.ws;
        let rate = RateLimit {
            tokens: f64::from(ws.rate_burst),
            last: Instant::now(),
            per_sec: f64::from(ws.rate_per_sec),
            burst: f64::from(ws.rate_burst),
            strikes: 0,
        };
        WsSession {
            id: NEXT_SESSION.fetch_add(1, Ordering::Relaxed),
            player,
            rt,
            manager,
            tables: HashMap::new(),
            last_heard: Instant::now(),
            rate,
            backlog: Arc::new(Backlog::default()),
            fragments: None,
        }
    }

    /// Sends a frame of the session's own (pong, error); table frames come
    /// through `Outbound`, accounted in the backlog.
    fn send_text(&mut self, text: &str, ctx: &mut ws::WebsocketContext<Self>) {
        metrics::counter!(instruments::WS_FRAMES_OUT).increment(1);
        ctx.text(text.to_owned());
    }

    fn reject(
        &mut self,
        ctx: &mut ws::WebsocketContext<Self>,
        table: Option<&TableId>,
        e: &ClientError,
    ) {
        metrics::counter!(instruments::WS_FRAMES_REJECTED, "code" => e.code).increment(1);
        self.send_text(&e.to_frame(table), ctx);
    }

    /// Closes the connection with a code and a machine-readable reason.
    fn close_with(ctx: &mut ws::WebsocketContext<Self>, code: ws::CloseCode, reason: &str) {
        ctx.close(Some(ws::CloseReason {
            code,
            description: Some(reason.into()),
        }));
        ctx.stop();
    }

    fn close_for_shutdown(ctx: &mut ws::WebsocketContext<Self>) {
        Self::close_with(ctx, ws::CloseCode::Restart, "server_shutdown");
    }

    /// Every inbound message (text, binary, ping, a reassembled fragmented
    /// one) spends from the rate limit; past it the client gets
    /// `rate_limited`, and after too many strikes the connection closes.
    fn admit(&mut self, ctx: &mut ws::WebsocketContext<Self>) -> bool {
        metrics::counter!(instruments::WS_FRAMES_IN).increment(1);
        if self.rate.allow(Instant::now()) {
            return true;
        }
        if self.rate.strikes > self.rt.settings.ws.rate_strikes {
            metrics::counter!(instruments::WS_FRAMES_REJECTED, "code" => "rate_limited")
                .increment(1);
            Self::close_with(ctx, ws::CloseCode::Policy, "rate_limited");
        } else {
            self.reject(
                ctx,
                None,
                &ClientError::new("rate_limited", "too many frames; slow down"),
            );
        }
        false
    }

    fn on_frame(&mut self, text: &str, ctx: &mut ws::WebsocketContext<Self>) {
        let frame = match protocol::parse(text) {
            Ok(f) => f,
            Err(e) => return self.reject(ctx, None, &e),
        };
        match frame {
            ClientFrame::Ping => self.send_text(&ServerFrame::Pong.to_string(), ctx),
            ClientFrame::Join { table, since } => self.join(table, since, ctx),
            other => self.forward(other, ctx),
        }
    }

    fn join(&mut self, table: TableId, since: Option<u64>, ctx: &mut ws::WebsocketContext<Self>) {
        let manager = self.manager.clone();
        let msg_table = table.clone();
        let join = Join {
            session: self.id,
            player: self.player.clone(),
            since,
            tx: ctx.address().recipient(),
            backlog: self.backlog.clone(),
        };
        // Frames of one session are handled in order: the next waits for
        // this join, so a sit right after a join finds the table joined.
        let fut = async move {
            let addr = manager
                .send(LoadOrCreate { table: msg_table })
                .await
                .map_err(|_| ClientError::new("unavailable", "the server is stopping"))?;
            let addr = addr.map_err(ClientError::from)?;
            addr.send(join)
                .await
                .map_err(|_| ClientError::new("table_frozen", "the table stopped"))??;
            Ok::<_, ClientError>(addr)
        };
        ctx.wait(fut.into_actor(self).map(move |res, act, ctx| match res {
            Ok(addr) => {
                act.tables.insert(table, addr);
            }
            Err(e) => act.reject(ctx, Some(&table), &e),
        }));
    }

    fn forward(&mut self, frame: ClientFrame, ctx: &mut ws::WebsocketContext<Self>) {
        let Some(table) = frame.table().cloned() else {
            return;
        };
        let Some(addr) = self.tables.get(&table).cloned() else {
            return self.reject(
                ctx,
                Some(&table),
                &ClientError::new("not_joined", "join the table first"),
            );
        };
        let player = self.player.clone();
        let received = Instant::now();
        let fut = async move {
            let sent = match frame {
                ClientFrame::Sit { seat, buy_in, .. } => {
                    addr.send(Sit {
                        player,
                        seat,
                        buy_in,
                    })
                    .await
                }
                ClientFrame::Act {
                    hand,
                    decision,
                    action,
                    ..
                } => {
                    addr.send(Act {
                        player,
                        hand,
                        decision,
                        action,
                        received,
                    })
                    .await
                }
                ClientFrame::Leave { .. } => addr.send(Leave { player }).await,
                ClientFrame::Join { .. } | ClientFrame::Ping => return Ok(()),
            };
            sent.map_err(|_| ClientError::new("table_frozen", "the table stopped"))?
        };
        ctx.wait(fut.into_actor(self).map(move |res, act, ctx| {
            if let Err(e) = res {
                if e.code == "table_frozen" {
                    act.tables.remove(&table);
                }
                act.reject(ctx, Some(&table), &e);
            }
        }));
    }
}

impl WsSession {
    fn reject_binary(&mut self, ctx: &mut ws::WebsocketContext<Self>) {
        self.reject(
            ctx,
            None,
            &ClientError::new("bad_json", "frames must be JSON text"),
        );
    }

    /// Puts a fragmented message back together, within the same size limit
    /// as a single frame, and handles it like one.
    fn on_fragment(&mut self, item: Fragment, ctx: &mut ws::WebsocketContext<Self>) {
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
            _ => return Self::close_with(ctx, ws::CloseCode::Protocol, "bad_fragments"),
        }
        if self
            .fragments
            .as_ref()
            .is_some_and(|(_, b)| b.len() > limit)
        {
            return Self::close_with(ctx, ws::CloseCode::Size, "frame_too_large");
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
            (true, Err(_)) => Self::close_with(ctx, ws::CloseCode::Invalid, "bad_utf8"),
            (false, _) => self.reject_binary(ctx),
        }
    }
}

impl Actor for WsSession {
    type Context = ws::WebsocketContext<Self>;

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
            ctx.ping(b"");
        });
        // Idle sessions close as soon as a drain starts; sessions at a table
        // stay until their tables have finished their hands.
        let mut shutdown = self.rt.shutdown_signal();
        let watch = async move {
            let _ = shutdown.wait_for(|draining| *draining).await;
        };
        ctx.spawn(watch.into_actor(self).map(|(), act, ctx| {
            if act.tables.is_empty() {
                Self::close_for_shutdown(ctx);
            }
        }));
    }

    fn stopped(&mut self, _ctx: &mut Self::Context) {
        metrics::gauge!(instruments::WS_CONNECTIONS).decrement(1.0);
        for addr in self.tables.values() {
            addr.do_send(Unsubscribe { session: self.id });
        }
    }
}

impl Handler<Outbound> for WsSession {
    type Result = ();

    fn handle(&mut self, msg: Outbound, ctx: &mut Self::Context) {
        match msg {
            Outbound::Frame(text) => {
                self.backlog.delivered(text.len());
                if self.backlog.is_too_slow() {
                    // A table stopped sending to this client while it lagged;
                    // whatever it sees now would have gaps, so end it.
                    Self::close_with(ctx, ws::CloseCode::Policy, "too_slow");
                    return;
                }
                self.send_text(&text, ctx);
            }
            Outbound::Unsubscribed(table) => {
                self.tables.remove(&table);
            }
            Outbound::Released(table) => {
                self.tables.remove(&table);
                if self.tables.is_empty() && self.rt.is_draining() {
                    Self::close_for_shutdown(ctx);
                }
            }
        }
    }
}

impl StreamHandler<Result<ws::Message, ws::ProtocolError>> for WsSession {
    fn handle(&mut self, msg: Result<ws::Message, ws::ProtocolError>, ctx: &mut Self::Context) {
        self.last_heard = Instant::now();
        match msg {
            Ok(ws::Message::Text(text)) => {
                if self.admit(ctx) {
                    self.on_frame(&text, ctx);
                }
            }
            Ok(ws::Message::Binary(_)) => {
                if self.admit(ctx) {
                    self.reject_binary(ctx);
                }
            }
            Ok(ws::Message::Ping(p)) => {
                if self.admit(ctx) {
                    ctx.pong(&p);
                }
            }
            Ok(ws::Message::Continuation(item)) => self.on_fragment(item, ctx),
            Ok(ws::Message::Pong(_)) => {}
            Ok(ws::Message::Close(reason)) => {
                ctx.close(reason);
                ctx.stop();
            }
            Ok(ws::Message::Nop) => {}
            Err(ws::ProtocolError::Overflow) => {
                Self::close_with(ctx, ws::CloseCode::Size, "frame_too_large");
            }
            // The codec checks the order of fragments: a new message before
            // the last one ended, or a continuation of nothing.
            Err(
                ws::ProtocolError::ContinuationStarted | ws::ProtocolError::ContinuationNotStarted,
            ) => {
                Self::close_with(ctx, ws::CloseCode::Protocol, "bad_fragments");
            }
            Err(e) => {
                debug!(error = %e, "websocket protocol error");
                ctx.stop();
            }
        }
    }
}
