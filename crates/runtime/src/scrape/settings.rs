//! The scraper's settings, built from the `scraping` section.

use std::time::Duration;

use crate::Error;
use crate::config::{EndpointSpec, ScrapingConfig};
use crate::mapping::{EngineMapping, EngineMappings, LEGACY_ENGINE_LABEL_KEY};

/// What the scraper does, ready to use: built from a [`ScrapingConfig`].
///
/// ```
/// use shepherd_runtime::config::{EndpointSpec, ScrapingConfig};
/// use shepherd_runtime::scrape::ScrapeSettings;
///
/// let settings = ScrapeSettings::from_config(&ScrapingConfig::default()).unwrap();
/// assert_eq!(settings.url("127.0.0.1:8000"), "http://127.0.0.1:8000/metrics");
/// let sglang = EndpointSpec::new("127.0.0.1:8001".parse().unwrap())
///     .with_label("llm-d.ai/engine-type", "sglang");
/// assert_eq!(settings.mapping_for(Some(&sglang)).name, "sglang");
/// assert_eq!(settings.mapping_for(None).name, "vllm");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScrapeSettings {
    /// Time between two scrapes of one endpoint.
    pub interval: Duration,
    /// Time allowed for one scrape (connection, request and body).
    pub timeout: Duration,
    /// Consecutive failures after which an endpoint's metrics are forgotten (0: never).
    pub clear_after_failures: u32,
    /// `http` (`https` is refused when the config is loaded).
    pub scheme: String,
    /// Path of the metrics page.
    pub path: String,
    /// The engine mappings.
    pub mappings: EngineMappings,
    /// The DCGM exporter source, when a `dcgm-data-source` is configured.
    pub dcgm: Option<super::dcgm::DcgmSettings>,
    /// Every endpoint is a cluster, read as a `multicluster-metrics-extractor` says.
    pub multicluster: Option<MultiClusterScrape>,
    /// Scrape an endpoint at its `metricsAddress` / `metricsPort` labels.
    pub metrics_host_from_labels: bool,
    /// The models source, when a `models-data-source` is configured.
    pub models: Option<super::models::ModelsSettings>,
}

/// How clusters are scraped (`multicluster-metrics-data-source` and `-extractor`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiClusterScrape {
    /// The mapping every cluster's page is read with.
    pub mapping: EngineMapping,
    /// Whether the clusters are scraped at all (`http` only).
    pub scraped: bool,
    /// The metrics page's path.
    pub path: String,
    /// A port replacing every endpoint's port.
    pub port: Option<u16>,
    /// The period, when not the scrape interval.
    pub interval: Option<Duration>,
}

impl ScrapeSettings {
    /// Checks `config` and builds the settings.
    pub fn from_config(config: &ScrapingConfig) -> Result<Self, Error> {
        let source = config.data_source();
        source.validate()?;
        Ok(ScrapeSettings {
            interval: config.interval().max(Duration::from_millis(1)),
            timeout: config.timeout().max(Duration::from_millis(1)),
            clear_after_failures: config.clear_after_failures,
            scheme: source.scheme,
            path: source.path,
            mappings: config.extractor().build()?,
            dcgm: match &config.dcgm_data_source {
                Some(params) => Some(params.settings(&config.dcgm_source_name).map_err(|_| {
                    Error::InvalidParameter {
                        parameter: "dcgmDataSource",
                        value: format!("{params:?}"),
                        reason: "invalid dcgm-data-source parameters",
                    }
                })?),
                None => None,
            },
            multicluster: match &config.multicluster_metrics_extractor {
                Some(extractor) => {
                    let invalid = |reason: String| Error::InvalidParameter {
                        parameter: "multicluster",
                        value: reason,
                        reason: "invalid multicluster metrics parameters",
                    };
                    let mapping = extractor.mapping().map_err(invalid)?;
                    let source = config.multicluster_data_source.as_ref();
                    Some(MultiClusterScrape {
                        mapping,
                        scraped: source.is_some_and(|s| s.scraped()),
                        path: source.map_or_else(|| "/metrics".to_string(), |s| s.path.clone()),
                        port: source
                            .map(|s| s.port())
                            .transpose()
                            .map_err(invalid)?
                            .flatten(),
                        interval: source
                            .map(|s| s.interval())
                            .transpose()
                            .map_err(invalid)?
                            .flatten(),
                    })
                }
                None => None,
            },
            metrics_host_from_labels: config.metrics_host_from_labels,
            models: match &config.models_data_source {
                Some(params) => {
                    Some(params.settings(&config.models_source_name).map_err(|_| {
                        Error::InvalidParameter {
                            parameter: "modelsDataSource",
                            value: format!("{params:?}"),
                            reason: "invalid models-data-source parameters",
                        }
                    })?)
                }
                None => None,
            },
        })
    }

    /// The metrics page of the endpoint `spec` at `address`; `None` when it is not scraped
    /// (a cluster source over https).
    pub fn url_for(&self, address: &str, spec: &EndpointSpec) -> Option<String> {
        match &self.multicluster {
            Some(mc) if !mc.scraped => None,
            Some(mc) => {
                let target = if self.metrics_host_from_labels || mc.port.is_some() {
                    crate::multicluster::metrics_target(spec, mc.port)
                } else {
                    address.to_string()
                };
                Some(format!("http://{target}{}", mc.path))
            }
            None if self.metrics_host_from_labels => Some(format!(
                "{}://{}{}",
                self.scheme,
                crate::multicluster::metrics_target(spec, None),
                self.path
            )),
            None => Some(self.url(address)),
        }
    }

    /// Time between two scrapes of one endpoint (a cluster source's own interval, if any).
    pub fn scrape_interval(&self) -> Duration {
        self.multicluster
            .as_ref()
            .and_then(|mc| mc.interval)
            .unwrap_or(self.interval)
    }

    /// The metrics page of the endpoint at `address`.
    pub fn url(&self, address: &str) -> String {
        format!("{}://{}{}", self.scheme, address, self.path)
    }

    /// The mapping for an endpoint: the one its engine label names (the configured label
    /// key, then upstream's older key), else the default engine's.
    pub fn mapping_for(&self, endpoint: Option<&EndpointSpec>) -> &EngineMapping {
        if let Some(mc) = &self.multicluster {
            return &mc.mapping;
        }
        let engine = endpoint.and_then(|e| {
            e.label(self.mappings.engine_label_key())
                .or_else(|| e.label(LEGACY_ENGINE_LABEL_KEY))
        });
        self.mappings.get(engine)
    }
}
