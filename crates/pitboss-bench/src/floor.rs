//! The floors an idle WebSocket connection is measured against: servers
//! that hold connections and do nothing else, run by `pitboss-bench
//! ws-floor` as a process of their own so their memory is theirs alone.
//!
//! - `tungstenite`: a bare tokio + tokio-tungstenite server, one task per
//!   connection (about the least a Rust WebSocket server can hold);
//! - `actix`: actix-web with one actix-web-actors actor per connection that
//!   answers pings and ignores every other frame, i.e. what the usual actix
//!   WebSocket stack costs before an application adds anything;
//! - `actix-upgrade`: the way under it that keeps the actor model, and the
//!   one pitboss's sessions are built on (`src/ws/upgrade.rs`). actix-http
//!   answers the upgrade and hands the socket over (`HttpService::upgrade`,
//!   `Framed::into_parts`); each connection is then an actix actor (plain
//!   `Context`) fed by a reader that waits for readiness and reads into a
//!   stack buffer, so an idle connection holds no read or write buffer.

use std::net::TcpListener;

use anyhow::{bail, Context as _};
use futures::StreamExt;

pub fn serve(kind: &str, port: u16) -> anyhow::Result<()> {
    match kind {
        "tungstenite" => tungstenite(port),
        "actix" => actix(port),
        "actix-upgrade" => actix_upgrade(port),
        other => bail!("unknown floor {other}: tungstenite, actix or actix-upgrade"),
    }
}

fn tungstenite(port: u16) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .with_context(|| format!("bind port {port}"))?;
        loop {
            let (socket, _) = listener.accept().await?;
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(socket).await else {
                    return;
                };
                // Reading answers pings and notices the close.
                while let Some(Ok(_)) = ws.next().await {}
            });
        }
    })
}

struct Idle;

impl actix::Actor for Idle {
    type Context = actix_web_actors::ws::WebsocketContext<Self>;
}

impl
    actix::StreamHandler<Result<actix_web_actors::ws::Message, actix_web_actors::ws::ProtocolError>>
    for Idle
{
    fn handle(
        &mut self,
        msg: Result<actix_web_actors::ws::Message, actix_web_actors::ws::ProtocolError>,
        ctx: &mut Self::Context,
    ) {
        if let Ok(actix_web_actors::ws::Message::Ping(payload)) = msg {
            ctx.pong(&payload);
        }
    }
}

async fn upgrade(
    req: actix_web::HttpRequest,
    stream: actix_web::web::Payload,
) -> Result<actix_web::HttpResponse, actix_web::Error> {
    actix_web_actors::ws::start(Idle, &req, stream)
}

fn actix(port: u16) -> anyhow::Result<()> {
    let listener =
        TcpListener::bind(("127.0.0.1", port)).with_context(|| format!("bind {port}"))?;
    actix_web::rt::System::new().block_on(async move {
        actix_web::HttpServer::new(|| {
            actix_web::App::new().route("/ws", actix_web::web::get().to(upgrade))
        })
        .disable_signals()
        .tcp_nodelay(true)
        .listen(listener)?
        .run()
        .await
    })?;
    Ok(())
}

/// A frame read off a connection the `actix-upgrade` floor owns.
#[derive(actix::Message)]
#[rtype(result = "()")]
struct Inbound {
    opcode: actix_http::ws::OpCode,
    payload: bytes::BytesMut,
}

/// One connection: answers pings and closes, ignores everything else. Its
/// writes are small control frames, written at once on the socket's write
/// half (a real session would queue what the socket cannot take yet).
struct Lean {
    write: std::rc::Rc<tokio::net::tcp::OwnedWriteHalf>,
}

impl actix::Actor for Lean {
    type Context = actix::Context<Self>;
}

impl actix::Handler<Inbound> for Lean {
    type Result = ();

    fn handle(&mut self, msg: Inbound, ctx: &mut Self::Context) {
        use actix::ActorContext as _;
        use actix_http::ws::{OpCode, Parser};
        let reply = match msg.opcode {
            OpCode::Ping => OpCode::Pong,
            OpCode::Close => OpCode::Close,
            _ => return,
        };
        let mut frame = bytes::BytesMut::new();
        Parser::write_message(&mut frame, &msg.payload, reply, true, false);
        let _ = self.write.try_write(&frame);
        if reply == OpCode::Close {
            ctx.stop();
        }
    }
}

/// Reads frames only while some are arriving: it waits for readiness
/// without a buffer, reads what is there into a stack buffer, and keeps a
/// heap buffer only for a frame split across reads.
async fn read_frames(
    read: tokio::net::tcp::OwnedReadHalf,
    mut pending: bytes::BytesMut,
    to: actix::Addr<Lean>,
) {
    const MAX_FRAME: usize = 64 * 1024;
    loop {
        while let Ok(Some((_, opcode, payload))) =
            actix_http::ws::Parser::parse(&mut pending, true, MAX_FRAME)
        {
            to.do_send(Inbound {
                opcode,
                payload: payload.unwrap_or_default(),
            });
        }
        if pending.is_empty() {
            // Hand the capacity back while idle.
            pending = bytes::BytesMut::new();
        }
        if read.readable().await.is_err() {
            return;
        }
        let mut chunk = [0u8; 1024];
        match read.try_read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => pending.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
    }
}

/// Why the `actix-upgrade` floor refused an upgrade.
#[derive(Debug)]
struct Refused(String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Refused> for actix_http::Response<actix_http::body::BoxBody> {
    fn from(e: Refused) -> Self {
        actix_http::Response::bad_request().set_body(actix_http::body::BoxBody::new(e.0))
    }
}

fn actix_upgrade(port: u16) -> anyhow::Result<()> {
    use actix_http::{body::BodySize, h1, ws, HttpService, Request, Response};
    use actix_service::{fn_factory, fn_service};
    use futures::SinkExt as _;
    use std::convert::Infallible;

    let listener =
        TcpListener::bind(("127.0.0.1", port)).with_context(|| format!("bind {port}"))?;
    actix_rt::System::new().block_on(async move {
        actix_server::Server::build()
            .disable_signals()
            .listen("ws-floor", listener, || {
                HttpService::build()
                    .upgrade(fn_factory(|| async {
                        Ok::<_, Infallible>(fn_service(
                            |(req, mut framed): (
                                Request,
                                actix_codec::Framed<tokio::net::TcpStream, h1::Codec>,
                            )| async move {
                                let res = ws::handshake(req.head())
                                    .map_err(|e| Refused(e.to_string()))?
                                    .message_body(())
                                    .map_err(|e| Refused(e.to_string()))?;
                                framed
                                    .send((res, BodySize::None).into())
                                    .await
                                    .map_err(|e| Refused(e.to_string()))?;
                                let parts = framed.into_parts();
                                let _ = parts.io.set_nodelay(true);
                                let (read, write) = parts.io.into_split();
                                let addr = actix::Actor::start(Lean {
                                    write: std::rc::Rc::new(write),
                                });
                                actix_rt::spawn(read_frames(read, parts.read_buf, addr));
                                Ok::<_, Refused>(())
                            },
                        ))
                    }))
                    .finish(|_req: Request| async { Ok::<_, Infallible>(Response::not_found()) })
                    .tcp()
            })?
            .run()
            .await
    })?;
    Ok(())
}
