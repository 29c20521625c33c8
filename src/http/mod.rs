//! HTTP: health, readiness, metrics, the pages and the admin API. The
//! WebSocket endpoint lives in `crate::ws`, which builds on this module.

pub mod admin;
mod moves;
pub mod pages;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use actix::Addr;
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse, ResponseError};
use serde_json::json;

use crate::actors::table_manager::TableManager;
use crate::instruments;
use crate::runtime::Runtime;
use crate::types::TableState;

pub struct AppState {
    pub rt: Arc<Runtime>,
    pub manager: Addr<TableManager>,
    pub last_renew_ok_ms: Arc<AtomicU64>,
    /// Calls to other instances' admin API (moves).
    pub peers: reqwest::Client,
}

/// Every HTTP error: a status and `{"error":{"code","message"}}`.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub owner: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: &str) -> ApiError {
        ApiError {
            status,
            code,
            message: message.to_string(),
            owner: None,
        }
    }
    /// The HTTP face of what a WebSocket client would be told.
    pub fn from_client(status: StatusCode, e: crate::protocol::ClientError) -> ApiError {
        ApiError {
            status,
            code: e.code,
            message: e.message,
            owner: e.owner,
        }
    }
    pub fn unauthorized(message: &str) -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }
    pub fn bad_request(code: &'static str, message: &str) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }
    pub fn table_not_found() -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "table_not_found", "no such table")
    }
    pub fn draining() -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "draining",
            "the server is shutting down",
        )
    }
    pub fn internal(e: impl std::fmt::Display) -> ApiError {
        tracing::error!(error = %e, "request failed");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error",
        )
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(owner) = &self.owner {
            error["owner"] = json!(owner);
        }
        HttpResponse::build(self.status).json(json!({ "error": error }))
    }
}

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/", web::get().to(pages::table_page))
        .route("/healthz", web::get().to(healthz))
        .route("/readyz", web::get().to(readyz))
        .route("/metrics", web::get().to(metrics))
        .service(
            web::scope("/admin")
                .route("", web::get().to(pages::admin_page))
                .route("/", web::get().to(pages::admin_page))
                .configure(admin::routes),
        );
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

async fn readyz(state: web::Data<AppState>) -> HttpResponse {
    let rt = &state.rt;
    let (redis, postgres) = tokio::join!(rt.lease.ping(), rt.store.ping());
    let body = json!({
        "draining": rt.is_draining(),
        "redis": redis.is_ok(),
        "postgres": postgres.is_ok(),
        "instance": rt.instance_id(),
    });
    if !rt.is_draining() && redis.is_ok() && postgres.is_ok() {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}

async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    let last = state.last_renew_ok_ms.load(Ordering::Relaxed);
    let now = crate::actors::heartbeat::now_ms();
    // Every state is set, so a state that empties drops to 0 instead of
    // keeping its last value.
    if let Ok(counts) = state.rt.store.count_by_state(state.rt.environment()).await {
        for state in TableState::ALL {
            let n = counts
                .iter()
                .find(|(s, _)| s == state)
                .map_or(0, |(_, n)| *n);
            metrics::gauge!(instruments::TABLES, "state" => state.as_str()).set(n as f64);
        }
    }
    state.rt.metrics.run_upkeep();
    metrics::gauge!(instruments::SECONDS_SINCE_LAST_RENEW)
        .set(now.saturating_sub(last) as f64 / 1000.0);
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(state.rt.metrics.render())
}
