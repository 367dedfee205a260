//! Runtime configuration: one YAML file holding the core's `EndpointPickerConfig` (plugins,
//! `schedulingProfiles`, `scheduler`, `adaptive`, ...) plus Shepherd's runtime sections.
//!
//! | section | what | type |
//! |---|---|---|
//! | `endpoints` | the static list of model servers, `ip:port` or `{address, labels}` | [`EndpointSpec`] |
//! | `discovery` | where endpoints come from instead: `kubernetes`, an InferencePool's pods or a label selector's (upstream's `--pool-name`, `--endpoint-selector`; `docs/kubernetes.md`) | [`DiscoveryConfig`] |
//! | `scraping` | scrape interval (50 ms), timeout (1 s), forgetting after failures, and the upstream `metrics-data-source` / `core-metrics-extractor` parameters | [`ScrapingConfig`] |
//! | `server` | bind address (127.0.0.1) and ports: ext_proc 9002, health 9003, admin/metrics 9090, HTTP 8080 | [`ServerConfig`] |
//! | `gateway` | the HTTP gateway's proxying: body limit, timeouts, concurrency cap, client and upstream keys, `/debug/explain` | [`GatewayConfig`] |
//! | `metrics` | the upstream `llm_d_epp_*` families: the deprecated names on or off, label caps, the pool's name | [`MetricsConfig`] |
//! | `flowControl` | upstream's flow-control section: priority bands, limits, TTL, the saturation detector (its `utilization-detector` / `concurrency-detector` plugins are taken out of `plugins`) | [`FlowSettings`] |
//! | everything else | the core's schema | [`EndpointPickerConfig`] |
//!
//! The file is read twice from the same text: once by the core's loader, which decodes
//! strictly as upstream does (an unknown key anywhere is an error naming its line; Shepherd's
//! sections above are declared to it), and once for Shepherd's sections, so a mistake in
//! either names its line. Upstream-style `metrics-data-source` and `core-metrics-extractor`
//! plugins in `plugins` are moved into [`ScrapingConfig`] (the `dataLayer` section that wires
//! them is checked by the core). The deprecated top-level `saturationDetector` is read as
//! `flowControl.saturationDetector` when that is unset, and a `flowControl=false` feature gate
//! turns flow control off, as upstream.
//!
//! **In a file of Shepherd's (no `apiVersion`/`kind`, or a section only Shepherd reads),
//! without `schedulingProfiles` and without scheduling plugins, the runtime runs the adaptive
//! preset** ([`shepherd_adaptive::preset`]; an upstream config, with the header and upstream's
//! sections only, gets what upstream's loader makes instead: a `default` profile of its
//! scheduling plugins, none here, and a `max-score-picker`): the library's recommended default,
//! prefix 3 : queue 2 : KV 2 : in-flight 1 : pending prefill 2, with weights retuned every
//! tick from the pool's load imbalance. The file's `scheduler` settings and its own
//! `adaptive` section, when given, apply to the preset. **A file with `plugins` but no
//! profile gets upstream's default profile** when the scheduler is built: one named
//! `default` with every filter, scorer and picker declared, in declaration order, at
//! weight 1 (and a `max-score-picker` when none is declared).
//!
//! ```
//! use shepherd_runtime::config::RuntimeConfig;
//!
//! let config = RuntimeConfig::from_yaml(r#"
//! endpoints:
//! - 127.0.0.1:8000
//! - address: 127.0.0.1:8001
//!   labels: {llm-d.ai/engine-type: sglang}
//! scraping:
//!   intervalMs: 50
//!   timeoutMs: 1000
//! server:
//!   metricsPort: 9090
//! scheduler:
//!   stalenessMs: 250
//! "#)?;
//! assert!(config.policy_is_preset); // no schedulingProfiles: the adaptive preset
//! assert_eq!(config.policy.scheduler.staleness_ms, 250);
//! assert!(config.policy.adaptive.is_some());
//! assert_eq!(config.endpoints.len(), 2);
//! assert!(config.warnings().is_empty()); // Shepherd's sections are not "unknown"
//!
//! let Err(error) = RuntimeConfig::from_yaml("endpoints:\n- 127.0.0.1:8000\n- nowhere\n") else {
//!     panic!("accepted a bad address");
//! };
//! assert_eq!(error.line(), Some(3));
//! # Ok::<(), shepherd_runtime::config::LoadError>(())
//! ```

mod discovery;
mod endpoints;
mod error;
mod gateway;
mod load;
mod metrics;
pub mod notifications;
mod replicas;
mod replicas_peers;
mod replicas_redis;
mod scraping;
mod server;

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use serde::Serialize;
use shepherd_scheduler_core::config::{
    ConfigError, ConfigWarning, EndpointPickerConfig, check_stability_of,
};
use shepherd_scheduler_core::flow::FlowSettings;

pub use discovery::{
    ALPHA_POOL_GROUP, DEFAULT_BACKOFF_INITIAL_MS, DEFAULT_BACKOFF_MAX_MS, DEFAULT_POOL_GROUP,
    DEFAULT_PUBLISH_INTERVAL_MS, DEFAULT_WATCH_TIMEOUT_SECS, DiscoveryConfig, FileDiscoveryConfig,
    KubernetesConfig, LeaderElectionConfig, MAX_TARGET_PORTS,
};
pub use endpoints::EndpointSpec;
pub use error::LoadError;
pub use gateway::{
    DEFAULT_BODY_READ_TIMEOUT_MS, DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_GATEWAY_MAX_BODY_BYTES,
    DEFAULT_MAX_BUFFERED_BODY_BYTES, DEFAULT_MODELS_CACHE_MS, DEFAULT_MODELS_TIMEOUT_MS,
    DEFAULT_RETRY_AFTER_SECONDS, GatewayConfig, PRIVILEGED_HEADERS, Secret, SecretError,
};
pub use metrics::MetricsConfig;
pub use replicas::{
    DEFAULT_HISTORY_ENTRIES, DEFAULT_MAX_PEERS, DEFAULT_PEER_EXPIRY_MS, DEFAULT_REDIS_PREFIX,
    DEFAULT_REDIS_TIMEOUT_MS, DEFAULT_SYNC_INTERVAL_MS, RedisReplicasConfig, RedisTls,
    ReplicaBackend, ReplicasConfig, ReplicasKeyError,
};
pub use replicas_peers::{
    DEFAULT_PEER_BACKOFF_INITIAL_MS, DEFAULT_PEER_BACKOFF_MAX_MS, KubernetesPeers,
    MAX_DISCOVERED_PEERS, ReplicaPeers,
};
pub use scraping::{
    DEFAULT_CLEAR_AFTER_FAILURES, DEFAULT_SCRAPE_INTERVAL_MS, DEFAULT_SCRAPE_TIMEOUT_MS,
    ScrapingConfig,
};
pub use server::{
    DEFAULT_EXTPROC_PORT, DEFAULT_HEADER_READ_TIMEOUT_MS, DEFAULT_HEALTH_PORT, DEFAULT_HTTP_PORT,
    DEFAULT_IDLE_TIMEOUT_MS, DEFAULT_MAX_ADMIN_CONNECTIONS, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_METRICS_PORT, ServerConfig,
};

/// A whole runtime configuration, validated. See the [module docs](self).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeConfig {
    /// The scheduling policy in force: the file's picker configuration, or the adaptive
    /// preset when the file has no `schedulingProfiles`. Shepherd's sections and data-layer
    /// plugins are not in it.
    pub policy: EndpointPickerConfig,
    /// Whether [`policy`](Self::policy) is the adaptive preset.
    pub policy_is_preset: bool,
    /// The static endpoint list.
    pub endpoints: Vec<EndpointSpec>,
    /// Another source of endpoints (Kubernetes), when the file has a `discovery` section.
    #[serde(skip_serializing_if = "is_default_discovery")]
    pub discovery: DiscoveryConfig,
    /// Scraping settings.
    pub scraping: ScrapingConfig,
    /// Listen addresses.
    pub server: ServerConfig,
    /// The HTTP gateway's settings (read by `shepherd-gateway` only).
    pub gateway: GatewayConfig,
    /// How the upstream metric families are exported.
    pub metrics: MetricsConfig,
    /// The load exchange with peer replicas, when the file has a `replicas` section.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<ReplicasConfig>,
    /// Flow control, when the file has a `flowControl` section (upstream's schema; its
    /// detector and policy plugins are taken out of `plugins`).
    #[serde(skip)]
    pub flow_control: Option<FlowSettings>,
    /// Every plugin the file declared, as `(name, type)`, before the runtime took its own
    /// (flow-control policies, data-layer sources) out of `policy.plugins`: what
    /// [`RuntimeConfig::check_stability`] checks.
    pub declared_plugins: Vec<(String, String)>,
    /// The file this config was read from, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
}

impl Default for RuntimeConfig {
    /// No endpoints, the adaptive preset, default scraping and ports.
    fn default() -> Self {
        // The preset is compiled in and covered by tests; an empty text always parses.
        load::parse("{}", None).unwrap_or_else(|_| RuntimeConfig {
            policy: EndpointPickerConfig::default(),
            policy_is_preset: true,
            endpoints: Vec::new(),
            discovery: DiscoveryConfig::default(),
            scraping: ScrapingConfig::default(),
            server: ServerConfig::default(),
            gateway: GatewayConfig::default(),
            metrics: MetricsConfig::default(),
            replicas: None,
            flow_control: None,
            declared_plugins: Vec::new(),
            path: None,
        })
    }
}

impl RuntimeConfig {
    /// Upstream's stability check ([`check_stability_of`]) over every declared plugin and
    /// the scheduling policy's: an Alpha type is refused unless `allow_experimental`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ExperimentalPlugin`] naming the first such plugin by name.
    pub fn check_stability(&self, allow_experimental: bool) -> Result<(), ConfigError> {
        let declared = self
            .declared_plugins
            .iter()
            .map(|(name, plugin_type)| (name.as_str(), plugin_type.as_str()));
        let policy = self
            .policy
            .plugins
            .iter()
            .map(|p| (p.name(), p.plugin_type.as_str()));
        check_stability_of(declared.chain(policy), allow_experimental)
    }

    /// Parses a config given as text (errors say `config`, not a file name).
    pub fn from_yaml(text: &str) -> Result<Self, LoadError> {
        load::parse(text, None)
    }

    /// Parses a config read from `path` (errors name the file).
    pub fn from_yaml_at(text: &str, path: &Path) -> Result<Self, LoadError> {
        load::parse(text, Some(path))
    }

    /// Reads and parses the file at `path`.
    pub async fn load(path: impl AsRef<Path>) -> Result<Self, LoadError> {
        let path = path.as_ref();
        let text = tokio::fs::read_to_string(path)
            .await
            .map_err(|e| read_error(path, e))?;
        Self::from_yaml_at(&text, path)
    }

    /// Reads and parses the file at `path` without an async runtime (for command-line checks
    /// before one starts).
    pub fn load_sync(path: impl AsRef<Path>) -> Result<Self, LoadError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| read_error(path, e))?;
        Self::from_yaml_at(&text, path)
    }

    /// What loads without effect, one warning each: top-level sections that will be ignored
    /// (Shepherd's own sections are never among them), upstream settings and entries accepted
    /// as no-ops, and plugin parameters accepted and unused.
    pub fn warnings(&self) -> Vec<ConfigWarning> {
        let mut warnings = self.policy.warnings();
        for plugin in &self.policy.plugins {
            warnings.extend(
                shepherd_scorers::parameter_warnings(&plugin.plugin_type, &plugin.parameters)
                    .into_iter()
                    .map(|message| ConfigWarning {
                        section: "plugins".into(),
                        message: format!("`{}` ({}): {message}", plugin.name(), plugin.plugin_type),
                    }),
            );
        }
        if let Some(dcgm) = &self.scraping.dcgm_data_source {
            warnings.extend(
                dcgm.warnings(&self.scraping.dcgm_source_name)
                    .into_iter()
                    .map(|message| ConfigWarning {
                        section: "plugins".into(),
                        message,
                    }),
            );
        }
        warnings.extend(
            crate::multicluster::warnings(&self.scraping, &self.discovery)
                .into_iter()
                .map(|message| ConfigWarning {
                    section: "plugins".into(),
                    message,
                }),
        );
        warnings.extend(
            notifications::warnings(&self.policy)
                .into_iter()
                .map(|message| ConfigWarning {
                    section: "plugins".into(),
                    message,
                }),
        );
        if let Some(models) = &self.scraping.models_data_source {
            warnings.extend(
                models
                    .warnings(&self.scraping.models_source_name)
                    .into_iter()
                    .map(|message| ConfigWarning {
                        section: "plugins".into(),
                        message,
                    }),
            );
        }
        warnings
    }

    /// The static endpoints' addresses, as the pool names them.
    pub fn addresses(&self) -> Vec<String> {
        self.endpoints.iter().map(EndpointSpec::address).collect()
    }

    /// The config as JSON (for a debug view).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

fn is_default_discovery(discovery: &DiscoveryConfig) -> bool {
    *discovery == DiscoveryConfig::default()
}

pub(crate) fn read_error(path: &Path, error: std::io::Error) -> LoadError {
    if error.kind() == ErrorKind::NotFound {
        LoadError::NotFound {
            path: path.to_path_buf(),
        }
    } else {
        LoadError::Read {
            path: path.to_path_buf(),
            source: error,
        }
    }
}
