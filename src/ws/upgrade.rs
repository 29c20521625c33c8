//! The HTTP side of a WebSocket upgrade. actix-http hands every request
//! that asks to upgrade to [`service`] with its connection. The request
//! goes through the same actix-web app as any other, so `/ws` and
//! `/ws/relay` answer with the same handlers, errors and JSON bodies. A
//! handler that takes the connection answers with [`accept`]: the 101 is
//! written and the socket goes to the session it named, without actix-http's
//! per-connection buffers. Any other answer is written and the connection
//! closes.

use std::rc::Rc;

use actix_codec::Framed;
use actix_http::body::{self, BodySize};
use actix_http::{h1, ConnectionType, HttpMessage as _, Request, StatusCode};
use actix_service::{fn_service, Service, ServiceFactory, ServiceFactoryExt as _};
use actix_web::dev::ServiceResponse;
use actix_web::{HttpRequest, HttpResponse};
use futures::SinkExt as _;
use tokio::net::TcpStream;
use tracing::debug;

use crate::http::ApiError;

/// Marks a request that came through [`service`]: only those can be
/// answered with a 101 and a session.
#[derive(Clone, Copy)]
struct Upgradable;

/// What runs on the socket once the 101 is written: it gets the socket and
/// whatever the client sent after its upgrade request.
type Start = Box<dyn FnOnce(TcpStream, &[u8])>;

/// A handler's acceptance of an upgrade, carried on its response.
struct Accepted(Start);

/// Accepts a WebSocket upgrade: the handshake is checked (400 `bad_field`
/// if it is not one), and `start` runs the session once the 101 is
/// written.
pub fn accept(
    req: &HttpRequest,
    start: impl FnOnce(TcpStream, &[u8]) + 'static,
) -> Result<HttpResponse, ApiError> {
    let mut handshake = actix_http::ws::handshake(req.head())
        .map_err(|e| ApiError::bad_request("bad_field", &e.to_string()))?;
    if req.extensions().get::<Upgradable>().is_none() {
        // A request that passes the handshake asks to upgrade, so it came
        // through the upgrade service; this is a safeguard.
        return Err(ApiError::bad_request(
            "bad_field",
            "this connection cannot be upgraded",
        ));
    }
    let mut res = HttpResponse::from(handshake.finish().map_into_boxed_body());
    res.extensions_mut().insert(Accepted(Box::new(start)));
    Ok(res)
}

/// The upgrade service for `HttpService::build().upgrade(..)`: each
/// request goes through the app `app` makes (one per worker).
pub fn service<F, A, B>(
    app: F,
) -> impl ServiceFactory<
    (Request, Framed<TcpStream, h1::Codec>),
    Config = (),
    Response = (),
    Error = std::convert::Infallible,
    InitError = (),
>
where
    F: Fn() -> A + Clone + 'static,
    A: ServiceFactory<
            Request,
            Config = (),
            Response = ServiceResponse<B>,
            Error = actix_web::Error,
            InitError = (),
        > + 'static,
    A::Service: 'static,
    B: actix_web::body::MessageBody + 'static,
{
    actix_service::fn_factory(move || {
        let app = app.clone();
        async move {
            let app = Rc::new(app().new_service(()).await?);
            Ok::<_, ()>(fn_service(move |(req, framed)| {
                let app = app.clone();
                async move {
                    upgrade(&*app, req, framed).await;
                    Ok(())
                }
            }))
        }
    })
    .map_init_err(|()| ())
}

async fn upgrade<S, B>(app: &S, req: Request, mut framed: Framed<TcpStream, h1::Codec>)
where
    S: Service<Request, Response = ServiceResponse<B>, Error = actix_web::Error>,
    B: actix_web::body::MessageBody + 'static,
{
    req.extensions_mut().insert(Upgradable);
    let res = match app.call(req).await {
        Ok(res) => res.map_into_boxed_body().into_parts().1,
        Err(e) => e.error_response(),
    };
    let mut res: actix_http::Response<body::BoxBody> = res.into();
    let accepted = res.extensions_mut().remove::<Accepted>();
    let (mut head, body) = res.into_parts();
    match accepted {
        Some(Accepted(start)) if head.status() == StatusCode::SWITCHING_PROTOCOLS => {
            if let Err(e) = framed.send((head, BodySize::None).into()).await {
                debug!(error = %e, "could not answer a websocket upgrade");
                return;
            }
            let parts = framed.into_parts();
            start(parts.io, &parts.read_buf);
        }
        _ => {
            // The answer is all this connection gets.
            head.head_mut().set_connection_type(ConnectionType::Close);
            let Ok(bytes) = body::to_bytes(body).await else {
                return;
            };
            let size = BodySize::Sized(bytes.len() as u64);
            let sent = async {
                framed.send((head, size).into()).await?;
                framed.send(h1::Message::Chunk(Some(bytes))).await?;
                framed.send(h1::Message::Chunk(None)).await
            };
            if let Err(e) = sent.await {
                debug!(error = %e, "could not answer a refused upgrade");
            }
        }
    }
}
