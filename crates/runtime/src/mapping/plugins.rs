//! The upstream plugin parameters: `metrics-data-source` (where to scrape) and
//! `core-metrics-extractor` (which engine mapping applies to which endpoint).

use serde::{Deserialize, Serialize};

use super::engine::EngineMapping;
use crate::Error;

/// Plugin type name of the metrics source in upstream configurations.
pub const METRICS_DATA_SOURCE_TYPE: &str = "metrics-data-source";
/// Plugin type name of the metrics extractor in upstream configurations.
pub const CORE_METRICS_EXTRACTOR_TYPE: &str = "core-metrics-extractor";
/// Default Pod label naming an endpoint's engine.
pub const DEFAULT_ENGINE_LABEL_KEY: &str = "llm-d.ai/engine-type";
/// The Gateway API Inference Extension's older engine label, still read when the default one
/// is absent (upstream deprecates it).
pub const LEGACY_ENGINE_LABEL_KEY: &str = "inference.networking.k8s.io/engine-type";
/// Default engine for endpoints that do not name one.
pub const DEFAULT_ENGINE: &str = "vllm";
/// Engine name upstream reserves for its fallback mapping; no engine config may use it.
pub const RESERVED_ENGINE_NAME: &str = "default";

/// Parameters of the `metrics-data-source` plugin: how each endpoint's metrics page is
/// fetched. Defaults are upstream's: `http`, `/metrics`, and TLS certificates not verified.
///
/// ```
/// use shepherd_runtime::mapping::MetricsDataSourceParams;
///
/// let params: MetricsDataSourceParams = serde_json::from_str(r#"{"scheme": "https"}"#).unwrap();
/// assert_eq!(params.path, "/metrics");
/// params.validate().unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct MetricsDataSourceParams {
    /// `http` or `https`.
    pub scheme: String,
    /// URL path of the metrics page.
    pub path: String,
    /// With `https`, whether to skip verifying the server's certificate.
    pub insecure_skip_verify: bool,
}

impl Default for MetricsDataSourceParams {
    fn default() -> Self {
        MetricsDataSourceParams {
            scheme: "http".to_owned(),
            path: "/metrics".to_owned(),
            insecure_skip_verify: true,
        }
    }
}

impl MetricsDataSourceParams {
    /// Checks that the scheme is `http` or `https` and the path starts with `/`.
    pub fn validate(&self) -> Result<(), Error> {
        if self.scheme != "http" && self.scheme != "https" {
            return Err(Error::InvalidParameter {
                parameter: "scheme",
                value: self.scheme.clone(),
                reason: "must be `http` or `https`",
            });
        }
        if !self.path.starts_with('/') {
            return Err(Error::InvalidParameter {
                parameter: "path",
                value: self.path.clone(),
                reason: "must start with `/`",
            });
        }
        Ok(())
    }
}

/// Parameters of the `core-metrics-extractor` plugin: engine mappings, and how to tell which
/// one an endpoint uses. Empty strings mean the defaults, as upstream.
///
/// ```
/// use shepherd_runtime::mapping::CoreMetricsExtractorParams;
///
/// let params: CoreMetricsExtractorParams = serde_json::from_str(r#"{
///     "defaultEngine": "sglang",
///     "engineConfigs": [{"name": "vllm", "queuedRequestsSpec": "my_queue"}]
/// }"#).unwrap();
/// let mappings = params.build().unwrap();
/// assert_eq!(mappings.get(None).name, "sglang");
/// assert_eq!(mappings.get(Some("vllm")).queued_requests_spec.as_slice()[0].name(), "my_queue");
/// assert_eq!(mappings.get(Some("unknown-engine")).name, "sglang");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CoreMetricsExtractorParams {
    /// Pod label naming the engine (default `llm-d.ai/engine-type`).
    pub engine_label_key: String,
    /// Engine of endpoints that do not name one, or name an unknown one (default `vllm`).
    pub default_engine: String,
    /// Engine mappings. A built-in preset (`vllm`, `sglang`) is added unless an entry of the
    /// same name replaces it, whole.
    pub engine_configs: Vec<EngineMapping>,
}

impl CoreMetricsExtractorParams {
    /// Checks the parameters and builds the mapping table.
    pub fn build(self) -> Result<EngineMappings, Error> {
        let engine_label_key = if self.engine_label_key.is_empty() {
            DEFAULT_ENGINE_LABEL_KEY.to_owned()
        } else {
            self.engine_label_key
        };
        let default_engine = if self.default_engine.is_empty() {
            DEFAULT_ENGINE.to_owned()
        } else {
            self.default_engine
        };
        let mut engines: Vec<EngineMapping> = Vec::with_capacity(self.engine_configs.len() + 2);
        for engine in self.engine_configs {
            let reason = if engine.name.is_empty() {
                Some("engine config name must not be empty")
            } else if engine.name == RESERVED_ENGINE_NAME {
                Some("engine config name `default` is reserved")
            } else if engines.iter().any(|e| e.name == engine.name) {
                Some("engine configured twice")
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(Error::InvalidParameter {
                    parameter: "engineConfigs",
                    value: engine.name,
                    reason,
                });
            }
            engines.push(engine);
        }
        for preset in [EngineMapping::vllm(), EngineMapping::sglang()] {
            if !engines.iter().any(|e| e.name == preset.name) {
                engines.push(preset);
            }
        }
        let default = engines
            .iter()
            .position(|e| e.name == default_engine)
            .ok_or(Error::InvalidParameter {
                parameter: "defaultEngine",
                value: default_engine,
                reason: "not among the engine configs",
            })?;
        Ok(EngineMappings {
            engines,
            default,
            engine_label_key,
        })
    }
}

/// The engine mappings in force, and which is the default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineMappings {
    engines: Vec<EngineMapping>,
    default: usize,
    engine_label_key: String,
}

impl Default for EngineMappings {
    /// The built-in presets, `vllm` the default.
    fn default() -> Self {
        EngineMappings {
            engines: vec![EngineMapping::vllm(), EngineMapping::sglang()],
            default: 0,
            engine_label_key: DEFAULT_ENGINE_LABEL_KEY.to_owned(),
        }
    }
}

impl EngineMappings {
    /// The mapping for an endpoint's engine; the default one when the engine is not given or
    /// not configured (as upstream).
    pub fn get(&self, engine: Option<&str>) -> &EngineMapping {
        engine
            .and_then(|name| self.engines.iter().find(|e| e.name == name))
            .unwrap_or_else(|| self.default_mapping())
    }

    /// The default mapping.
    pub fn default_mapping(&self) -> &EngineMapping {
        // Both fields are private and `build` / `default` only make `default` an index of
        // `engines`.
        &self.engines[self.default]
    }

    /// Every configured mapping.
    pub fn engines(&self) -> &[EngineMapping] {
        &self.engines
    }

    /// The Pod label naming an endpoint's engine.
    pub fn engine_label_key(&self) -> &str {
        &self.engine_label_key
    }
}
