//! The WebSocket endpoints: `GET /ws?token=<player token>` for clients, and
//! `GET /ws/relay` for other instances relaying a player's frames to the
//! tables this process hosts.

pub mod relay;
pub mod session;

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;

use crate::game::PlayerId;
use crate::http::{ApiError, AppState};

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/ws", web::get().to(connect));
    cfg.route("/ws/relay", web::get().to(relay_connect));
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

/// A relay credential (see [`crate::auth::RelayClaim`]): the relaying
/// instance, the player, the signing time (unix millis) and the signature.
#[derive(Deserialize)]
pub struct RelayQuery {
    player: Option<String>,
    from: Option<String>,
    at: Option<i64>,
    sig: Option<String>,
}

/// Another instance relays one player's frames here. Refused (401) unless
/// the credential is signed with this environment's secret, addressed to
/// this instance and recent.
pub async fn relay_connect(
    req: HttpRequest,
    stream: web::Payload,
    query: web::Query<RelayQuery>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let q = query.into_inner();
    let (Some(player), Some(from), Some(at_ms), Some(sig)) = (q.player, q.from, q.at, q.sig) else {
        metrics::counter!(crate::instruments::RELAYS_REFUSED).increment(1);
        return Err(ApiError::unauthorized(
            "a relay credential is required: /ws/relay?player=..&from=..&at=..&sig=..",
        ));
    };
    let rt = &state.rt;
    let claim = crate::auth::RelayClaim {
        from,
        to: rt.instance_id().to_string(),
        player,
        at_ms,
    };
    let player = rt
        .signer
        .verify_relay(&claim, &sig, rt.instance_id(), crate::auth::now_unix_ms())
        .map_err(|e| {
            metrics::counter!(crate::instruments::RELAYS_REFUSED).increment(1);
            tracing::warn!(from = %claim.from, player = %claim.player, error = %e, "relay connection refused");
            ApiError::unauthorized(&e.to_string())
        })?;
    if rt.is_draining() {
        return Err(ApiError::draining());
    }
    let session =
        session::WsSession::new(PlayerId(player), rt.clone(), state.manager.clone()).relayed();
    actix_web_actors::ws::WsResponseBuilder::new(session, &req, stream)
        .frame_size(rt.settings.ws.max_frame_bytes)
        .start()
        .map_err(|e| ApiError::bad_request("bad_field", &e.to_string()))
}
