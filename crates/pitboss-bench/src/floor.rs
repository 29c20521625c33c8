//! The floors an idle WebSocket connection is measured against: servers
//! that hold connections and do nothing else, run by `pitboss-bench
//! ws-floor` as a process of their own so their memory is theirs alone.
//!
//! - `tungstenite`: a bare tokio + tokio-tungstenite server, one task per
//!   connection (about the least a Rust WebSocket server can hold);
//! - `actix`: actix-web with one actix-web-actors actor per connection that
//!   ignores every frame, i.e. what pitboss's stack costs before pitboss
//!   adds anything.

use std::net::TcpListener;

use anyhow::{bail, Context as _};
use futures::StreamExt;

pub fn serve(kind: &str, port: u16) -> anyhow::Result<()> {
    match kind {
        "tungstenite" => tungstenite(port),
        "actix" => actix(port),
        other => bail!("unknown floor {other}: tungstenite or actix"),
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
        _msg: Result<actix_web_actors::ws::Message, actix_web_actors::ws::ProtocolError>,
        _ctx: &mut Self::Context,
    ) {
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
