//! Reporting the upstream families to a metrics visitor.

use std::sync::atomic::Ordering;

use shepherd_scheduler_core::metrics::{
    HistogramSnapshot, MetricDesc, MetricsSource, MetricsVisitor,
};

use super::legacy::LegacyNames;
use super::names::{self as n, Family};
use super::series::FLOW_OUTCOMES;
use super::{GRPC_CODES, UpstreamMetrics};

impl MetricsSource for UpstreamMetrics {
    /// The upstream families alone (the prefix-index and plugin figures read from the
    /// attached scheduler). [`UpstreamMetrics::render_after`] renders them after other
    /// sources without reading the scheduler twice.
    fn visit_metrics(&self, v: &mut dyn MetricsVisitor) {
        let mut figures = SchedulerFigures::default();
        if let Some(attached) = self.attached.get() {
            attached.scheduler.visit_metrics(&mut figures);
        }
        self.visit_with(v, &figures);
    }
}

impl UpstreamMetrics {
    /// `sources` (which include the attached scheduler), then the upstream families, as one
    /// source: the scheduler's prefix-index and plugin figures are taken on the way.
    pub fn render_after<'a>(
        &'a self,
        sources: &'a [&'a dyn MetricsSource],
    ) -> impl MetricsSource + 'a {
        After {
            upstream: self,
            sources,
        }
    }

    fn visit_with(&self, v: &mut dyn MetricsVisitor, figures: &SchedulerFigures) {
        if self.legacy_names() {
            let mut legacy = LegacyNames::new(v);
            self.visit_current(&mut legacy, figures);
            legacy.flush();
        } else {
            self.visit_current(v, figures);
        }
    }
}

/// Other sources, then the upstream families. See [`UpstreamMetrics::render_after`].
struct After<'a> {
    upstream: &'a UpstreamMetrics,
    sources: &'a [&'a dyn MetricsSource],
}

impl MetricsSource for After<'_> {
    fn visit_metrics(&self, v: &mut dyn MetricsVisitor) {
        let mut tee = Tee {
            inner: v,
            figures: SchedulerFigures::default(),
        };
        for source in self.sources {
            source.visit_metrics(&mut tee);
        }
        let Tee { inner, figures } = tee;
        self.upstream.visit_with(inner, &figures);
    }
}

/// Passes everything on, keeping the scheduler's figures the upstream families need.
struct Tee<'a> {
    inner: &'a mut dyn MetricsVisitor,
    figures: SchedulerFigures,
}

impl MetricsVisitor for Tee<'_> {
    fn counter(&mut self, desc: MetricDesc<'_>, labels: &[(&str, &str)], value: u64) {
        self.inner.counter(desc, labels, value);
    }

    fn gauge(&mut self, desc: MetricDesc<'_>, labels: &[(&str, &str)], value: f64) {
        self.inner.gauge(desc, labels, value);
        self.figures.gauge(desc, labels, value);
    }

    fn histogram(&mut self, desc: MetricDesc<'_>, labels: &[(&str, &str)], h: &HistogramSnapshot) {
        self.inner.histogram(desc, labels, h);
        self.figures.histogram(desc, labels, h);
    }
}

/// A histogram reported only once it has observations (as upstream's vectors create a series
/// at its first observation).
fn histogram(
    v: &mut dyn MetricsVisitor,
    f: Family,
    labels: &[(&str, &str)],
    h: &HistogramSnapshot,
) {
    if h.count > 0 {
        v.histogram(f.desc, labels, h);
    }
}

impl UpstreamMetrics {
    fn visit_current(&self, v: &mut dyn MetricsVisitor, figures: &SchedulerFigures) {
        self.visit_requests(v);
        if let Some(attached) = self.attached.get() {
            self.visit_pool(v, attached, figures);
        }
        self.visit_scheduling(v);
        self.visit_streams(v);
    }

    fn visit_requests(&self, v: &mut dyn MetricsVisitor) {
        let map = self.series.snapshot();
        let mut all: Vec<_> = map.iter().collect();
        all.sort_by(|a, b| {
            (&a.0.model, &a.0.target, &a.0.fairness, a.0.priority).cmp(&(
                &b.0.model,
                &b.0.target,
                &b.0.fairness,
                b.0.priority,
            ))
        });
        let pool = self.settings.pool_name.as_str();
        let mut flow_requests: Vec<(&'static str, i32, u64)> = Vec::new();
        for (key, s) in all {
            let priority = key.priority.to_string();
            let labels = [
                ("model_name", &*key.model),
                ("target_model_name", &*key.target),
                ("fairness_id", &*key.fairness),
                ("priority", priority.as_str()),
            ];
            v.counter(
                n::REQUEST_TOTAL.desc,
                &labels,
                s.requests.load(Ordering::Relaxed),
            );
            for (code, count) in s.errors.lock().iter() {
                let mut with = labels.to_vec();
                with.push(("error_code", code));
                v.counter(n::REQUEST_ERROR_TOTAL.desc, &with, *count);
            }
            v.gauge(n::RUNNING.desc, &labels, s.running() as f64);
            histogram(v, n::REQUEST_DURATION, &labels, &s.duration.snapshot());
            histogram(v, n::REQUEST_SIZE, &labels, &s.request_size.snapshot());
            histogram(v, n::RESPONSE_SIZE, &labels, &s.response_size.snapshot());
            histogram(v, n::INPUT_TOKENS, &labels, &s.input_tokens.snapshot());
            histogram(v, n::OUTPUT_TOKENS, &labels, &s.output_tokens.snapshot());
            histogram(v, n::CACHED_TOKENS, &labels, &s.cached_tokens.snapshot());
            histogram(v, n::NTPOT, &labels, &s.ntpot.snapshot());
            for (streaming, h) in ["false", "true"].iter().zip(&s.ttft) {
                let mut with = labels.to_vec();
                with.push(("streaming", streaming));
                histogram(v, n::TTFT, &with, &h.snapshot());
            }
            histogram(v, n::STREAMING_TPOT, &labels, &s.tpot.snapshot());

            // Flow control, for label sets that went through it.
            let waits: Vec<HistogramSnapshot> = s.flow_waits.iter().map(|h| h.snapshot()).collect();
            let queued = s.flow_queued.load(Ordering::Relaxed);
            if queued != 0 || waits.iter().any(|w| w.count > 0) {
                let flow_labels = [
                    ("fairness_id", &*key.fairness),
                    ("priority", priority.as_str()),
                    ("inference_pool", pool),
                    ("model_name", &*key.model),
                    ("target_model_name", &*key.target),
                ];
                v.gauge(n::FLOW_QUEUE_SIZE.desc, &flow_labels, queued as f64);
                v.gauge(
                    n::FLOW_QUEUE_BYTES.desc,
                    &flow_labels,
                    s.flow_bytes.load(Ordering::Relaxed) as f64,
                );
                for (outcome, w) in FLOW_OUTCOMES.iter().zip(&waits) {
                    let with = [
                        ("fairness_id", &*key.fairness),
                        ("priority", priority.as_str()),
                        ("outcome", outcome),
                        ("inference_pool", pool),
                        ("model_name", &*key.model),
                        ("target_model_name", &*key.target),
                    ];
                    histogram(v, n::FLOW_QUEUE_DURATION, &with, w);
                    if w.count > 0 {
                        match flow_requests
                            .iter_mut()
                            .find(|(o, p, _)| o == outcome && *p == key.priority)
                        {
                            Some(entry) => entry.2 += w.count,
                            None => flow_requests.push((outcome, key.priority, w.count)),
                        }
                    }
                }
            }
        }
        flow_requests.sort();
        for (outcome, priority, count) in flow_requests {
            let priority = priority.to_string();
            v.counter(
                n::FLOW_REQUESTS.desc,
                &[
                    ("outcome", outcome),
                    ("priority", priority.as_str()),
                    ("inference_pool", pool),
                ],
                count,
            );
        }
    }

    fn visit_pool(
        &self,
        v: &mut dyn MetricsVisitor,
        attached: &super::Attached,
        prefix: &SchedulerFigures,
    ) {
        let pool_name = self.settings.pool_name.as_str();
        let name = [("name", pool_name)];
        let scheduler = attached.scheduler.load();
        let pool = scheduler.pool();
        let now = pool.clock().now();
        let bound = scheduler.staleness_bound();
        let snapshot = pool.load();
        let (mut kv, mut queue, mut running, mut scraped, mut ready) = (0.0, 0.0, 0.0, 0u32, 0u32);
        for e in snapshot.endpoints() {
            let load = e.load_metrics();
            if load.scraped_at.is_some() {
                scraped += 1;
                kv += load.kv_utilization_clamped();
                queue += f64::from(load.waiting);
                running += f64::from(load.running);
                v.gauge(
                    n::PER_ENDPOINT_QUEUE.desc,
                    &[("name", pool_name), ("model_server_endpoint", e.address())],
                    f64::from(load.waiting),
                );
            }
            if e.accepts_requests() && !load.is_stale(now, bound) {
                ready += 1;
            }
        }
        let average = |sum: f64| {
            if scraped == 0 {
                0.0
            } else {
                sum / f64::from(scraped)
            }
        };
        v.gauge(n::AVG_KV.desc, &name, average(kv));
        v.gauge(n::AVG_QUEUE.desc, &name, average(queue));
        v.gauge(n::AVG_RUNNING.desc, &name, average(running));
        v.gauge(n::READY_ENDPOINTS.desc, &name, f64::from(ready));

        // The prefix index's size, the picks' hit ratio and the plugin durations, from the
        // scheduler's own figures.
        for (plugin, entries) in &prefix.sizes {
            v.gauge(
                n::PREFIX_SIZE.desc,
                &[("plugin_name", plugin), ("plugin_type", PREFIX_PLUGIN_TYPE)],
                *entries,
            );
        }
        for (labels, h) in &prefix.plugins {
            let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
            histogram(v, n::PLUGIN_DURATION, &labels, h);
        }
        if let Some(ratio) = &prefix.hit_ratio {
            v.histogram(
                n::PREFIX_HIT_RATIO.desc,
                &[
                    ("plugin_name", PREFIX_PLUGIN_TYPE),
                    ("plugin_type", PREFIX_PLUGIN_TYPE),
                ],
                ratio,
            );
        }

        if let Some(flow) = &attached.flow {
            v.gauge(
                n::FLOW_SATURATION.desc,
                &[("inference_pool", pool_name), ("stage", "effective")],
                flow.saturation(),
            );
        }
    }

    fn visit_scheduling(&self, v: &mut dyn MetricsVisitor) {
        histogram(v, n::SCHEDULER_E2E, &[], &self.scheduler_e2e.snapshot());
        let map = self.attempts.snapshot();
        let mut all: Vec<_> = map.iter().collect();
        all.sort_by(|a, b| a.0.cmp(b.0));
        for ((ok, target, endpoint), count) in all {
            let (host, port) = endpoint.rsplit_once(':').unwrap_or((endpoint, ""));
            v.counter(
                n::SCHEDULER_ATTEMPTS.desc,
                &[
                    ("status", if *ok { "success" } else { "failure" }),
                    ("target_model_name", target),
                    ("endpoint_name", host),
                    ("namespace", ""),
                    ("port", port),
                ],
                count.load(Ordering::Relaxed),
            );
        }
        let map = self.rewrites.snapshot();
        let mut all: Vec<_> = map.iter().collect();
        all.sort_by(|a, b| a.0.cmp(b.0));
        for ((rule, model, target), count) in all {
            v.counter(
                n::MODEL_REWRITE_DECISIONS.desc,
                &[
                    ("model_rewrite_name", rule),
                    ("model_name", model),
                    ("target_model", target),
                ],
                count.load(Ordering::Relaxed),
            );
        }
    }

    fn visit_streams(&self, v: &mut dyn MetricsVisitor) {
        if !self.streams_enabled.load(Ordering::Relaxed) {
            return;
        }
        v.gauge(
            n::EXTPROC_INFLIGHT.desc,
            &[],
            self.streams_open.load(Ordering::Relaxed) as f64,
        );
        for (code, count) in GRPC_CODES.iter().zip(&self.streams_total) {
            let count = count.load(Ordering::Relaxed);
            if count > 0 {
                v.counter(n::EXTPROC_TOTAL.desc, &[("code", code)], count);
            }
        }
        histogram(
            v,
            n::EXTPROC_DURATION,
            &[],
            &self.stream_duration.snapshot(),
        );
    }
}

/// The plugin type upstream labels its approximate prefix index with.
const PREFIX_PLUGIN_TYPE: &str = "prefix-cache-scorer";

/// Picks the prefix index's figures and the plugin durations out of the scheduler's report.
#[derive(Debug, Default)]
struct SchedulerFigures {
    sizes: Vec<(String, f64)>,
    hit_ratio: Option<HistogramSnapshot>,
    /// `shepherd_plugin_duration_seconds`, whose labels are upstream's.
    plugins: Vec<(Vec<(&'static str, String)>, HistogramSnapshot)>,
}

/// The labels of the plugin durations, in upstream's order.
const PLUGIN_LABELS: [&str; 3] = ["extension_point", "plugin_type", "plugin_name"];

impl MetricsVisitor for SchedulerFigures {
    fn counter(&mut self, _: MetricDesc<'_>, _: &[(&str, &str)], _: u64) {}

    fn gauge(&mut self, desc: MetricDesc<'_>, labels: &[(&str, &str)], value: f64) {
        if desc.name == "shepherd_prefix_index_entries" {
            let plugin = labels
                .iter()
                .find(|(k, _)| *k == "plugin")
                .map_or("", |(_, v)| *v);
            self.sizes.push((plugin.to_owned(), value));
        }
    }

    fn histogram(&mut self, desc: MetricDesc<'_>, labels: &[(&str, &str)], h: &HistogramSnapshot) {
        if desc.name == "shepherd_plugin_duration_seconds" {
            let labels = PLUGIN_LABELS
                .iter()
                .map(|name| {
                    let value = labels
                        .iter()
                        .find(|(k, _)| k == name)
                        .map_or("", |(_, v)| *v);
                    (*name, value.to_owned())
                })
                .collect();
            self.plugins.push((labels, h.clone()));
        }
        if desc.name == "shepherd_picked_prefix_hit_ratio" {
            let total = self.hit_ratio.get_or_insert_with(|| HistogramSnapshot {
                buckets: h.buckets.iter().map(|(b, _)| (*b, 0)).collect(),
                sum: 0.0,
                count: 0,
            });
            if total.buckets.len() == h.buckets.len() {
                for (a, b) in total.buckets.iter_mut().zip(&h.buckets) {
                    a.1 += b.1;
                }
                total.sum += h.sum;
                total.count += h.count;
            }
        }
    }
}
