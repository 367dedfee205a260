//! What the admin endpoints read.

use std::fmt;
use std::sync::Arc;

use shepherd_scheduler_core::metrics::{MetricsSource, render_prometheus};
use shepherd_scheduler_core::reload::ReloadableScheduler;
use tokio::sync::watch;

use crate::adaptive::AdaptiveRunner;
use crate::config::RuntimeConfig;
use crate::runtime::ReloadStats;
use crate::scrape::ScrapeStats;
use crate::shutdown::ShutdownSignal;

/// The runtime's parts the admin endpoints read: cheap to clone, shared with the
/// [`RuntimeHandle`](crate::RuntimeHandle).
#[derive(Clone)]
pub struct AdminState {
    pub(crate) scheduler: Arc<ReloadableScheduler>,
    pub(crate) scrape: Arc<ScrapeStats>,
    pub(crate) adaptive: Arc<AdaptiveRunner>,
    pub(crate) reloads: Arc<ReloadStats>,
    pub(crate) config: watch::Receiver<Arc<RuntimeConfig>>,
    pub(crate) shutdown: ShutdownSignal,
    /// The adapter's own metrics sources.
    pub(crate) extra: Arc<[Arc<dyn MetricsSource>]>,
    /// Whether flow control is on: requests can then be held while no endpoint can serve.
    pub(crate) holds_requests: bool,
    /// The upstream (`llm_d_epp_*`) families, rendered after everything else.
    pub(crate) upstream: Arc<crate::upstream::UpstreamMetrics>,
    /// How often the debug views may be rendered.
    pub(crate) debug_budget: Arc<super::budget::RenderBudget>,
    /// Leadership, under leader election: a follower is not ready.
    pub(crate) leadership: Option<watch::Receiver<bool>>,
}

impl fmt::Debug for AdminState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdminState")
            .field("scheduler", &self.scheduler)
            .field("ready", &self.is_ready())
            .finish()
    }
}

impl AdminState {
    /// Every metric in the Prometheus text format: the current scheduler (core counters, the
    /// pool's per-endpoint figures, plugins' sources), the scraper, the adaptive controller
    /// and config reloads, then the adapter's own sources
    /// ([`RuntimeOptions::metrics_sources`](crate::RuntimeOptions::metrics_sources)), then the
    /// upstream `llm_d_epp_*` families ([`crate::upstream`]).
    pub fn render_metrics(&self) -> String {
        let mut sources: Vec<&dyn MetricsSource> = vec![
            &*self.scheduler,
            &*self.scrape,
            &*self.adaptive,
            &*self.reloads,
        ];
        sources.extend(self.extra.iter().map(|s| &**s));
        render_prometheus(&[&self.upstream.render_after(&sources)])
    }

    /// Whether this replica leads (always, without leader election).
    pub fn is_leader(&self) -> bool {
        self.leadership
            .as_ref()
            .is_none_or(|leading| *leading.borrow())
    }

    /// Whether the runtime can take requests: not shutting down, leading (under leader
    /// election), and either flow control is on (it holds requests until an endpoint can
    /// serve them: a pool scaled to zero must not make the picker unready) or at least one
    /// endpoint that accepts requests has metrics younger than the scheduler's staleness
    /// bound.
    pub fn is_ready(&self) -> bool {
        if self.shutdown.is_shutting_down() || !self.is_leader() {
            return false;
        }
        if self.holds_requests {
            return true;
        }
        let scheduler = self.scheduler.load();
        let pool = scheduler.pool();
        let now = pool.clock().now();
        let bound = scheduler.staleness_bound();
        pool.load()
            .endpoints()
            .iter()
            .any(|e| e.accepts_requests() && !e.load_metrics().is_stale(now, bound))
    }

    /// The upstream families, which the adapters record requests in.
    pub fn upstream(&self) -> &Arc<crate::upstream::UpstreamMetrics> {
        &self.upstream
    }

    /// The config in force.
    pub fn config(&self) -> Arc<RuntimeConfig> {
        Arc::clone(&self.config.borrow())
    }

    /// The adaptive debug view (see [`AdaptiveRunner::debug_json`]).
    pub fn adaptive_json(&self, limit: Option<usize>) -> serde_json::Value {
        self.adaptive.debug_json(limit)
    }
}
