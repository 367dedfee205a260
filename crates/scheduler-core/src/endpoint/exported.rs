//! The pool's figures for export: per endpoint, what the scheduler did and what it last saw.

use super::Pool;
use crate::metrics::{MetricDesc, MetricsSource, MetricsVisitor};

const PICKS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_endpoint_picks_total",
    "Requests sent to this endpoint: picked as primary, or moved here as a fallback.",
);
const IN_FLIGHT: MetricDesc<'static> = MetricDesc::new(
    "shepherd_endpoint_in_flight_requests",
    "Requests scheduled here that have not ended.",
);
const PEER_IN_FLIGHT: MetricDesc<'static> = MetricDesc::new(
    "shepherd_endpoint_peer_in_flight_requests",
    "Requests other picker replicas last reported in flight on the endpoint (0 without a load exchange).",
);
const PENDING_PREFILL: MetricDesc<'static> = MetricDesc::new(
    "shepherd_endpoint_pending_prefill_tokens",
    "Uncached prompt tokens sent here whose first token has not come back.",
);
const ACCEPTING: MetricDesc<'static> = MetricDesc::new(
    "shepherd_endpoint_accepting",
    "1 when the endpoint takes new requests, 0 when draining or disabled.",
);
const METRICS_AGE: MetricDesc<'static> = MetricDesc::new(
    "shepherd_endpoint_metrics_age_seconds",
    "Age of the endpoint's latest scraped metrics (+Inf when never scraped).",
);
const WAITING: MetricDesc<'static> = MetricDesc::new(
    "shepherd_endpoint_waiting_requests",
    "Waiting requests the endpoint last reported.",
);
const RUNNING: MetricDesc<'static> = MetricDesc::new(
    "shepherd_endpoint_running_requests",
    "Running requests the endpoint last reported.",
);
const KV: MetricDesc<'static> = MetricDesc::new(
    "shepherd_endpoint_kv_cache_utilization",
    "KV-cache utilization the endpoint last reported (0..1).",
);

impl MetricsSource for Pool {
    fn visit_metrics(&self, v: &mut dyn MetricsVisitor) {
        let snapshot = self.snapshot();
        let now = self.clock().now();
        for e in snapshot.endpoints() {
            let labels = [("endpoint", e.address())];
            let load = e.load_metrics();
            v.counter(PICKS, &labels, e.picks_total());
            v.gauge(IN_FLIGHT, &labels, e.in_flight_requests() as f64);
            v.gauge(PEER_IN_FLIGHT, &labels, e.peer_load().requests as f64);
            v.gauge(PENDING_PREFILL, &labels, e.pending_prefill_tokens() as f64);
            v.gauge(
                ACCEPTING,
                &labels,
                f64::from(u8::from(e.accepts_requests())),
            );
            let age = load
                .scraped_at
                .map_or(f64::INFINITY, |t| now.saturating_since(t).as_secs_f64());
            v.gauge(METRICS_AGE, &labels, age);
            v.gauge(WAITING, &labels, f64::from(load.waiting));
            v.gauge(RUNNING, &labels, f64::from(load.running));
            v.gauge(KV, &labels, load.kv_utilization_clamped());
        }
    }
}
