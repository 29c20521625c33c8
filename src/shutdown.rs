//! SIGTERM/SIGINT: stop taking work, let hands finish (or void them at the
//! deadline), persist, hand each lease back as its table stops, exit 0. A
//! second signal releases at once.

use std::time::Duration;

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
    let drain = app.manager.send(DrainAll);
    tokio::pin!(drain);
    // The hard deadline (I11): the writes in flight (a commit, a buy-in or
    // a cash-out) get the drain timeout, then the releases two statement
    // budgets; whatever is still unwritten after that is left to the next
    // owner, and every lease is released at once. No hand is waited for:
    // the next owner resumes it from the journal.
    let statement = Duration::from_millis(app.rt.settings.database.statement_timeout_ms);
    let hard = drain_timeout + statement * 2 + Duration::from_secs(1);
    tokio::select! {
        _ = &mut drain => {
            warn!(event = "drain_finished", "every table persisted and every lease released");
        }
        _ = tokio::time::sleep(hard) => {
            warn!(event = "drain_deadline", deadline_ms = hard.as_millis() as u64, "the drain passed its hard deadline");
            force(&app.manager, "hard drain deadline").await;
        }
        _ = term.recv() => force(&app.manager, "second signal").await,
        _ = int.recv() => force(&app.manager, "second signal").await,
    }
    // Nobody need wait a TTL for this process: its liveness record goes.
    let forget = app.rt.store.forget_instance(
        app.rt.environment(),
        app.rt.instance_id(),
        app.rt.registration.incarnation(),
    );
    if let Ok(Err(e)) = tokio::time::timeout(Duration::from_secs(2), forget).await {
        warn!(error = %e, "could not remove the instance's liveness record");
    }
    // The id is free for the next process at once (I12).
    if let Err(e) = app.rt.lease.deregister_instance(&app.rt.registration).await {
        warn!(error = %e, "could not remove the instance registration; it expires with its TTL");
    }
    handle.stop(true).await;
    let _ = server.await;
    Ok(())
}

async fn force(manager: &actix::Addr<crate::actors::table_manager::TableManager>, why: &str) {
    warn!(
        event = "drain_forced",
        cause = why,
        "{why}: releasing every lease now"
    );
    let released = tokio::time::timeout(Duration::from_secs(3), manager.send(ForceRelease)).await;
    if released.is_err() {
        warn!("lease release timed out; the leases expire with their TTL");
    }
}
