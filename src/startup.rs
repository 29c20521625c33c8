//! Builds pools, actors and the HTTP server; hands back the bound address so
//! tests (and operators, through the `addr` log field) can use port 0.

use std::net::{SocketAddr, TcpListener, ToSocketAddrs as _};
use std::str::FromStr as _;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use actix_web::dev::Server;
use actix_web::{web, App};
use anyhow::Context as _;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use secrecy::ExposeSecret;
use socket2::{Domain, Protocol, Socket, Type};
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection as _, PgConnection};
use tokio::time::Instant;
use tracing::{info, warn};

use crate::actors::heartbeat::{now_ms, Heartbeat};
use crate::actors::table::Games;
use crate::actors::table_manager::TableManager;
use crate::auth::TokenSigner;
use crate::config::Settings;
use crate::http::{routes, AppState};
use crate::lease::{Claim, ClaimError, LeaseClient, LeaseClock, LeaseError, Registration, Target};
use crate::runtime::Runtime;
use crate::store::{Budgets, Store};

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

/// How often an unreachable backend is tried again at start.
const RETRY_EVERY: Duration = Duration::from_secs(1);
/// One attempt to reach Postgres gives up after this long (a host that
/// drops packets never refuses).
const POSTGRES_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// The last attempt, at the deadline, still gets this long.
const LAST_ATTEMPT: Duration = Duration::from_millis(200);

/// Why one attempt to reach a backend failed: worth another try (it may
/// still be starting, or be restarting), or not (bad credentials, a missing
/// database: waiting changes nothing).
enum Attempt {
    Retry(String),
    Fatal(String),
}

/// Tries `connect` until it succeeds, fails for good, or `budget` runs out,
/// logging each failure with the time left; one attempt lasts at most
/// `attempt_limit`. `what` names the target (host, port, database) and never
/// holds a password.
async fn connect_with_retry<T, F, Fut>(
    what: &str,
    setting: &str,
    budget: Duration,
    attempt_limit: Duration,
    mut connect: F,
) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Attempt>>,
{
    info!("connecting to {what}");
    let deadline = Instant::now() + budget;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let attempt = attempt_limit.min(left.max(LAST_ATTEMPT));
        let why = match tokio::time::timeout(attempt, connect()).await {
            Ok(Ok(connected)) => return Ok(connected),
            Ok(Err(Attempt::Fatal(why))) => anyhow::bail!("{what}: {why}"),
            Ok(Err(Attempt::Retry(why))) => why,
            Err(_) => format!("no answer within {} ms", attempt.as_millis()),
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            anyhow::bail!(
                "{what} unreachable ({why}); gave up after {} s ({setting})",
                budget.as_secs_f64()
            );
        }
        warn!(
            event = "backend_unreachable",
            "{what} unreachable ({why}); retrying, giving up in {} s",
            left.as_secs_f64().ceil()
        );
        tokio::time::sleep(RETRY_EVERY.min(left)).await;
    }
}

fn io_reason(e: &std::io::Error) -> String {
    use std::io::ErrorKind;
    match e.kind() {
        ErrorKind::ConnectionRefused => "connection refused".into(),
        ErrorKind::ConnectionReset => "connection reset".into(),
        ErrorKind::TimedOut => "connection timed out".into(),
        ErrorKind::HostUnreachable => "host unreachable".into(),
        ErrorKind::NetworkUnreachable => "network unreachable".into(),
        ErrorKind::AddrNotAvailable => "address not available".into(),
        _ => e.to_string(),
    }
}

fn postgres_attempt(e: sqlx::Error) -> Attempt {
    match &e {
        sqlx::Error::Io(io) => Attempt::Retry(io_reason(io)),
        // 57P03: starting up or shutting down; 53300: too many connections.
        sqlx::Error::Database(db) if matches!(db.code().as_deref(), Some("57P03" | "53300")) => {
            Attempt::Retry(db.message().to_string())
        }
        sqlx::Error::Database(db) => Attempt::Fatal(db.message().to_string()),
        _ => Attempt::Fatal(e.to_string()),
    }
}

/// Waits until Postgres accepts a connection (Postgres may still be starting
/// when pitboss does: compose, CI), within `database.connect_timeout_ms`.
async fn wait_for_postgres(url: &str, name: &str, budget: Duration) -> anyhow::Result<()> {
    let options = PgConnectOptions::from_str(url)
        .map_err(|e| anyhow::anyhow!("database.url is not a Postgres URL: {e}"))?
        .application_name(name);
    let what = format!(
        "Postgres {}:{}/{}",
        options.get_host(),
        options.get_port(),
        options
            .get_database()
            .unwrap_or_else(|| options.get_username())
    );
    connect_with_retry(
        &what,
        "database.connect_timeout_ms",
        budget,
        POSTGRES_ATTEMPT_TIMEOUT,
        || {
            let options = options.clone();
            async move {
                let conn = PgConnection::connect_with(&options)
                    .await
                    .map_err(postgres_attempt)?;
                // Only the answer matters; the pool opens its own connections.
                let _ = conn.close().await;
                Ok(())
            }
        },
    )
    .await
}

fn redis_attempt(e: LeaseError) -> Attempt {
    match e {
        LeaseError::Timeout(d) => Attempt::Retry(format!("no answer within {} ms", d.as_millis())),
        LeaseError::Redis(e) if e.is_connection_refusal() => {
            Attempt::Retry("connection refused".into())
        }
        LeaseError::Redis(e) if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() => {
            Attempt::Retry(e.to_string())
        }
        LeaseError::Redis(e) if e.kind() == redis::ErrorKind::BusyLoadingError => {
            Attempt::Retry(e.to_string())
        }
        LeaseError::Redis(e) => Attempt::Fatal(e.to_string()),
        other => Attempt::Fatal(other.to_string()),
    }
}

/// Waits until Redis answers, within `redis.connect_timeout_ms`; each
/// connection attempt is bounded by `redis.op_timeout_ms`.
async fn connect_redis(settings: &Settings) -> anyhow::Result<LeaseClient> {
    let redis = &settings.redis;
    let ca = match &redis.tls_ca_file {
        Some(path) => Some(
            std::fs::read(path)
                .with_context(|| format!("redis.tls_ca_file: could not read {}", path.display()))?,
        ),
        None => None,
    };
    let (target, what) = if let Some(nodes) = redis.cluster_nodes() {
        let what = format!("Redis Cluster {}", addresses(&nodes));
        (Target::Cluster { nodes, ca }, what)
    } else if let Some(sentinels) = redis.sentinel_nodes() {
        let master = redis.sentinel_master.clone().unwrap_or_default();
        let what = format!(
            "Redis master {master:?} through Sentinels {}",
            addresses(&sentinels)
        );
        (Target::Sentinel { sentinels, master }, what)
    } else {
        let client = crate::lease::client(redis.url.expose_secret(), ca)
            .map_err(|e| anyhow::anyhow!("redis.url is not a Redis URL: {e}"))?;
        let what = format!("Redis {}", client.get_connection_info().addr);
        (Target::Single(client), what)
    };
    let op_timeout = Duration::from_millis(redis.op_timeout_ms);
    connect_with_retry(
        &what,
        "redis.connect_timeout_ms",
        Duration::from_millis(redis.connect_timeout_ms),
        // A connection and its first command, each within the op timeout.
        op_timeout.saturating_mul(3),
        || {
            let target = target.clone();
            async move {
                LeaseClient::open(
                    &target,
                    &settings.instance.environment,
                    settings.instance_id(),
                    settings.lease_ttl(),
                    op_timeout,
                )
                .await
                .map_err(redis_attempt)
            }
        },
    )
    .await
}

/// `host:port` of each URL, without what a URL may carry besides (a
/// password), for log lines.
fn addresses(urls: &[String]) -> String {
    urls.iter()
        .map(|u| {
            redis::IntoConnectionInfo::into_connection_info(u.as_str())
                .map_or_else(|_| "?".to_string(), |i| i.addr.to_string())
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Takes the port first: a port in use is the most common start failure,
/// and nothing is running yet that would need stopping. Like actix-web's own
/// `bind`, every address the host resolves to is bound (`localhost`: IPv4
/// and IPv6), with address reuse and a backlog of 1024.
fn bind(host: &str, port: u16) -> anyhow::Result<Vec<TcpListener>> {
    let refused = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            anyhow::anyhow!(
                "could not listen on {host}:{port}: the port is in use (choose another with --port N or PITBOSS__HTTP__PORT)"
            )
        } else {
            anyhow::anyhow!("could not listen on {host}:{port}: {}", io_reason(&e))
        }
    };
    let addrs = (host, port).to_socket_addrs().map_err(refused)?;
    let mut listeners = Vec::new();
    let mut last_error = None;
    for addr in addrs {
        match bind_one(addr) {
            Ok(listener) => listeners.push(listener),
            Err(e) => last_error = Some(e),
        }
    }
    match (listeners.is_empty(), last_error) {
        (false, _) => Ok(listeners),
        (true, Some(e)) => Err(refused(e)),
        (true, None) => Err(anyhow::anyhow!(
            "could not listen on {host}:{port}: the host resolves to no address"
        )),
    }
}

fn bind_one(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}

/// Refuses to start (I12) when Postgres shows another incarnation of this
/// instance id beating within the last TTL and still beating one refresh
/// period later: a live process holds the id even though Redis forgot it.
async fn check_recorded_liveness(
    store: &Store,
    settings: &Settings,
    me: &Registration,
) -> anyhow::Result<()> {
    let (env, id, ttl) = (
        settings.instance.environment.as_str(),
        settings.instance_id(),
        settings.lease_ttl(),
    );
    let recorded = store
        .instance_seen(env, id)
        .await
        .context("could not read the instances' liveness from Postgres")?;
    let Some(seen) = recorded.filter(|r| r.live && r.incarnation != me.incarnation()) else {
        return Ok(());
    };
    info!(
        instance = id,
        incarnation = %seen.incarnation,
        "Postgres saw another process with this id lately; watching it for one refresh period"
    );
    tokio::time::sleep(ttl / 3 + Duration::from_secs(1)).await;
    let again = store
        .instance_seen(env, id)
        .await
        .context("could not read the instances' liveness from Postgres")?;
    match again {
        Some(now) if now.incarnation == seen.incarnation && now.last_seen > seen.last_seen => {
            Err(ClaimError::InUse {
                owner: id.to_string(),
                incarnation: now.incarnation,
                advertise_url: now.advertise_url,
            }
            .into())
        }
        _ => Ok(()),
    }
}

impl Application {
    /// Everything that can fail (the port, Postgres, Redis) is acquired
    /// before any actor or arbiter starts, so a failed start has nothing to
    /// stop.
    pub async fn build(settings: Settings, games: Games) -> anyhow::Result<Application> {
        let metrics = install_metrics().context("metrics recorder")?;
        let listeners = bind(&settings.http.host, settings.http.port)?;
        let addr = listeners
            .first()
            .map(TcpListener::local_addr)
            .transpose()
            .context("the bound address")?
            .context("the server bound no address")?;

        wait_for_postgres(
            settings.database.url.expose_secret(),
            settings.instance_id(),
            Duration::from_millis(settings.database.connect_timeout_ms),
        )
        .await?;
        let store = Store::connect_lazy(
            settings.database.url.expose_secret(),
            settings.instance_id(),
            settings.database.max_connections,
            Duration::from_millis(settings.database.acquire_timeout_ms),
            Budgets {
                statement: Duration::from_millis(settings.database.statement_timeout_ms),
                lock: Duration::from_millis(settings.database.lock_timeout_ms),
                idle_in_transaction: Duration::from_millis(
                    settings.database.idle_in_transaction_timeout_ms,
                ),
            },
        )
        .context("database url")?
        .with_owner_timeout(settings.lease_ttl())
        .with_journal(settings.journal.group_commit());
        // Known before any table is taken: every stamp carries it.
        let registration = Registration::new(
            settings
                .instance
                .advertise_url
                .clone()
                .unwrap_or_else(|| format!("http://{addr}")),
        );
        let store = store.with_incarnation(registration.incarnation());
        store
            .migrate()
            .await
            .context("could not migrate the database")?;

        let lease = connect_redis(&settings).await?;
        // I12: one live process per instance id, checked before any table
        // could be taken.
        info!(
            instance = settings.instance_id(),
            incarnation = registration.incarnation(),
            "registering the instance id"
        );
        let claim = lease.claim_instance(&registration).await?;
        if claim == Claim::Free {
            // Redis vouched for nobody; it may have lost the registration
            // along with the leases. Postgres' record of liveness decides.
            if let Err(e) = check_recorded_liveness(&store, &settings, &registration).await {
                let _ = lease.deregister_instance(&registration).await;
                return Err(e);
            }
        }
        // Liveness on record in Postgres too, before any table is taken:
        // the takeover rule reads it (I1).
        let beat_sent = std::time::Instant::now();
        store
            .beat(
                &settings.instance.environment,
                settings.instance_id(),
                registration.incarnation(),
                registration.advertise_url(),
                false,
            )
            .await
            .context("could not record this instance's liveness in Postgres")?;
        let liveness = LeaseClock::new(beat_sent, settings.lease_ttl());

        let secret = settings
            .auth
            .secret
            .clone()
            .context("auth.secret is not set (PITBOSS__AUTH__SECRET)")?;
        let signer = TokenSigner::new(secret);
        if settings.admin.token.is_none() {
            warn!("admin.token is not set: /admin is closed");
        }

        let arbiters = (0..settings.table.arbiters)
            .map(|_| Arbiter::new().handle())
            .collect();
        let rt = Arc::new(
            Runtime::new(
                settings,
                store,
                lease,
                signer,
                metrics,
                registration,
                liveness,
            )
            .with_games(games),
        );
        let manager = TableManager::new(rt.clone(), arbiters).start();
        let last_renew_ok_ms = Arc::new(AtomicU64::new(now_ms()));
        Heartbeat::new(rt.clone(), manager.clone(), last_renew_ok_ms.clone()).start();

        let state = web::Data::new(AppState {
            rt: rt.clone(),
            manager: manager.clone(),
            last_renew_ok_ms,
            peers: reqwest::Client::new(),
        });
        let server =
            serve_http(listeners, state).with_context(|| format!("could not listen on {addr}"))?;
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

/// The HTTP server: actix-web's app on actix-http, with WebSocket upgrades
/// taken off actix-http's dispatcher (`crate::ws::upgrade`), so an open
/// connection keeps no HTTP buffers. Otherwise configured as actix-web's
/// `HttpServer` would be: one worker per core, 5 s to read a request and
/// keep-alive, idle keep-alive connections closed when a graceful stop
/// begins, and 2 s for requests still in flight at the stop.
fn serve_http(listeners: Vec<TcpListener>, state: web::Data<AppState>) -> std::io::Result<Server> {
    let app = move || {
        let app = App::new()
            .app_data(state.clone())
            .app_data(crate::http::query_config())
            .app_data(crate::http::payload_config())
            .wrap(crate::http::oversized_body_errors())
            .configure(routes)
            .configure(crate::ws::routes);
        actix_service::map_config(app, |()| actix_web::dev::AppConfig::default())
    };
    let mut server = actix_server::Server::build()
        .disable_signals()
        .shutdown_timeout(2);
    for listener in listeners {
        let addr = listener.local_addr()?;
        let stopping = server.graceful_shutdown_signal();
        let app = app.clone();
        server = server.listen(format!("pitboss-http-{addr}"), listener, move || {
            let stopping = stopping.clone();
            actix_http::HttpService::build()
                .client_request_timeout(Duration::from_secs(5))
                .client_disconnect_timeout(Duration::from_secs(1))
                .h1_allow_half_closed(true)
                // Game frames are small and latency-bound: no Nagle delay.
                .tcp_nodelay(true)
                .local_addr(addr)
                .graceful_shutdown_signal(move || {
                    let stopping = stopping.clone();
                    async move { stopping.notified().await }
                })
                .upgrade(crate::ws::upgrade::service(app.clone()))
                .finish(app())
                .tcp()
        })?;
    }
    Ok(server.run())
}
