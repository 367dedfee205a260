//! Why the runtime could not start, or a reload was refused.

use std::net::SocketAddr;

use shepherd_adaptive::AdaptiveError;
use shepherd_scheduler_core::config::ConfigError;
use thiserror::Error;

use crate::config::{LoadError, ReplicasKeyError};

/// Why [`Runtime::start`](super::Runtime::start) failed or
/// [`RuntimeHandle::reload`](super::RuntimeHandle::reload) refused a config.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The config could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The scheduling policy could not be built (an unknown plugin type, a bad parameter).
    #[error("scheduling policy: {0}")]
    Policy(#[source] ConfigError),
    /// The `adaptive` section does not fit the policy's default profile.
    #[error(transparent)]
    Adaptive(#[from] AdaptiveError),
    /// The scraping settings were refused.
    #[error("scraping: {0}")]
    Scraping(#[source] crate::Error),
    /// The scraper's HTTP client could not be built.
    #[error("scraper HTTP client: {0}")]
    HttpClient(String),
    /// The `replicas` section's key could not be read.
    #[error(transparent)]
    ReplicasKey(#[from] ReplicasKeyError),
    /// The `replicas` section's Redis backend could not start (a password that cannot be
    /// read, credentials or commands Redis refuses).
    #[cfg(feature = "redis")]
    #[error(transparent)]
    ReplicasRedis(#[from] crate::replicas::redis::RedisStartError),
    /// `replicas.backend: redis` in a build without the `redis` feature.
    #[error("replicas.backend: redis needs a build with the `redis` feature")]
    ReplicasBackendUnavailable,
    /// The discovery source of the config could not start (Kubernetes credentials, or a
    /// build without the `kubernetes` feature).
    #[error("{0}")]
    Discovery(String),
    /// A listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}
