//! Serving: the ext_proc service on one listener, gRPC health (`grpc.health.v1`) on another.
//!
//! Both take a bound [`TcpListener`] (bind port 0 in tests and read the address back) and a
//! shutdown future: when it completes, the server stops accepting and lets open streams end.
//! Accepted connections get `TCP_NODELAY`: ext_proc answers are small messages on a
//! latency-critical path, and Nagle's algorithm would hold them back.
//!
//! Both servers bound what one peer may make them hold (the figures are this module's
//! constants; `docs/ext-proc.md` says why each):
//!
//! - at most [`MAX_CONCURRENT_STREAMS`] streams per HTTP/2 connection (Envoy opens another
//!   connection when it needs more);
//! - HTTP/2 flow-control windows of [`STREAM_WINDOW_BYTES`] per stream and
//!   [`CONNECTION_WINDOW_BYTES`] per connection: what a peer may send ahead of the picker
//!   reading it;
//! - an HTTP/2 PING every [`KEEPALIVE_INTERVAL`], the connection closed when one is not
//!   answered within [`KEEPALIVE_TIMEOUT`], and TCP keepalive after [`TCP_KEEPALIVE`]: a dead
//!   peer's streams and buffers are freed instead of held forever;
//! - request headers (gRPC metadata) of at most [`MAX_HEADER_LIST_BYTES`];
//! - every message a stream declares charged to the picker's body budget before the gRPC
//!   library reserves room for it ([`crate::framing`]): declaring is not enough to make the
//!   picker hold memory;
//! - at most [`ExtProcOptions::max_connections`](crate::ExtProcOptions::max_connections)
//!   connections open on the ext_proc port ([`MAX_HEALTH_CONNECTIONS`] on the health port),
//!   more closed as they arrive, and a connection that sends nothing within
//!   [`PREFACE_TIMEOUT`](crate::connections::PREFACE_TIMEOUT) closed ([`crate::connections`]);
//! - an accept error (out of file descriptors, say) pauses accepting for
//!   [`ACCEPT_ERROR_PAUSE`] instead of retrying at once;
//! - messages of at most [`ExtProcOptions::max_message_bytes`](crate::ExtProcOptions::max_message_bytes)
//!   (the body limit and a margin, so an over-size BUFFERED body is still answered 413; a
//!   larger message ends its stream with `RESOURCE_EXHAUSTED`).
//!
//! ```no_run
//! # async fn run(service: shepherd_adapters_extproc::ExtProcService) -> Result<(), Box<dyn std::error::Error>> {
//! use shepherd_adapters_extproc::{serve, serve_health};
//! use tokio::net::TcpListener;
//!
//! let grpc = TcpListener::bind("127.0.0.1:9002").await?;
//! let health = TcpListener::bind("127.0.0.1:9003").await?;
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! tokio::spawn(serve_health(health, async { let _ = stopped.await; }));
//! serve(grpc, service, std::future::pending()).await?;
//! # drop(stop); Ok(()) }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio_stream::Stream;

use tokio::net::TcpListener;
use tonic::server::NamedService;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic_health::ServingStatus;

use crate::connections::{Capped, ConnectionCounts};
use crate::error::ServeError;
use crate::framing::DeclaredMessagesLayer;
use crate::service::ExtProcService;

/// Most streams (requests in flight) on one HTTP/2 connection.
pub const MAX_CONCURRENT_STREAMS: u32 = 1024;

/// HTTP/2 flow-control window of one stream (1 MiB): a 62,000-byte body chunk and many more
/// fit, so a body streams in without waiting on window updates.
pub const STREAM_WINDOW_BYTES: u32 = 1024 * 1024;

/// HTTP/2 flow-control window of one connection (8 MiB): what all its streams together may
/// send ahead of the picker reading it.
pub const CONNECTION_WINDOW_BYTES: u32 = 8 * 1024 * 1024;

/// How often an idle HTTP/2 connection is pinged.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);

/// How long an HTTP/2 PING may go unanswered before the connection is closed.
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// Idle time before the operating system starts probing a TCP connection.
pub const TCP_KEEPALIVE: Duration = Duration::from_secs(60);

/// Largest HTTP/2 header list (gRPC metadata) accepted on a request (64 KiB; Envoy sends a
/// few hundred bytes; hyper's default is 16 MiB).
pub const MAX_HEADER_LIST_BYTES: u32 = 64 * 1024;

/// The gRPC name of the ext_proc service, as health checks ask for it.
pub const SERVICE_NAME: &str = <crate::grpc_server::ExtProcServer as NamedService>::NAME;

/// Connections open at once on the health port.
pub const MAX_HEALTH_CONNECTIONS: usize = 64;

/// How long accepting pauses after an accept error.
pub const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// Accepted connections, with `TCP_NODELAY` and TCP keepalive, paced after accept errors.
fn incoming(listener: TcpListener) -> Paced<TcpIncoming> {
    Paced {
        inner: TcpIncoming::from(listener)
            .with_nodelay(Some(true))
            .with_keepalive(Some(TCP_KEEPALIVE)),
        pause: None,
        errors: 0,
    }
}

/// A stream of accepted connections that waits [`ACCEPT_ERROR_PAUSE`] after each error (the
/// gRPC server would otherwise poll again at once, spinning while descriptors are out).
struct Paced<S> {
    inner: S,
    pause: Option<Pin<Box<tokio::time::Sleep>>>,
    errors: u64,
}

impl<S, T> Stream for Paced<S>
where
    S: Stream<Item = std::io::Result<T>> + Unpin,
{
    type Item = std::io::Result<T>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(pause) = self.pause.as_mut() {
            std::task::ready!(pause.as_mut().poll(cx));
            self.pause = None;
        }
        let next = Pin::new(&mut self.inner).poll_next(cx);
        if let Poll::Ready(Some(Err(error))) = &next {
            self.errors += 1;
            if self.errors.is_power_of_two() {
                tracing::warn!(%error, errors = self.errors, "cannot accept an ext_proc connection");
            }
            self.pause = Some(Box::pin(tokio::time::sleep(ACCEPT_ERROR_PAUSE)));
        }
        next
    }
}

/// A server builder with the limits of the [module docs](self).
fn builder() -> Server {
    Server::builder()
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .initial_stream_window_size(STREAM_WINDOW_BYTES)
        .initial_connection_window_size(CONNECTION_WINDOW_BYTES)
        .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
        .http2_max_header_list_size(MAX_HEADER_LIST_BYTES)
}

/// Serves `service` on `listener` until `shutdown` completes, with the limits of the
/// [module docs](self).
pub async fn serve<F>(
    listener: TcpListener,
    service: ExtProcService,
    shutdown: F,
) -> Result<(), ServeError>
where
    F: Future<Output = ()> + Send,
{
    let declared = DeclaredMessagesLayer::new(std::sync::Arc::clone(service.message_budget()));
    let accepted = Capped::new(
        incoming(listener),
        service.options().max_connections,
        std::sync::Arc::clone(service.connection_counts()),
    );
    builder()
        .layer(declared)
        .add_service(service.into_server())
        .serve_with_incoming_shutdown(accepted, shutdown)
        .await?;
    Ok(())
}

/// Serves gRPC health on `listener` until `shutdown` completes, reporting `SERVING` for the
/// whole server (`""`) and for the ext_proc service.
pub async fn serve_health<F>(listener: TcpListener, shutdown: F) -> Result<(), ServeError>
where
    F: Future<Output = ()> + Send,
{
    let counts = std::sync::Arc::new(ConnectionCounts::new("health"));
    serve_health_counted(listener, counts, shutdown).await
}

/// As [`serve_health`], counting the port's connections in `counts` (to export them).
pub async fn serve_health_counted<F>(
    listener: TcpListener,
    counts: std::sync::Arc<ConnectionCounts>,
    shutdown: F,
) -> Result<(), ServeError>
where
    F: Future<Output = ()> + Send,
{
    serve_health_leading(listener, counts, None, shutdown).await
}

/// The health service upstream's picker checks for readiness.
pub const READINESS_SERVICE: &str = "readiness";

/// The health service upstream's picker checks for liveness.
pub const LIVENESS_SERVICE: &str = "liveness";

/// As [`serve_health_counted`], with upstream's leader-election semantics when `leadership`
/// is given (`--ha-enable-leader-election`): the whole server (`""`), [`READINESS_SERVICE`]
/// and the ext_proc service are `SERVING` only while this replica leads, `NOT_SERVING` on a
/// follower; [`LIVENESS_SERVICE`] is always `SERVING` (a follower must not be restarted).
/// Without it every service is `SERVING`.
pub async fn serve_health_leading<F>(
    listener: TcpListener,
    counts: std::sync::Arc<ConnectionCounts>,
    leadership: Option<tokio::sync::watch::Receiver<bool>>,
    shutdown: F,
) -> Result<(), ServeError>
where
    F: Future<Output = ()> + Send,
{
    const READY: [&str; 3] = ["", READINESS_SERVICE, SERVICE_NAME];
    let status = |ready: bool| {
        if ready {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        }
    };
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status(LIVENESS_SERVICE, ServingStatus::Serving)
        .await;
    match leadership {
        None => {
            for service in READY {
                reporter
                    .set_service_status(service, ServingStatus::Serving)
                    .await;
            }
        }
        Some(mut leading) => {
            let now = *leading.borrow_and_update();
            for service in READY {
                reporter.set_service_status(service, status(now)).await;
            }
            tokio::spawn(async move {
                while leading.changed().await.is_ok() {
                    let now = *leading.borrow_and_update();
                    for service in READY {
                        reporter.set_service_status(service, status(now)).await;
                    }
                }
            });
        }
    }
    let accepted = Capped::new(incoming(listener), MAX_HEALTH_CONNECTIONS, counts);
    builder()
        .add_service(health)
        .serve_with_incoming_shutdown(accepted, shutdown)
        .await?;
    Ok(())
}
