//! A WebSocket connection's socket once the upgrade has handed it over:
//! frames read off it as a stream, and a write queue that holds only what
//! the kernel has not taken yet.
//!
//! An idle connection holds no buffer. The reader waits for readiness
//! without one, reads what arrived into a stack buffer, and keeps heap
//! bytes only for a frame split across reads; the writer writes each frame
//! at once and queues only what the socket would not take. (actix-http's
//! dispatcher keeps an 8 KiB read and an 8 KiB write buffer for a
//! connection's whole life; see docs/BENCHMARKS.md.)

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_codec::Decoder as _;
use actix_http::ws::{CloseReason, Codec, Frame, OpCode, Parser, ProtocolError};
use bytes::{Buf as _, Bytes, BytesMut};
use futures::Stream;
use tokio::net::TcpStream;

use crate::ws::backlog::Backlog;

/// How much is read off the socket at a time (on the reader's stack).
const READ_CHUNK: usize = 4096;

/// How long a closing connection may take to write what it still has
/// queued (its close frame last) before it is dropped.
const CLOSE_WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// How often a write waiting for room looks whether its session closed.
const RECHECK: Duration = Duration::from_secs(1);

/// How long a closed connection waits for the client's end after its own:
/// reading until then means the kernel closes with FIN, not with a reset
/// that could discard the client's last unread frames.
const CLOSE_LINGER: Duration = Duration::from_secs(1);

/// The frames a client sends, in order, until the connection ends (`None`)
/// or breaks the protocol (an error, then the end). `leftover` is what the
/// HTTP layer had read past the upgrade request.
pub fn frames(
    io: Rc<TcpStream>,
    leftover: &[u8],
    max_frame_bytes: usize,
) -> impl Stream<Item = Result<Frame, ProtocolError>> {
    let reader = Reader {
        io,
        pending: BytesMut::from(leftover),
        codec: Codec::new().max_size(max_frame_bytes),
    };
    futures::stream::unfold(Some(reader), |reader| async move {
        let mut reader = reader?;
        match reader.next().await {
            Ok(Some(frame)) => Some((Ok(frame), Some(reader))),
            Ok(None) => None,
            Err(e) => Some((Err(e), None)),
        }
    })
}

struct Reader {
    io: Rc<TcpStream>,
    /// Bytes read but not yet a whole frame; no capacity while empty.
    pending: BytesMut,
    codec: Codec,
}

impl Reader {
    /// The next frame, or `None` once the client closed the socket.
    async fn next(&mut self) -> Result<Option<Frame>, ProtocolError> {
        loop {
            if let Some(frame) = self.codec.decode(&mut self.pending)? {
                return Ok(Some(frame));
            }
            if self.pending.is_empty() {
                // Hand the capacity back while idle.
                self.pending = BytesMut::new();
            }
            self.io.readable().await?;
            let mut chunk = [0u8; READ_CHUNK];
            match self.io.try_read(&mut chunk) {
                Ok(0) => return Ok(None),
                Ok(n) => self.pending.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// The write side of a connection, shared by its session and, while the
/// kernel's buffer is full, a task that waits for room.
#[derive(Clone)]
pub struct Writer(Rc<RefCell<Outgoing>>);

struct Outgoing {
    io: Rc<TcpStream>,
    /// Encoded frames the kernel has not taken, oldest first (the first may
    /// be partly written), each with the bytes it counts in the backlog.
    queue: VecDeque<(Bytes, usize)>,
    queued_bytes: usize,
    backlog: Arc<Backlog>,
    /// A task is waiting for the socket to take more.
    waiting: bool,
    /// The session ended: once the queue is written, the socket closes.
    closing: bool,
    broken: bool,
}

/// Writing failed: the client is gone or lags past the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteError {
    Broken,
    TooSlow,
}

impl Writer {
    pub fn new(io: Rc<TcpStream>, backlog: Arc<Backlog>) -> Writer {
        Writer(Rc::new(RefCell::new(Outgoing {
            io,
            queue: VecDeque::new(),
            queued_bytes: 0,
            backlog,
            waiting: false,
            closing: false,
            broken: false,
        })))
    }

    /// A text frame. `accounted` is how many of its bytes the backlog
    /// counts (a table's frame) and is handed back once the kernel took it.
    pub fn text(&self, text: &str, accounted: usize, cap: u64) -> Result<(), WriteError> {
        self.message(text.as_bytes(), OpCode::Text, accounted, cap)
    }

    pub fn ping(&self, cap: u64) -> Result<(), WriteError> {
        self.message(b"", OpCode::Ping, 0, cap)
    }

    pub fn pong(&self, payload: &[u8], cap: u64) -> Result<(), WriteError> {
        self.message(payload, OpCode::Pong, 0, cap)
    }

    fn message(
        &self,
        payload: &[u8],
        op: OpCode,
        accounted: usize,
        cap: u64,
    ) -> Result<(), WriteError> {
        let mut frame = BytesMut::with_capacity(payload.len() + 10);
        Parser::write_message(&mut frame, payload, op, true, false);
        self.push(frame.freeze(), accounted, cap)
    }

    /// Queues the close frame and closes the socket once everything before
    /// it is written; nothing is written after it.
    pub fn close(&self, reason: Option<CloseReason>) {
        let mut frame = BytesMut::new();
        Parser::write_close(&mut frame, reason, false);
        // Past the cap or broken, the close frame cannot be delivered.
        let _ = self.push(frame.freeze(), 0, u64::MAX);
        self.finish();
    }

    /// The session stopped: write what is queued, then close the socket.
    pub fn finish(&self) {
        let mut out = self.0.borrow_mut();
        if out.closing {
            return;
        }
        out.closing = true;
        if !out.waiting {
            out.waiting = true;
            actix_rt::spawn(write_out(self.clone()));
        }
    }

    /// Queues a frame; it is written once the current turn of the session
    /// is over, together with whatever else the turn queued (one system
    /// call for a table's whole broadcast, not one per frame).
    fn push(&self, frame: Bytes, accounted: usize, cap: u64) -> Result<(), WriteError> {
        let mut out = self.0.borrow_mut();
        if out.broken {
            return Err(WriteError::Broken);
        }
        if out.closing {
            // Nothing follows a close frame.
            return Ok(());
        }
        out.queued_bytes = out.queued_bytes.saturating_add(frame.len());
        out.queue.push_back((frame, accounted));
        if out.queued_bytes as u64 > cap {
            return Err(WriteError::TooSlow);
        }
        if !out.waiting {
            out.waiting = true;
            actix_rt::spawn(write_out(self.clone()));
        }
        Ok(())
    }
}

/// At most this many queued frames go to the kernel in one call.
const WRITE_BATCH: usize = 64;

impl Outgoing {
    /// Writes as much of the queue as the kernel takes now.
    fn flush(&mut self) -> Result<(), WriteError> {
        while !self.queue.is_empty() {
            let wrote = {
                let mut slices = [io::IoSlice::new(&[]); WRITE_BATCH];
                let mut n = 0;
                for ((frame, _), slice) in self.queue.iter().zip(slices.iter_mut()) {
                    *slice = io::IoSlice::new(frame);
                    n += 1;
                }
                self.io.try_write_vectored(&slices[..n])
            };
            match wrote {
                Ok(n) => self.written(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(_) => {
                    self.broken = true;
                    self.queue.clear();
                    self.queued_bytes = 0;
                    return Err(WriteError::Broken);
                }
            }
        }
        Ok(())
    }

    /// The kernel took `n` bytes from the front of the queue: whole frames
    /// leave it (and the backlog), a partly written one keeps its rest.
    fn written(&mut self, mut n: usize) {
        self.queued_bytes -= n;
        while n > 0 {
            let Some((front, accounted)) = self.queue.front_mut() else {
                return;
            };
            if n < front.len() {
                front.advance(n);
                return;
            }
            n -= front.len();
            let accounted = *accounted;
            self.queue.pop_front();
            self.backlog.delivered(accounted);
        }
    }
}

/// Writes the queue out as the socket takes it; on a closing connection,
/// then closes the socket.
async fn write_out(writer: Writer) {
    let io = writer.0.borrow().io.clone();
    let mut close_by: Option<Instant> = None;
    loop {
        {
            let mut out = writer.0.borrow_mut();
            if out.flush().is_err() {
                break;
            }
            if out.closing && close_by.is_none() {
                close_by = Some(Instant::now() + CLOSE_WRITE_TIMEOUT);
            }
            if out.queue.is_empty() {
                if !out.closing {
                    out.waiting = false;
                    return;
                }
                break;
            }
        }
        if close_by.is_some_and(|by| Instant::now() >= by) {
            break;
        }
        // Looks again now and then: the session may close meanwhile.
        if let Ok(Err(_)) = tokio::time::timeout(RECHECK, io.writable()).await {
            break;
        }
    }
    let closing = {
        let mut out = writer.0.borrow_mut();
        out.waiting = false;
        out.queue.clear();
        out.queued_bytes = 0;
        out.closing
    };
    // Broken while the session goes on: it learns on its next write.
    if closing {
        linger(&io).await;
    }
}

/// Closes the socket's sending side, then reads (and drops) whatever the
/// client still sends until it closes its side too, for a short while.
async fn linger(io: &TcpStream) {
    let _ = socket2::SockRef::from(io).shutdown(std::net::Shutdown::Write);
    let drain = async {
        loop {
            if io.readable().await.is_err() {
                return;
            }
            let mut chunk = [0u8; READ_CHUNK];
            match io.try_read(&mut chunk) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return,
            }
        }
    };
    let _ = tokio::time::timeout(CLOSE_LINGER, drain).await;
}
