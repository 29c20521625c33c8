//! How a session reaches the tables it joined: the route to each (hosted
//! here, relayed to its owner, or being looked for), the join that finds
//! it, the relays, and the search for a new owner when it changes.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_http::ws::CloseCode;

use crate::actors::table::{Act, Join, Leave, Sit, TableHandle, Unsubscribe};
use crate::actors::table_manager::{HostError, LoadOrCreate};
use crate::instruments;
use crate::protocol::{ClientError, ClientFrame, ServerFrame};
use crate::types::{ErrorCode, FreezeReason, TableId};
use crate::ws::backlog::SessionLink;
use crate::ws::relay::{self, Ending, RelayEnded, RelayStart, Upstream};

use super::WsSession;

/// How long a session waits for the farewell of a table copy that stopped
/// under one of its commands (it is sent before the copy stops).
pub(super) const FAREWELL_GRACE: Duration = Duration::from_secs(1);

/// How this connection reaches one table it joined.
pub(super) enum Route {
    /// Hosted by this process.
    Local(TableHandle),
    /// Hosted elsewhere: frames go through a relay to the owner.
    Relay {
        up: Upstream,
        generation: u64,
        /// Set while this relay is an attempt to find a new owner: when the
        /// search started.
        search: Option<Search>,
    },
    /// The owner changed; the new one is being looked for.
    Searching,
}

/// A search for a table's new owner.
#[derive(Clone, Copy)]
pub(super) struct Search {
    started: Instant,
    attempt: u32,
}

impl Search {
    pub(super) fn new() -> Search {
        Search {
            started: Instant::now(),
            attempt: 0,
        }
    }

    /// 0, 50, 100, 200, 250, 250… ms between attempts.
    fn delay(self) -> Duration {
        if self.attempt == 0 {
            return Duration::ZERO;
        }
        Duration::from_millis((25u64 << self.attempt.min(4)).min(250))
    }

    fn next(self) -> Search {
        Search {
            attempt: self.attempt.saturating_add(1),
            ..self
        }
    }
}

/// What a join found.
pub(super) enum Joined {
    Local(TableHandle),
    Remote(String),
    /// Following an owner change, the table was found frozen in Postgres.
    Frozen(FreezeReason),
}

impl WsSession {
    /// Joins a table: hosted here (or taken here now), or relayed to its
    /// owner. `search` is set when this join follows the table to a new
    /// owner rather than answering the client.
    pub(super) fn join(
        &mut self,
        table: TableId,
        since: Option<u64>,
        search: Option<Search>,
        ctx: &mut Context<Self>,
    ) {
        let manager = self.manager.clone();
        let msg_table = table.clone();
        let relayed = self.relayed;
        let following = search.is_some();
        let join = Join {
            session: self.id,
            player: self.player.clone(),
            since,
            watcher: Arc::new(SessionLink::new(
                ctx.address().recipient(),
                self.backlog.clone(),
                self.rt.settings.ws.outbound_queue_bytes,
            )),
        };
        let fut = async move {
            let hosted = manager
                .send(LoadOrCreate { table: msg_table })
                .await
                .map_err(|_| ClientError::new(ErrorCode::Unavailable, "the server is stopping"))?;
            let addr = match hosted {
                Ok(addr) => addr,
                Err(HostError::OwnedElsewhere { owner, .. }) if !relayed => {
                    return Ok(Joined::Remote(owner))
                }
                // Frozen while the client followed it: told as any copy
                // tells a freeze, with the reason Postgres records.
                Err(HostError::Frozen(reason)) if following => return Ok(Joined::Frozen(reason)),
                Err(e) => return Err(ClientError::from(e)),
            };
            // The copy stopped between the manager's answer and this join.
            addr.send(join)
                .await
                .map_err(|_| {
                    ClientError::new(ErrorCode::Unavailable, "the table stopped here; join again")
                })?
                .map_err(ClientError::from)?;
            Ok::<_, ClientError>(Joined::Local(addr))
        };
        let done = fut.into_actor(self).map(move |res, act, ctx| {
            if following && !matches!(act.tables.get(&table), Some(Route::Searching)) {
                // The client joined again (or left) while this search's join
                // was on its way: its own join decides the route, and this
                // one must not send it the events it was already sent.
                if let Ok(Joined::Local(addr)) = res {
                    if !matches!(act.tables.get(&table), Some(Route::Local(a)) if *a == addr) {
                        addr.do_send(Unsubscribe { session: act.id });
                    }
                }
                return;
            }
            act.joined(table, since, search, res, ctx);
        });
        if search.is_some() {
            // Following an owner change must not hold up the client's frames
            // for its other tables.
            ctx.spawn(done);
        } else {
            // Frames of one session are handled in order: the next waits for
            // this join, so a sit right after a join finds the table joined.
            ctx.wait(done);
        }
    }

    /// What a join found becomes the table's route.
    pub(super) fn joined(
        &mut self,
        table: TableId,
        since: Option<u64>,
        search: Option<Search>,
        res: Result<Joined, ClientError>,
        ctx: &mut Context<Self>,
    ) {
        let act = self;
        match res {
            Ok(Joined::Local(addr)) => {
                act.set_route(table, Route::Local(addr));
            }
            Ok(Joined::Remote(owner)) => act.start_relay(table, owner, since, search, ctx),
            Ok(Joined::Frozen(reason)) => {
                act.tables.remove(&table);
                let frame = ServerFrame::Frozen {
                    table: &table,
                    reason,
                }
                .to_shared();
                act.send_text(&frame, ctx);
            }
            Err(e) => match search {
                // The new owner is not there yet (a lease still held by a
                // crashed owner, a drain releasing): look again.
                Some(search)
                    if matches!(e.code, ErrorCode::Unavailable | ErrorCode::OwnedElsewhere)
                        && search.started.elapsed() < act.search_budget() =>
                {
                    act.search_later(table, since, search.next(), ctx);
                }
                _ => {
                    act.tables.remove(&table);
                    // Following an owner change, the client did not ask:
                    // say that its subscription is over.
                    let e = if search.is_some() {
                        e.ending_subscription()
                    } else {
                        e
                    };
                    act.reject(ctx, Some(&table), &e);
                }
            },
        }
    }

    /// Routes `table` anew. A copy hosted here that the old route named
    /// stops sending to this connection: frames from two routes at once
    /// could interleave out of order.
    pub(super) fn set_route(&mut self, table: TableId, route: Route) {
        if let Some(Route::Local(old)) = self.tables.get(&table) {
            if !matches!(&route, Route::Local(new) if new == old) {
                old.do_send(Unsubscribe { session: self.id });
            }
        }
        self.tables.insert(table, route);
    }

    pub(super) fn start_relay(
        &mut self,
        table: TableId,
        owner: String,
        since: Option<u64>,
        search: Option<Search>,
        ctx: &mut Context<Self>,
    ) {
        self.generation += 1;
        let told = self.told.entry(table.clone()).or_default().clone();
        // What an earlier relay of this table passed on is on its way to
        // the client already: a resume never asks for it again, so no event
        // reaches this connection twice or out of order.
        let since = since.map(|n| n.max(told.load(Ordering::Relaxed)));
        let up = relay::start(RelayStart {
            rt: self.rt.clone(),
            table: table.clone(),
            player: self.player.clone(),
            owner,
            since,
            generation: self.generation,
            out: ctx.address().recipient(),
            ended: ctx.address().recipient(),
            backlog: self.backlog.clone(),
            told,
        });
        self.set_route(
            table,
            Route::Relay {
                up,
                generation: self.generation,
                search,
            },
        );
    }

    /// A command found `addr` stopped: its farewell is on its way. Should
    /// none have come (the route still names that copy a moment later),
    /// the client is told the subscription is over rather than left
    /// waiting.
    pub(super) fn farewell_due(
        &mut self,
        table: TableId,
        addr: TableHandle,
        ctx: &mut Context<Self>,
    ) {
        ctx.run_later(FAREWELL_GRACE, move |act, ctx| {
            let stale = matches!(act.tables.get(&table), Some(Route::Local(a)) if *a == addr);
            if stale {
                act.tables.remove(&table);
                act.reject(
                    ctx,
                    Some(&table),
                    &ClientError::new(
                        ErrorCode::Unavailable,
                        "the table stopped here; join it again",
                    )
                    .ending_subscription(),
                );
            }
        });
    }

    /// The table left its owner (drain, crash, move, a stale copy stopped):
    /// look for the new one after the search's delay.
    pub(super) fn search_later(
        &mut self,
        table: TableId,
        since: Option<u64>,
        search: Search,
        ctx: &mut Context<Self>,
    ) {
        self.tables.insert(table.clone(), Route::Searching);
        ctx.run_later(search.delay(), move |act, ctx| {
            // Still looking (the client may have left or joined again).
            if matches!(act.tables.get(&table), Some(Route::Searching)) {
                act.join(table, since, Some(search), ctx);
            }
        });
    }

    pub(super) fn forward(&mut self, frame: ClientFrame, text: &str, ctx: &mut Context<Self>) {
        let Some(table) = frame.table().cloned() else {
            return;
        };
        let addr = match self.tables.get(&table) {
            Some(Route::Local(addr)) => addr.clone(),
            Some(Route::Relay { up, .. }) => {
                if let Err(e) = up.send(text) {
                    self.reject(ctx, Some(&table), &e);
                }
                return;
            }
            Some(Route::Searching) => {
                return self.reject(ctx, Some(&table), &relay::owner_changing())
            }
            None => {
                return self.reject(
                    ctx,
                    Some(&table),
                    &ClientError::new(ErrorCode::NotJoined, "join the table first"),
                )
            }
        };
        let player = self.player.clone();
        let received = Instant::now();
        let stopped = addr.clone();
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
                    decision, fields, ..
                } => {
                    addr.send(Act {
                        player,
                        decision,
                        fields,
                        received,
                    })
                    .await
                }
                ClientFrame::Leave { .. } => addr.send(Leave { player }).await,
                ClientFrame::Join { .. } | ClientFrame::Ping => return Ok(()),
            };
            // The copy stopped before answering: every way a table stops
            // tells its watchers (`frozen`, `released`, the next hosting's
            // snapshot), and that farewell is the answer.
            sent.map(|answer| answer.map_err(|e| Some(ClientError::from(e))))
                .unwrap_or(Err(None))
        };
        ctx.wait(fut.into_actor(self).map(move |res, act, ctx| match res {
            Ok(()) => {}
            Err(Some(e)) => {
                if e.code == ErrorCode::TableFrozen {
                    act.tables.remove(&table);
                }
                act.reject(ctx, Some(&table), &e);
            }
            Err(None) => act.farewell_due(table, stopped, ctx),
        }));
    }
}

impl Handler<RelayEnded> for WsSession {
    type Result = ();

    fn handle(&mut self, msg: RelayEnded, ctx: &mut Self::Context) {
        let search = match self.tables.get(&msg.table) {
            Some(Route::Relay {
                generation, search, ..
            }) if *generation == msg.generation => *search,
            // A relay since replaced or left.
            _ => return,
        };
        for _ in 0..msg.dropped {
            self.reject(ctx, Some(&msg.table), &relay::owner_changing());
        }
        match msg.how {
            Ending::Lost { since, joined } => {
                if self.rt.is_draining() {
                    return self.forget_table(&msg.table, ctx);
                }
                metrics::counter!(instruments::RELAY_OWNER_CHANGES).increment(u64::from(joined));
                // A relay that had joined saw the owner go: a new search.
                // One that had not was an attempt of the search going on.
                let search = match search {
                    Some(s) if !joined => {
                        if s.started.elapsed() >= self.search_budget() {
                            self.tables.remove(&msg.table);
                            return self.reject(
                                ctx,
                                Some(&msg.table),
                                &ClientError::new(
                                    ErrorCode::Unavailable,
                                    "the table's owner cannot be reached; join again later",
                                )
                                .ending_subscription(),
                            );
                        }
                        s.next()
                    }
                    _ => Search::new(),
                };
                self.search_later(msg.table, since, search, ctx);
            }
            Ending::Ended => {
                self.tables.remove(&msg.table);
            }
            Ending::Close { code, reason } => {
                self.close_with(ctx, CloseCode::from(code), &reason);
            }
        }
    }
}
