//! The WebSocket endpoint: `GET /ws?token=<player token>`.

pub mod session;

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;

use crate::game::PlayerId;
use crate::http::{ApiError, AppState};

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/ws", web::get().to(connect));
}

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
    let session =
        session::WsSession::new(PlayerId(player), state.rt.clone(), state.manager.clone());
    actix_web_actors::ws::WsResponseBuilder::new(session, &req, stream)
        .frame_size(state.rt.settings.ws.max_frame_bytes)
        .start()
        .map_err(|e| ApiError::bad_request("bad_field", &e.to_string()))
}
