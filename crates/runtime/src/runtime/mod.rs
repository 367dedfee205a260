//! Wiring the runtime's parts together: [`Runtime::start`] and the [`RuntimeHandle`] it returns.

mod check;
mod error;
mod handle;
mod options;
mod reload;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use shepherd_scheduler_core::endpoint::{EndpointAttributes, Pool};
use shepherd_scheduler_core::reload::ReloadableScheduler;
use shepherd_scheduler_core::shared::SharedState;
use shepherd_scorers::builtin_registry;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::adaptive::{AdaptiveRunner, build_controller};
use crate::admin::{self, AdminState};
use crate::clock::TokioClock;
use crate::config::{RuntimeConfig, read_error};
use crate::discovery::membership::Membership;
use crate::discovery::{Discovery, FileWatcher, StaticDiscovery};
use crate::flow::FlowController;
use crate::http::{ConnectionLimits, ConnectionStats};
use crate::kv_events::{KvEventStats, KvEventsManager};
use crate::replicas::{IndexSync, LoadExchange, ReplicaStats};
use crate::scrape::scraper::Scraper;
use crate::scrape::{ScrapeSettings, ScrapeStats, fetch};
use crate::shutdown::ShutdownSignal;

pub use check::ConfigCheck;
pub use error::RuntimeError;
pub use handle::{RuntimeHandle, ShutdownReport};
pub use options::{ConfigSource, RuntimeOptions};
pub use reload::{ReloadOutcome, ReloadStats};

/// [`Runtime::start`]: everything wired, for an adapter binary to call once.
///
/// Start loads the config (a file, watched for edits, or a [`RuntimeConfig`] built in code),
/// builds the [`SharedState`] over a pool on [`TokioClock`](crate::TokioClock) and the
/// [`ReloadableScheduler`] for the policy (the adaptive preset when the file has no
/// `schedulingProfiles`), puts the discovered endpoints in the pool, and spawns on the
/// current tokio runtime:
///
/// - the membership loop (discovery → `Pool::set_members`);
/// - the scraper (one task per endpoint);
/// - the adaptive tick loop, when the policy has an `adaptive:` section;
/// - the KV-cache event subscriptions of the policy's precise prefix-cache producers
///   ([`kv_events`](crate::kv_events));
/// - the in-flight load exchange with peer replicas, with a `replicas` section
///   ([`replicas`](crate::replicas); changes take effect on a restart);
/// - the config file watcher: an edit that loads is applied through
///   [`RuntimeHandle::reload`] (policy rebuilt and swapped in with live counters kept,
///   endpoints and scraping updated); one that does not is logged and counted, and the
///   running config stays;
/// - the admin server (`/metrics`, `/healthz`, `/readyz`, `/debug/adaptive`,
///   `/debug/config`).
///
/// The adapter routes with [`RuntimeHandle::scheduler`], and at the end calls
/// [`RuntimeHandle::shutdown`] with a deadline.
///
/// ```
/// use std::time::Duration;
/// use shepherd_runtime::config::RuntimeConfig;
/// use shepherd_runtime::{Runtime, RuntimeOptions};
/// use shepherd_scheduler_core::prelude::*;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let config = RuntimeConfig::from_yaml(
///     "endpoints: [127.0.0.1:18000, 127.0.0.1:18001]\nserver: {metricsPort: 0}\n",
/// )?;
/// // No servers listen there: scraping is off for this example.
/// let options = RuntimeOptions { scrape: false, ..RuntimeOptions::default() };
/// let handle = Runtime::start(config, options).await?;
/// assert_eq!(handle.pool().snapshot().len(), 2);
/// assert!(handle.config().policy_is_preset);
///
/// let request = InferenceRequest::new("r1", "llama", Prompt::Text("hello".into()));
/// let decision = handle.scheduler().schedule(&request)?;
/// let response = decision.into_handle(); // forwarded; the response is streaming
/// assert_eq!(handle.in_flight(), 1);
/// drop(response); // the stream ended
///
/// let report = handle.shutdown(Duration::from_secs(5)).await;
/// assert!(report.drained);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Runtime;

impl Runtime {
    /// Loads the config, builds the scheduler and spawns the loops and the admin server on
    /// the current tokio runtime.
    ///
    /// # Errors
    ///
    /// [`RuntimeError`] when the config cannot be loaded, the policy, adaptive section or
    /// scraping settings are refused, or the admin port cannot be bound.
    pub async fn start(
        source: impl Into<ConfigSource>,
        options: RuntimeOptions,
    ) -> Result<RuntimeHandle, RuntimeError> {
        let (config, loaded_text) = match source.into() {
            ConfigSource::File(path) => {
                let text = tokio::fs::read_to_string(&path)
                    .await
                    .map_err(|e| read_error(&path, e))?;
                (RuntimeConfig::from_yaml_at(&text, &path)?, Some(text))
            }
            ConfigSource::Config(config) => (*config, None),
        };
        for warning in config.warnings() {
            tracing::warn!(%warning, "config section ignored");
        }

        let clock = options
            .clock
            .clone()
            .unwrap_or_else(|| Arc::new(TokioClock::new()));
        let shared = SharedState::new(Arc::new(Pool::with_clock(clock)));
        let registry = options.registry.clone().unwrap_or_else(builtin_registry);
        config
            .check_stability(options.allow_experimental_plugins)
            .map_err(RuntimeError::Policy)?;
        // The program-aware ledger is a completion hook of every scheduler: in place first.
        if let Some(flow) = config
            .flow_control
            .as_ref()
            .filter(|f| f.uses_program_aware())
        {
            shepherd_scheduler_core::flow::ProgramLedger::install(
                &shared.resources,
                flow.program_aware.clone(),
            );
        }
        let scheduler = Arc::new(
            ReloadableScheduler::build(&config.policy, &registry, shared.clone())
                .map_err(RuntimeError::Policy)?,
        );
        let adaptive = Arc::new(AdaptiveRunner::new());
        if options.adaptive {
            adaptive.replace(build_controller(&config.policy, &scheduler.load())?);
        }
        let settings =
            ScrapeSettings::from_config(&config.scraping).map_err(RuntimeError::Scraping)?;
        let client = fetch::client().map_err(|e| RuntimeError::HttpClient(e.to_string()))?;

        let (static_discovery, discovery): (Option<Arc<StaticDiscovery>>, Arc<dyn Discovery>) =
            match &options.discovery {
                Some(discovery) => (None, Arc::clone(discovery)),
                None if config.discovery.file.is_some() => (None, file_discovery(&config).await?),
                None if config.discovery.kubernetes.is_some() => {
                    (None, kubernetes_discovery(&config).await?)
                }
                None => {
                    let discovery = Arc::new(StaticDiscovery::from_config(&config));
                    (Some(Arc::clone(&discovery)), discovery)
                }
            };
        let membership = Arc::new(Membership::new(Arc::clone(&shared.pool)));
        membership.apply(&discovery.subscribe().borrow());

        let admin_limits = ConnectionLimits::admin(&config.server);
        let admin_listener = if options.serve_admin {
            let addr = options
                .admin_addr
                .unwrap_or_else(|| config.server.admin_addr());
            let listener = TcpListener::bind(addr)
                .await
                .map_err(|source| RuntimeError::Bind { addr, source })?;
            Some(listener)
        } else {
            None
        };

        let replica_medium = match &config.replicas {
            Some(replicas) => Some(start_replicas(replicas, &shared).await?),
            None => None,
        };

        let flow = config.flow_control.clone().map(|settings| {
            FlowController::with_resources(settings, Arc::clone(&shared.pool), &shared.resources)
        });

        let mut upstream_settings = config.metrics.settings();
        if let Some(legacy) = options.legacy_metric_names {
            upstream_settings.legacy_names = legacy;
        }
        let upstream = Arc::new(crate::upstream::UpstreamMetrics::new(upstream_settings));
        upstream.attach(Arc::clone(&scheduler), flow.clone());

        let (trigger, signal) = ShutdownSignal::new();
        let path = config.path.clone();
        let (config_tx, config_rx) = watch::channel(Arc::new(config));
        let (settings_tx, settings_rx) = watch::channel(Arc::new(settings));
        let scrape_stats = Arc::new(ScrapeStats::default());
        let reload_stats = Arc::new(ReloadStats::default());
        let applier = Arc::new(reload::Applier {
            lock: Mutex::new(()),
            current: config_tx,
            registry,
            scheduler: Arc::clone(&scheduler),
            discovery: static_discovery,
            settings: settings_tx,
            adaptive: Arc::clone(&adaptive),
            adaptive_enabled: options.adaptive,
            allow_experimental: options.allow_experimental_plugins,
            stats: Arc::clone(&reload_stats),
        });

        let mut tasks = JoinSet::new();
        tasks.spawn(Arc::clone(&membership).follow(discovery.subscribe(), signal.clone()));
        if options.scrape {
            let scraper = Scraper {
                pool: Arc::clone(&shared.pool),
                sets: discovery.subscribe(),
                settings: settings_rx,
                stats: Arc::clone(&scrape_stats),
                client,
                attributes: EndpointAttributes::of(&shared.resources),
                models: crate::scrape::models::EndpointModels::of(&shared.resources),
            };
            tasks.spawn(scraper.run(signal.clone()));
        }
        if options.adaptive {
            tasks.spawn(Arc::clone(&adaptive).run(Arc::clone(&shared.pool), signal.clone()));
        }
        let mut extra = options.metrics_sources.clone();
        extra.extend(discovery.metrics());
        let admin_connections = Arc::new(ConnectionStats::new("admin"));
        if admin_listener.is_some() {
            extra.push(admin_connections.clone());
        }
        let kv_event_stats = Arc::new(KvEventStats::default());
        if options.kv_events {
            let manager = KvEventsManager {
                resources: Arc::clone(&shared.resources),
                pool: Arc::clone(&shared.pool),
                sets: discovery.subscribe(),
                configs: config_rx.clone(),
                stats: Arc::clone(&kv_event_stats),
            };
            tasks.spawn(manager.run(signal.clone()));
            extra.push(kv_event_stats);
        }
        match replica_medium {
            Some(ReplicaMedium::Direct(exchange, stats)) => {
                tasks.spawn((*exchange).run(signal.clone()));
                extra.push(stats);
            }
            #[cfg(feature = "redis")]
            Some(ReplicaMedium::Redis(exchange, stats, redis_stats)) => {
                let exchange = *exchange;
                tasks.spawn(exchange.run(signal.clone()));
                extra.push(stats);
                extra.push(redis_stats);
            }
            None => {}
        }
        if let Some(flow) = &flow {
            let stop = signal.clone();
            tasks.spawn(flow.clone().run_until(async move { stop.wait().await }));
            extra.push(Arc::new(flow.clone()));
        }
        if let (Some(path), Some(text), true) = (path, loaded_text, options.watch_config) {
            tasks.spawn(watch_file(
                path,
                text,
                options.config_poll_interval,
                Arc::clone(&applier),
                signal.clone(),
            ));
        }

        let admin = AdminState {
            scheduler,
            scrape: scrape_stats,
            adaptive,
            reloads: reload_stats,
            config: config_rx,
            shutdown: signal.clone(),
            extra: extra.into(),
            holds_requests: flow.is_some(),
            upstream,
            debug_budget: Arc::new(admin::RenderBudget::new()),
            leadership: options.leadership.clone(),
        };
        let mut admin_addr = None;
        if let Some(listener) = admin_listener {
            admin_addr = listener.local_addr().ok();
            tasks.spawn(crate::http::serve(
                listener,
                admin::router(admin.clone()),
                admin_limits,
                admin_connections,
                signal.clone(),
            ));
            if let Some(addr) = admin_addr {
                tracing::info!(%addr, "admin endpoints listening");
            }
        }
        tracing::info!(
            endpoints = shared.pool.snapshot().len(),
            discovery = discovery.name(),
            preset = admin.config().policy_is_preset,
            adaptive = admin.adaptive.controller().is_some(),
            flow_control = flow.is_some(),
            "runtime started"
        );

        Ok(RuntimeHandle {
            admin,
            flow,
            applier,
            discovery,
            membership,
            admin_addr,
            trigger,
            tasks,
        })
    }
}

/// The config's endpoints file (`discovery.file`, or upstream's `file-discovery`), read and,
/// with `watchFile`, followed.
async fn file_discovery(config: &RuntimeConfig) -> Result<Arc<dyn Discovery>, RuntimeError> {
    let Some(file) = &config.discovery.file else {
        return Err(RuntimeError::Discovery("no discovery.file section".into()));
    };
    let discovery = crate::discovery::EndpointsFileDiscovery::start(file)
        .await
        .map_err(|e| {
            RuntimeError::Discovery(format!("file-discovery: initial load failed: {e}"))
        })?;
    Ok(Arc::new(discovery))
}

/// The config's `discovery.kubernetes` source, started.
#[cfg(feature = "kubernetes")]
async fn kubernetes_discovery(config: &RuntimeConfig) -> Result<Arc<dyn Discovery>, RuntimeError> {
    let Some(kubernetes) = &config.discovery.kubernetes else {
        return Err(RuntimeError::Discovery(
            "no discovery.kubernetes section".into(),
        ));
    };
    let discovery = crate::discovery::kubernetes::KubernetesDiscovery::start(kubernetes)
        .await
        .map_err(|e| RuntimeError::Discovery(e.to_string()))?;
    Ok(Arc::new(discovery))
}

/// Without the `kubernetes` feature, a `discovery.kubernetes` section cannot be honoured.
#[cfg(not(feature = "kubernetes"))]
async fn kubernetes_discovery(_: &RuntimeConfig) -> Result<Arc<dyn Discovery>, RuntimeError> {
    Err(RuntimeError::Discovery(
        "the config has a discovery.kubernetes section, but this build has no Kubernetes support (cargo feature `kubernetes`)".into(),
    ))
}

/// Applies every new version of the config file until `stop`.
async fn watch_file(
    path: PathBuf,
    loaded: String,
    poll: Duration,
    applier: Arc<reload::Applier>,
    stop: ShutdownSignal,
) {
    let mut watcher = FileWatcher::new(&path, poll);
    watcher.assume(loaded.as_bytes());
    loop {
        tokio::select! {
            changed = watcher.changed() => match changed {
                Ok(text) => reload_text(&applier, &text, &path),
                Err(error) => applier.reject(&error),
            },
            () = stop.wait() => return,
        }
    }
}

fn reload_text(applier: &reload::Applier, text: &str, path: &Path) {
    match RuntimeConfig::from_yaml_at(text, path) {
        // `apply` counts and logs its own errors.
        Ok(config) => {
            let _ = applier.apply(config);
        }
        Err(error) => applier.reject(&error),
    }
}

/// The replica exchange a `replicas` section starts, with its counters.
enum ReplicaMedium {
    Direct(Box<LoadExchange>, Arc<ReplicaStats>),
    #[cfg(feature = "redis")]
    Redis(
        Box<crate::replicas::redis::RedisExchange>,
        Arc<ReplicaStats>,
        Arc<crate::replicas::redis::RedisStats>,
    ),
}

/// Starts the Kubernetes discovery of the direct exchange's peers, when configured.
async fn discover_peers(
    config: &crate::config::ReplicasConfig,
    stats: &Arc<ReplicaStats>,
) -> Result<Option<crate::replicas::DiscoveredPeers>, RuntimeError> {
    if config.peers.kubernetes().is_none() {
        return Ok(None);
    }
    if config.identity().ip().is_unspecified() {
        return Err(RuntimeError::Discovery(format!(
            "replicas: listen is {} and neither replicas.advertise nor the POD_IP variable (the downward API's status.podIP) names the address the peers know this replica by",
            config.listen_addr()
        )));
    }
    #[cfg(feature = "kubernetes")]
    {
        crate::discovery::kubernetes::start_peer_discovery(config, Arc::clone(stats))
            .await
            .map(Some)
            .map_err(|e| RuntimeError::Discovery(e.to_string()))
    }
    #[cfg(not(feature = "kubernetes"))]
    {
        let _ = stats;
        Err(RuntimeError::Discovery(
            "replicas.peers.kubernetes needs a build with the `kubernetes` feature".into(),
        ))
    }
}

/// Reads the section's secrets and binds the direct exchange's socket, or checks the Redis
/// backend's credentials: a failure stops the start.
async fn start_replicas(
    config: &crate::config::ReplicasConfig,
    shared: &SharedState,
) -> Result<ReplicaMedium, RuntimeError> {
    let stats = Arc::new(ReplicaStats::default());
    let index = config
        .index_deltas
        .then(|| IndexSync::new(Arc::clone(&shared.resources), Arc::clone(&shared.pool)));
    match config.backend {
        crate::config::ReplicaBackend::Direct => {
            let key = config.mac_key()?;
            let listen = config.listen_addr();
            let socket = tokio::net::UdpSocket::bind(listen)
                .await
                .map_err(|source| RuntimeError::Bind {
                    addr: listen,
                    source,
                })?;
            let discovered = discover_peers(config, &stats).await?;
            let exchange = LoadExchange {
                config: config.clone(),
                key,
                socket,
                pool: Arc::clone(&shared.pool),
                stats: Arc::clone(&stats),
                index,
                discovered,
            };
            Ok(ReplicaMedium::Direct(Box::new(exchange), stats))
        }
        #[cfg(feature = "redis")]
        crate::config::ReplicaBackend::Redis => {
            let redis_stats = Arc::new(crate::replicas::redis::RedisStats::default());
            let exchange = crate::replicas::redis::RedisExchange::start(
                config.clone(),
                Arc::clone(&shared.pool),
                index,
                Arc::clone(&stats),
                Arc::clone(&redis_stats),
            )
            .await?;
            Ok(ReplicaMedium::Redis(Box::new(exchange), stats, redis_stats))
        }
        #[cfg(not(feature = "redis"))]
        crate::config::ReplicaBackend::Redis => Err(RuntimeError::ReplicasBackendUnavailable),
    }
}
