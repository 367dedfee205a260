//! Plugin kinds, and the plugin types Shepherd honours *outside* the scheduler's
//! [`Registry`](super::Registry).
//!
//! Upstream's `plugins` list mixes every kind of plugin: filters, scorers and pickers (what a
//! scheduling profile is made of, built through the registry), but also the profile handler,
//! request parsers, data-layer sources and extractors, and flow-control policies. Shepherd
//! has a fixed place for each of those: the scheduler always runs one profile per request
//! (what `single-profile-handler` does), the adapters parse requests with the config's
//! [`ParserSet`](crate::request::ParserSet) (the `*-parser` types), the runtime scrapes metrics (`metrics-data-source`,
//! `core-metrics-extractor`) and runs the flow controller (detectors and policies). Such a
//! plugin is therefore *accepted* — its parameters are checked by the part that honours it —
//! and not built by the scheduler. [`framework_plugin`] is that table.
//!
//! ```
//! use shepherd_scheduler_core::config::{PluginKind, framework_plugin};
//!
//! let handler = framework_plugin("single-profile-handler").unwrap();
//! assert_eq!(handler.kind, PluginKind::ProfileHandler);
//! assert_eq!(framework_plugin("openai-parser").unwrap().kind, PluginKind::Parser);
//! assert!(framework_plugin("queue-scorer").is_none()); // built by the registry
//! ```

use std::fmt;

/// What a plugin is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PluginKind {
    /// Narrows the candidate endpoints.
    Filter,
    /// Scores the candidate endpoints.
    Scorer,
    /// Picks from the scored endpoints.
    Picker,
    /// Decides which profiles run for a request (and how their results combine).
    ProfileHandler,
    /// Decides, for a disaggregating profile handler, whether a request is split.
    Decider,
    /// Computes per-request data other plugins read (prefix matches, tokens, predictions).
    Producer,
    /// Parses requests of one API.
    Parser,
    /// A data-layer source (where endpoint data comes from).
    DataSource,
    /// A data-layer extractor (what is read from a source).
    DataExtractor,
    /// Endpoint discovery.
    Discovery,
    /// Flow control: saturation detectors, fairness, ordering, usage-limit and eviction policies.
    FlowControl,
    /// Request control: admitters, screeners, reporters, header processors.
    RequestControl,
    /// Plugins upstream uses only in its conformance tests.
    Test,
}

impl PluginKind {
    /// Whether a scheduling profile may reference a plugin of this kind.
    pub fn in_profiles(self) -> bool {
        matches!(
            self,
            PluginKind::Filter | PluginKind::Scorer | PluginKind::Picker | PluginKind::Producer
        )
    }
}

impl fmt::Display for PluginKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PluginKind::Filter => "filter",
            PluginKind::Scorer => "scorer",
            PluginKind::Picker => "picker",
            PluginKind::ProfileHandler => "profile handler",
            PluginKind::Decider => "disaggregation decider",
            PluginKind::Producer => "data producer",
            PluginKind::Parser => "parser",
            PluginKind::DataSource => "data-layer source",
            PluginKind::DataExtractor => "data-layer extractor",
            PluginKind::Discovery => "discovery plugin",
            PluginKind::FlowControl => "flow-control plugin",
            PluginKind::RequestControl => "request-control plugin",
            PluginKind::Test => "test plugin",
        })
    }
}

/// A plugin type Shepherd honours outside the scheduler's registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameworkPlugin {
    /// The upstream type name.
    pub plugin_type: &'static str,
    /// Its kind.
    pub kind: PluginKind,
    /// What in Shepherd does its job.
    pub honoured_by: &'static str,
}

/// The profile handler Shepherd's scheduler always behaves as.
pub const SINGLE_PROFILE_HANDLER: &str = "single-profile-handler";

/// The parser of the OpenAI API, which both adapters implement.
pub const OPENAI_PARSER: &str = "openai-parser";

/// Upstream's deprecated PreRequest plugin that writes the prefill server's header (its job is
/// now the `disagg-profile-handler`'s).
pub const DISAGG_HEADERS_HANDLER: &str = "disagg-headers-handler";

/// The older name of [`DISAGG_HEADERS_HANDLER`].
pub const PREFILL_HEADER_HANDLER: &str = "prefill-header-handler";

/// What honours the deprecated header handlers.
const DISAGG_HEADERS: &str = "the adapters, which send `x-prefiller-host-port` for the prefill \
                              stage the profile handler picked";

/// What honours every request parser type.
const PARSERS: &str = "the adapters' request parsers (`ParserSet`, from `requestHandler.parsers`)";

const FRAMEWORK_PLUGINS: [FrameworkPlugin; 36] = [
    FrameworkPlugin {
        plugin_type: SINGLE_PROFILE_HANDLER,
        kind: PluginKind::ProfileHandler,
        honoured_by: "the scheduler, which runs one profile per request",
    },
    FrameworkPlugin {
        plugin_type: OPENAI_PARSER,
        kind: PluginKind::Parser,
        honoured_by: PARSERS,
    },
    FrameworkPlugin {
        plugin_type: "anthropic-parser",
        kind: PluginKind::Parser,
        honoured_by: PARSERS,
    },
    FrameworkPlugin {
        plugin_type: "vllmhttp-parser",
        kind: PluginKind::Parser,
        honoured_by: PARSERS,
    },
    FrameworkPlugin {
        plugin_type: "sglanghttp-parser",
        kind: PluginKind::Parser,
        honoured_by: PARSERS,
    },
    FrameworkPlugin {
        plugin_type: "passthrough-parser",
        kind: PluginKind::Parser,
        honoured_by: PARSERS,
    },
    FrameworkPlugin {
        plugin_type: "vllmgrpc-parser",
        kind: PluginKind::Parser,
        honoured_by: PARSERS,
    },
    FrameworkPlugin {
        plugin_type: "vertexai-parser",
        kind: PluginKind::Parser,
        honoured_by: PARSERS,
    },
    FrameworkPlugin {
        plugin_type: "metrics-data-source",
        kind: PluginKind::DataSource,
        honoured_by: "the runtime's metrics scraper (`scraping.metricsDataSource`)",
    },
    FrameworkPlugin {
        plugin_type: "core-metrics-extractor",
        kind: PluginKind::DataExtractor,
        honoured_by: "the runtime's metrics mapping (`scraping.coreMetricsExtractor`)",
    },
    FrameworkPlugin {
        plugin_type: "file-discovery",
        kind: PluginKind::Discovery,
        honoured_by: "the runtime's endpoint discovery, which reads (and with `watchFile` \
                      watches) the endpoints file that `dataLayer.discovery` names",
    },
    FrameworkPlugin {
        plugin_type: "dcgm-data-source",
        kind: PluginKind::DataSource,
        honoured_by: "the runtime's metrics scraper, which also reads each endpoint's DCGM \
                      exporter (`scraping.dcgmDataSource`)",
    },
    FrameworkPlugin {
        plugin_type: "dcgm-extractor",
        kind: PluginKind::DataExtractor,
        honoured_by: "the runtime's metrics scraper, which stores the GPU utilization as the \
                      endpoint attribute `GPUUtilization`",
    },
    FrameworkPlugin {
        plugin_type: "multicluster-file-discovery",
        kind: PluginKind::Discovery,
        honoured_by: "the runtime's endpoint discovery, which reads (and with `watchFile` \
                      watches) the clusters file that `dataLayer.discovery` names",
    },
    FrameworkPlugin {
        plugin_type: "multicluster-metrics-data-source",
        kind: PluginKind::DataSource,
        honoured_by: "the runtime's metrics scraper, which reads every cluster's metrics page",
    },
    FrameworkPlugin {
        plugin_type: "multicluster-metrics-extractor",
        kind: PluginKind::DataExtractor,
        honoured_by: "the runtime's metrics scraper, which stores each cluster's pool averages \
                      as the endpoint attributes the `multicluster-*` scorers read",
    },
    FrameworkPlugin {
        plugin_type: "models-data-source",
        kind: PluginKind::DataSource,
        honoured_by: "the runtime's metrics scraper, which also polls each endpoint's \
                      `/v1/models` (`scraping.modelsDataSource`)",
    },
    FrameworkPlugin {
        plugin_type: "models-data-extractor",
        kind: PluginKind::DataExtractor,
        honoured_by: "the runtime's metrics scraper, which keeps each endpoint's model list \
                      (`EndpointModels`)",
    },
    FrameworkPlugin {
        plugin_type: "k8s-notification-source",
        kind: PluginKind::DataSource,
        honoured_by: "the runtime's config loader, which checks it as upstream and logs that \
                      it watches nothing (no notification extractor exists to read it)",
    },
    FrameworkPlugin {
        plugin_type: "endpoint-notification-source",
        kind: PluginKind::DataSource,
        honoured_by: "the pool's membership: its listeners (the KV-event subscriptions, the \
                      producers) hear of every endpoint added and removed",
    },
    FrameworkPlugin {
        plugin_type: DISAGG_HEADERS_HANDLER,
        kind: PluginKind::RequestControl,
        honoured_by: DISAGG_HEADERS,
    },
    FrameworkPlugin {
        plugin_type: PREFILL_HEADER_HANDLER,
        kind: PluginKind::RequestControl,
        honoured_by: DISAGG_HEADERS,
    },
    FrameworkPlugin {
        plugin_type: "request-attribute-reporter",
        kind: PluginKind::RequestControl,
        honoured_by: "the adapters, which evaluate it when a response ends (`Scheduler::reporters`)",
    },
    FrameworkPlugin {
        plugin_type: "utilization-detector",
        kind: PluginKind::FlowControl,
        honoured_by: "the flow controller (`flowControl.saturationDetector`)",
    },
    FrameworkPlugin {
        plugin_type: "concurrency-detector",
        kind: PluginKind::FlowControl,
        honoured_by: "the flow controller (`flowControl.saturationDetector`)",
    },
    FrameworkPlugin {
        plugin_type: "static-usage-limit-policy",
        kind: PluginKind::FlowControl,
        honoured_by: "the flow controller (`flowControl.usageLimitPolicyPluginRef`)",
    },
    FrameworkPlugin {
        plugin_type: "priority-holdback-policy",
        kind: PluginKind::FlowControl,
        honoured_by: "the flow controller (`flowControl.usageLimitPolicyPluginRef`)",
    },
    FrameworkPlugin {
        plugin_type: "soft-reflective-ceiling-policy",
        kind: PluginKind::FlowControl,
        honoured_by: "the flow controller (`flowControl.usageLimitPolicyPluginRef`)",
    },
    FrameworkPlugin {
        plugin_type: "round-robin-fairness-policy",
        kind: PluginKind::FlowControl,
        honoured_by: "the flow controller (`fairnessPolicyRef`)",
    },
    FrameworkPlugin {
        plugin_type: "global-strict-fairness-policy",
        kind: PluginKind::FlowControl,
        honoured_by: "the flow controller (`fairnessPolicyRef`)",
    },
    FrameworkPlugin {
        plugin_type: "program-aware-fairness",
        kind: PluginKind::FlowControl,
        honoured_by: "the flow controller (`fairnessPolicyRef`)",
    },
    FrameworkPlugin {
        plugin_type: "fcfs-ordering-policy",
        kind: PluginKind::FlowControl,
        honoured_by: "the flow controller (`orderingPolicyRef`)",
    },
    FrameworkPlugin {
        plugin_type: "edf-ordering-policy",
        kind: PluginKind::FlowControl,
        honoured_by: "the flow controller (`orderingPolicyRef`)",
    },
    FrameworkPlugin {
        plugin_type: "slo-deadline-ordering-policy",
        kind: PluginKind::FlowControl,
        honoured_by: "the flow controller (`orderingPolicyRef`)",
    },
    FrameworkPlugin {
        plugin_type: "sheddable-eviction-filter",
        kind: PluginKind::FlowControl,
        honoured_by: "the flow controller's in-flight eviction (`flowControl.enableEviction`)",
    },
    FrameworkPlugin {
        plugin_type: "priority-then-time-eviction-order-policy",
        kind: PluginKind::FlowControl,
        honoured_by: "the flow controller's in-flight eviction (`flowControl.enableEviction`)",
    },
];

/// Producer types that upstream also runs as data-layer extractors (they implement its
/// extractor interface), so `dataLayer.sources[].extractors` may name them.
pub const EXTRACTOR_PRODUCERS: [&str; 4] = [
    "precise-prefix-cache-producer",
    "precise-prefix-cache-scorer",
    "mm-embeddings-cache-producer",
    "inflight-load-producer",
];

/// The entry for `plugin_type` when Shepherd honours it outside the registry.
pub fn framework_plugin(plugin_type: &str) -> Option<&'static FrameworkPlugin> {
    FRAMEWORK_PLUGINS
        .iter()
        .find(|p| p.plugin_type == plugin_type)
}

/// Every plugin type Shepherd honours outside the registry.
pub fn framework_plugins() -> &'static [FrameworkPlugin] {
    &FRAMEWORK_PLUGINS
}

/// The kind of an upstream plugin type (or of one Shepherd honours outside the registry);
/// `None` for a type only a registry knows.
pub fn upstream_kind(plugin_type: &str) -> Option<PluginKind> {
    framework_plugin(plugin_type)
        .map(|p| p.kind)
        .or_else(|| super::upstream_type(plugin_type).map(|t| t.kind))
}
