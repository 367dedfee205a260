//! `multicluster-metrics-extractor`: a cluster's pool aggregates into endpoint attributes.
//!
//! At every scrape of a cluster, the newest sample of `kvCacheUtilizationMetric` (default
//! `llm_d_epp_average_kv_cache_utilization`) becomes the attribute
//! `llm-d.ai/multicluster-kv-cache-utilization`, and that of `queueSizeMetric` (default
//! `llm_d_epp_average_queue_size`) the attribute `llm-d.ai/multicluster-queue-size`; a metric
//! missing from the page leaves its attribute absent (the other is still written), and a page
//! with neither is a failed scrape. Both parameters are metric specs (`name{label=value}`)
//! checked at load. The same values are the cluster's load metrics for the rest of Shepherd
//! (waiting = the queue size, KV utilization = the pool's), so saturation detection and the
//! adaptive weights see clusters too; its per-pod engine metrics are not read.
//!
//! ```
//! use shepherd_runtime::multicluster::MultiClusterExtractorParams;
//! use shepherd_runtime::prom::parse;
//!
//! let mapping = MultiClusterExtractorParams::default().mapping().unwrap();
//! let page = b"llm_d_epp_average_kv_cache_utilization 0.62\nllm_d_epp_average_queue_size 4\n";
//! let out = mapping.extract(&parse(page).unwrap());
//! assert_eq!(out.attributes, [
//!     ("llm-d.ai/multicluster-kv-cache-utilization".to_string(), 0.62),
//!     ("llm-d.ai/multicluster-queue-size".to_string(), 4.0),
//! ]);
//! assert_eq!(out.metrics.waiting, 4);
//! ```

use serde::{Deserialize, Serialize};
use shepherd_scorers::multicluster::{
    DEFAULT_KV_CACHE_UTILIZATION_METRIC, DEFAULT_QUEUE_SIZE_METRIC, KV_CACHE_UTILIZATION_KEY,
    QUEUE_SIZE_KEY,
};

use crate::mapping::{CustomMetric, EngineMapping, MetricSpec, Specs};

/// The type name.
pub const EXTRACTOR_TYPE: &str = "multicluster-metrics-extractor";

/// The name of the mapping every cluster is read with.
pub const MAPPING_NAME: &str = "multicluster";

/// The parameters (see the module docs); empty strings mean the defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct MultiClusterExtractorParams {
    /// The pool's KV-cache utilization metric.
    pub kv_cache_utilization_metric: String,
    /// The pool's queue-size metric.
    pub queue_size_metric: String,
}

fn spec(field: &str, text: &str, default: &str) -> Result<MetricSpec, String> {
    let text = if text.is_empty() { default } else { text };
    text.parse::<MetricSpec>()
        .map_err(|e| format!("{field}: not a valid metric specification {text:?}: {e}"))
}

impl MultiClusterExtractorParams {
    /// The mapping every cluster's page is read with.
    ///
    /// # Errors
    ///
    /// A metric parameter that is not a valid spec (upstream: `1_bad` is refused).
    pub fn mapping(&self) -> Result<EngineMapping, String> {
        let kv = spec(
            "kv-cache utilization metric",
            &self.kv_cache_utilization_metric,
            DEFAULT_KV_CACHE_UTILIZATION_METRIC,
        )?;
        let queue = spec(
            "queue size metric",
            &self.queue_size_metric,
            DEFAULT_QUEUE_SIZE_METRIC,
        )?;
        Ok(EngineMapping {
            queued_requests_spec: Specs::from(vec![queue.clone()]),
            kv_usage_spec: Specs::from(vec![kv.clone()]),
            custom_metrics: vec![
                CustomMetric {
                    attribute_key: KV_CACHE_UTILIZATION_KEY.into(),
                    metric_spec: kv,
                },
                CustomMetric {
                    attribute_key: QUEUE_SIZE_KEY.into(),
                    metric_spec: queue,
                },
            ],
            ..EngineMapping::empty(MAPPING_NAME)
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::prom::parse;

    fn attributes(params: &MultiClusterExtractorParams, page: &str) -> Vec<(String, f64)> {
        params
            .mapping()
            .unwrap()
            .extract(&parse(page.as_bytes()).unwrap())
            .attributes
    }

    // extractor/metrics/multicluster_test.go, TestMultiClusterMetricsExtractor.
    #[test]
    fn upstreams_extraction_cases() {
        let defaults = MultiClusterExtractorParams::default();
        assert_eq!(
            attributes(
                &defaults,
                "llm_d_epp_average_kv_cache_utilization 0.42\nllm_d_epp_average_queue_size 7\n"
            ),
            [
                (KV_CACHE_UTILIZATION_KEY.to_string(), 0.42),
                (QUEUE_SIZE_KEY.to_string(), 7.0)
            ]
        );
        // Missing queue: the KV value is still written.
        assert_eq!(
            attributes(&defaults, "llm_d_epp_average_kv_cache_utilization 0.9\n"),
            [(KV_CACHE_UTILIZATION_KEY.to_string(), 0.9)]
        );
        assert!(attributes(&defaults, "").is_empty());
    }

    // TestMultiClusterMetricsExtractorCustomNames.
    #[test]
    fn custom_names_write_the_same_attributes() {
        let params = MultiClusterExtractorParams {
            kv_cache_utilization_metric: "custom_kv".into(),
            queue_size_metric: "custom_queue".into(),
        };
        assert_eq!(
            attributes(&params, "custom_kv 0.3\ncustom_queue 2\n"),
            [
                (KV_CACHE_UTILIZATION_KEY.to_string(), 0.3),
                (QUEUE_SIZE_KEY.to_string(), 2.0)
            ]
        );
    }

    // TestMultiClusterMetricsExtractorInvalidMetricName.
    #[test]
    fn an_invalid_metric_name_is_refused() {
        let params = MultiClusterExtractorParams {
            kv_cache_utilization_metric: "1_bad".into(),
            ..Default::default()
        };
        assert!(params.mapping().is_err());
        let strict: Result<MultiClusterExtractorParams, _> =
            serde_json::from_str(r#"{"queueSizeMetrics": "x"}"#);
        assert!(strict.is_err());
    }
}
