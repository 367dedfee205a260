//! [`Runtime::check`]: a config checked as [`Runtime::start`] checks it, with nothing started.
//!
//! Operators run it before a rollout (`shepherd-epp --config FILE --check-config`): the file
//! is parsed, the policy is built with every plugin's parameters, the experimental-plugin
//! rule, the adaptive section, the scraping settings and the replicas key are checked, and
//! nothing is bound, scraped, watched or contacted (no Kubernetes API, no Redis, no model
//! server).
//!
//! ```
//! use shepherd_runtime::config::RuntimeConfig;
//! use shepherd_runtime::{Runtime, RuntimeOptions};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let text = "
//! apiVersion: inference.networking.x-k8s.io/v1alpha1
//! kind: EndpointPickerConfig
//! plugins:
//! - type: queue-scorer
//! - type: max-score-picker
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - pluginRef: queue-scorer
//!   - pluginRef: max-score-picker
//! ";
//! let config = RuntimeConfig::from_yaml(text)?;
//! let check = Runtime::check(config, &RuntimeOptions::default()).await?;
//! assert_eq!(check.profiles, ["default"]);
//! assert!(check.warnings.is_empty());
//! assert_eq!(check.to_string(), "config OK: profiles default");
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::sync::Arc;

use shepherd_scheduler_core::endpoint::Pool;
use shepherd_scheduler_core::reload::ReloadableScheduler;
use shepherd_scheduler_core::shared::SharedState;
use shepherd_scorers::builtin_registry;

use super::{ConfigSource, Runtime, RuntimeError, RuntimeOptions};
use crate::adaptive::build_controller;
use crate::config::{ReplicaBackend, RuntimeConfig, read_error};
use crate::scrape::ScrapeSettings;

/// What a config that passed [`Runtime::check`] would run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigCheck {
    /// The scheduling profiles, in the order the policy lists them.
    pub profiles: Vec<String>,
    /// Whether the file had no scheduling profiles and gets the adaptive preset.
    pub preset: bool,
    /// Whether the adaptive controller would run.
    pub adaptive: bool,
    /// What the runtime would log as ignored or deprecated at start.
    pub warnings: Vec<String>,
}

/// One line for an operator, then one per warning:
/// `config OK: profiles default; adaptive weights on` and `warning: ...`.
impl fmt::Display for ConfigCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "config OK: profiles {}", self.profiles.join(", "))?;
        if self.preset {
            f.write_str(" (the adaptive preset: the file has no schedulingProfiles)")?;
        }
        if self.adaptive {
            f.write_str("; adaptive weights on")?;
        }
        for warning in &self.warnings {
            write!(f, "\nwarning: {warning}")?;
        }
        Ok(())
    }
}

impl Runtime {
    /// Checks a config as [`Runtime::start`] would, without starting anything.
    ///
    /// # Errors
    ///
    /// The [`RuntimeError`] that [`Runtime::start`] would return for the same config, short
    /// of the ones only a running system can give (a port in use, Kubernetes or Redis
    /// credentials refused).
    pub async fn check(
        source: impl Into<ConfigSource>,
        options: &RuntimeOptions,
    ) -> Result<ConfigCheck, RuntimeError> {
        let config = match source.into() {
            ConfigSource::File(path) => {
                let text = tokio::fs::read_to_string(&path)
                    .await
                    .map_err(|e| read_error(&path, e))?;
                RuntimeConfig::from_yaml_at(&text, &path)?
            }
            ConfigSource::Config(config) => *config,
        };
        let warnings = config.warnings().iter().map(ToString::to_string).collect();
        config
            .check_stability(options.allow_experimental_plugins)
            .map_err(RuntimeError::Policy)?;
        let registry = options.registry.clone().unwrap_or_else(builtin_registry);
        let shared = SharedState::new(Arc::new(Pool::new()));
        let scheduler = ReloadableScheduler::build(&config.policy, &registry, shared)
            .map_err(RuntimeError::Policy)?;
        let scheduler = scheduler.load();
        let adaptive = options.adaptive && build_controller(&config.policy, &scheduler)?.is_some();
        ScrapeSettings::from_config(&config.scraping).map_err(RuntimeError::Scraping)?;
        if let Some(replicas) = &config.replicas {
            match replicas.backend {
                ReplicaBackend::Direct => {
                    replicas.mac_key()?;
                }
                #[cfg(feature = "redis")]
                ReplicaBackend::Redis => {}
                #[cfg(not(feature = "redis"))]
                ReplicaBackend::Redis => return Err(RuntimeError::ReplicasBackendUnavailable),
            }
        }
        Ok(ConfigCheck {
            profiles: scheduler
                .profiles()
                .iter()
                .map(|p| p.name().to_string())
                .collect(),
            preset: config.policy_is_preset,
            adaptive,
            warnings,
        })
    }
}
