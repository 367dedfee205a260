//! `utilization-filter` (upstream's name): drops the endpoints over any of its load caps.
//!
//! Each condition caps one metric; an endpoint is kept only when its value is at most every
//! condition's `maxValue` (so several conditions drop an endpoint when *any* cap is passed).
//!
//! | `metric` | value |
//! |---|---|
//! | `active-requests` | the requests Shepherd has routed to the endpoint and not seen finish (upstream's `inflight-load-producer` count) |
//! | `running-requests` | running requests, as scraped |
//! | `waiting-queue` | waiting requests, as scraped |
//! | `kv-cache-utilization` | KV-cache use in `[0, 1]`, as scraped (`maxValue` at most 1) |
//!
//! An endpoint never scraped reads 0, as upstream reads a missing metric. With
//! `fallbackOnEmpty: true`, a filter that would drop every candidate keeps them all.
//! `inFlightLoadProducerName` is accepted: the endpoints count their own requests in flight.
//!
//! ```
//! use shepherd_scorers::filters::utilization::UtilizationFilterParameters;
//!
//! let p: UtilizationFilterParameters = serde_json::from_str(
//!     r#"{"conditions": [{"metric": "running-requests", "maxValue": 40},
//!                        {"metric": "waiting-queue", "maxValue": 0}],
//!         "fallbackOnEmpty": true}"#,
//! ).unwrap();
//! assert_eq!(p.conditions.len(), 2);
//! ```

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{CycleState, Filter, PluginInstance};

/// Registry type name.
pub const TYPE_NAME: &str = "utilization-filter";

/// A metric the filter caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum UtilizationMetric {
    /// Requests in flight from this picker.
    #[serde(rename = "active-requests")]
    ActiveRequests,
    /// Running requests, as scraped.
    #[serde(rename = "running-requests")]
    RunningRequests,
    /// Waiting requests, as scraped.
    #[serde(rename = "waiting-queue")]
    WaitingQueue,
    /// KV-cache use, as scraped.
    #[serde(rename = "kv-cache-utilization")]
    KvCacheUtilization,
}

/// One cap.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Condition {
    /// The metric capped.
    pub metric: UtilizationMetric,
    /// Largest value an endpoint may have and be kept (required).
    pub max_value: Option<f64>,
}

/// The `utilization-filter` parameters (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct UtilizationFilterParameters {
    /// The caps (at least one).
    pub conditions: Vec<Condition>,
    /// Keep every candidate when none passes.
    pub fallback_on_empty: bool,
    /// Upstream's in-flight producer to read (accepted; the endpoints count themselves).
    pub in_flight_load_producer_name: Option<String>,
}

/// The filter (see the module docs).
#[derive(Debug)]
pub struct UtilizationFilter {
    caps: Vec<(UtilizationMetric, f64)>,
    fallback_on_empty: bool,
}

impl UtilizationFilter {
    /// A filter from checked parameters.
    ///
    /// # Errors
    ///
    /// [`PluginError`] as upstream: no condition, a condition without `maxValue`, a negative
    /// cap, a KV-cache cap over 1.
    pub fn new(parameters: UtilizationFilterParameters) -> Result<Self, PluginError> {
        if parameters.conditions.is_empty() {
            return Err(PluginError::invalid(
                "conditions",
                "utilization filter requires at least one condition",
            ));
        }
        let mut caps = Vec::with_capacity(parameters.conditions.len());
        for condition in parameters.conditions {
            let Some(max) = condition.max_value else {
                return Err(PluginError::invalid("conditions[].maxValue", "is required"));
            };
            if max.is_nan() || max < 0.0 {
                return Err(PluginError::invalid(
                    "conditions[].maxValue",
                    format!("must be non-negative, got {max}"),
                ));
            }
            if condition.metric == UtilizationMetric::KvCacheUtilization && max > 1.0 {
                return Err(PluginError::invalid(
                    "conditions[].maxValue",
                    format!("kv-cache-utilization is a fraction and must be at most 1, got {max}"),
                ));
            }
            caps.push((condition.metric, max));
        }
        Ok(UtilizationFilter {
            caps,
            fallback_on_empty: parameters.fallback_on_empty,
        })
    }

    fn keeps(&self, endpoint: &Endpoint) -> bool {
        let load = endpoint.load_metrics();
        self.caps.iter().all(|(metric, max)| {
            let value = match metric {
                UtilizationMetric::ActiveRequests => endpoint.in_flight_requests() as f64,
                UtilizationMetric::RunningRequests => f64::from(load.running),
                UtilizationMetric::WaitingQueue => f64::from(load.waiting),
                UtilizationMetric::KvCacheUtilization => {
                    if load.kv_utilization.is_nan() {
                        0.0
                    } else {
                        load.kv_utilization
                    }
                }
            };
            value <= *max
        })
    }
}

impl Filter for UtilizationFilter {
    fn filter(&self, _cycle: &mut CycleState<'_>, candidates: &mut Vec<&Arc<Endpoint>>) {
        if self.fallback_on_empty && !candidates.iter().any(|e| self.keeps(e)) {
            return;
        }
        candidates.retain(|e| self.keeps(e));
    }
}

/// Builds a `utilization-filter`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters: UtilizationFilterParameters = args.parse()?;
    Ok(PluginInstance::filter(Arc::new(UtilizationFilter::new(
        parameters,
    )?)))
}
