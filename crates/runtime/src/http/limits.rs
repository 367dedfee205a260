//! The limits of one listener.

use std::time::Duration;

use crate::config::ServerConfig;

/// Largest request head (request line and headers) read, in bytes.
pub(crate) const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Most headers in one request head.
pub(crate) const MAX_HEADERS: usize = 100;
/// Largest read buffer of one connection, in bytes (a body streams through it).
pub(crate) const MAX_READ_BUFFER_BYTES: usize = 128 * 1024;

/// What one listener allows each connection. See the [module docs](super).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Time from a connection's start, or from the first byte of its next request, to the end
    /// of that request's head.
    pub header_read_timeout: Duration,
    /// Time a connection with no request open may stay silent.
    pub idle_timeout: Duration,
    /// Connections open at once; more are refused.
    pub max_connections: usize,
}

impl ConnectionLimits {
    /// The traffic port's limits (`server.headerReadTimeoutMs`, `server.idleTimeoutMs`,
    /// `server.maxConnections`).
    pub fn traffic(server: &ServerConfig) -> Self {
        ConnectionLimits {
            header_read_timeout: Duration::from_millis(server.header_read_timeout_ms),
            idle_timeout: Duration::from_millis(server.idle_timeout_ms),
            max_connections: server.max_connections,
        }
    }

    /// The admin port's limits: the same timeouts, `server.maxAdminConnections`.
    pub fn admin(server: &ServerConfig) -> Self {
        ConnectionLimits {
            max_connections: server.max_admin_connections,
            ..ConnectionLimits::traffic(server)
        }
    }
}

impl Default for ConnectionLimits {
    /// The traffic port's defaults.
    fn default() -> Self {
        ConnectionLimits::traffic(&ServerConfig::default())
    }
}
