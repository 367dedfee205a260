//! Why the simulated servers could not start.

use std::net::SocketAddr;

use thiserror::Error;

/// Why [`spawn`](super::spawn) or [`run`](super::run) failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ServeError {
    /// An option has a value the servers cannot use.
    #[error("invalid option `{option}`: {reason}")]
    Config {
        /// The option (CLI flag or [`ServeConfig`](super::ServeConfig) field).
        option: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A listen address is not on the loopback interface.
    #[error("{0} is not a loopback address: simulated servers only listen on 127.0.0.0/8 or ::1")]
    NotLoopback(SocketAddr),
    /// A listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The system's reason.
        #[source]
        source: std::io::Error,
    },
    /// A KV-event socket could not take its listener.
    #[error("cannot publish KV-cache events on {addr}: {reason}")]
    KvEvents {
        /// The address bound.
        addr: SocketAddr,
        /// ZeroMQ's reason.
        reason: String,
    },
    /// No server has this index.
    #[error("no server {0} in the pool")]
    NoSuchServer(usize),
    /// The async runtime could not be built.
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// Waiting for Ctrl-C failed.
    #[error("cannot wait for Ctrl-C: {0}")]
    Signal(#[source] std::io::Error),
}
