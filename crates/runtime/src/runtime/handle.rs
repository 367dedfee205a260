//! The running runtime, as its embedder holds it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use shepherd_scheduler_core::endpoint::Pool;
use shepherd_scheduler_core::reload::ReloadableScheduler;
use shepherd_scheduler_core::shared::SharedState;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::RuntimeError;
use super::reload::{Applier, ReloadOutcome, ReloadStats};
use crate::adaptive::AdaptiveRunner;
use crate::admin::{self, AdminState};
use crate::config::RuntimeConfig;
use crate::discovery::Discovery;
use crate::discovery::membership::Membership;
use crate::flow::FlowController;
use crate::scrape::ScrapeStats;
use crate::shutdown::{ShutdownSignal, ShutdownTrigger};

/// How often [`RuntimeHandle::shutdown`] looks at the in-flight count.
const DRAIN_POLL: Duration = Duration::from_millis(10);

/// What [`RuntimeHandle::shutdown`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Whether every in-flight request ended before the deadline.
    pub drained: bool,
    /// Requests still in flight when shutdown returned.
    pub in_flight: u64,
    /// How long shutdown took.
    pub waited: Duration,
}

/// A running runtime: the scheduler to route with, the shared state, the admin endpoints,
/// and graceful shutdown. Dropping it without [`shutdown`](Self::shutdown) stops every loop
/// at once.
///
/// What an adapter binary does with it:
///
/// ```no_run
/// use std::time::Duration;
/// use shepherd_runtime::{Runtime, RuntimeOptions};
///
/// # async fn serve_adapter(
/// #     _: std::sync::Arc<shepherd_scheduler_core::reload::ReloadableScheduler>,
/// #     _: std::net::SocketAddr,
/// #     _: shepherd_runtime::ShutdownSignal,
/// # ) {}
/// #[tokio::main]
/// async fn main() -> Result<(), Box<dyn std::error::Error>> {
///     let handle =
///         Runtime::start(std::path::Path::new("shepherd.yaml"), RuntimeOptions::default()).await?;
///     // Serve: schedule with the scheduler, stop accepting when the signal fires.
///     let server = tokio::spawn(serve_adapter(
///         handle.scheduler().clone(),
///         handle.config().server.extproc_addr(),
///         handle.shutdown_signal(),
///     ));
///     tokio::signal::ctrl_c().await?;
///     let report = handle.shutdown(Duration::from_secs(30)).await; // drains in-flight requests
///     server.await?;
///     println!("stopped; drained: {}", report.drained);
///     Ok(())
/// }
/// ```
pub struct RuntimeHandle {
    pub(crate) admin: AdminState,
    pub(crate) flow: Option<FlowController>,
    pub(crate) applier: Arc<Applier>,
    pub(crate) discovery: Arc<dyn Discovery>,
    pub(crate) membership: Arc<Membership>,
    pub(crate) admin_addr: Option<SocketAddr>,
    pub(crate) trigger: ShutdownTrigger,
    pub(crate) tasks: JoinSet<()>,
}

impl std::fmt::Debug for RuntimeHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeHandle")
            .field("discovery", &self.discovery.name())
            .field("admin_addr", &self.admin_addr)
            .field("generation", &self.admin.scheduler.generation())
            .field("in_flight", &self.in_flight())
            .field("flow_control", &self.flow.is_some())
            .finish()
    }
}

impl RuntimeHandle {
    /// The flow controller, when the config has a `flowControl` section: ask it
    /// ([`FlowController::admit`]) before scheduling each request.
    pub fn flow(&self) -> Option<&FlowController> {
        self.flow.as_ref()
    }

    /// The scheduler to route with (reloads swap the policy inside it).
    pub fn scheduler(&self) -> &Arc<ReloadableScheduler> {
        &self.admin.scheduler
    }

    /// The pool, resources and core metrics every policy generation shares.
    pub fn shared(&self) -> &SharedState {
        self.admin.scheduler.shared()
    }

    /// The pool.
    pub fn pool(&self) -> &Arc<Pool> {
        &self.shared().pool
    }

    /// The config in force.
    pub fn config(&self) -> Arc<RuntimeConfig> {
        self.admin.config()
    }

    /// Puts `config` in force, as a file edit would: a changed policy is rebuilt and swapped
    /// in (live counters, prefix index and core metrics survive), the endpoint list and the
    /// scraping settings follow. On error the running config stays whole and the error is
    /// counted in `shepherd_config_reloads_total{result="rejected"}`.
    pub fn reload(&self, config: RuntimeConfig) -> Result<ReloadOutcome, RuntimeError> {
        self.applier.apply(config)
    }

    /// Reload counters.
    pub fn reload_stats(&self) -> &Arc<ReloadStats> {
        &self.admin.reloads
    }

    /// The discovery source in use.
    pub fn discovery(&self) -> &Arc<dyn Discovery> {
        &self.discovery
    }

    /// The scraper's per-endpoint counters.
    pub fn scrape_stats(&self) -> &Arc<ScrapeStats> {
        &self.admin.scrape
    }

    /// The adaptive controller in force and its debug view.
    pub fn adaptive(&self) -> &Arc<AdaptiveRunner> {
        &self.admin.adaptive
    }

    /// What the admin endpoints read.
    pub fn admin_state(&self) -> &AdminState {
        &self.admin
    }

    /// The pool's request policies (`InferenceObjective` priorities, `InferenceModelRewrite`
    /// rules) when discovery keeps them ([`Discovery::request_policies`](crate::discovery::Discovery::request_policies)):
    /// the adapters apply them to every request.
    pub fn request_policies(&self) -> Option<Arc<crate::policies::RequestPolicies>> {
        self.discovery.request_policies()
    }

    /// The upstream (`llm_d_epp_*`) metric families, which the adapters record requests in.
    pub fn upstream_metrics(&self) -> &Arc<crate::upstream::UpstreamMetrics> {
        self.admin.upstream()
    }

    /// The admin routes, to mount in a server of the adapter's own.
    pub fn admin_router(&self) -> Router {
        admin::router(self.admin.clone())
    }

    /// Where the admin endpoints are served, when the runtime serves them.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// Every metric in the Prometheus text format (what `GET /metrics` answers).
    pub fn render_metrics(&self) -> String {
        self.admin.render_metrics()
    }

    /// Whether some endpoint has fresh metrics (what `GET /readyz` answers).
    pub fn is_ready(&self) -> bool {
        self.admin.is_ready()
    }

    /// Requests in flight on the pool's endpoints, and on endpoints that left the pool
    /// while requests were in flight there.
    pub fn in_flight(&self) -> u64 {
        self.membership.in_flight()
    }

    /// Fires when shutdown begins: an adapter passes `signal.wait()` to its server's graceful
    /// shutdown, so it stops accepting at the same moment as the runtime.
    pub fn shutdown_signal(&self) -> ShutdownSignal {
        self.trigger.signal()
    }

    /// Shuts down gracefully: signals shutdown (the adapters' servers and the admin server
    /// stop accepting, `/readyz` answers 503, the scrape, discovery, reload and adaptive
    /// loops stop), then waits until no request is in flight ([`in_flight`](Self::in_flight)
    /// is 0) or `deadline` has passed, whichever comes first.
    pub async fn shutdown(mut self, deadline: Duration) -> ShutdownReport {
        let started = Instant::now();
        self.trigger.trigger();
        let drained = loop {
            if self.in_flight() == 0 {
                break true;
            }
            let elapsed = started.elapsed();
            if elapsed >= deadline {
                break false;
            }
            tokio::time::sleep(DRAIN_POLL.min(deadline - elapsed)).await;
        };
        let left = deadline.saturating_sub(started.elapsed());
        let joined = tokio::time::timeout(left, async {
            while self.tasks.join_next().await.is_some() {}
        })
        .await;
        if joined.is_err() {
            self.tasks.abort_all();
        }
        let report = ShutdownReport {
            drained,
            in_flight: self.in_flight(),
            waited: started.elapsed(),
        };
        tracing::info!(
            drained = report.drained,
            in_flight = report.in_flight,
            waited_ms = report.waited.as_millis() as u64,
            "runtime stopped"
        );
        report
    }
}
