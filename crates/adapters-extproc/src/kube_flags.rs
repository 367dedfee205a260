//! Upstream's Kubernetes discovery flags (`--pool-name`, `--pool-namespace`, `--pool-group`,
//! `--endpoint-selector`, `--endpoint-target-ports`), shared by both binaries' command lines.

use std::sync::Arc;

use shepherd_runtime::config::KubernetesConfig;
use shepherd_runtime::discovery::Discovery;

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
}

impl KubeFlags {
    /// Whether the flags ask for Kubernetes discovery.
    pub(crate) fn given(&self) -> bool {
        self.pool_name.is_some() || self.endpoint_selector.is_some()
    }

    /// The flags over the file's `discovery.kubernetes` section, when they name a pool or a
    /// selector.
    pub(crate) fn config(&self, file: Option<&KubernetesConfig>) -> Option<KubernetesConfig> {
        KubernetesConfig::from_flags(
            file,
            self.pool_name.clone(),
            self.pool_namespace.clone(),
            self.pool_group.clone(),
            self.endpoint_selector.clone(),
            self.endpoint_target_ports.clone(),
        )
    }

    /// Starts the discovery the flags ask for (none when they name no pool or selector).
    pub(crate) async fn start(
        &self,
        file: Option<&KubernetesConfig>,
    ) -> Result<Option<Arc<dyn Discovery>>, Box<dyn std::error::Error>> {
        let Some(config) = self.config(file) else {
            return Ok(None);
        };
        start(&config).await
    }
}

#[cfg(feature = "kubernetes")]
async fn start(
    config: &KubernetesConfig,
) -> Result<Option<Arc<dyn Discovery>>, Box<dyn std::error::Error>> {
    let discovery =
        shepherd_runtime::discovery::kubernetes::KubernetesDiscovery::start(config).await?;
    Ok(Some(Arc::new(discovery)))
}

#[cfg(not(feature = "kubernetes"))]
async fn start(
    _: &KubernetesConfig,
) -> Result<Option<Arc<dyn Discovery>>, Box<dyn std::error::Error>> {
    Err("--pool-name / --endpoint-selector: this build has no Kubernetes support (cargo feature `kubernetes`)".into())
}
