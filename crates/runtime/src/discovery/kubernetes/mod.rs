//! Kubernetes discovery: the pool's members are the ready pods an `InferencePool` selects,
//! one endpoint per pod and target port, watched live through the API server (the
//! `kubernetes` cargo feature, on by default in `shepherd-epp` and `shepherd-gateway`).
//!
//! Upstream's picker is started with `--pool-name` (and `--pool-namespace`, `--pool-group`),
//! or, without the CRD, `--endpoint-selector` and `--endpoint-target-ports`; the same fields
//! are the config file's `discovery.kubernetes` section ([`KubernetesConfig`]).
//!
//! What becomes an endpoint ([`ServingPod`]): a pod of the pool's namespace whose labels
//! match the pool's `spec.selector.matchLabels`, whose `Ready` condition is true, that is not
//! being deleted and has a pod IP; one endpoint `podIP:port` per `spec.targetPorts[].number`,
//! narrowed by the pod's `llm-d.ai/active-ports` annotation. The pod's labels become the
//! endpoint's labels (`llm-d.ai/role` for the prefill/decode filters, any label for
//! `label-selector-filter`, `llm-d.ai/engine-type` for the metrics mapping).
//!
//! Resilience, all from kube's `runtime::watcher` plus the rules here:
//!
//! - watches resume from their resourceVersion; a 410 Gone relists, and the relisted pods
//!   replace the known ones in one step when the list is done;
//! - API errors back off ([`WatchBackoff`], 500 ms doubling to 10 s by default);
//! - **an unreachable API server never changes the pool**: the last set stays in force, the
//!   log says the discovery is stale and `shepherd_discovery_stale` is 1 until it answers;
//! - an edit of the pool's selector or ports applies live; an invalid pool (no selector, a
//!   bad label, 0 or more than 8 ports) is refused with a log line and the last valid pool
//!   stays; a deleted pool empties the pool, with a log line;
//! - endpoints that leave and come back are new endpoints in the pool (their in-flight count
//!   starts from zero; requests still running on the old one finish against it).
//!
//! ```no_run
//! use std::sync::Arc;
//! use shepherd_runtime::config::KubernetesConfig;
//! use shepherd_runtime::discovery::Discovery;
//! use shepherd_runtime::discovery::kubernetes::KubernetesDiscovery;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // In a pod: the service account's credentials; elsewhere: the kubeconfig.
//! let discovery = KubernetesDiscovery::start(&KubernetesConfig::pool("vllm-llama3-8b")).await?;
//! let mut sets = discovery.subscribe();
//! sets.changed().await?;
//! println!("{:?}", sets.borrow().addresses());
//! // Or hand it to the runtime: RuntimeOptions { discovery: Some(Arc::new(discovery)), .. }
//! # Ok(()) }
//! ```

mod backoff;
mod lease;
mod peers;
mod pods;
mod policy_objects;
mod policy_watch;
mod pool;
mod state;
mod stats;
mod watch;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::api::ApiResource;
use shepherd_scheduler_core::metrics::{MetricsSource, MetricsVisitor};
use thiserror::Error;
use tokio::sync::watch as channel;
use tokio::task::JoinHandle;

pub use backoff::WatchBackoff;
pub use lease::{LeaderElection, LeaseSettings, lease_name};
pub use peers::peer_address;
pub(crate) use peers::start_peer_discovery;
pub use pods::{ACTIVE_PORTS_ANNOTATION, LEGACY_ACTIVE_PORTS_ANNOTATION, ServingPod, active_ports};
pub use policy_objects::{objective_priority, references_pool, rewrite_object};
pub use policy_watch::POLICY_GROUP_VERSIONS;
pub use pool::{PoolError, PoolSpec};
pub use stats::{DiscoveryStats, Watched};

use super::{Discovery, EndpointSet, LabelSelector};
use crate::config::{ALPHA_POOL_GROUP, KubernetesConfig};
use crate::policies::RequestPolicies;
use policy_watch::PolicyWatch;
use watch::{Driver, Target};

/// Where the pod's own namespace is written in a pod with a service account.
pub const SERVICE_ACCOUNT_NAMESPACE_FILE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// Why Kubernetes discovery could not start.
#[derive(Debug, Error)]
pub enum KubernetesError {
    /// The `discovery.kubernetes` section (or the flags) are not valid.
    #[error("Kubernetes discovery: {0}")]
    Config(String),
    /// No in-cluster credentials and no usable kubeconfig.
    #[error(
        "Kubernetes discovery: no API server credentials (in-cluster service account or kubeconfig): {0}"
    )]
    Credentials(#[source] kube::config::InferConfigError),
    /// The client could not be built from the credentials.
    #[error("Kubernetes discovery: cannot build the API client: {0}")]
    Client(#[source] kube::Error),
}

/// Endpoints from an InferencePool's (or a label selector's) pods. See the
/// [module docs](self).
pub struct KubernetesDiscovery {
    rx: channel::Receiver<Arc<EndpointSet>>,
    stats: Arc<DiscoveryStats>,
    namespace: String,
    client: Client,
    policies: Option<Arc<RequestPolicies>>,
    tasks: Vec<JoinHandle<()>>,
}

impl fmt::Debug for KubernetesDiscovery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubernetesDiscovery")
            .field("namespace", &self.namespace)
            .field("endpoints", &self.rx.borrow().len())
            .field("stale", &self.stats.stale())
            .finish()
    }
}

impl KubernetesDiscovery {
    /// Starts watching with the credentials `kube::Config::infer` finds: the pod's service
    /// account in a cluster, else the kubeconfig (`KUBECONFIG`, `~/.kube/config`).
    pub async fn start(config: &KubernetesConfig) -> Result<Self, KubernetesError> {
        config.validate().map_err(KubernetesError::Config)?;
        let kube_config = kube::Config::infer()
            .await
            .map_err(KubernetesError::Credentials)?;
        let default_namespace = kube_config.default_namespace.clone();
        let client = Client::try_from(kube_config).map_err(KubernetesError::Client)?;
        Self::with_client(config, client, &default_namespace)
    }

    /// Starts watching through `client`; `default_namespace` is used when neither the config
    /// nor the environment names one (see [`resolve_namespace`]). Spawns one task on the
    /// current tokio runtime, stopped when this value is dropped.
    pub fn with_client(
        config: &KubernetesConfig,
        client: Client,
        default_namespace: &str,
    ) -> Result<Self, KubernetesError> {
        config.validate().map_err(KubernetesError::Config)?;
        let namespace = resolve_namespace(config.pool_namespace.as_deref(), default_namespace);
        let target = match (&config.pool_name, &config.endpoint_selector) {
            (Some(name), _) => {
                let version = if config.pool_group == ALPHA_POOL_GROUP {
                    "v1alpha2"
                } else {
                    "v1"
                };
                Target::Pool {
                    name: name.clone(),
                    group: config.pool_group.clone(),
                    resource: ApiResource {
                        group: config.pool_group.clone(),
                        version: version.to_string(),
                        api_version: format!("{}/{version}", config.pool_group),
                        kind: "InferencePool".to_string(),
                        plural: "inferencepools".to_string(),
                    },
                }
            }
            (None, Some(selector)) => {
                let selector: LabelSelector = selector
                    .parse()
                    .map_err(|e| KubernetesError::Config(format!("endpointSelector: {e}")))?;
                let mut ports = config.endpoint_target_ports.clone();
                ports.dedup();
                Target::Selector(PoolSpec {
                    selector,
                    target_ports: ports,
                    app_protocol: None,
                    endpoint_picker: None,
                })
            }
            (None, None) => {
                return Err(KubernetesError::Config(
                    "give poolName or endpointSelector".into(),
                ));
            }
        };
        match &target {
            Target::Pool { name, group, .. } => tracing::info!(
                pool = %name, %namespace, %group, "watching the InferencePool and its pods"
            ),
            Target::Selector(spec) => tracing::info!(
                selector = %spec.selector, ports = ?spec.target_ports, %namespace,
                "watching the pods of the endpoint selector"
            ),
        }
        let backoff = WatchBackoff::new(
            Duration::from_millis(config.backoff_initial_ms),
            Duration::from_millis(config.backoff_max_ms),
        );
        let mut tasks = Vec::new();
        // Objectives and rewrites reference a pool by name: there are none without one.
        let policies = match &target {
            Target::Pool { name, group, .. } => {
                let policies = Arc::new(RequestPolicies::new());
                let watch = PolicyWatch {
                    client: client.clone(),
                    namespace: namespace.clone(),
                    pool_name: name.clone(),
                    pool_group: group.clone(),
                    backoff: backoff.clone(),
                    watch_timeout_secs: config.watch_timeout_secs,
                    policies: Arc::clone(&policies),
                };
                tasks.push(tokio::spawn(watch.run()));
                Some(policies)
            }
            Target::Selector(_) => None,
        };
        let (tx, rx) = channel::channel(Arc::new(EndpointSet::default()));
        let stats = Arc::new(DiscoveryStats::default());
        let driver = Driver {
            client: client.clone(),
            namespace: namespace.clone(),
            target,
            backoff,
            watch_timeout_secs: config.watch_timeout_secs,
            publish_interval: Duration::from_millis(config.publish_interval_ms),
            tx,
            stats: Arc::clone(&stats),
        };
        tasks.push(tokio::spawn(driver.run()));
        Ok(KubernetesDiscovery {
            rx,
            stats,
            namespace,
            client,
            policies,
            tasks,
        })
    }

    /// The discovery's figures (also exported through [`MetricsSource`]).
    pub fn stats(&self) -> &Arc<DiscoveryStats> {
        &self.stats
    }

    /// The namespace watched.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The pool's `InferenceObjective` priorities and `InferenceModelRewrite` rules, kept
    /// current (with an InferencePool; `None` with an endpoint selector, which no objective
    /// can reference). The adapters apply them to every request
    /// ([`crate::policies`]).
    pub fn policies(&self) -> Option<&Arc<RequestPolicies>> {
        self.policies.as_ref()
    }

    /// The API client the discovery watches through (for leader election beside it).
    pub fn client(&self) -> &Client {
        &self.client
    }
}

impl Drop for KubernetesDiscovery {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Discovery for KubernetesDiscovery {
    fn name(&self) -> &str {
        "kubernetes"
    }

    fn subscribe(&self) -> channel::Receiver<Arc<EndpointSet>> {
        self.rx.clone()
    }

    fn request_policies(&self) -> Option<Arc<RequestPolicies>> {
        self.policies.clone()
    }

    fn metrics(&self) -> Option<Arc<dyn MetricsSource>> {
        Some(Arc::new(KubernetesFigures {
            stats: Arc::clone(&self.stats),
            policies: self.policies.clone(),
        }) as Arc<dyn MetricsSource>)
    }
}

impl MetricsSource for KubernetesDiscovery {
    fn visit_metrics(&self, visitor: &mut dyn MetricsVisitor) {
        self.stats.visit_metrics(visitor);
        if let Some(policies) = &self.policies {
            policies.visit_metrics(visitor);
        }
    }
}

/// The discovery's figures and its policies', exported together.
struct KubernetesFigures {
    stats: Arc<DiscoveryStats>,
    policies: Option<Arc<RequestPolicies>>,
}

impl MetricsSource for KubernetesFigures {
    fn visit_metrics(&self, visitor: &mut dyn MetricsVisitor) {
        self.stats.visit_metrics(visitor);
        if let Some(policies) = &self.policies {
            policies.visit_metrics(visitor);
        }
    }
}

/// The namespace to watch: `configured` (`--pool-namespace`) when given, else the
/// `NAMESPACE` variable (upstream's), else `POD_NAMESPACE` (the usual downward-API name),
/// else `default_namespace` (the client's: the service account's namespace in a pod, the
/// kubeconfig context's outside), else `default`.
pub fn resolve_namespace(configured: Option<&str>, default_namespace: &str) -> String {
    let from_env = |name: &str| {
        std::env::var(name)
            .ok()
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    configured
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .or_else(|| from_env("NAMESPACE"))
        .or_else(|| from_env("POD_NAMESPACE"))
        .or_else(|| {
            std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE_FILE)
                .ok()
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty())
        })
        .or_else(|| Some(default_namespace.trim().to_string()).filter(|n| !n.is_empty()))
        .unwrap_or_else(|| "default".to_string())
}
