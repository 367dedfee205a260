//! The llm-d router's multi-cluster data layer: a picker whose endpoints are *peer clusters*
//! (each reached at its inference gateway), scored on the pool-aggregate load each peer's own
//! picker publishes.
//!
//! | upstream type | here |
//! |---|---|
//! | `multicluster-file-discovery` | [`discovery`]: the endpoints file of `file-discovery`, whose `address` may also be a hostname (resolved when the file is read) or an IPv6 address; `metricsAddress` / `metricsPort` labels move an endpoint's scrape target |
//! | `multicluster-metrics-data-source` | [`source`]: the scraper reads each cluster's metrics page (default scheme `https`, which Shepherd does not scrape: said at start) |
//! | `multicluster-metrics-extractor` | [`extractor`]: `llm_d_epp_average_kv_cache_utilization` and `llm_d_epp_average_queue_size` become the endpoint attributes the `multicluster-*` scorers read |
//!
//! The three are Alpha upstream (`--allow-experimental-plugins`). Upstream's wiring example
//! (`pkg/epp/framework/plugins/README.md`, llm-d router at `ebab68792`) loads as written:
//!
//! ```
//! use shepherd_runtime::config::RuntimeConfig;
//!
//! let config = RuntimeConfig::from_yaml(r#"
//! apiVersion: llm-d.ai/v1alpha1
//! kind: EndpointPickerConfig
//! plugins:
//!   - type: multicluster-file-discovery
//!     name: discovery
//!     parameters:
//!       path: /etc/epp/clusters.yaml
//!   - type: multicluster-metrics-data-source
//!     name: metrics-source
//!     parameters:
//!       scheme: http
//!   - type: multicluster-metrics-extractor
//!     name: metrics-extractor
//!   - type: multicluster-queue-scorer
//!     name: queue
//!   - type: max-score-picker
//!   - type: single-profile-handler
//! dataLayer:
//!   discovery:
//!     pluginRef: discovery
//!   sources:
//!     - pluginRef: metrics-source
//!       extractors:
//!         - pluginRef: metrics-extractor
//! "#)?;
//! let file = config.discovery.file.as_ref().unwrap();
//! assert!(file.multicluster);
//! assert_eq!(file.path, "/etc/epp/clusters.yaml");
//! assert!(config.scraping.multicluster_metrics_extractor.is_some());
//!
//! // Without the extractor the queue scorer has nothing to read: refused, as upstream.
//! let refused = RuntimeConfig::from_yaml(
//!     "plugins:\n- type: multicluster-queue-scorer\n- type: max-score-picker\n",
//! ).unwrap_err();
//! assert!(refused.to_string().contains("multicluster-metrics-extractor"));
//! # Ok::<(), shepherd_runtime::config::LoadError>(())
//! ```

pub mod discovery;
pub mod extractor;
pub mod source;

pub use discovery::{
    ClusterEntry, METRICS_ADDRESS_LABEL, METRICS_PORT_LABEL, metrics_target, parse_clusters_file,
};
pub use extractor::{EXTRACTOR_TYPE, MultiClusterExtractorParams};
pub use source::{MultiClusterSourceParams, SOURCE_TYPE};

/// Upstream's type name of the cluster discovery.
pub const DISCOVERY_TYPE: &str = "multicluster-file-discovery";

/// What the multi-cluster plugins of a config do here, one start-up line each: the source's
/// scheme, a cluster extractor without a source, hostname resolution.
pub fn warnings(
    scraping: &crate::config::ScrapingConfig,
    discovery: &crate::config::DiscoveryConfig,
) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(source) = &scraping.multicluster_data_source {
        out.extend(source.warnings(&scraping.multicluster_source_name));
    }
    if scraping.multicluster_metrics_extractor.is_some() {
        if scraping.multicluster_data_source.is_none() {
            out.push(format!(
                "{EXTRACTOR_TYPE}: no `{SOURCE_TYPE}` is declared, so the clusters are not \
                 scraped and the multicluster queue and KV-cache scorers score them 0"
            ));
        }
        out.push(format!(
            "{EXTRACTOR_TYPE}: every endpoint is read as a cluster (its pool averages are its \
             load metrics); engine mappings of a `core-metrics-extractor` are not applied"
        ));
    }
    if discovery.file.as_ref().is_some_and(|f| f.multicluster) {
        out.push(format!(
            "{DISCOVERY_TYPE}: a cluster's hostname is resolved when the file is read (at start \
             and at each reload) and the cluster is routed to by its first address; DNS changes \
             are seen at the next reload"
        ));
    }
    out
}
