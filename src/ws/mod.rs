//! The WebSocket endpoint: `GET /ws?token=<player token>`.

pub mod backpressure;
pub mod protocol;
pub mod session;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;

use crate::game::PlayerId;
use crate::http::{ApiError, AppState};

#[derive(Deserialize)]
pub struct WsQuery {
    token: Option<String>,
}

pub async fn connect(
    req: HttpRequest,
    stream: web::Payload,
    query: web::Query<WsQuery>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let token = query
        .token
        .as_deref()
        .ok_or_else(|| ApiError::unauthorized("a player token is required: /ws?token=..."))?;
    let player = state
        .rt
        .signer
        .verify(token, crate::auth::now_unix())
        .map_err(|e| ApiError::unauthorized(&e.to_string()))?;
    if state.rt.is_draining() {
        return Err(ApiError::draining());
    }
    let written = Arc::new(AtomicU64::new(0));
    let session = session::WsSession::new(
        PlayerId(player),
        state.rt.clone(),
        state.manager.clone(),
        written.clone(),
    );
    let response = actix_web_actors::ws::WsResponseBuilder::new(session, &req, stream)
        .frame_size(state.rt.settings.ws.max_frame_bytes)
        .start()
        .map_err(|e| ApiError::bad_request("bad_field", &e.to_string()))?;
    Ok(response
        .map_body(|_, body| backpressure::CountingBody::new(body, written))
        .map_into_boxed_body())
}
