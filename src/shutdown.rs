//! SIGTERM/SIGINT: stop taking work, let hands finish (or void them at the
//! deadline), persist, release every lease in one round trip, exit 0. A
//! second signal releases at once.

use std::time::{Duration, Instant};

use tokio::signal::unix::{signal, SignalKind};
use tracing::warn;

use crate::actors::table_manager::{DrainAll, ForceRelease};
use crate::startup::Application;

pub async fn run_until_stopped(app: Application) -> anyhow::Result<()> {
    let handle = app.server.handle();
    let server = actix_rt::spawn(app.server);
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;

    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    let drain_timeout = Duration::from_millis(app.rt.settings.shutdown.drain_timeout_ms);
    warn!(
        event = "drain_started",
        timeout_ms = drain_timeout.as_millis() as u64,
        "draining"
    );
    app.rt.start_draining();
    let drain = app.manager.send(DrainAll {
        deadline: Instant::now() + drain_timeout,
    });
    tokio::pin!(drain);
    tokio::select! {
        _ = &mut drain => {
            warn!(event = "drain_finished", "every table persisted and every lease released");
        }
        _ = term.recv() => force(&app.manager).await,
        _ = int.recv() => force(&app.manager).await,
    }
    // The id is free for the next process at once (I12).
    if let Err(e) = app.rt.lease.deregister_instance(&app.rt.registration).await {
        warn!(error = %e, "could not remove the instance registration; it expires with its TTL");
    }
    handle.stop(true).await;
    let _ = server.await;
    Ok(())
}

async fn force(manager: &actix::Addr<crate::actors::table_manager::TableManager>) {
    warn!(
        event = "drain_forced",
        "second signal: releasing every lease now"
    );
    let released = tokio::time::timeout(Duration::from_secs(3), manager.send(ForceRelease)).await;
    if released.is_err() {
        warn!("lease release timed out; the leases expire with their TTL");
    }
}
