//! Moving a table between instances: `POST /admin/tables/{id}/move` (any
//! instance answers: it forwards to the owner, which drains the table to
//! the target) and `POST /admin/tables/{id}/host` (take the table here, as a
//! join would).

use std::time::{Duration, Instant};

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use secrecy::ExposeSecret;
use serde_json::Value;
use tracing::info;

use super::admin::{host_error, json_object, only_fields, store_error, table_id, view_of, Admin};
use super::{ApiError, AppState};
use crate::actors::table_manager::{HostError, IsHosted, LoadOrCreate, MoveOut};
use crate::peers::PeerError;
use crate::types::{StateReason, TableId, TableState};

/// Marks a move forwarded by another instance, so it is never forwarded on.
const FORWARDED: &str = "x-pitboss-forwarded-by";

fn conflict(code: &'static str, message: &str) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, code, message)
}

/// The admin base URL of a live instance that is not draining, or 409
/// `not_live`.
async fn live_url(state: &AppState, instance: &str) -> Result<String, ApiError> {
    match state.rt.peers.live(instance).await {
        Ok(peer) => Ok(peer.http_base().to_string()),
        Err(PeerError::Store(e)) => Err(store_error(e)),
        Err(e) => Err(conflict("not_live", &e.to_string())),
    }
}

/// Sends `POST {base}{path}` with the admin token and hands back the
/// peer's answer as it is.
async fn call_peer(
    state: &AppState,
    base: &str,
    path: &str,
    body: Option<&Value>,
    timeout: Duration,
) -> Result<HttpResponse, ApiError> {
    let rt = &state.rt;
    let mut req = state
        .peers
        .post(format!("{base}{path}"))
        .timeout(timeout)
        .header(FORWARDED, rt.instance_id());
    if let Some(token) = &rt.settings.admin.token {
        req = req.bearer_auth(token.expose_secret());
    }
    if let Some(body) = body {
        req = req.json(body);
    }
    let resp = req.send().await.map_err(|e| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            &format!("could not reach {base}: {e}"),
        )
    })?;
    let status =
        StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let bytes = resp.bytes().await.map_err(|e| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            &format!("no answer from {base}: {e}"),
        )
    })?;
    Ok(HttpResponse::build(status)
        .content_type("application/json")
        .body(bytes))
}

/// Hosts the table here (as a join would) and answers its view.
///
/// The clients of a table being moved here follow it the moment its owner
/// tells them, a moment before the owner has recorded the release, and the
/// request to host it joins whatever attempt of theirs is in flight: one
/// begun before the release stood is refused as owned elsewhere. While
/// Postgres shows the table released to this instance, it is asked again.
async fn host_here(state: &AppState, id: &TableId) -> Result<HttpResponse, ApiError> {
    let until = Instant::now() + Duration::from_secs(2);
    loop {
        let hosted = state
            .manager
            .send(LoadOrCreate { table: id.clone() })
            .await
            .map_err(ApiError::internal)?;
        match hosted {
            Ok(_) => break,
            Err(HostError::OwnedElsewhere { .. })
                if Instant::now() < until && released_here(state, id).await =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => return Err(host_error(e)),
        }
    }
    Ok(HttpResponse::Ok().json(view_of(state, id).await?))
}

/// Whether Postgres shows `id` released to this instance for a move.
async fn released_here(state: &AppState, id: &TableId) -> bool {
    let rt = &state.rt;
    matches!(
        rt.store.table(id).await,
        Ok(Some(row)) if row.state == TableState::Released
            && row.state_reason == Some(StateReason::Moved)
            && row.owner_instance.as_deref() == Some(rt.instance_id())
    )
}

/// `POST /admin/tables/{id}/host`: this instance takes the table (refused
/// with 409 `owned_elsewhere` while a live owner holds it).
pub async fn host_table(
    _: Admin,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = table_id(&path)?;
    if state.rt.is_draining() {
        return Err(ApiError::draining());
    }
    host_here(&state, &id).await
}

/// The body of `POST /admin/tables/{id}/move`: `{"to":"<instance id>"}`;
/// the instance it names.
pub fn move_body(body: &[u8]) -> Result<String, ApiError> {
    let obj = json_object(body)?;
    only_fields(&obj, &["to"])?;
    match obj.get("to") {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err(ApiError::bad_request(
            "bad_field",
            "to must name an instance id",
        )),
    }
}

/// `POST /admin/tables/{id}/move {"to": "<instance id>"}`: 200 with the view
/// once `to` hosts the table. The owner finishes the hand in progress
/// (within the drain timeout, else voids it), records the table released
/// to `to` (no other instance's scan takes it meanwhile), releases the
/// lease, and asks `to` to host it; clients follow it there.
pub async fn move_table(
    _: Admin,
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = table_id(&path)?;
    let to = move_body(&body)?;
    let rt = &state.rt;
    let row = rt
        .store
        .table(&id)
        .await
        .map_err(store_error)?
        .filter(|r| r.environment == rt.environment())
        .ok_or_else(ApiError::table_not_found)?;
    if !matches!(row.state, TableState::Open | TableState::Released) {
        return Err(conflict(
            "not_movable",
            &format!(
                "the table is {}: only an open or released table moves",
                row.state
            ),
        ));
    }
    let target = live_url(&state, &to).await?;
    let me = rt.instance_id();
    let owner = row.owner_instance.as_deref();
    if row.state == TableState::Open && owner == Some(to.as_str()) {
        // Already there.
        return Ok(HttpResponse::Ok().json(view_of(&state, &id).await?));
    }
    let hosted_here = state
        .manager
        .send(IsHosted { table: id.clone() })
        .await
        .map_err(ApiError::internal)?;
    let settings = &rt.settings;
    let drain = Duration::from_millis(settings.shutdown.drain_timeout_ms);
    let statement = Duration::from_millis(settings.database.statement_timeout_ms);
    let budget = drain
        .saturating_add(statement.saturating_mul(4))
        .saturating_add(Duration::from_secs(5));
    if hosted_here {
        state
            .manager
            .send(MoveOut {
                table: id.clone(),
                to: to.clone(),
            })
            .await
            .map_err(ApiError::internal)?
            .map_err(host_error)?;
        info!(event = "table_released_for_move", table_id = %id, to = %to, "table released to its new owner");
    } else if row.state == TableState::Open {
        let Some(owner) = owner.filter(|o| *o != me) else {
            return Err(conflict(
                "not_movable",
                "the table is between owners right now; try again",
            ));
        };
        if req.headers().contains_key(FORWARDED) {
            // The forwarding instance thought this one owned it.
            return Err(conflict(
                "owned_elsewhere",
                &format!("the table is owned by {owner}"),
            ));
        }
        let owner_url = live_url(&state, owner).await.map_err(|_| {
            conflict(
                "owned_elsewhere",
                &format!("the owner {owner} cannot be reached; try again once the table is hosted"),
            )
        })?;
        let path = format!("/admin/tables/{}/move", id.as_str());
        let body = serde_json::json!({ "to": to });
        return call_peer(&state, &owner_url, &path, Some(&body), budget).await;
    }
    // Released (just now, or before): the target takes it.
    if to == me {
        return host_here(&state, &id).await;
    }
    let path = format!("/admin/tables/{}/host", id.as_str());
    call_peer(&state, &target, &path, None, budget).await
}
