//! A small TCP proxy between one instance and Redis, so a fault can reach
//! that instance's Redis traffic alone: added one-way latency on every
//! chunk, in both directions, or a cut (every open connection closed, new
//! ones closed as soon as they are accepted, until the cut is lifted).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

struct Control {
    latency_ms: AtomicU64,
    cut_until: Mutex<Option<Instant>>,
    /// Bumped by every cut; each connection ends when it changes.
    cuts: watch::Sender<u64>,
}

impl Control {
    fn latency(&self) -> Duration {
        Duration::from_millis(self.latency_ms.load(Ordering::Relaxed))
    }

    fn cut_now(&self) -> bool {
        let until = *self.cut_until.lock().unwrap_or_else(|p| p.into_inner());
        until.is_some_and(|u| Instant::now() < u)
    }
}

pub struct Proxy {
    pub port: u16,
    control: Arc<Control>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `upstream_port`.
    pub async fn start(upstream_port: u16) -> anyhow::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the Redis proxy")?;
        let port = listener.local_addr()?.port();
        let (cuts, _) = watch::channel(0);
        let control = Arc::new(Control {
            latency_ms: AtomicU64::new(0),
            cut_until: Mutex::new(None),
            cuts,
        });
        let ctl = control.clone();
        let accept = tokio::spawn(async move {
            loop {
                let Ok((down, _)) = listener.accept().await else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                if ctl.cut_now() {
                    drop(down);
                    continue;
                }
                tokio::spawn(relay(down, upstream_port, ctl.clone()));
            }
        });
        Ok(Proxy {
            port,
            control,
            accept,
        })
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn set_latency(&self, latency: Duration) {
        let ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
        self.control.latency_ms.store(ms, Ordering::Relaxed);
    }

    /// Closes every open connection and refuses new ones for `how_long`.
    pub fn cut(&self, how_long: Duration) {
        *self
            .control
            .cut_until
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(Instant::now() + how_long);
        self.control.cuts.send_modify(|n| *n += 1);
    }

    /// Lifts any latency and cut.
    pub fn heal(&self) {
        self.set_latency(Duration::ZERO);
        *self
            .control
            .cut_until
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = None;
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        // Ends the connections still open.
        self.control.cuts.send_modify(|n| *n += 1);
    }
}

async fn relay(down: TcpStream, upstream_port: u16, ctl: Arc<Control>) {
    let mut cut = ctl.cuts.subscribe();
    let connect = TcpStream::connect(("127.0.0.1", upstream_port));
    let Ok(Ok(up)) = tokio::time::timeout(UPSTREAM_CONNECT_TIMEOUT, connect).await else {
        // Redis is down: the client sees its connection closed, as it
        // would see a refused one.
        return;
    };
    let _ = down.set_nodelay(true);
    let _ = up.set_nodelay(true);
    let (down_read, down_write) = down.into_split();
    let (up_read, up_write) = up.into_split();
    tokio::select! {
        _ = pump(down_read, up_write, ctl.clone()) => {}
        _ = pump(up_read, down_write, ctl.clone()) => {}
        _ = cut.changed() => {}
    }
}

/// Copies one direction, each chunk delivered `latency` after it was read
/// (the latency in force when it was read), in order.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    ctl: Arc<Control>,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let read = async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let due = Instant::now() + ctl.latency();
                    if tx.send((due, buf[..n].to_vec())).is_err() {
                        break;
                    }
                }
            }
        }
    };
    let write = async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&chunk).await.is_err() {
                break;
            }
        }
    };
    tokio::join!(read, write);
}
