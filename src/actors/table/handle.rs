//! A hosted table as the rest of the process holds it, whatever its game:
//! one recipient per message a table takes. The manager, sessions and the
//! relay send through it and never name the game.

use std::sync::Arc;

use actix::dev::RecipientRequest;
use actix::prelude::*;

use super::handlers::{Act, Drain, Freeze, Join, Leave, Refence, Sit, Superseded, Unsubscribe};
use super::timers::CheckLease;
use super::Table;
use crate::games::Game;

struct Recipients {
    join: Recipient<Join>,
    unsubscribe: Recipient<Unsubscribe>,
    sit: Recipient<Sit>,
    act: Recipient<Act>,
    leave: Recipient<Leave>,
    drain: Recipient<Drain>,
    freeze: Recipient<Freeze>,
    superseded: Recipient<Superseded>,
    refence: Recipient<Refence>,
    check_lease: Recipient<CheckLease>,
}

/// One hosting of one table. Two handles are equal when they reach the
/// same hosting.
#[derive(Clone)]
pub struct TableHandle(Arc<Recipients>);

impl TableHandle {
    pub fn of<G: Game>(addr: &Addr<Table<G>>) -> TableHandle {
        TableHandle(Arc::new(Recipients {
            join: addr.clone().recipient(),
            unsubscribe: addr.clone().recipient(),
            sit: addr.clone().recipient(),
            act: addr.clone().recipient(),
            leave: addr.clone().recipient(),
            drain: addr.clone().recipient(),
            freeze: addr.clone().recipient(),
            superseded: addr.clone().recipient(),
            refence: addr.clone().recipient(),
            check_lease: addr.clone().recipient(),
        }))
    }

    /// Whether the table's actor still runs.
    pub fn connected(&self) -> bool {
        self.0.check_lease.connected()
    }

    /// Sends `msg` and waits for the table's answer.
    pub fn send<M>(&self, msg: M) -> RecipientRequest<M>
    where
        M: Message + Send + 'static,
        M::Result: Send,
        TableHandle: Takes<M>,
    {
        self.recipient().send(msg)
    }

    /// Sends `msg` without waiting (dropped if the table has stopped).
    pub fn do_send<M>(&self, msg: M)
    where
        M: Message + Send + 'static,
        M::Result: Send,
        TableHandle: Takes<M>,
    {
        self.recipient().do_send(msg)
    }
}

impl PartialEq for TableHandle {
    fn eq(&self, other: &TableHandle) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for TableHandle {}

/// The messages a table takes, each through its recipient.
pub trait Takes<M: Message + Send>
where
    M::Result: Send,
{
    fn recipient(&self) -> &Recipient<M>;
}

macro_rules! takes {
    ($($msg:ty => $field:ident),* $(,)?) => {$(
        impl Takes<$msg> for TableHandle {
            fn recipient(&self) -> &Recipient<$msg> {
                &self.0.$field
            }
        }
    )*};
}

takes! {
    Join => join,
    Unsubscribe => unsubscribe,
    Sit => sit,
    Act => act,
    Leave => leave,
    Drain => drain,
    Freeze => freeze,
    Superseded => superseded,
    Refence => refence,
    CheckLease => check_lease,
}
