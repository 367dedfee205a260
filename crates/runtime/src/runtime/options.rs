//! What a caller may change about how the runtime runs (the config file says the rest).

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use shepherd_scheduler_core::clock::Clock;
use shepherd_scheduler_core::config::Registry;
use shepherd_scheduler_core::metrics::MetricsSource;

use crate::config::RuntimeConfig;
use crate::discovery::{DEFAULT_POLL_INTERVAL, Discovery};

/// Where the runtime's config comes from.
#[derive(Debug, Clone)]
pub enum ConfigSource {
    /// A YAML file, watched for edits (unless [`RuntimeOptions::watch_config`] is off).
    File(PathBuf),
    /// A config built or parsed by the caller (reload it with
    /// [`RuntimeHandle::reload`](super::RuntimeHandle::reload)).
    Config(Box<RuntimeConfig>),
}

impl From<PathBuf> for ConfigSource {
    fn from(path: PathBuf) -> Self {
        ConfigSource::File(path)
    }
}

impl From<&std::path::Path> for ConfigSource {
    fn from(path: &std::path::Path) -> Self {
        ConfigSource::File(path.to_path_buf())
    }
}

impl From<RuntimeConfig> for ConfigSource {
    fn from(config: RuntimeConfig) -> Self {
        ConfigSource::Config(Box::new(config))
    }
}

/// Options of [`Runtime::start`](super::Runtime::start). The defaults are what the adapter
/// binaries run with.
///
/// ```
/// use std::time::Duration;
/// use shepherd_runtime::RuntimeOptions;
///
/// let options = RuntimeOptions {
///     config_poll_interval: Duration::from_millis(200),
///     ..RuntimeOptions::default()
/// };
/// assert!(options.scrape && options.adaptive && options.serve_admin && options.watch_config);
/// ```
#[derive(Clone)]
pub struct RuntimeOptions {
    /// Plugin types the policy may use (default: `shepherd_scorers::builtin_registry()`).
    pub registry: Option<Registry>,
    /// Where endpoints come from (default: the config file's `endpoints`, reloaded with it).
    /// With a source of its own, the file's `endpoints` section is ignored.
    pub discovery: Option<Arc<dyn Discovery>>,
    /// Watch the config file and apply its edits (default on; only for a file source).
    pub watch_config: bool,
    /// How often the config file is looked at (default 1 s).
    pub config_poll_interval: Duration,
    /// Serve the admin endpoints on `server.metricsPort` (default on).
    pub serve_admin: bool,
    /// Serve the admin endpoints here instead of the config's address.
    pub admin_addr: Option<SocketAddr>,
    /// Scrape the endpoints' metrics (default on; off when something else feeds them).
    pub scrape: bool,
    /// Run the adaptive tick loop when the policy has an `adaptive:` section (default on).
    pub adaptive: bool,
    /// Subscribe to the model servers' KV-cache events for the policy's precise prefix-cache
    /// producers (default on; off when something else feeds their indexes).
    pub kv_events: bool,
    /// The pool's clock (default: [`TokioClock`](crate::TokioClock)).
    pub clock: Option<Arc<dyn Clock>>,
    /// The adapter's own metrics, rendered on `/metrics` after the runtime's (default none).
    pub metrics_sources: Vec<Arc<dyn MetricsSource>>,
    /// Export the upstream families' deprecated names whatever the config's
    /// `metrics.legacyNames` says (`Some`), or as it says (`None`, the default).
    pub legacy_metric_names: Option<bool>,
    /// Leadership under leader election (`--ha-enable-leader-election`): `/readyz` answers
    /// 503 while it is false (default none: always a leader).
    pub leadership: Option<tokio::sync::watch::Receiver<bool>>,
    /// Load plugins of the types upstream marks Alpha (`--allow-experimental-plugins`);
    /// without it a config declaring one is refused at start and on reload, as upstream
    /// refuses to start (default off, upstream's default).
    pub allow_experimental_plugins: bool,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            registry: None,
            discovery: None,
            watch_config: true,
            config_poll_interval: DEFAULT_POLL_INTERVAL,
            serve_admin: true,
            admin_addr: None,
            scrape: true,
            adaptive: true,
            kv_events: true,
            clock: None,
            metrics_sources: Vec::new(),
            legacy_metric_names: None,
            leadership: None,
            allow_experimental_plugins: false,
        }
    }
}

impl fmt::Debug for RuntimeOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeOptions")
            .field("registry", &self.registry)
            .field("discovery", &self.discovery)
            .field("watch_config", &self.watch_config)
            .field("config_poll_interval", &self.config_poll_interval)
            .field("serve_admin", &self.serve_admin)
            .field("admin_addr", &self.admin_addr)
            .field("scrape", &self.scrape)
            .field("adaptive", &self.adaptive)
            .field("kv_events", &self.kv_events)
            .field("custom_clock", &self.clock.is_some())
            .field("metrics_sources", &self.metrics_sources.len())
            .finish()
    }
}
