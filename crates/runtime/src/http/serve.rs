//! The accept loop and one connection's life.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tower_service::Service as _;

use super::activity::{Activity, OpenRequest, Verdict, Watched};
use super::limits::{ConnectionLimits, MAX_HEAD_BYTES, MAX_HEADERS, MAX_READ_BUFFER_BYTES};
use super::stats::{Closed, ConnectionStats};
use crate::shutdown::ShutdownSignal;

/// What a connection over the cap is told before it is closed.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\n\
retry-after: 1\r\nx-shepherd-dropped-reason: connection_limit\r\nconnection: close\r\n\
content-length: 39\r\n\r\ntoo many connections open; retry later\n";

/// Serves `router` on `listener` under `limits` until `stop` fires; then stops accepting,
/// lets every open request finish (its connection closing after it), and returns once every
/// connection has closed. See the [module docs](super).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    stats: Arc<ConnectionStats>,
    stop: ShutdownSignal,
) {
    let max = limits.max_connections.clamp(1, Semaphore::MAX_PERMITS);
    let places = Arc::new(Semaphore::new(max));
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS));
    let mut accept_errors = 0u64;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stop.wait() => break,
        };
        let tcp = match accepted {
            Ok((tcp, _peer)) => tcp,
            Err(error) => {
                // Out of file descriptors, say: wait a little rather than spin.
                accept_errors += 1;
                if accept_errors.is_power_of_two() {
                    tracing::warn!(%error, accept_errors, "cannot accept a connection");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(place) = Arc::clone(&places).try_acquire_owned() else {
            stats.close(Closed::Refused);
            refuse(tcp, &refusals);
            continue;
        };
        // Without it small writes (one SSE event) may wait for the previous one's ACK.
        let _ = tcp.set_nodelay(true);
        stats.opened();
        let router = router.clone();
        let stats = Arc::clone(&stats);
        let stop = stop.clone();
        tokio::spawn(async move {
            connection(tcp, router, limits, &stats, stop).await;
            stats.ended();
            drop(place);
        });
    }
    drop(listener);
    // Every connection gives its place back when it closes.
    let _ = places
        .acquire_many(u32::try_from(max).unwrap_or(u32::MAX))
        .await;
}

/// Refusals being written at once; past them a connection over the cap is closed unanswered.
const MAX_REFUSALS: usize = 64;
/// Time a refusal may take to write.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(1);

/// Answers a connection over the cap with [`REFUSAL`] (within [`REFUSAL_TIMEOUT`], at most
/// [`MAX_REFUSALS`] at once: a flood of connections cannot make refusing them cost more).
fn refuse(tcp: TcpStream, refusals: &Arc<Semaphore>) {
    let Ok(writing) = Arc::clone(refusals).try_acquire_owned() else {
        return; // dropped: closed unanswered
    };
    tokio::spawn(async move {
        let mut tcp = tcp;
        let _ = tokio::time::timeout(REFUSAL_TIMEOUT, async {
            tcp.write_all(REFUSAL).await?;
            tcp.shutdown().await
        })
        .await;
        drop(writing);
    });
}

/// One connection, until it ends, a limit closes it, or `stop` drains it.
async fn connection(
    tcp: TcpStream,
    router: Router,
    limits: ConnectionLimits,
    stats: &ConnectionStats,
    stop: ShutdownSignal,
) {
    let activity = Activity::new();
    let io = TokioIo::new(Watched::new(tcp, Arc::clone(&activity)));
    let service = Routed {
        router,
        activity: Arc::clone(&activity),
    };
    let mut builder = http1::Builder::new();
    builder
        .max_buf_size(MAX_READ_BUFFER_BYTES)
        .max_header_size(MAX_HEAD_BYTES)
        .max_headers(MAX_HEADERS)
        .keep_alive(true);
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    let mut draining = false;
    // Looked at no less often than the shorter timeout: a connection is closed at most that
    // long after its deadline.
    let mut check = Instant::now() + limits.header_read_timeout.min(limits.idle_timeout);
    loop {
        tokio::select! {
            ended = conn.as_mut() => {
                if let Err(error) = ended {
                    tracing::debug!(%error, "HTTP connection ended with an error");
                }
                return;
            }
            () = tokio::time::sleep_until(check) => match activity.verdict(&limits, Instant::now()) {
                Verdict::Until(next) => check = next,
                Verdict::Close(why) => {
                    stats.close(why);
                    return; // dropping the connection closes the socket
                }
            },
            () = stop.wait(), if !draining => {
                draining = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// The router as hyper's service, marking each request open until its response body ends.
#[derive(Clone)]
struct Routed {
    router: Router,
    activity: Arc<Activity>,
}

impl hyper::service::Service<hyper::Request<Incoming>> for Routed {
    type Response = hyper::Response<Tracked>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, request: hyper::Request<Incoming>) -> Self::Future {
        let open = self.activity.request();
        let mut router = self.router.clone();
        let answer = router.call(request.map(Body::new));
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|body| Tracked { body, _open: open }))
        })
    }
}

/// A response body that keeps its request open until it ends or is dropped.
struct Tracked {
    body: Body,
    _open: OpenRequest,
}

impl hyper::body::Body for Tracked {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
