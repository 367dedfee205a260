//! The discovery's figures, on the admin port's `/metrics`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use shepherd_scheduler_core::metrics::{MetricDesc, MetricsSource, MetricsVisitor};

const STALE: MetricDesc<'static> = MetricDesc::new(
    "shepherd_discovery_stale",
    "1 while a watch of the API server fails: the last endpoint set stays in force.",
);
const ERRORS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_discovery_watch_errors_total",
    "Errors from the API server (list, watch, connection), by watched resource.",
);
const EVENTS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_discovery_events_total",
    "Objects received from the API server (listed or watched), by watched resource.",
);
const RELISTS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_discovery_relists_total",
    "Complete lists of a resource (at start, after 410 Gone, after a selector change).",
);
const REFUSED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_discovery_pool_refused_total",
    "InferencePool versions refused (bad selector, 0 or more than 8 ports): the last valid pool stayed.",
);
const POOL_PRESENT: MetricDesc<'static> = MetricDesc::new(
    "shepherd_discovery_pool_present",
    "1 when a valid pool (or the endpoint selector) is in force, 0 when the pool is missing or deleted.",
);
const PODS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_discovery_serving_pods",
    "Pods that are Ready, not being deleted and have an IP.",
);
const ENDPOINTS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_discovery_endpoints",
    "Endpoints in the set last published (pods times their active target ports).",
);
const PUBLISHED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_discovery_sets_published_total",
    "Endpoint sets published to the pool (membership changes).",
);

/// Which watch a figure is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watched {
    /// The InferencePool.
    Pool,
    /// The pods.
    Pods,
}

impl Watched {
    fn label(self) -> &'static str {
        match self {
            Watched::Pool => "inferencepool",
            Watched::Pods => "pods",
        }
    }
}

/// Counters and gauges of a [`KubernetesDiscovery`](super::KubernetesDiscovery).
#[derive(Debug, Default)]
pub struct DiscoveryStats {
    pub(crate) stale_pool: AtomicBool,
    pub(crate) stale_pods: AtomicBool,
    errors: [AtomicU64; 2],
    events: [AtomicU64; 2],
    relists: [AtomicU64; 2],
    pub(crate) refused: AtomicU64,
    pub(crate) pool_present: AtomicBool,
    pub(crate) pods: AtomicU64,
    pub(crate) endpoints: AtomicU64,
    pub(crate) published: AtomicU64,
}

impl DiscoveryStats {
    /// Whether a watch is failing (the set in force may be out of date).
    pub fn stale(&self) -> bool {
        self.stale_pool.load(Ordering::Relaxed) || self.stale_pods.load(Ordering::Relaxed)
    }

    /// Errors seen on a watch.
    pub fn errors(&self, watched: Watched) -> u64 {
        self.errors[watched as usize].load(Ordering::Relaxed)
    }

    /// Objects received on a watch.
    pub fn events(&self, watched: Watched) -> u64 {
        self.events[watched as usize].load(Ordering::Relaxed)
    }

    /// Complete lists done on a watch.
    pub fn relists(&self, watched: Watched) -> u64 {
        self.relists[watched as usize].load(Ordering::Relaxed)
    }

    /// Pool versions refused.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Whether a valid pool is in force.
    pub fn pool_present(&self) -> bool {
        self.pool_present.load(Ordering::Relaxed)
    }

    /// Serving pods known.
    pub fn serving_pods(&self) -> u64 {
        self.pods.load(Ordering::Relaxed)
    }

    /// Endpoints in the last published set.
    pub fn endpoints(&self) -> u64 {
        self.endpoints.load(Ordering::Relaxed)
    }

    /// Sets published.
    pub fn published(&self) -> u64 {
        self.published.load(Ordering::Relaxed)
    }

    pub(crate) fn error(&self, watched: Watched) {
        self.errors[watched as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn event(&self, watched: Watched) {
        self.events[watched as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn relisted(&self, watched: Watched) {
        self.relists[watched as usize].fetch_add(1, Ordering::Relaxed);
    }
}

impl MetricsSource for DiscoveryStats {
    fn visit_metrics(&self, v: &mut dyn MetricsVisitor) {
        v.gauge(
            STALE,
            &[("source", "kubernetes")],
            f64::from(u8::from(self.stale())),
        );
        for watched in [Watched::Pool, Watched::Pods] {
            let labels = [("resource", watched.label())];
            v.counter(ERRORS, &labels, self.errors(watched));
            v.counter(EVENTS, &labels, self.events(watched));
            v.counter(RELISTS, &labels, self.relists(watched));
        }
        v.counter(REFUSED, &[], self.refused());
        v.gauge(POOL_PRESENT, &[], f64::from(u8::from(self.pool_present())));
        v.gauge(PODS, &[], self.serving_pods() as f64);
        v.gauge(ENDPOINTS, &[], self.endpoints() as f64);
        v.counter(PUBLISHED, &[], self.published());
    }
}
