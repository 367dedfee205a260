//! Reading a runtime config: the core's `EndpointPickerConfig` plus Shepherd's own sections,
//! from one YAML text.

use std::collections::BTreeSet;
use std::path::Path;

use serde::Deserialize;
use shepherd_adaptive::AdaptiveConfig;
use shepherd_adaptive::preset::adaptive_config;
use shepherd_scheduler_core::config::{
    ConfigError, EndpointPickerConfig, FeatureGates, PluginSpec,
};
use shepherd_scheduler_core::flow::config::{
    EDF_ORDERING_POLICY, FCFS_ORDERING_POLICY, GLOBAL_STRICT_FAIRNESS_POLICY,
    ROUND_ROBIN_FAIRNESS_POLICY, SLO_DEADLINE_ORDERING_POLICY, SaturationDetectorConfig,
};
use shepherd_scheduler_core::flow::eviction::{
    PRIORITY_THEN_TIME_EVICTION_ORDER_POLICY, SHEDDABLE_EVICTION_FILTER,
};
use shepherd_scheduler_core::flow::program_aware::PROGRAM_AWARE_FAIRNESS_POLICY;
use shepherd_scheduler_core::flow::{
    ConcurrencyDetector, FlowConfigError, FlowControlConfig, UsageLimitPolicy, UtilizationDetector,
};

use super::{
    DiscoveryConfig, EndpointSpec, FileDiscoveryConfig, GatewayConfig, LoadError, MetricsConfig,
    ReplicasConfig, RuntimeConfig, ScrapingConfig, ServerConfig,
};
use crate::mapping::{
    CORE_METRICS_EXTRACTOR_TYPE, CoreMetricsExtractorParams, METRICS_DATA_SOURCE_TYPE,
    MetricsDataSourceParams,
};

/// Top-level sections that belong to Shepherd's runtime rather than to the picker schema
/// (declared to the core's strict loader, which refuses any other unknown key).
pub(crate) const RUNTIME_SECTIONS: [&str; 8] = [
    "endpoints",
    "discovery",
    "metrics",
    "scraping",
    "server",
    "gateway",
    "replicas",
    FLOW_CONTROL_SECTION,
];

/// The upstream flow-control section, honoured by the runtime's flow controller.
const FLOW_CONTROL_SECTION: &str = "flowControl";

/// Plugin types that belong to flow control, not to scheduling: taken out of `plugins` and
/// resolved by the `flowControl` section.
const FLOW_CONTROL_PLUGIN_TYPES: [&str; 13] = [
    UtilizationDetector::TYPE,
    ConcurrencyDetector::TYPE,
    UsageLimitPolicy::STATIC_TYPE,
    UsageLimitPolicy::HOLDBACK_TYPE,
    UsageLimitPolicy::SOFT_REFLECTIVE_TYPE,
    ROUND_ROBIN_FAIRNESS_POLICY,
    GLOBAL_STRICT_FAIRNESS_POLICY,
    PROGRAM_AWARE_FAIRNESS_POLICY,
    FCFS_ORDERING_POLICY,
    EDF_ORDERING_POLICY,
    SLO_DEADLINE_ORDERING_POLICY,
    SHEDDABLE_EVICTION_FILTER,
    PRIORITY_THEN_TIME_EVICTION_ORDER_POLICY,
];

/// Shepherd's sections, read straight from the YAML text so that their errors carry a line.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Sections {
    endpoints: Option<Vec<EndpointSpec>>,
    discovery: Option<DiscoveryConfig>,
    scraping: Option<ScrapingConfig>,
    server: Option<ServerConfig>,
    gateway: Option<GatewayConfig>,
    metrics: Option<MetricsConfig>,
    replicas: Option<ReplicasConfig>,
    #[serde(rename = "flowControl")]
    flow_control: Option<FlowControlConfig>,
}

/// Parses `text`, which came from `path` when given.
pub(super) fn parse(text: &str, path: Option<&Path>) -> Result<RuntimeConfig, LoadError> {
    let owned_path = || path.map(Path::to_path_buf);
    // An empty file is an empty config: the preset, no endpoints.
    let text = if text.trim().is_empty() { "{}" } else { text };

    let mut picker =
        EndpointPickerConfig::from_yaml_with(text, &RUNTIME_SECTIONS).map_err(|e| match e {
            ConfigError::Syntax {
                message,
                line,
                column,
            } => LoadError::Syntax {
                path: owned_path(),
                message,
                line,
                column,
            },
            source => LoadError::Policy {
                path: owned_path(),
                source,
            },
        })?;
    let sections: Sections = serde_norway::from_str(text).map_err(|e| {
        let location = e.location();
        let mut message = e.to_string();
        if let Some(l) = &location {
            let suffix = format!(" at line {} column {}", l.line(), l.column());
            if let Some(stripped) = message.strip_suffix(&suffix) {
                message = stripped.to_owned();
            }
        }
        LoadError::Syntax {
            path: owned_path(),
            message,
            line: location.as_ref().map(|l| l.line()),
            column: location.as_ref().map(|l| l.column()),
        }
    })?;
    for section in RUNTIME_SECTIONS {
        picker.other.remove(section);
    }

    // Before the runtime takes its own plugins out: the stability check sees them all.
    let declared_plugins: Vec<(String, String)> = picker
        .plugins
        .iter()
        .map(|p| (p.name().to_string(), p.plugin_type.clone()))
        .collect();
    let mut scraping = sections.scraping.unwrap_or_default();
    // Upstream wires those plugins together in `dataLayer` (whose references the core has
    // checked); Shepherd reads them directly.
    take_data_layer_plugins(&mut picker, &mut scraping, path)?;
    super::notifications::check(&picker)
        .map_err(|(field, reason)| LoadError::invalid(path, field, reason))?;

    let mut discovery = sections.discovery.unwrap_or_default();
    read_file_discovery(&picker, &mut discovery, path)?;
    scraping.metrics_host_from_labels = discovery.file.as_ref().is_some_and(|f| f.multicluster);

    let flow_plugins = take_flow_control_plugins(&mut picker);
    let mut flow_section = sections.flow_control;
    if let (Some(section), Some(detector)) = (&mut flow_section, &picker.saturation_detector)
        && section.saturation_detector.is_none()
    {
        // The deprecated top-level `saturationDetector`, read as upstream reads it.
        section.saturation_detector = Some(SaturationDetectorConfig {
            plugin_ref: Some(detector.plugin_ref.clone()),
        });
    }
    // An explicit `flowControl=false` gate turns the section off, as upstream.
    if picker.feature_gates.get(FeatureGates::FLOW_CONTROL) == Some(false) {
        flow_section = None;
    }
    let flow_control = match &flow_section {
        Some(section) => Some(
            section
                .validate(&flow_plugins)
                .map_err(|e| flow_error(path, e))?,
        ),
        None => None,
    };

    // No profiles and no scheduling plugins in a file of Shepherd's (no `apiVersion`/`kind`,
    // or a section of Shepherd's own, which upstream's picker would refuse): the adaptive
    // preset. An upstream config (a header and only upstream's sections) without scheduling
    // plugins gets what upstream's loader makes of it: a default profile of its plugins,
    // none here, and a `max-score-picker` (the scheduler builds it).
    let upstream_shaped =
        (picker.api_version.is_some() || picker.kind.is_some()) && !has_shepherd_section(text);
    let policy_is_preset =
        picker.scheduling_profiles.is_empty() && picker.plugins.is_empty() && !upstream_shaped;
    let policy = if policy_is_preset {
        with_preset(picker).map_err(|source| LoadError::Policy {
            path: owned_path(),
            source,
        })?
    } else {
        picker
    };

    let config = RuntimeConfig {
        policy,
        policy_is_preset,
        endpoints: sections.endpoints.unwrap_or_default(),
        discovery,
        scraping,
        server: sections.server.unwrap_or_default(),
        gateway: sections.gateway.unwrap_or_default(),
        metrics: sections.metrics.unwrap_or_default(),
        replicas: sections.replicas,
        flow_control,
        declared_plugins,
        path: owned_path(),
    };
    validate(&config, path)?;
    Ok(config)
}

/// Top-level sections only Shepherd reads (upstream's picker refuses them).
const SHEPHERD_SECTIONS: [&str; 9] = [
    "endpoints",
    "scraping",
    "server",
    "gateway",
    "replicas",
    "scheduler",
    "adaptive",
    "discovery",
    "metrics",
];

/// Whether `text` (a YAML mapping, already parsed once) has one of [`SHEPHERD_SECTIONS`].
fn has_shepherd_section(text: &str) -> bool {
    let Ok(serde_norway::Value::Mapping(top)) = serde_norway::from_str::<serde_norway::Value>(text)
    else {
        return false;
    };
    top.keys()
        .filter_map(serde_norway::Value::as_str)
        .any(|key| SHEPHERD_SECTIONS.contains(&key))
}

/// The adaptive preset's plugins, profiles and (unless the file has its own) `adaptive`
/// section, with the file's header, scheduler settings and unknown sections.
fn with_preset(file: EndpointPickerConfig) -> Result<EndpointPickerConfig, ConfigError> {
    let preset = adaptive_config()?;
    Ok(EndpointPickerConfig {
        api_version: file.api_version.or(preset.api_version),
        kind: file.kind.or(preset.kind),
        plugins: preset.plugins,
        scheduling_profiles: preset.scheduling_profiles,
        adaptive: file.adaptive.or(preset.adaptive),
        ..file
    })
}

/// Moves upstream data-layer plugins (`metrics-data-source`, `core-metrics-extractor`) from
/// the picker's plugin list into the scraping settings; returns whether there were any.
fn take_data_layer_plugins(
    picker: &mut EndpointPickerConfig,
    scraping: &mut ScrapingConfig,
    path: Option<&Path>,
) -> Result<bool, LoadError> {
    let before = picker.plugins.len();
    let mut kept: Vec<PluginSpec> = Vec::with_capacity(picker.plugins.len());
    for (i, plugin) in std::mem::take(&mut picker.plugins).into_iter().enumerate() {
        let field = |name: &str| format!("plugins[{i}] ({name})");
        match plugin.plugin_type.as_str() {
            METRICS_DATA_SOURCE_TYPE => {
                if scraping.metrics_data_source.is_some() {
                    return Err(twice(path, &field(METRICS_DATA_SOURCE_TYPE)));
                }
                let params: MetricsDataSourceParams =
                    plugin_params(&plugin.parameters).map_err(|e| {
                        LoadError::invalid(path, field(METRICS_DATA_SOURCE_TYPE), e.to_string())
                    })?;
                scraping.metrics_data_source = Some(params);
            }
            CORE_METRICS_EXTRACTOR_TYPE => {
                if scraping.core_metrics_extractor.is_some() {
                    return Err(twice(path, &field(CORE_METRICS_EXTRACTOR_TYPE)));
                }
                let params: CoreMetricsExtractorParams = plugin_params(&plugin.parameters)
                    .map_err(|e| {
                        LoadError::invalid(path, field(CORE_METRICS_EXTRACTOR_TYPE), e.to_string())
                    })?;
                scraping.core_metrics_extractor = Some(params);
            }
            crate::scrape::dcgm::SOURCE_TYPE => {
                // It stays among the plugins (the `dataLayer` section names it); the scraper
                // runs it. A second source is ignored (a warning).
                if scraping.dcgm_data_source.is_none() {
                    let params: crate::scrape::dcgm::DcgmSourceParams =
                        plugin_params(&plugin.parameters).map_err(|e| {
                            LoadError::invalid(
                                path,
                                field(crate::scrape::dcgm::SOURCE_TYPE),
                                e.to_string(),
                            )
                        })?;
                    params.settings(plugin.name()).map_err(|e| {
                        LoadError::invalid(path, field(crate::scrape::dcgm::SOURCE_TYPE), e)
                    })?;
                    scraping.dcgm_data_source = Some(params);
                    scraping.dcgm_source_name = plugin.name().to_string();
                }
                kept.push(plugin);
            }
            crate::multicluster::SOURCE_TYPE => {
                // Kept among the plugins (the `dataLayer` section names it); the scraper
                // reads the clusters with it. A second source is ignored.
                let params: crate::multicluster::MultiClusterSourceParams =
                    plugin_params(&plugin.parameters).map_err(|e| {
                        LoadError::invalid(
                            path,
                            field(crate::multicluster::SOURCE_TYPE),
                            e.to_string(),
                        )
                    })?;
                params.check().map_err(|e| {
                    LoadError::invalid(path, field(crate::multicluster::SOURCE_TYPE), e)
                })?;
                if scraping.multicluster_data_source.is_none() {
                    scraping.multicluster_data_source = Some(params);
                    scraping.multicluster_source_name = plugin.name().to_string();
                }
                kept.push(plugin);
            }
            crate::multicluster::EXTRACTOR_TYPE => {
                let params: crate::multicluster::MultiClusterExtractorParams =
                    plugin_params(&plugin.parameters).map_err(|e| {
                        LoadError::invalid(
                            path,
                            field(crate::multicluster::EXTRACTOR_TYPE),
                            e.to_string(),
                        )
                    })?;
                params.mapping().map_err(|e| {
                    LoadError::invalid(path, field(crate::multicluster::EXTRACTOR_TYPE), e)
                })?;
                if scraping.multicluster_metrics_extractor.is_none() {
                    scraping.multicluster_metrics_extractor = Some(params);
                }
                kept.push(plugin);
            }
            crate::scrape::models::SOURCE_TYPE => {
                // As the DCGM source: it stays among the plugins, the scraper polls it, a
                // second one is ignored (a warning).
                if scraping.models_data_source.is_none() {
                    let params: crate::scrape::models::ModelsSourceParams =
                        plugin_params(&plugin.parameters).map_err(|e| {
                            LoadError::invalid(
                                path,
                                field(crate::scrape::models::SOURCE_TYPE),
                                e.to_string(),
                            )
                        })?;
                    params.settings(plugin.name()).map_err(|e| {
                        LoadError::invalid(path, field(crate::scrape::models::SOURCE_TYPE), e)
                    })?;
                    scraping.models_data_source = Some(params);
                    scraping.models_source_name = plugin.name().to_string();
                }
                kept.push(plugin);
            }
            _ => kept.push(plugin),
        }
    }
    // Upstream's load-time guard: the multicluster metric scorers read attributes only the
    // multicluster extractor writes.
    if scraping.multicluster_metrics_extractor.is_none()
        && let Some((i, plugin)) = kept.iter().enumerate().find(|(_, p)| {
            shepherd_scorers::multicluster::METRIC_SCORER_TYPES.contains(&p.plugin_type.as_str())
        })
    {
        return Err(LoadError::invalid(
            path,
            format!("plugins[{i}] ({})", plugin.plugin_type),
            format!(
                "`{}` reads the pool metrics a `{}` writes, and the config declares none \
                 (declare it with a `{}` in `dataLayer.sources`)",
                plugin.name(),
                crate::multicluster::EXTRACTOR_TYPE,
                crate::multicluster::SOURCE_TYPE,
            ),
        ));
    }
    let moved = kept.len() < before;
    picker.plugins = kept;
    Ok(moved)
}

/// Reads the `file-discovery` plugin that `dataLayer.discovery` names (the core checked that
/// it names a discovery plugin) into `discovery.file`. Another discovery type is left to the
/// scheduler's build, which names its area.
fn read_file_discovery(
    picker: &EndpointPickerConfig,
    discovery: &mut DiscoveryConfig,
    path: Option<&Path>,
) -> Result<(), LoadError> {
    let Some(reference) = picker
        .data_layer
        .as_ref()
        .and_then(|l| l.discovery.as_ref())
    else {
        return Ok(());
    };
    let Some((i, plugin)) = picker
        .plugins
        .iter()
        .enumerate()
        .find(|(_, p)| p.name() == reference.plugin_ref)
    else {
        return Ok(());
    };
    let multicluster = plugin.plugin_type == crate::multicluster::DISCOVERY_TYPE;
    if plugin.plugin_type != FILE_DISCOVERY_TYPE && !multicluster {
        return Ok(());
    }
    let field = format!("plugins[{i}] ({})", plugin.plugin_type);
    if discovery.file.is_some() {
        return Err(twice(path, &field));
    }
    let mut params: FileDiscoveryConfig = plugin_params(&plugin.parameters)
        .map_err(|e| LoadError::invalid(path, &field, e.to_string()))?;
    if params.path.is_empty() {
        return Err(LoadError::invalid(
            path,
            field,
            format!("{}: 'path' parameter is required", plugin.plugin_type),
        ));
    }
    params.multicluster = multicluster;
    discovery.file = Some(params);
    Ok(())
}

/// Upstream's endpoints-file discovery plugin.
const FILE_DISCOVERY_TYPE: &str = "file-discovery";

/// Moves the flow-control plugins (saturation detectors, fairness and ordering policies) out of
/// the picker's plugin list: the scheduler does not build them, `flowControl` refers to them.
fn take_flow_control_plugins(picker: &mut EndpointPickerConfig) -> Vec<PluginSpec> {
    let (flow, kept) = std::mem::take(&mut picker.plugins)
        .into_iter()
        .partition(|p| FLOW_CONTROL_PLUGIN_TYPES.contains(&p.plugin_type.as_str()));
    picker.plugins = kept;
    flow
}

fn flow_error(path: Option<&Path>, error: FlowConfigError) -> LoadError {
    match error {
        FlowConfigError::Invalid { field, message } => LoadError::invalid(path, field, message),
        FlowConfigError::Parameters { plugin, message } => {
            LoadError::invalid(path, format!("plugins ({plugin}).parameters"), message)
        }
        other @ (FlowConfigError::UnknownDetector(_) | FlowConfigError::Syntax(_)) => {
            LoadError::invalid(path, FLOW_CONTROL_SECTION, other.to_string())
        }
    }
}

fn plugin_params<T: serde::de::DeserializeOwned + Default>(
    value: &serde_json::Value,
) -> Result<T, serde_json::Error> {
    if value.is_null() {
        Ok(T::default())
    } else {
        T::deserialize(value)
    }
}

fn twice(path: Option<&Path>, field: &str) -> LoadError {
    LoadError::invalid(
        path,
        field,
        "given twice: both as a plugin and in the `scraping` section",
    )
}

/// Checks what deserializing could not.
fn validate(config: &RuntimeConfig, path: Option<&Path>) -> Result<(), LoadError> {
    let mut seen = BTreeSet::new();
    for (i, endpoint) in config.endpoints.iter().enumerate() {
        if !seen.insert(endpoint.addr) {
            return Err(LoadError::invalid(
                path,
                format!("endpoints[{i}]"),
                format!("{} is listed twice", endpoint.addr),
            ));
        }
    }

    if let Some(kubernetes) = &config.discovery.kubernetes {
        kubernetes
            .validate()
            .map_err(|reason| LoadError::invalid(path, "discovery.kubernetes", reason))?;
    }
    if let Some(file) = &config.discovery.file {
        if file.path.is_empty() {
            return Err(LoadError::invalid(
                path,
                "discovery.file.path",
                "is required",
            ));
        }
        if config.discovery.kubernetes.is_some() {
            return Err(LoadError::invalid(
                path,
                "discovery.file",
                "an endpoints file and Kubernetes discovery cannot both be the pool's source",
            ));
        }
        if !config.endpoints.is_empty() {
            return Err(LoadError::invalid(
                path,
                "discovery.file",
                "an endpoints file and the `endpoints` section cannot both be the pool's source",
            ));
        }
    }

    if let Some((field, reason)) = config.replicas.as_ref().and_then(|r| r.problem()) {
        return Err(LoadError::invalid(path, field, reason));
    }

    let scraping = &config.scraping;
    if scraping.interval_ms == 0 {
        return Err(LoadError::invalid(
            path,
            "scraping.intervalMs",
            "must be at least 1",
        ));
    }
    if scraping.timeout_ms == 0 {
        return Err(LoadError::invalid(
            path,
            "scraping.timeoutMs",
            "must be at least 1",
        ));
    }
    let source = scraping.data_source();
    source
        .validate()
        .map_err(|e| LoadError::invalid(path, "scraping.metricsDataSource", e.to_string()))?;
    if source.scheme == "https" {
        return Err(LoadError::invalid(
            path,
            "scraping.metricsDataSource.scheme",
            "https scraping is not built into this runtime; scrape over http",
        ));
    }
    scraping
        .extractor()
        .build()
        .map_err(|e| LoadError::invalid(path, "scraping.coreMetricsExtractor", e.to_string()))?;
    if let Some(dcgm) = &scraping.dcgm_data_source {
        dcgm.settings(&scraping.dcgm_source_name)
            .map_err(|e| LoadError::invalid(path, "scraping.dcgmDataSource", e))?;
    }
    if let Some(models) = &scraping.models_data_source {
        models
            .settings(&scraping.models_source_name)
            .map_err(|e| LoadError::invalid(path, "scraping.modelsDataSource", e))?;
    }

    config
        .gateway
        .check()
        .map_err(|(field, reason)| LoadError::invalid(path, field, reason))?;
    config
        .server
        .check()
        .map_err(|(field, reason)| LoadError::invalid(path, field, reason))?;

    if config.policy.adaptive.is_some() {
        AdaptiveConfig::from_picker_config(&config.policy).map_err(|source| {
            LoadError::Adaptive {
                path: path.map(Path::to_path_buf),
                source,
            }
        })?;
    }
    Ok(())
}
