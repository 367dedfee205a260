//! The `scraping` section: how often and how each endpoint's `/metrics` page is read, and
//! which metrics mean what.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::mapping::{CoreMetricsExtractorParams, MetricsDataSourceParams};
use crate::multicluster::{MultiClusterExtractorParams, MultiClusterSourceParams};
use crate::scrape::dcgm::DcgmSourceParams;
use crate::scrape::models::ModelsSourceParams;

/// Default time between two scrapes of one endpoint: 50 ms (DESIGN §2).
pub const DEFAULT_SCRAPE_INTERVAL_MS: u64 = 50;
/// Default scrape timeout: 1 s.
pub const DEFAULT_SCRAPE_TIMEOUT_MS: u64 = 1_000;
/// Default number of consecutive failed scrapes after which an endpoint's metrics are
/// forgotten (it then reads as never scraped).
pub const DEFAULT_CLEAR_AFTER_FAILURES: u32 = 3;

/// How endpoints are scraped.
///
/// `metricsDataSource` and `coreMetricsExtractor` take the parameters of the upstream plugins
/// of those names (see [`mapping`](crate::mapping)). They may instead be written, as upstream
/// does, as plugins of type `metrics-data-source` and `core-metrics-extractor` in the
/// top-level `plugins` list; the loader moves them here (giving both is an error).
///
/// ```
/// use std::time::Duration;
/// use shepherd_runtime::config::ScrapingConfig;
///
/// let scraping: ScrapingConfig = serde_norway::from_str(
///     "intervalMs: 100\ncoreMetricsExtractor: {defaultEngine: sglang}\n",
/// ).unwrap();
/// assert_eq!(scraping.interval(), Duration::from_millis(100));
/// assert_eq!(scraping.timeout(), Duration::from_secs(1));
/// assert_eq!(scraping.data_source().path, "/metrics");
/// assert_eq!(scraping.extractor().default_engine, "sglang");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ScrapingConfig {
    /// Time between two scrapes of one endpoint, in milliseconds (default 50).
    pub interval_ms: u64,
    /// Time allowed for one scrape, in milliseconds (default 1000).
    pub timeout_ms: u64,
    /// After this many consecutive failures, forget the endpoint's metrics so it reads as
    /// never scraped (default 3; 0 never forgets, and the metrics only go stale).
    pub clear_after_failures: u32,
    /// Parameters of the upstream `metrics-data-source` plugin (scheme and path).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics_data_source: Option<MetricsDataSourceParams>,
    /// Parameters of the upstream `core-metrics-extractor` plugin (engine mappings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub core_metrics_extractor: Option<CoreMetricsExtractorParams>,
    /// Parameters of an upstream `dcgm-data-source` plugin: GPU utilization from each
    /// endpoint's DCGM exporter ([`dcgm`](crate::scrape::dcgm)). Taken from the first such
    /// plugin in `plugins` when not given here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dcgm_data_source: Option<DcgmSourceParams>,
    /// The name of the `dcgm-data-source` plugin the parameters came from (for logs).
    #[serde(skip)]
    pub dcgm_source_name: String,
    /// Parameters of an upstream `multicluster-metrics-data-source` plugin (from `plugins`
    /// only; see [`multicluster`](crate::multicluster)).
    #[serde(skip)]
    pub multicluster_data_source: Option<MultiClusterSourceParams>,
    /// The name of that plugin (for logs).
    #[serde(skip)]
    pub multicluster_source_name: String,
    /// Parameters of an upstream `multicluster-metrics-extractor` plugin: when set, every
    /// endpoint is a cluster and is read with its mapping.
    #[serde(skip)]
    pub multicluster_metrics_extractor: Option<MultiClusterExtractorParams>,
    /// Scrape each endpoint at its `metricsAddress` / `metricsPort` labels (set when the
    /// endpoints come from `multicluster-file-discovery`).
    #[serde(skip)]
    pub metrics_host_from_labels: bool,
    /// Parameters of an upstream `models-data-source` plugin: each endpoint's `/v1/models`
    /// ([`models`](crate::scrape::models)). Taken from the first such plugin in `plugins` when
    /// not given here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub models_data_source: Option<ModelsSourceParams>,
    /// The name of the `models-data-source` plugin the parameters came from (for logs).
    #[serde(skip)]
    pub models_source_name: String,
}

impl Default for ScrapingConfig {
    fn default() -> Self {
        ScrapingConfig {
            interval_ms: DEFAULT_SCRAPE_INTERVAL_MS,
            timeout_ms: DEFAULT_SCRAPE_TIMEOUT_MS,
            clear_after_failures: DEFAULT_CLEAR_AFTER_FAILURES,
            metrics_data_source: None,
            core_metrics_extractor: None,
            dcgm_data_source: None,
            dcgm_source_name: String::new(),
            multicluster_data_source: None,
            multicluster_source_name: String::new(),
            multicluster_metrics_extractor: None,
            metrics_host_from_labels: false,
            models_data_source: None,
            models_source_name: String::new(),
        }
    }
}

impl ScrapingConfig {
    /// Time between two scrapes of one endpoint.
    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms)
    }

    /// Time allowed for one scrape.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// Where metrics pages are fetched (upstream defaults when not configured).
    pub fn data_source(&self) -> MetricsDataSourceParams {
        self.metrics_data_source.clone().unwrap_or_default()
    }

    /// Which engine mapping applies to which endpoint (upstream defaults when not
    /// configured).
    pub fn extractor(&self) -> CoreMetricsExtractorParams {
        self.core_metrics_extractor.clone().unwrap_or_default()
    }
}
