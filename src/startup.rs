//! Builds pools, actors and the HTTP server; hands back the bound address so
//! tests (and operators, through the `addr` log field) can use port 0.

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use actix_web::dev::Server;
use actix_web::{web, App, HttpServer};
use anyhow::Context as _;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use secrecy::ExposeSecret;
use tracing::{info, warn};

use crate::actors::heartbeat::{now_ms, Heartbeat};
use crate::actors::table_manager::TableManager;
use crate::auth::TokenSigner;
use crate::config::Settings;
use crate::http::{routes, AppState};
use crate::lease::LeaseClient;
use crate::runtime::Runtime;
use crate::store::Store;

pub struct Application {
    pub addr: SocketAddr,
    pub server: Server,
    pub rt: Arc<Runtime>,
    pub manager: Addr<TableManager>,
}

fn install_metrics() -> anyhow::Result<PrometheusHandle> {
    let buckets = [
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    ];
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("seconds".into()), &buckets)?
        .install_recorder()?;
    crate::instruments::register();
    Ok(handle)
}

/// Postgres may still be starting when pitboss does (compose, CI); give it a
/// few seconds before failing with a clear message.
async fn migrate_with_retry(store: &Store) -> anyhow::Result<()> {
    let mut last = None;
    for _ in 0..20 {
        match store.migrate().await {
            Ok(()) => return Ok(()),
            Err(e) => {
                last = Some(e);
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
    Err(anyhow::anyhow!(
        "could not migrate the database: {}",
        last.map(|e| e.to_string()).unwrap_or_default()
    ))
}

impl Application {
    pub async fn build(settings: Settings) -> anyhow::Result<Application> {
        let metrics = install_metrics().context("metrics recorder")?;
        let store = Store::connect_lazy(
            settings.database.url.expose_secret(),
            settings.database.max_connections,
            Duration::from_millis(settings.database.acquire_timeout_ms),
        )
        .context("database url")?;
        migrate_with_retry(&store).await?;

        let lease = LeaseClient::connect(
            settings.redis.url.expose_secret(),
            &settings.instance.environment,
            settings.instance_id(),
            settings.lease_ttl(),
            Duration::from_millis(settings.redis.op_timeout_ms),
        )
        .await
        .context("could not connect to Redis")?;

        let secret = settings
            .auth
            .secret
            .clone()
            .context("auth.secret is not set (PITBOSS__AUTH__SECRET)")?;
        let signer = TokenSigner::new(secret);
        if settings.admin.token.is_none() {
            warn!("admin.token is not set: /admin is closed");
        }

        let (host, port) = (settings.http.host.clone(), settings.http.port);
        let arbiters = (0..settings.table.arbiters)
            .map(|_| Arbiter::new().handle())
            .collect();
        let rt = Arc::new(Runtime::new(settings, store, lease, signer, metrics));
        let manager = TableManager::new(rt.clone(), arbiters).start();
        let last_renew_ok_ms = Arc::new(AtomicU64::new(now_ms()));
        Heartbeat::new(rt.clone(), manager.clone(), last_renew_ok_ms.clone()).start();

        let state = web::Data::new(AppState {
            rt: rt.clone(),
            manager: manager.clone(),
            last_renew_ok_ms,
        });
        let server = HttpServer::new(move || {
            App::new()
                .app_data(state.clone())
                .configure(routes)
                .configure(crate::ws::routes)
        })
        .disable_signals()
        // Game frames are small and latency-bound: no Nagle delay.
        .tcp_nodelay(true)
        .shutdown_timeout(2)
        .bind((host.as_str(), port))
        .with_context(|| format!("could not bind {host}:{port}"))?;
        let addr = server
            .addrs()
            .first()
            .copied()
            .context("the server bound no address")?;
        let server = server.run();
        info!(
            addr = %addr,
            instance = rt.instance_id(),
            environment = rt.environment(),
            "listening"
        );
        Ok(Application {
            addr,
            server,
            rt,
            manager,
        })
    }
}
