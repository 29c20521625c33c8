//! Polling with a deadline, the one way the harness and the tests wait.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often the harness looks again at a child process or its output.
pub(super) const POLL: Duration = Duration::from_millis(20);

/// Polls `f` every `every` until it returns true (→ true) or `timeout` passes
/// (→ false). `f` always runs at least once.
pub async fn eventually<F, Fut>(timeout: Duration, every: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let found = poll_for(timeout, every, || {
        let ready = f();
        async move { ready.await.then_some(()) }
    })
    .await;
    found.is_some()
}

/// Calls `check` every `every` until it gives a value (→ that value) or
/// `timeout` passes (→ `None`). `check` always runs at least once.
pub(super) async fn poll_until<T>(
    timeout: Duration,
    every: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> Option<T> {
    poll_for(timeout, every, || std::future::ready(check())).await
}

async fn poll_for<T, F, Fut>(timeout: Duration, every: Duration, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(found) = f().await {
            return Some(found);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(every).await;
    }
}

/// Polls `f` every 25 ms until it gives a value (→ that value) or `timeout`
/// passes (→ `None`).
pub async fn eventually_value<T, F, Fut>(timeout: Duration, f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    poll_for(timeout, Duration::from_millis(25), f).await
}
