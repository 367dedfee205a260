//! The `discovery` section: where the pool's members come from when not from `endpoints`.
//!
//! Today one source: `kubernetes`, the pods of an `InferencePool` (upstream's `--pool-name`,
//! `--pool-namespace`, `--pool-group`) or of a label selector (`--endpoint-selector`,
//! `--endpoint-target-ports`), watched through the API server (the runtime's `kubernetes`
//! cargo feature; `docs/kubernetes.md`).
//!
//! ```
//! use shepherd_runtime::config::RuntimeConfig;
//!
//! let config = RuntimeConfig::from_yaml(r#"
//! discovery:
//!   kubernetes:
//!     poolName: vllm-llama3-8b
//!     poolNamespace: inference
//! "#)?;
//! let kubernetes = config.discovery.kubernetes.as_ref().unwrap();
//! assert_eq!(kubernetes.pool_name.as_deref(), Some("vllm-llama3-8b"));
//! assert_eq!(kubernetes.pool_group, "inference.networking.k8s.io");
//!
//! // A selector needs its ports, 1 to 8 of them.
//! let error = RuntimeConfig::from_yaml(
//!     "discovery:\n  kubernetes:\n    endpointSelector: app=vllm\n",
//! ).unwrap_err();
//! assert!(error.to_string().contains("endpointTargetPorts"));
//! # Ok::<(), shepherd_runtime::config::LoadError>(())
//! ```

use serde::{Deserialize, Serialize};

use crate::discovery::LabelSelector;

/// Upstream's default `--pool-group`: the `inference.networking.k8s.io/v1` InferencePool.
pub const DEFAULT_POOL_GROUP: &str = "inference.networking.k8s.io";

/// The older pool group, whose `v1alpha2` InferencePool is also watched.
pub const ALPHA_POOL_GROUP: &str = "inference.networking.x-k8s.io";

/// Most target ports a pool or `endpointTargetPorts` may give (the CRD's limit).
pub const MAX_TARGET_PORTS: usize = 8;

/// Default first wait after an API-server error: 500 ms.
pub const DEFAULT_BACKOFF_INITIAL_MS: u64 = 500;

/// Default longest wait between two tries while the API server fails: 10 s.
pub const DEFAULT_BACKOFF_MAX_MS: u64 = 10_000;

/// Default length of one watch request (kube's default): 290 s.
pub const DEFAULT_WATCH_TIMEOUT_SECS: u32 = 290;

/// Default shortest time between two published endpoint sets: 100 ms (a burst of pod events
/// becomes one membership change).
pub const DEFAULT_PUBLISH_INTERVAL_MS: u64 = 100;

/// The `discovery` section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscoveryConfig {
    /// Pods from the Kubernetes API server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<KubernetesConfig>,
    /// Endpoints from a file of their own (upstream's `file-discovery` plugin, which
    /// `dataLayer.discovery` names, is read into this).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FileDiscoveryConfig>,
}

/// `discovery.file`, and the parameters of upstream's `file-discovery` plugin: the endpoints
/// file (see [`EndpointsFileDiscovery`](crate::discovery::EndpointsFileDiscovery)).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileDiscoveryConfig {
    /// The file's path (required).
    #[serde(default)]
    pub path: String,
    /// Whether to read it again when it changes (default false).
    #[serde(default)]
    pub watch_file: bool,
    /// The file lists peer clusters (upstream's `multicluster-file-discovery`): addresses may
    /// be hostnames or IPv6 ([`multicluster::discovery`](crate::multicluster::discovery)).
    #[serde(skip)]
    pub multicluster: bool,
}

/// `discovery.kubernetes`: which pods are the pool, and how the watch behaves.
///
/// Exactly one of `poolName` (an InferencePool) or `endpointSelector` (pods by label, no CRD)
/// is given, as upstream requires of its flags.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubernetesConfig {
    /// The InferencePool (`--pool-name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_name: Option<String>,
    /// Its namespace (`--pool-namespace`); default: the `NAMESPACE` or `POD_NAMESPACE`
    /// variable, else the pod's own namespace (the service account's), else the kubeconfig
    /// context's, else `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_namespace: Option<String>,
    /// Its API group (`--pool-group`): `inference.networking.k8s.io` (v1, the default) or
    /// `inference.networking.x-k8s.io` (v1alpha2).
    #[serde(default = "default_pool_group")]
    pub pool_group: String,
    /// Without a pool: the pods' labels, `key=value,...` (`--endpoint-selector`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_selector: Option<String>,
    /// Without a pool: the model servers' ports, 1 to 8 (`--endpoint-target-ports`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoint_target_ports: Vec<u16>,
    /// First wait after an API-server error, in milliseconds (doubles up to `backoffMaxMs`,
    /// back to this after a success).
    #[serde(default = "default_backoff_initial")]
    pub backoff_initial_ms: u64,
    /// Longest wait between two tries, in milliseconds.
    #[serde(default = "default_backoff_max")]
    pub backoff_max_ms: u64,
    /// Length of one watch request, in seconds (then it is renewed from where it stopped).
    #[serde(default = "default_watch_timeout")]
    pub watch_timeout_secs: u32,
    /// Shortest time between two published endpoint sets, in milliseconds.
    #[serde(default = "default_publish_interval")]
    pub publish_interval_ms: u64,
    /// Active-passive leader election over a Lease (`--ha-enable-leader-election`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_election: Option<LeaderElectionConfig>,
}

/// `discovery.kubernetes.leaderElection`: upstream's active-passive mode and its timings
/// (controller-runtime's defaults).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaderElectionConfig {
    /// Elect a leader (as `--ha-enable-leader-election`).
    #[serde(default)]
    pub enabled: bool,
    /// How long a lease not renewed stays held, in milliseconds (15,000).
    #[serde(default = "default_lease_duration")]
    pub lease_duration_ms: u64,
    /// How long a leader keeps trying to renew before stepping down, in milliseconds
    /// (10,000; less than `leaseDurationMs`).
    #[serde(default = "default_renew_deadline")]
    pub renew_deadline_ms: u64,
    /// Time between two tries, in milliseconds (2,000; less than `renewDeadlineMs`).
    #[serde(default = "default_retry_period")]
    pub retry_period_ms: u64,
}

fn default_lease_duration() -> u64 {
    15_000
}
fn default_renew_deadline() -> u64 {
    10_000
}
fn default_retry_period() -> u64 {
    2_000
}

impl Default for LeaderElectionConfig {
    fn default() -> Self {
        LeaderElectionConfig {
            enabled: false,
            lease_duration_ms: default_lease_duration(),
            renew_deadline_ms: default_renew_deadline(),
            retry_period_ms: default_retry_period(),
        }
    }
}

impl LeaderElectionConfig {
    /// Checks the timings as client-go does: retry < renew deadline < lease duration.
    pub fn validate(&self) -> Result<(), String> {
        if self.retry_period_ms == 0
            || self.retry_period_ms >= self.renew_deadline_ms
            || self.renew_deadline_ms >= self.lease_duration_ms
        {
            return Err(format!(
                "leaderElection: needs 0 < retryPeriodMs ({}) < renewDeadlineMs ({}) < leaseDurationMs ({})",
                self.retry_period_ms, self.renew_deadline_ms, self.lease_duration_ms
            ));
        }
        Ok(())
    }
}

fn default_pool_group() -> String {
    DEFAULT_POOL_GROUP.to_string()
}
fn default_backoff_initial() -> u64 {
    DEFAULT_BACKOFF_INITIAL_MS
}
fn default_backoff_max() -> u64 {
    DEFAULT_BACKOFF_MAX_MS
}
fn default_watch_timeout() -> u32 {
    DEFAULT_WATCH_TIMEOUT_SECS
}
fn default_publish_interval() -> u64 {
    DEFAULT_PUBLISH_INTERVAL_MS
}

impl Default for KubernetesConfig {
    fn default() -> Self {
        KubernetesConfig {
            pool_name: None,
            pool_namespace: None,
            pool_group: default_pool_group(),
            endpoint_selector: None,
            endpoint_target_ports: Vec::new(),
            backoff_initial_ms: DEFAULT_BACKOFF_INITIAL_MS,
            backoff_max_ms: DEFAULT_BACKOFF_MAX_MS,
            watch_timeout_secs: DEFAULT_WATCH_TIMEOUT_SECS,
            publish_interval_ms: DEFAULT_PUBLISH_INTERVAL_MS,
            leader_election: None,
        }
    }
}

impl KubernetesConfig {
    /// Discovery of the InferencePool `name` (namespace and group by default).
    pub fn pool(name: impl Into<String>) -> Self {
        KubernetesConfig {
            pool_name: Some(name.into()),
            ..KubernetesConfig::default()
        }
    }

    /// Discovery of the pods matching `selector` on `ports`.
    pub fn selector(selector: impl Into<String>, ports: impl Into<Vec<u16>>) -> Self {
        KubernetesConfig {
            endpoint_selector: Some(selector.into()),
            endpoint_target_ports: ports.into(),
            ..KubernetesConfig::default()
        }
    }

    /// Upstream's command-line flags over the file's section (`file`, whose other fields
    /// are kept): `None` when neither `--pool-name` nor `--endpoint-selector` is given.
    ///
    /// ```
    /// use shepherd_runtime::config::KubernetesConfig;
    ///
    /// let file = KubernetesConfig { backoff_max_ms: 2_000, ..KubernetesConfig::pool("old") };
    /// let config = KubernetesConfig::from_flags(Some(&file), Some("pool".into()), None, None, None, vec![])
    ///     .unwrap();
    /// assert_eq!((config.pool_name.as_deref(), config.backoff_max_ms), (Some("pool"), 2_000));
    /// assert!(KubernetesConfig::from_flags(None, None, None, None, None, vec![]).is_none());
    /// ```
    pub fn from_flags(
        file: Option<&KubernetesConfig>,
        pool_name: Option<String>,
        pool_namespace: Option<String>,
        pool_group: Option<String>,
        endpoint_selector: Option<String>,
        endpoint_target_ports: Vec<u16>,
    ) -> Option<KubernetesConfig> {
        if pool_name.is_none() && endpoint_selector.is_none() {
            return None;
        }
        let mut config = file.cloned().unwrap_or_default();
        config.pool_name = pool_name;
        config.endpoint_selector = endpoint_selector;
        if pool_namespace.is_some() {
            config.pool_namespace = pool_namespace;
        }
        if let Some(group) = pool_group {
            config.pool_group = group;
        }
        if !endpoint_target_ports.is_empty() {
            config.endpoint_target_ports = endpoint_target_ports;
        }
        Some(config)
    }

    /// Checks the section as upstream checks its flags; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        match (&self.pool_name, &self.endpoint_selector) {
            (Some(_), Some(_)) | (None, None) => {
                return Err(
                    "give exactly one of poolName (--pool-name) or endpointSelector (--endpoint-selector)"
                        .into(),
                );
            }
            (Some(name), None) => {
                if name.trim().is_empty() {
                    return Err("poolName is empty".into());
                }
                if self.pool_group != DEFAULT_POOL_GROUP && self.pool_group != ALPHA_POOL_GROUP {
                    return Err(format!(
                        "poolGroup {:?} is not an InferencePool group ({DEFAULT_POOL_GROUP} or {ALPHA_POOL_GROUP})",
                        self.pool_group
                    ));
                }
            }
            (None, Some(selector)) => {
                selector
                    .parse::<LabelSelector>()
                    .map_err(|e| format!("endpointSelector: {e}"))?;
                let ports = &self.endpoint_target_ports;
                if ports.is_empty() || ports.len() > MAX_TARGET_PORTS {
                    return Err(format!(
                        "endpointTargetPorts (--endpoint-target-ports) needs 1 to {MAX_TARGET_PORTS} ports with endpointSelector, got {}",
                        ports.len()
                    ));
                }
                if ports.contains(&0) {
                    return Err("endpointTargetPorts: port 0 is not a port".into());
                }
            }
        }
        if self.backoff_initial_ms == 0 || self.backoff_max_ms < self.backoff_initial_ms {
            return Err("backoffInitialMs must be at least 1 and at most backoffMaxMs".into());
        }
        if self.watch_timeout_secs == 0 {
            return Err("watchTimeoutSecs must be at least 1".into());
        }
        if let Some(election) = &self.leader_election {
            election.validate()?;
            if election.enabled && self.pool_name.is_none() {
                return Err("leaderElection needs poolName (the lease is the pool's)".into());
            }
        }
        Ok(())
    }
}
