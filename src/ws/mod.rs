//! The WebSocket endpoints: `GET /ws?token=<player token>` for clients, and
//! `GET /ws/relay` for other instances relaying a player's frames to the
//! tables this process hosts.

pub mod backlog;
pub mod relay;
pub mod session;
mod socket;
pub mod upgrade;

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;

use crate::chips::PlayerId;
use crate::http::{ApiError, AppState};

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/ws", web::get().to(connect));
    cfg.route("/ws/relay", web::get().to(relay_connect));
}

#[derive(Deserialize)]
struct WsQuery {
    token: Option<String>,
}

pub async fn connect(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    // Read here rather than by the `Query` extractor: a query string that
    // does not parse (the token given twice) holds no token that verifies,
    // so it gets a 401 like a missing one, not the 400 of other routes.
    let token = web::Query::<WsQuery>::from_query(req.query_string())
        .map_err(|_| ApiError::unauthorized("give the player token once: /ws?token=..."))?
        .into_inner()
        .token
        .ok_or_else(|| ApiError::unauthorized("a player token is required: /ws?token=..."))?;
    let player = state
        .rt
        .signer
        .verify(&token, crate::auth::now_unix())
        .map_err(|e| ApiError::unauthorized(&e.to_string()))?;
    if state.rt.is_draining() {
        return Err(ApiError::draining());
    }
    let who = session::Admitted {
        player: PlayerId(player),
        rt: state.rt.clone(),
        manager: state.manager.clone(),
        relayed: false,
    };
    upgrade::accept(&req, move |io, leftover| who.start(io, leftover))
}

/// A relay credential (see [`crate::auth::RelayClaim`]): the relaying
/// instance, the player, the signing time (unix millis) and the signature.
#[derive(Deserialize)]
struct RelayQuery {
    player: Option<String>,
    from: Option<String>,
    at: Option<i64>,
    sig: Option<String>,
}

/// The credential's player, sender, time and signature, or why there is
/// none. Parameters that do not parse (an `at` that is not a whole number
/// of 64 bits, a parameter given twice) make a credential that cannot
/// verify, so they are refused like a missing one rather than as a bad
/// request.
fn relay_credential(query: &str) -> Result<(String, String, i64, String), &'static str> {
    let q = web::Query::<RelayQuery>::from_query(query)
        .map_err(|_| {
            "a relay credential takes each parameter once, and `at` in whole unix milliseconds"
        })?
        .into_inner();
    match (q.player, q.from, q.at, q.sig) {
        (Some(player), Some(from), Some(at_ms), Some(sig)) => Ok((player, from, at_ms, sig)),
        _ => Err("a relay credential is required: /ws/relay?player=..&from=..&at=..&sig=.."),
    }
}

/// Another instance relays one player's frames here. Refused (401) unless
/// the credential is signed with this environment's secret, addressed to
/// this instance and recent.
pub async fn relay_connect(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (player, from, at_ms, sig) = relay_credential(req.query_string()).map_err(|why| {
        metrics::counter!(crate::instruments::RELAYS_REFUSED).increment(1);
        ApiError::unauthorized(why)
    })?;
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
    let who = session::Admitted {
        player: PlayerId(player),
        rt: rt.clone(),
        manager: state.manager.clone(),
        relayed: true,
    };
    upgrade::accept(&req, move |io, leftover| who.start(io, leftover))
}
