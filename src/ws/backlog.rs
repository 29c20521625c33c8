//! The per-connection byte accounting of the WebSocket transport: how far
//! a connection lags behind what its tables offered it, and the
//! [`Watcher`] a session hands a table when it joins, which takes a frame
//! only while the connection is within its cap.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use actix::Recipient;

use crate::actors::table::{Delivery, Outbound, Watcher};

/// How far one connection lags behind what its tables sent it: the bytes
/// offered to it (in its session's mailbox, or in its writer) that the
/// kernel has not taken yet. A client that stops reading lets it grow;
/// past the cap (`ws.outbound_queue_bytes`) the connection is too slow and
/// its tables stop sending to it, instead of queueing without bound.
#[derive(Debug, Default)]
pub struct Backlog {
    queued_bytes: AtomicU64,
    too_slow: AtomicBool,
}

impl Backlog {
    /// Counts a frame about to be queued; false (and marked too slow) when
    /// the session already lags more than `cap` bytes.
    pub fn admit(&self, len: usize, cap: u64) -> bool {
        if self.queued_bytes.load(Ordering::Relaxed) > cap {
            self.too_slow.store(true, Ordering::Relaxed);
            return false;
        }
        self.queued_bytes.fetch_add(len as u64, Ordering::Relaxed);
        true
    }

    pub fn delivered(&self, len: usize) {
        let _ = self
            .queued_bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |q| {
                Some(q.saturating_sub(len as u64))
            });
    }

    pub fn is_too_slow(&self) -> bool {
        self.too_slow.load(Ordering::Relaxed)
    }
}

/// A session's end of one table: frames go to its actor while the
/// connection's backlog is within `cap` bytes.
pub struct SessionLink {
    tx: Recipient<Outbound>,
    backlog: Arc<Backlog>,
    cap: u64,
}

impl SessionLink {
    pub fn new(tx: Recipient<Outbound>, backlog: Arc<Backlog>, cap: u64) -> SessionLink {
        SessionLink { tx, backlog, cap }
    }
}

impl Watcher for SessionLink {
    fn offer(&self, frame: &Arc<str>) -> Delivery {
        if !self.tx.connected() {
            return Delivery::Gone;
        }
        if !self.backlog.admit(frame.len(), self.cap) {
            return Delivery::TooSlow;
        }
        self.tx.do_send(Outbound::Frame(frame.clone()));
        Delivery::Queued
    }

    fn notify(&self, notice: Outbound) {
        self.tx.do_send(notice);
    }

    fn connected(&self) -> bool {
        self.tx.connected()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_past_its_cap_is_too_slow_until_the_kernel_takes_its_bytes() {
        let b = Backlog::default();
        assert!(b.admit(600, 1000));
        assert!(b.admit(600, 1000), "admitted while at or under the cap");
        assert!(!b.admit(1, 1000), "past the cap");
        assert!(b.is_too_slow());
        b.delivered(1200);
        assert!(b.admit(1, 1000), "written out, it is taken again");
        b.delivered(5000);
        assert!(
            b.admit(1000, 1000),
            "delivering more than queued saturates at 0"
        );
    }
}
