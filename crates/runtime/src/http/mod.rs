//! Serving HTTP/1.1 on a public port without trusting the client: every connection has a
//! deadline for its request head, an idle keep-alive timeout, bounded read buffers, and a
//! place under a cap on open connections — over the cap a connection is refused at once with
//! a 503, not queued.
//!
//! Both HTTP ports use it: the gateway's traffic port (`shepherd-gateway`) and the admin port
//! (`/metrics`, `/healthz`, `/readyz`, `/debug/*`) of both binaries. What a request's *body*
//! may cost (its size, its read deadline, the bytes all bodies may hold at once) is the
//! gateway's business, decided where it reads the body.
//!
//! | limit | setting | default | what a hostile client meets |
//! |---|---|---|---|
//! | request head | `server.headerReadTimeoutMs` | 10 s | a connection that has not sent a whole request head 10 s after it opened, or after its first byte since the last response, is closed (slow headers) |
//! | idle keep-alive | `server.idleTimeoutMs` | 60 s | a connection with no request open that sends nothing for 60 s is closed |
//! | open connections | `server.maxConnections` (traffic), `server.maxAdminConnections` (admin) | 4096, 256 | one more is answered `503` with `connection: close` and closed |
//! | head size | — | 64 KiB, 100 headers | a larger head gets `431` and the connection is closed |
//!
//! A connection is closed between its deadline and the shorter of the two timeouts after it
//! (its watchdog looks at it no less often). Every closing is counted ([`ConnectionStats`], on `/metrics` as
//! `shepherd_http_connections_closed_total{port,reason}`) and logged at most once a second.
//!
//! ```no_run
//! use std::time::Duration;
//! use axum::{Router, routing::get};
//! use shepherd_runtime::http::{ConnectionLimits, ConnectionStats, serve};
//! use shepherd_runtime::ShutdownSignal;
//!
//! # async fn run(stop: ShutdownSignal) -> std::io::Result<()> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! let limits = ConnectionLimits {
//!     header_read_timeout: Duration::from_secs(10),
//!     idle_timeout: Duration::from_secs(60),
//!     max_connections: 1024,
//! };
//! let stats = std::sync::Arc::new(ConnectionStats::new("http"));
//! let app = Router::new().route("/", get(|| async { "hello" }));
//! serve(listener, app, limits, stats, stop).await;
//! # Ok(()) }
//! ```

mod activity;
mod limits;
mod serve;
mod stats;

pub use limits::ConnectionLimits;
pub use serve::serve;
pub use stats::{Closed, ConnectionStats};
