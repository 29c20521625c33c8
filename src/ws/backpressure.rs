//! Counts the bytes of a WebSocket response that actually left for the
//! client. The HTTP dispatcher only pulls more of the body when its write
//! buffer drains, so `queued − written` is how far a client lags behind.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use actix_web::body::{BodySize, BoxBody, MessageBody};
use actix_web::web::Bytes;

pub struct CountingBody {
    inner: BoxBody,
    written: Arc<AtomicU64>,
}

impl CountingBody {
    pub fn new(inner: BoxBody, written: Arc<AtomicU64>) -> CountingBody {
        CountingBody { inner, written }
    }
}

impl MessageBody for CountingBody {
    type Error = Box<dyn std::error::Error>;

    fn size(&self) -> BodySize {
        self.inner.size()
    }

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_next(cx);
        if let Poll::Ready(Some(Ok(bytes))) = &polled {
            self.written
                .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        }
        polled
    }
}
