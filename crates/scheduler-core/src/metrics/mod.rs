//! The metrics surface: counters the core keeps cheaply on the request path, and a visitor
//! through which an embedder exports them (the runtime renders Prometheus text with
//! [`render_prometheus`]).
//!
//! Nothing here is global. The embedder creates one [`CoreMetrics`] (usually inside a
//! [`SharedState`](crate::shared::SharedState)) and hands it to every scheduler it builds, so
//! counters survive config reloads. Everything else that has figures to report — the pool, a
//! plugin such as the prefix-cache scorer, the adaptive controller — implements
//! [`MetricsSource`] and is visited at export time; no one keeps a registry of statics.
//!
//! Counters written on every pick are [`StripedCounter`]s: each thread adds to its own cache
//! line, so two threads picking at once do not fight over one.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scheduler_core::metrics::render_prometheus;
//!
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["10.0.0.1:8000"]);
//! let scheduler = Scheduler::builder(pool).profile(Profile::builder("default").build()).build().unwrap();
//! let request = InferenceRequest::new("r1", "llama", Prompt::Text("hi".into()));
//! scheduler.schedule(&request).unwrap().finish(Completion::success(None));
//!
//! let text = render_prometheus(&[&scheduler]);
//! assert!(text.contains("shepherd_picks_total{profile=\"default\"} 1"));
//! assert!(text.contains("shepherd_endpoint_picks_total{endpoint=\"10.0.0.1:8000\"} 1"));
//! assert!(text.contains("shepherd_completions_total{outcome=\"success\"} 1"));
//! ```

mod bounded;
mod buckets;
mod core_metrics;
mod histogram;
mod striped;
mod text;
mod visitor;

pub use bounded::{LabelBound, OVERFLOW_LABEL};
pub use buckets::BucketHistogram;
pub use core_metrics::{
    CoreMetrics, HIT_RATIO_BOUNDS, PLUGIN_DURATION_BOUNDS, PLUGIN_TIMING_SAMPLE, ProfileMetrics,
};
pub use histogram::{HistogramSnapshot, LatencyHistogram};
pub use striped::StripedCounter;
pub use text::render_prometheus;
pub use visitor::{MetricDesc, MetricsSource, MetricsVisitor};
