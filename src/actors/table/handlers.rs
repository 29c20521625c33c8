//! The table's messages and their handlers: what sessions ask of it, and
//! what the manager tells it.

use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;
use tokio::sync::oneshot;
use tracing::{error, warn};

use super::error::TableError;
use super::fanout::{SessionId, Subscriber, Watcher};
use super::play::{beside, Applied};
use super::Table;
use crate::chips::{Chips, PlayerId, SeatNo};
use crate::games::Game;
use crate::store::{EntryKind, StoreError};
use crate::types::{Fence, FreezeReason};

/// Subscribe a session; the table sends it a snapshot, or with `since` the
/// events it missed if they are still kept.
#[derive(Message)]
#[rtype(result = "Result<(), TableError>")]
pub struct Join {
    pub session: SessionId,
    pub player: PlayerId,
    pub since: Option<u64>,
    pub watcher: Arc<dyn Watcher>,
}

impl<G: Game> Handler<Join> for Table<G> {
    type Result = Result<(), TableError>;

    fn handle(&mut self, msg: Join, _ctx: &mut Self::Context) -> Self::Result {
        if let Some(e) = self.stopped_error() {
            return Err(e);
        }
        let sub = Subscriber {
            player: msg.player,
            watcher: msg.watcher,
        };
        self.subscribe(msg.session, sub, msg.since)
    }
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct Unsubscribe {
    pub session: SessionId,
}

impl<G: Game> Handler<Unsubscribe> for Table<G> {
    type Result = ();

    fn handle(&mut self, msg: Unsubscribe, _ctx: &mut Self::Context) {
        self.drop_subscriber(msg.session);
    }
}

/// Wallet → stack, fenced, then the player is seated.
///
/// The buy-in's transaction runs beside the table's other work: the seat and
/// the player are reserved meanwhile (a second sit for either is refused),
/// and the player is seated once Postgres has recorded it. Acts at the
/// table never wait behind a buy-in.
#[derive(Message)]
#[rtype(result = "Result<(), TableError>")]
pub struct Sit {
    pub player: PlayerId,
    pub seat: SeatNo,
    pub buy_in: Chips,
}

impl<G: Game> Handler<Sit> for Table<G> {
    type Result = ResponseActFuture<Self, Result<(), TableError>>;

    fn handle(&mut self, msg: Sit, _ctx: &mut Self::Context) -> Self::Result {
        let refuse = |e: TableError| -> Self::Result { Box::pin(fut::ready(Err(e))) };
        if let Err(e) = self.refuse_unless_open() {
            return refuse(e);
        }
        // A buy-in in flight holds its seat and its player.
        if let Err(e) = self.side.reserve_buy_in(msg.seat, &msg.player) {
            return refuse(e);
        }
        // Validate against a copy first: the wallet is only debited for a
        // sit the rules accept.
        if let Err(e) = self.game.clone().sit(msg.seat, &msg.player.0, msg.buy_in) {
            self.side.buy_in_done(msg.seat);
            return refuse(e.into());
        }
        let cmd = (msg.seat, msg.player.clone(), msg.buy_in);
        let env = self.env.clone();
        let fence = self.fence;
        let player = msg.player.clone();
        let fut =
            beside(async move { env.store.buy_in(fence, msg.seat, &player, msg.buy_in).await });
        Box::pin(fut.into_actor(self).map(move |res, act, ctx| {
            let _g = act.span.clone().entered();
            act.side.buy_in_done(msg.seat);
            let told = act.bought_in(res, cmd, fence, ctx);
            // A drain or an idle release waits for buy-ins in flight.
            act.after_side_write(ctx);
            told
        }))
    }
}

impl<G: Game> Table<G> {
    /// What a sit's player is told once its buy-in has an outcome; a
    /// recorded buy-in seats the player.
    fn bought_in(
        &mut self,
        res: Result<Chips, StoreError>,
        (seat, player, stack): (SeatNo, PlayerId, Chips),
        fence: Fence,
        ctx: &mut Context<Self>,
    ) -> Result<(), TableError> {
        let sit = move |g: &mut G| g.sit(seat, &player.0, stack);
        match res {
            Ok(_balance) => {
                if self.phase.is_stopped() {
                    // Recorded while this copy stops (it waits for buy-ins in
                    // flight): the seat is the player's, and whoever hosts
                    // the table next seats them from Postgres. Told as it
                    // is (`seated`, then the `frozen` or the move that ends
                    // the subscription), so no client believes its chips
                    // vanished; nothing is dealt here any more.
                    return match self.apply(sit, ctx) {
                        Ok(events) => {
                            self.broadcast(events);
                            Ok(())
                        }
                        Err(_) => {
                            error!("the rules refused a sit already paid for at a stopping table");
                            Err(TableError::SeatHeldWhileStopping)
                        }
                    };
                }
                match self.apply(sit, ctx) {
                    Ok(events) => {
                        self.seated(ctx);
                        self.advance(events, ctx);
                        self.schedule_next_hand(ctx);
                        Ok(())
                    }
                    Err(e) => {
                        error!(error = %e, "the rules refused a sit already paid for; freezing");
                        self.freeze(FreezeReason::InternalError, ctx);
                        Err(TableError::Frozen)
                    }
                }
            }
            // The table moved to a new fence of its own (a re-assert) while
            // the buy-in carried the old one: nothing was recorded, and
            // nobody else owns the table, so the player may try again.
            Err(StoreError::StaleOwnerBoundaryWrite { .. }) if self.fence != fence => {
                Err(TableError::TryBuyingInAgain)
            }
            Err(e) => Err(sit_refusal(&e).unwrap_or_else(|| {
                self.on_write_error(e, ctx);
                TableError::BuyInNotRecorded
            })),
        }
    }
}

/// What a sit is told when Postgres refused its buy-in and recorded
/// nothing; `None` for a failure the table itself must answer (a newer
/// owner's fence, a broken invariant).
fn sit_refusal(e: &StoreError) -> Option<TableError> {
    Some(match e {
        StoreError::InsufficientFunds => TableError::InsufficientFunds,
        StoreError::SeatTaken => TableError::SeatTaken,
        StoreError::AlreadySeated => TableError::AlreadySeated,
        StoreError::WrongState(_) => TableError::NotOpen,
        other if other.is_transient() => TableError::TryBuyingInAgain,
        _ => return None,
    })
}

/// A seat's answer to the open decision: the `act` frame's game fields,
/// which the table's game parses into its command.
#[derive(Message)]
#[rtype(result = "Result<(), TableError>")]
pub struct Act {
    pub player: PlayerId,
    /// The `turn` this action answers.
    pub decision: u64,
    pub fields: serde_json::Map<String, serde_json::Value>,
    /// When the session read the frame, for the latency histogram.
    pub received: Instant,
}

impl<G: Game> Handler<Act> for Table<G> {
    type Result = Result<(), TableError>;

    fn handle(&mut self, msg: Act, ctx: &mut Self::Context) -> Self::Result {
        let _g = self.span.clone().entered();
        // The frame's own fields are checked first, as they always were.
        let command = G::command(&msg.fields)?;
        let seat = self.live_seat_of(&msg.player)?;
        let decision = msg.decision;
        let j = self.journalled();
        let mut rng = j.rng(j.next);
        let spent = self.spent();
        let change = |g: &mut G| g.apply_timed(seat, decision, command, spent, &mut rng);
        let events = self.apply(change, ctx)?;
        // Told once committed (I15): the act is journalled as its frame's
        // game fields, which the game parses again on a replay.
        let applied = Applied {
            kind: EntryKind::Act,
            seat,
            decision: Some(decision),
            fields: Some(serde_json::Value::Object(msg.fields)),
            spent: self.game.clock().map(|_| spent),
        };
        self.commit(applied, events, Some(msg.received), ctx);
        Ok(())
    }
}

#[derive(Message)]
#[rtype(result = "Result<(), TableError>")]
pub struct Leave {
    pub player: PlayerId,
}

impl<G: Game> Handler<Leave> for Table<G> {
    type Result = Result<(), TableError>;

    fn handle(&mut self, msg: Leave, ctx: &mut Self::Context) -> Self::Result {
        let _g = self.span.clone().entered();
        let seat = self.live_seat_of(&msg.player)?;
        // Dealt into the hand in progress: folded now, cashed out by the
        // hand's own write. Otherwise cashed out beside the hand, and the
        // seat vacated once Postgres has recorded it (see `cash_out`).
        self.stand_up(seat, ctx)?;
        Ok(())
    }
}

/// Sent by the manager when the lease is held by someone else (a refused
/// re-assert) or Postgres holds a newer fence (an operator's freeze, a newer
/// owner's stamp).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Freeze {
    pub reason: FreezeReason,
}

impl<G: Game> Handler<Freeze> for Table<G> {
    type Result = ();

    fn handle(&mut self, msg: Freeze, ctx: &mut Self::Context) {
        self.freeze(msg.reason, ctx);
    }
}

/// Postgres holds a newer owner's fence for the table (seen by the fence
/// check): stop this copy without a write; its watchers follow the table.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Superseded;

impl<G: Game> Handler<Superseded> for Table<G> {
    type Result = ();

    fn handle(&mut self, _msg: Superseded, ctx: &mut Self::Context) {
        self.supersede(ctx);
    }
}

/// Graceful shutdown or a move: no more commands; once the write in
/// flight has landed the table is released, its hand in progress left in
/// the journal for the next owner to resume.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Drain {
    /// A move: the instance the table is released to (its watchers follow
    /// it there); `None` for a shutdown.
    pub to: Option<String>,
}

impl<G: Game> Handler<Drain> for Table<G> {
    type Result = ();

    fn handle(&mut self, msg: Drain, ctx: &mut Self::Context) {
        self.start_drain(msg.to, ctx);
    }
}

/// The manager took this table's lease again under `fence` (its key had
/// vanished, or Redis was unreachable): the table moves Postgres to the new
/// fence only if Postgres still holds its own (continuity), and carries on,
/// the hand in progress included. Refused, it freezes its copy.
#[derive(Message)]
#[rtype(result = "RefenceOutcome")]
pub struct Refence {
    pub fence: Fence,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, MessageResponse)]
pub enum RefenceOutcome {
    /// Postgres holds the new fence; the table carries on under it.
    Reasserted,
    /// Someone stamped or froze the table in between: its copy froze.
    Refused,
    /// Redis names another holder that Postgres does not know yet: nothing
    /// changed; asked again later (never answered by the table itself).
    Contested,
    /// Postgres could not be reached; nothing changed, try again later.
    Failed,
}

impl RefenceOutcome {
    /// The `result` label of `pitboss_lease_reasserts_total`.
    pub fn label(self) -> &'static str {
        match self {
            RefenceOutcome::Reasserted => "reasserted",
            RefenceOutcome::Refused => "refused",
            RefenceOutcome::Contested => "contested",
            RefenceOutcome::Failed => "error",
        }
    }
}

impl<G: Game> Handler<Refence> for Table<G> {
    type Result = ResponseFuture<RefenceOutcome>;

    fn handle(&mut self, msg: Refence, ctx: &mut Self::Context) -> Self::Result {
        if self.phase.is_stopped() {
            return Box::pin(async { RefenceOutcome::Refused });
        }
        let (tx, rx) = oneshot::channel();
        let env = self.env.clone();
        let (old, new) = (self.fence, msg.fence);
        let fut = async move { env.store.reassert(old, new).await };
        // Waited for, like a boundary write: no write with the old fence
        // can start while Postgres moves to the new one.
        ctx.wait(fut.into_actor(self).map(move |res, act, ctx| {
            let _g = act.span.clone().entered();
            let outcome = match res {
                Ok(()) => {
                    act.fence = new;
                    act.refresh_span();
                    warn!(
                        event = "lease_reasserted",
                        old = old.0,
                        "lease taken again; carrying on under the new fence"
                    );
                    RefenceOutcome::Reasserted
                }
                Err(e) if e.is_transient() => {
                    warn!(error = %e, "could not record the re-asserted fence; will try again");
                    RefenceOutcome::Failed
                }
                Err(e) => {
                    warn!(event = "reassert_refused", error = %e, "Postgres no longer holds this owner's fence; freezing");
                    act.freeze(FreezeReason::LeaseLost, ctx);
                    RefenceOutcome::Refused
                }
            };
            let _ = tx.send(outcome);
        }));
        Box::pin(async move { rx.await.unwrap_or(RefenceOutcome::Failed) })
    }
}
