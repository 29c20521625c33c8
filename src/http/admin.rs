//! `/admin/*`: operators' API, behind the admin bearer token.

use std::future::{ready, Ready};

use actix_web::http::StatusCode;
use actix_web::{web, FromRequest, HttpRequest, HttpResponse};
use secrecy::ExposeSecret;
use serde_json::{json, Map, Value};

use super::{ApiError, AppState};
use crate::actors::table::Games;
use crate::actors::table_manager::{
    Dispose, FencesSeen, HostError, IsHosted, LoadOrCreate, Recover,
};
use crate::auth::{expires_at, now_unix};
use crate::chips::Chips;
use crate::games::{fields, GameKind, Refusal};
use crate::protocol::ClientError;
use crate::store::{StoreError, TableRow};
use crate::types::{valid_player_name, FreezeReason, TableId, TableState};

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/tables", web::post().to(create_table))
        .route("/tables", web::get().to(list_tables))
        .route("/tables/{id}", web::get().to(get_table))
        .route("/tables/{id}/events", web::get().to(table_events))
        .route("/tables/{id}/recover", web::post().to(recover_table))
        .route("/tables/{id}/dispose", web::post().to(dispose_table))
        .route("/tables/{id}/freeze", web::post().to(freeze_table))
        .route(
            "/tables/{id}/move",
            web::post().to(super::moves::move_table),
        )
        .route(
            "/tables/{id}/host",
            web::post().to(super::moves::host_table),
        )
        .route("/players/{player}/grant", web::post().to(grant))
        .route("/players/{player}/token", web::post().to(player_token))
        .route("/players/{player}", web::get().to(player))
        .route("/instances", web::get().to(instances))
        .route("/audit", web::get().to(audit));
}

/// Proof that the request carried the admin bearer token.
pub struct Admin;

impl FromRequest for Admin {
    type Error = ApiError;
    type Future = Ready<Result<Admin, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        let expected = req
            .app_data::<web::Data<AppState>>()
            .and_then(|s| s.rt.settings.admin.token.clone());
        let given = req
            .headers()
            .get("authorization")
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.strip_prefix("Bearer "));
        let ok = match (expected, given) {
            (Some(exp), Some(given)) => {
                constant_time_eq(exp.expose_secret().as_bytes(), given.as_bytes())
            }
            _ => false,
        };
        ready(if ok {
            Ok(Admin)
        } else {
            Err(ApiError::unauthorized(
                "a valid admin bearer token is required",
            ))
        })
    }
}

/// Compares the SHA-256 digests rather than the tokens themselves: `ct_eq`
/// then always sees two 32-byte inputs, so the timing gives away neither
/// the expected token's bytes nor its length.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use sha2::{Digest, Sha256};
    use subtle::ConstantTimeEq;
    Sha256::digest(a)
        .as_slice()
        .ct_eq(Sha256::digest(b).as_slice())
        .into()
}

pub(super) fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::TableNotFound => ApiError::table_not_found(),
        StoreError::BadAmount(m) => ApiError::bad_request("bad_amount", &m),
        // Postgres out of connections or over a budget for now: the
        // transaction never ran or was rolled back, so nothing was done and
        // the same request may well succeed in a moment. (A connection lost
        // mid-request stays a 500: its commit may have landed.)
        e if e.is_refused_for_now() => {
            tracing::warn!(error = %e, "request refused: Postgres unavailable");
            ApiError::new(
                actix_web::http::StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "the database is out of connections or time right now; nothing was done; try again",
            )
        }
        other => ApiError::internal(other),
    }
}

pub(super) fn host_error(e: HostError) -> ApiError {
    let status = match e {
        HostError::NotFound | HostError::Closed(_) => StatusCode::NOT_FOUND,
        HostError::OwnedElsewhere { .. } | HostError::Frozen(_) | HostError::NotFrozen => {
            StatusCode::CONFLICT
        }
        HostError::NotHosted => StatusCode::CONFLICT,
        HostError::Draining | HostError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    ApiError::from_client(status, e.into())
}

/// A table id from a path segment; one that could never exist is simply not
/// found.
pub fn table_id(raw: &str) -> Result<TableId, ApiError> {
    TableId::parse(raw).ok_or_else(ApiError::table_not_found)
}

async fn view(state: &AppState, row: TableRow) -> Result<Value, ApiError> {
    let seats = state.rt.store.seats(&row.id).await.map_err(store_error)?;
    let hosted_here = state
        .manager
        .send(IsHosted {
            table: row.id.clone(),
        })
        .await
        .unwrap_or(false);
    Ok(json!({
        "id": row.id,
        "environment": row.environment,
        "state": row.state,
        "state_reason": row.state_reason,
        "owner": row.owner_instance,
        "fence": row.fence,
        "hand_no": row.hand_no,
        "hosted_here": hosted_here,
        "game_kind": row.game_kind,
        "config": row.config,
        "seats": seats,
    }))
}

pub(super) async fn view_of(state: &AppState, id: &TableId) -> Result<Value, ApiError> {
    let row = state
        .rt
        .store
        .table(id)
        .await
        .map_err(store_error)?
        .ok_or_else(ApiError::table_not_found)?;
    view(state, row).await
}

/// A JSON object body; anything else is `bad_json`.
pub fn json_object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    match serde_json::from_slice(body) {
        Ok(Value::Object(obj)) => Ok(obj),
        Ok(_) => Err(ApiError::bad_request(
            "bad_json",
            "the body must be a JSON object",
        )),
        Err(e) => Err(ApiError::bad_request(
            "bad_json",
            &format!("the body is not valid JSON: {e}"),
        )),
    }
}

pub fn only_fields(obj: &Map<String, Value>, known: &[&str]) -> Result<(), ApiError> {
    fields::only_fields(obj, known).map_err(|e| bad_request(e.into()))
}

fn bad_request(e: ClientError) -> ApiError {
    ApiError::from_client(StatusCode::BAD_REQUEST, e)
}

/// The body of `POST /admin/tables`: the game (`"game"`, hold'em when
/// absent) and a config that game accepts, with every amount within what
/// Postgres stores; a field the game does not know is refused, listing
/// `game` and the game's fields.
pub fn table_spec(games: &Games, body: &[u8]) -> Result<(GameKind, Value), ApiError> {
    let refused = |e: Refusal| bad_request(e.into());
    let mut obj = json_object(body)?;
    let kind = match obj.remove("game") {
        None | Some(Value::Null) => GameKind::HOLDEM,
        Some(Value::String(name)) => {
            GameKind::parse(&name).ok_or_else(|| refused(games.not_hosted(&name)))?
        }
        Some(_) => {
            return Err(ApiError::bad_request(
                "bad_field",
                &format!("game must be a string: one of {}", games.names()),
            ))
        }
    };
    let config = games.configure(&kind, &obj).map_err(refused)?;
    Ok((kind, config))
}

/// A required chip amount: 1 to 2^63−1.
fn chips(obj: &Map<String, Value>, name: &str) -> Result<Chips, ApiError> {
    fields::required_chips(obj, name).map_err(|e| bad_request(e.into()))
}

async fn create_table(
    _: Admin,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let (kind, config) = table_spec(&state.rt.games, &body)?;
    if state.rt.is_draining() {
        return Err(ApiError::draining());
    }
    let id = TableId::generate();
    state
        .rt
        .store
        .create_table(state.rt.environment(), &id, kind, &config)
        .await
        .map_err(store_error)?;
    // The instance that creates a table hosts it.
    state
        .manager
        .send(LoadOrCreate { table: id.clone() })
        .await
        .map_err(ApiError::internal)?
        .map_err(host_error)?;
    Ok(HttpResponse::Created().json(view_of(&state, &id).await?))
}

async fn list_tables(_: Admin, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let rows = state
        .rt
        .store
        .tables(state.rt.environment())
        .await
        .map_err(store_error)?;
    let mut tables = Vec::with_capacity(rows.len());
    for row in rows {
        tables.push(view(&state, row).await?);
    }
    Ok(HttpResponse::Ok().json(json!({ "tables": tables })))
}

async fn get_table(
    _: Admin,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = table_id(&path)?;
    let row = state
        .rt
        .store
        .table(&id)
        .await
        .map_err(store_error)?
        .filter(|r| r.environment == state.rt.environment())
        .ok_or_else(ApiError::table_not_found)?;
    Ok(HttpResponse::Ok().json(view(&state, row).await?))
}

async fn table_events(
    _: Admin,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = table_id(&path)?;
    let known = state.rt.store.table(&id).await.map_err(store_error)?;
    if known.is_none_or(|r| r.environment != state.rt.environment()) {
        return Err(ApiError::table_not_found());
    }
    let events = state.rt.store.events(&id).await.map_err(store_error)?;
    Ok(HttpResponse::Ok().json(json!({ "events": events })))
}

async fn recover_table(
    _: Admin,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = table_id(&path)?;
    state
        .manager
        .send(Recover { table: id.clone() })
        .await
        .map_err(ApiError::internal)?
        .map_err(host_error)?;
    Ok(HttpResponse::Ok().json(view_of(&state, &id).await?))
}

/// The body of `POST /admin/tables/{id}/freeze`: empty, `{}`, or
/// `{"reason":"operator"}`.
pub fn freeze_body(body: &[u8]) -> Result<(), ApiError> {
    if body.is_empty() {
        return Ok(());
    }
    let obj = json_object(body)?;
    only_fields(&obj, &["reason"])?;
    match obj.get("reason") {
        None => Ok(()),
        Some(Value::String(r)) if r == FreezeReason::Operator.as_str() => Ok(()),
        Some(_) => Err(ApiError::bad_request(
            "bad_field",
            "reason must be \"operator\" (or left out)",
        )),
    }
}

/// An operator's freeze, from any instance: recorded (with a fence past
/// the owner's) first, then the owner stops: at once when it is this
/// instance, else at its next fence check (within TTL/3).
async fn freeze_table(
    _: Admin,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = table_id(&path)?;
    freeze_body(&body)?;
    let known = state.rt.store.table(&id).await.map_err(store_error)?;
    if known.is_none_or(|r| r.environment != state.rt.environment()) {
        return Err(ApiError::table_not_found());
    }
    let row = state
        .rt
        .store
        .freeze_by_operator(&id, state.rt.instance_id())
        .await
        .map_err(|e| match e {
            StoreError::WrongState(s) => ApiError::new(
                StatusCode::CONFLICT,
                "not_freezable",
                &format!("the table is {s}: it is being disposed or is closed"),
            ),
            other => store_error(other),
        })?;
    state.manager.do_send(FencesSeen {
        rows: vec![(row.id.clone(), row.state, row.state_reason, row.fence)],
    });
    Ok(HttpResponse::Ok().json(view(&state, row).await?))
}

async fn dispose_table(
    _: Admin,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = table_id(&path)?;
    let returned = state
        .manager
        .send(Dispose { table: id.clone() })
        .await
        .map_err(ApiError::internal)?
        .map_err(host_error)?;
    let audit = state.rt.store.audit().await.map_err(store_error)?;
    let returned: Vec<Value> = returned
        .into_iter()
        .map(|(player, chips)| json!({"player": player, "chips": chips}))
        .collect();
    Ok(HttpResponse::Ok().json(json!({
        "id": id,
        "state": TableState::Closed,
        "delta": audit.delta,
        "returned": returned,
    })))
}

/// A player name from a path segment.
pub fn player_name(raw: &str) -> Result<&str, ApiError> {
    if valid_player_name(raw) {
        Ok(raw)
    } else {
        Err(ApiError::bad_request(
            "bad_field",
            "player names are 1-32 letters, digits, '_', '-' or '.'",
        ))
    }
}

/// The body of `POST /admin/players/{player}/grant`: `{"chips":N}`, N from
/// 1 to 2^63−1.
pub fn grant_body(body: &[u8]) -> Result<Chips, ApiError> {
    let obj = json_object(body)?;
    only_fields(&obj, &["chips"])?;
    chips(&obj, "chips")
}

async fn grant(
    _: Admin,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let player = player_name(&path)?;
    let chips = grant_body(&body)?;
    let balance = state
        .rt
        .store
        .grant(player, chips)
        .await
        .map_err(store_error)?;
    Ok(HttpResponse::Ok().json(json!({"player": player, "balance": balance})))
}

async fn player(
    _: Admin,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let player = player_name(&path)?;
    let balance = state
        .rt
        .store
        .balance(player)
        .await
        .map_err(store_error)?
        // A player never granted anything simply has no chips yet.
        .unwrap_or_default();
    Ok(HttpResponse::Ok().json(json!({"player": player, "balance": balance})))
}

/// A player token signed with this server's secret, for clients (load
/// generators, scripted players) that hold only the admin token.
async fn player_token(
    _: Admin,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let player = player_name(&path)?;
    let now = now_unix();
    let token = state
        .rt
        .signer
        .mint(player, now)
        .map_err(ApiError::internal)?;
    Ok(HttpResponse::Ok().json(json!({
        "player": player,
        "token": token,
        "expires_at": expires_at(now),
    })))
}

/// The live instances of the environment (seen within one lease TTL), from
/// Postgres, with how many open tables each owns there.
async fn instances(_: Admin, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let env = state.rt.environment();
    let rows = state.rt.store.instances(env).await.map_err(store_error)?;
    let counts = state
        .rt
        .store
        .owned_counts(env)
        .await
        .map_err(store_error)?;
    let live: Vec<Value> = rows
        .into_iter()
        .filter(|i| i.live)
        .map(|i| {
            json!({
                "id": i.id,
                "advertise_url": i.advertise_url,
                "incarnation": i.incarnation,
                "tables": counts.get(&i.id).copied().unwrap_or(0),
                "draining": i.draining,
                "started_at": i.started_at,
                "last_seen": i.last_seen,
                "here": i.id == state.rt.instance_id(),
            })
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({ "instances": live })))
}

async fn audit(_: Admin, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let audit = state.rt.store.audit().await.map_err(store_error)?;
    Ok(HttpResponse::Ok().json(audit))
}

#[cfg(test)]
mod store_error_tests {
    use super::*;

    #[test]
    fn a_database_out_of_reach_is_503_unavailable_and_a_broken_invariant_is_500() {
        let e = store_error(StoreError::Db(sqlx::Error::PoolTimedOut));
        assert_eq!((e.status.as_u16(), e.code), (503, "unavailable"));
        let e = store_error(StoreError::Inconsistent("no".into()));
        assert_eq!((e.status.as_u16(), e.code), (500, "internal"));
        let e = store_error(StoreError::TableNotFound);
        assert_eq!((e.status.as_u16(), e.code), (404, "table_not_found"));
    }
}
