//! What the scraper counts, per endpoint, exported as a [`MetricsSource`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use shepherd_scheduler_core::metrics::{
    HistogramSnapshot, MetricDesc, MetricsSource, MetricsVisitor,
};

use super::ScrapeError;

const SCRAPES: MetricDesc<'static> = MetricDesc::new(
    "shepherd_scrapes_total",
    "Scrapes of the endpoint's metrics page attempted.",
);
const ERRORS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_scrape_errors_total",
    "Failed scrapes of the endpoint's metrics page, by reason.",
);
const BAD_LINES: MetricDesc<'static> = MetricDesc::new(
    "shepherd_scrape_bad_lines_total",
    "Lines of the endpoint's metrics pages the parser skipped.",
);
const CONSECUTIVE: MetricDesc<'static> = MetricDesc::new(
    "shepherd_scrape_consecutive_failures",
    "Failed scrapes of the endpoint since its last successful one.",
);
const DURATION: MetricDesc<'static> = MetricDesc::new(
    "shepherd_scrape_duration_seconds",
    "Time to fetch, parse and map the endpoint's metrics page (successful scrapes).",
);

/// Upper bounds of the scrape latency buckets, in seconds.
const BOUNDS: [f64; 11] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

#[derive(Debug, Default)]
struct Latency {
    buckets: [u64; BOUNDS.len()],
    sum: f64,
    count: u64,
}

/// One endpoint's scrape counters.
#[derive(Debug, Default)]
pub struct EndpointScrapeStats {
    scrapes: AtomicU64,
    errors: [AtomicU64; ScrapeError::REASONS.len()],
    bad_lines: AtomicU64,
    consecutive_failures: AtomicU64,
    latency: Mutex<Latency>,
    last_error: Mutex<Option<String>>,
}

impl EndpointScrapeStats {
    /// Counts a successful scrape that took `took` and skipped `bad_lines` lines.
    pub(crate) fn success(&self, took: Duration, bad_lines: usize) {
        self.scrapes.fetch_add(1, Ordering::Relaxed);
        self.bad_lines
            .fetch_add(bad_lines as u64, Ordering::Relaxed);
        self.consecutive_failures.store(0, Ordering::Relaxed);
        let secs = took.as_secs_f64();
        let mut latency = self.latency.lock();
        latency.count += 1;
        latency.sum += secs;
        if let Some(b) = BOUNDS.iter().position(|&bound| secs <= bound) {
            latency.buckets[b] += 1;
        }
    }

    /// Counts a failed scrape; returns the number of consecutive failures, this one included.
    pub(crate) fn failure(&self, error: &ScrapeError, bad_lines: usize) -> u64 {
        self.scrapes.fetch_add(1, Ordering::Relaxed);
        self.bad_lines
            .fetch_add(bad_lines as u64, Ordering::Relaxed);
        if let Some(i) = ScrapeError::REASONS
            .iter()
            .position(|r| *r == error.reason())
        {
            self.errors[i].fetch_add(1, Ordering::Relaxed);
        }
        *self.last_error.lock() = Some(error.to_string());
        self.consecutive_failures.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Scrapes attempted.
    pub fn scrapes(&self) -> u64 {
        self.scrapes.load(Ordering::Relaxed)
    }

    /// Failed scrapes with `reason` (a label of `shepherd_scrape_errors_total`).
    pub fn errors(&self, reason: &str) -> u64 {
        ScrapeError::REASONS
            .iter()
            .position(|r| *r == reason)
            .map_or(0, |i| self.errors[i].load(Ordering::Relaxed))
    }

    /// Failed scrapes, all reasons.
    pub fn total_errors(&self) -> u64 {
        self.errors.iter().map(|e| e.load(Ordering::Relaxed)).sum()
    }

    /// Successful scrapes.
    pub fn successes(&self) -> u64 {
        self.latency.lock().count
    }

    /// Lines skipped by the parser, over every page.
    pub fn bad_lines(&self) -> u64 {
        self.bad_lines.load(Ordering::Relaxed)
    }

    /// Failures since the last success.
    pub fn consecutive_failures(&self) -> u64 {
        self.consecutive_failures.load(Ordering::Relaxed)
    }

    /// The latest failure's message.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().clone()
    }

    fn latency_snapshot(&self) -> HistogramSnapshot {
        let latency = self.latency.lock();
        let mut cumulative = 0;
        let buckets = BOUNDS
            .iter()
            .zip(latency.buckets)
            .map(|(&bound, n)| {
                cumulative += n;
                (bound, cumulative)
            })
            .collect();
        HistogramSnapshot {
            buckets,
            sum: latency.sum,
            count: latency.count,
        }
    }
}

/// Scrape counters of every endpoint being scraped, by address.
///
/// ```
/// use shepherd_runtime::scrape::ScrapeStats;
/// use shepherd_scheduler_core::metrics::render_prometheus;
///
/// let stats = ScrapeStats::default();
/// stats.endpoint("127.0.0.1:8000");
/// let text = render_prometheus(&[&stats]);
/// assert!(text.contains("shepherd_scrapes_total{endpoint=\"127.0.0.1:8000\"} 0"));
/// assert!(text.contains("shepherd_scrape_errors_total{endpoint=\"127.0.0.1:8000\",reason=\"timeout\"} 0"));
/// ```
#[derive(Debug, Default)]
pub struct ScrapeStats {
    endpoints: Mutex<BTreeMap<String, Arc<EndpointScrapeStats>>>,
}

impl ScrapeStats {
    /// The counters of `address`, created on first use.
    pub fn endpoint(&self, address: &str) -> Arc<EndpointScrapeStats> {
        Arc::clone(self.endpoints.lock().entry(address.to_owned()).or_default())
    }

    /// The counters of `address`, when it is being scraped.
    pub fn get(&self, address: &str) -> Option<Arc<EndpointScrapeStats>> {
        self.endpoints.lock().get(address).cloned()
    }

    /// Forgets `address` (it left the pool).
    pub(crate) fn remove(&self, address: &str) {
        self.endpoints.lock().remove(address);
    }

    /// Failed scrapes over every endpoint.
    pub fn total_errors(&self) -> u64 {
        self.endpoints
            .lock()
            .values()
            .map(|e| e.total_errors())
            .sum()
    }

    fn all(&self) -> Vec<(String, Arc<EndpointScrapeStats>)> {
        self.endpoints
            .lock()
            .iter()
            .map(|(a, e)| (a.clone(), Arc::clone(e)))
            .collect()
    }
}

impl MetricsSource for ScrapeStats {
    fn visit_metrics(&self, v: &mut dyn MetricsVisitor) {
        let all = self.all();
        for (address, e) in &all {
            v.counter(SCRAPES, &[("endpoint", address)], e.scrapes());
        }
        for (address, e) in &all {
            for (reason, count) in ScrapeError::REASONS.iter().zip(&e.errors) {
                v.counter(
                    ERRORS,
                    &[("endpoint", address), ("reason", reason)],
                    count.load(Ordering::Relaxed),
                );
            }
        }
        for (address, e) in &all {
            v.counter(BAD_LINES, &[("endpoint", address)], e.bad_lines());
        }
        for (address, e) in &all {
            v.gauge(
                CONSECUTIVE,
                &[("endpoint", address)],
                e.consecutive_failures() as f64,
            );
        }
        for (address, e) in &all {
            v.histogram(DURATION, &[("endpoint", address)], &e.latency_snapshot());
        }
    }
}
