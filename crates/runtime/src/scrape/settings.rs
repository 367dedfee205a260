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
    /// The models source, when a `models-data-source` is configured.
    pub models: Option<super::models::ModelsSettings>,
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

    /// The metrics page of the endpoint at `address`.
    pub fn url(&self, address: &str) -> String {
        format!("{}://{}{}", self.scheme, address, self.path)
    }

    /// The mapping for an endpoint: the one its engine label names (the configured label
    /// key, then upstream's older key), else the default engine's.
    pub fn mapping_for(&self, endpoint: Option<&EndpointSpec>) -> &EngineMapping {
        let engine = endpoint.and_then(|e| {
            e.label(self.mappings.engine_label_key())
                .or_else(|| e.label(LEGACY_ENGINE_LABEL_KEY))
        });
        self.mappings.get(engine)
    }
}
