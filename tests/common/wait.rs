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
    let deadline = Instant::now() + timeout;
    loop {
        if f().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(every).await;
    }
}
