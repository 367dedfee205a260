//! Why the gateway could not start or stopped serving.

use std::net::SocketAddr;

use shepherd_runtime::RuntimeError;
use shepherd_runtime::config::SecretError;
use thiserror::Error;

/// Why the gateway could not start, or stopped serving. (Answers to single requests are
/// [`ApiError`](crate::ApiError)s, never this.)
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// The runtime did not start: config file, policy, admin port, ...
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// A key of the `gateway` section could not be read.
    #[error("gateway.{field}: {source}")]
    Secret {
        /// The field, e.g. `apiKeys[0]`.
        field: String,
        /// Why it could not be read.
        #[source]
        source: SecretError,
    },
    /// The HTTP port could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The server failed while serving.
    #[error("serving HTTP failed: {0}")]
    Serve(#[source] std::io::Error),
}
