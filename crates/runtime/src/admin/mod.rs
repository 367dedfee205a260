//! The admin port (`server.metricsPort`, default 9090): what operators and Prometheus read.
//!
//! | route | answer |
//! |---|---|
//! | `GET /metrics` | Prometheus text: the scheduler's core counters and per-endpoint figures, its plugins' sources, the scraper's `shepherd_scrape_*` families, the adaptive controller's `shepherd_adaptive_*` and `shepherd_config_reloads_total` |
//! | `GET /healthz` | 200 while the process runs |
//! | `GET /readyz` | 200 once at least one endpoint has fresh metrics, else 503 (and 503 from the start of shutdown) |
//! | `GET /debug/adaptive` | JSON: whether the adaptive loop runs, its profile, mode, smoothed signal, and its recent tick records, oldest first (`?limit=N` for the newest N) |
//! | `GET /debug/config` | JSON: the effective config (the policy in force, endpoints, scraping, server) |
//!
//! The debug views are rendered at most [`DEBUG_RENDERS_PER_SECOND`] a second (bursts of as
//! many); more get 429 with `Retry-After: 1`. The admin port takes no key: keep it private
//! (on the gateway's port, where they can be mounted too, they take a client key when keys
//! are configured).
//!
//! [`router`] builds the routes over an [`AdminState`]; the runtime serves them on the admin
//! port, and an adapter may also mount them in a server of its own
//! ([`RuntimeHandle::admin_router`](crate::RuntimeHandle::admin_router)).
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use shepherd_runtime::{Runtime, RuntimeOptions};
//!
//! let handle = Runtime::start(std::path::Path::new("shepherd.yaml"), RuntimeOptions::default()).await?;
//! println!("admin endpoints on http://{}", handle.admin_addr().unwrap());
//! # Ok(())
//! # }
//! ```

mod budget;
mod handlers;
mod state;

use axum::Router;
use axum::routing::get;
pub use budget::DEBUG_RENDERS_PER_SECOND;
pub(crate) use budget::RenderBudget;
pub use state::AdminState;

/// The admin routes over `state`.
pub fn router(state: AdminState) -> Router {
    Router::new()
        .route("/metrics", get(handlers::metrics))
        .route("/healthz", get(handlers::healthz))
        .route("/readyz", get(handlers::readyz))
        .route("/debug/adaptive", get(handlers::adaptive))
        .route("/debug/config", get(handlers::config))
        .with_state(state)
}
