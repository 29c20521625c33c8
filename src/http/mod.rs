//! HTTP: health, readiness, metrics, the pages and the admin API. The
//! WebSocket endpoint lives in `crate::ws`, which builds on this module.

pub mod admin;
#[doc(hidden)]
pub mod checks;
pub mod moves;
pub mod pages;

#[cfg(test)]
mod proptests;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use actix::Addr;
use actix_web::dev::ServiceResponse;
use actix_web::http::StatusCode;
use actix_web::middleware::{ErrorHandlerResponse, ErrorHandlers};
use actix_web::{web, HttpResponse, ResponseError};
use serde_json::json;

use crate::actors::table_manager::TableManager;
use crate::instruments;
use crate::runtime::Runtime;
use crate::types::TableState;

/// The largest request body a route reads. It is actix-web's default,
/// named here so that the refusal can say what the limit is.
pub const MAX_BODY_BYTES: usize = 256 * 1024;

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
            code: e.code.as_str(),
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
    pub fn too_large() -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            &format!("the request body is over the limit of {MAX_BODY_BYTES} bytes"),
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

/// A query string that does not fit a route's parameters gets the JSON
/// error body, like every other refusal, instead of actix-web's plain text.
/// The WebSocket endpoints read their query strings themselves: there a
/// query that does not parse is a credential that does not verify (401).
pub fn query_config() -> web::QueryConfig {
    web::QueryConfig::default().error_handler(|e, _| {
        let actix_web::error::QueryPayloadError::Deserialize(cause) = e else {
            return ApiError::bad_request("bad_field", "the query string does not parse").into();
        };
        ApiError::bad_request(
            "bad_field",
            &format!("the query string does not parse: {cause}"),
        )
        .into()
    })
}

pub fn payload_config() -> web::PayloadConfig {
    web::PayloadConfig::new(MAX_BODY_BYTES)
}

/// actix-web refuses a body over [`MAX_BODY_BYTES`] itself, before any
/// handler runs, and `PayloadConfig` takes no error handler: this middleware
/// gives that refusal the JSON error body (413 `too_large`).
pub fn oversized_body_errors<B: 'static>() -> ErrorHandlers<B> {
    ErrorHandlers::new().handler(StatusCode::PAYLOAD_TOO_LARGE, body_too_large)
}

fn body_too_large<B>(res: ServiceResponse<B>) -> actix_web::Result<ErrorHandlerResponse<B>> {
    let ours = res
        .response()
        .error()
        .is_some_and(|e| e.as_error::<ApiError>().is_some());
    if ours {
        return Ok(ErrorHandlerResponse::Response(res.map_into_left_body()));
    }
    let (req, _) = res.into_parts();
    let res = ServiceResponse::new(req, ApiError::too_large().error_response());
    Ok(ErrorHandlerResponse::Response(res.map_into_right_body()))
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

#[cfg(test)]
mod tests {
    use actix_web::{test, App};
    use serde::Deserialize;
    use serde_json::Value;

    use super::*;

    #[derive(Deserialize)]
    struct Page {
        n: u32,
    }

    async fn echo(page: web::Query<Page>, body: web::Bytes) -> HttpResponse {
        HttpResponse::Ok().body(format!("{} {}", page.n, body.len()))
    }

    #[actix_web::test]
    async fn queries_and_bodies_actix_refuses_itself_get_the_json_error_body() {
        let app = test::init_service(
            App::new()
                .app_data(query_config())
                .app_data(payload_config())
                .wrap(oversized_body_errors())
                .route("/", web::post().to(echo)),
        )
        .await;
        let call = |uri: &str, body: Vec<u8>| test::TestRequest::post().uri(uri).set_payload(body);

        for uri in ["/?n=soon", "/?n=-1", "/", "/?n=1&n=2"] {
            let res = test::call_service(&app, call(uri, Vec::new()).to_request()).await;
            assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{uri}");
            let body: Value = test::read_body_json(res).await;
            assert_eq!(body["error"]["code"], "bad_field", "{uri}: {body}");
        }

        let res = test::call_service(
            &app,
            call("/?n=1", vec![b'x'; MAX_BODY_BYTES + 1]).to_request(),
        )
        .await;
        assert_eq!(res.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let body: Value = test::read_body_json(res).await;
        assert_eq!(body["error"]["code"], "too_large", "{body}");

        let res =
            test::call_service(&app, call("/?n=1", vec![b'x'; MAX_BODY_BYTES]).to_request()).await;
        assert_eq!(res.status(), StatusCode::OK);
    }
}
