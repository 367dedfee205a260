//! Upstream's Kubernetes discovery flags (`--pool-name`, `--pool-namespace`, `--pool-group`,
//! `--endpoint-selector`, `--endpoint-target-ports`, `--ha-enable-leader-election`), shared by
//! both binaries' command lines.

use std::sync::Arc;

use shepherd_runtime::config::KubernetesConfig;
use shepherd_runtime::discovery::Discovery;
use tokio::sync::watch;

/// What Kubernetes discovery started: the pool (which keeps the pool's objectives and
/// rewrites, `Discovery::request_policies`), and the leader election when asked for.
#[derive(Default)]
pub(crate) struct KubeParts {
    pub(crate) discovery: Option<Arc<dyn Discovery>>,
    pub(crate) election: Option<Election>,
}

impl KubeParts {
    /// Leadership as it changes, under leader election.
    pub(crate) fn leadership(&self) -> Option<watch::Receiver<bool>> {
        self.election.as_ref().map(Election::subscribe)
    }
}

/// A running leader election, behind the feature gate.
pub(crate) struct Election {
    #[cfg(feature = "kubernetes")]
    inner: shepherd_runtime::discovery::kubernetes::LeaderElection,
    #[cfg(not(feature = "kubernetes"))]
    rx: watch::Receiver<bool>,
}

impl Election {
    /// Leadership as it changes.
    pub(crate) fn subscribe(&self) -> watch::Receiver<bool> {
        #[cfg(feature = "kubernetes")]
        return self.inner.subscribe();
        #[cfg(not(feature = "kubernetes"))]
        return self.rx.clone();
    }

    /// Gives the lease up when leading (at shutdown).
    pub(crate) async fn release(self) {
        #[cfg(feature = "kubernetes")]
        self.inner.release().await;
    }
}

/// The flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct KubeFlags {
    /// Name of the InferencePool whose ready pods are the endpoints (Kubernetes discovery;
    /// overrides the config file's `discovery.kubernetes.poolName`).
    #[arg(long)]
    pub(crate) pool_name: Option<String>,
    /// Namespace of the InferencePool [default: $NAMESPACE, $POD_NAMESPACE, the pod's own
    /// namespace, the kubeconfig context's, `default`].
    #[arg(long)]
    pub(crate) pool_namespace: Option<String>,
    /// API group of the InferencePool: `inference.networking.k8s.io` (v1) or
    /// `inference.networking.x-k8s.io` (v1alpha2) [default: inference.networking.k8s.io,
    /// or the config file's `poolGroup`].
    #[arg(long)]
    pub(crate) pool_group: Option<String>,
    /// Without an InferencePool: the model-server pods' labels, `key=value,...`.
    #[arg(long)]
    pub(crate) endpoint_selector: Option<String>,
    /// With `--endpoint-selector`: the model servers' ports, 1 to 8, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub(crate) endpoint_target_ports: Vec<u16>,
    /// Active-passive high availability: replicas elect a leader through a
    /// `coordination.k8s.io` Lease (`epp-NAMESPACE-POOL.llm-d.ai`); followers keep their pool
    /// view warm and report NOT_SERVING on the readiness health checks.
    #[arg(long)]
    pub(crate) ha_enable_leader_election: bool,
}

impl KubeFlags {
    /// Whether the flags ask for Kubernetes discovery.
    pub(crate) fn given(&self) -> bool {
        self.pool_name.is_some() || self.endpoint_selector.is_some()
    }

    /// The flags over the file's `discovery.kubernetes` section when they name a pool or a
    /// selector, else the file's section as written.
    pub(crate) fn config(&self, file: Option<&KubernetesConfig>) -> Option<KubernetesConfig> {
        KubernetesConfig::from_flags(
            file,
            self.pool_name.clone(),
            self.pool_namespace.clone(),
            self.pool_group.clone(),
            self.endpoint_selector.clone(),
            self.endpoint_target_ports.clone(),
        )
        .or_else(|| file.cloned())
    }

    /// Starts the discovery the flags ask for (nothing when they name no pool or selector).
    pub(crate) async fn start(
        &self,
        file: Option<&KubernetesConfig>,
    ) -> Result<KubeParts, Box<dyn std::error::Error>> {
        let Some(config) = self.config(file) else {
            if self.ha_enable_leader_election {
                return Err(
                    "--ha-enable-leader-election needs Kubernetes discovery (--pool-name)".into(),
                );
            }
            return Ok(KubeParts::default());
        };
        start(&config, self.ha_enable_leader_election).await
    }
}

#[cfg(feature = "kubernetes")]
async fn start(
    config: &KubernetesConfig,
    leader_election: bool,
) -> Result<KubeParts, Box<dyn std::error::Error>> {
    use shepherd_runtime::discovery::kubernetes::{
        KubernetesDiscovery, LeaderElection, LeaseSettings, lease_name,
    };
    let discovery = KubernetesDiscovery::start(config).await?;
    let leader_election = leader_election
        || config
            .leader_election
            .as_ref()
            .is_some_and(|election| election.enabled);
    let election = match (&config.pool_name, leader_election) {
        (_, false) => None,
        (None, true) => {
            return Err(
                "--ha-enable-leader-election needs --pool-name (the lease is the pool's)".into(),
            );
        }
        (Some(pool), true) => {
            let mut settings = LeaseSettings::new(
                lease_name(discovery.namespace(), pool),
                discovery.namespace(),
                LeaseSettings::default_identity(),
            );
            if let Some(timings) = &config.leader_election {
                settings = settings.with_timings(timings);
            }
            Some(Election {
                inner: LeaderElection::start(discovery.client().clone(), settings),
            })
        }
    };
    Ok(KubeParts {
        discovery: Some(Arc::new(discovery)),
        election,
    })
}

#[cfg(not(feature = "kubernetes"))]
async fn start(_: &KubernetesConfig, _: bool) -> Result<KubeParts, Box<dyn std::error::Error>> {
    Err("--pool-name / --endpoint-selector: this build has no Kubernetes support (cargo feature `kubernetes`)".into())
}
