//! The `server` section: where the adapters and the admin endpoints listen.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use serde::{Deserialize, Serialize};

/// Default port of the Envoy ext_proc gRPC service.
pub const DEFAULT_EXTPROC_PORT: u16 = 9002;
/// Default port of the gRPC health service.
pub const DEFAULT_HEALTH_PORT: u16 = 9003;
/// Default port of the admin endpoints (`/metrics`, `/healthz`, `/readyz`, `/debug/...`).
pub const DEFAULT_METRICS_PORT: u16 = 9090;
/// Default port of the OpenAI-compatible HTTP gateway.
pub const DEFAULT_HTTP_PORT: u16 = 8080;
/// Default time an HTTP client has to send a whole request head.
pub const DEFAULT_HEADER_READ_TIMEOUT_MS: u64 = 10_000;
/// Default time an HTTP connection with no request open may stay silent.
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 60_000;
/// Default cap on the HTTP connections open at once on the traffic port.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// Default cap on the connections open at once on the admin port.
pub const DEFAULT_MAX_ADMIN_CONNECTIONS: usize = 256;

/// Listen addresses, and the limits of every HTTP connection (the gateway's traffic port
/// and the admin port; [`crate::http`] enforces them). Every port may be 0 to let the OS
/// pick one (tests do).
///
/// ```
/// use shepherd_runtime::config::ServerConfig;
///
/// let server: ServerConfig = serde_norway::from_str("metricsPort: 9191").unwrap();
/// assert_eq!(server.admin_addr().to_string(), "127.0.0.1:9191");
/// assert_eq!(server.extproc_addr().port(), 9002);
/// assert_eq!(server.header_read_timeout_ms, 10_000);
/// assert_eq!((server.max_connections, server.max_admin_connections), (4096, 256));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address every listener binds to (default 127.0.0.1; `0.0.0.0` to serve other hosts).
    pub bind_address: IpAddr,
    /// Envoy ext_proc gRPC port (`shepherd-epp`), default 9002.
    pub extproc_port: u16,
    /// gRPC health port (`shepherd-epp`), default 9003.
    pub health_port: u16,
    /// Admin port: Prometheus metrics, health, readiness and debug views, default 9090.
    pub metrics_port: u16,
    /// OpenAI-compatible HTTP port (`shepherd-gateway`), default 8080.
    pub http_port: u16,
    /// Time an HTTP client has, from opening a connection or from the first byte of its next
    /// request, to send that request's whole head; then the connection is closed. Default
    /// 10000 ms.
    pub header_read_timeout_ms: u64,
    /// Time an HTTP connection with no request open may stay silent before it is closed.
    /// Default 60000 ms.
    pub idle_timeout_ms: u64,
    /// HTTP connections open at once on the gateway's traffic port; one more is answered 503
    /// and closed. Default 4096.
    pub max_connections: usize,
    /// Connections open at once on the admin port. Default 256.
    pub max_admin_connections: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind_address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            extproc_port: DEFAULT_EXTPROC_PORT,
            health_port: DEFAULT_HEALTH_PORT,
            metrics_port: DEFAULT_METRICS_PORT,
            http_port: DEFAULT_HTTP_PORT,
            header_read_timeout_ms: DEFAULT_HEADER_READ_TIMEOUT_MS,
            idle_timeout_ms: DEFAULT_IDLE_TIMEOUT_MS,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_admin_connections: DEFAULT_MAX_ADMIN_CONNECTIONS,
        }
    }
}

impl ServerConfig {
    /// The first invalid field and why, if any.
    pub(crate) fn check(&self) -> Result<(), (String, String)> {
        let fields = [
            (
                "server.headerReadTimeoutMs",
                self.header_read_timeout_ms as u128,
            ),
            ("server.idleTimeoutMs", self.idle_timeout_ms as u128),
            ("server.maxConnections", self.max_connections as u128),
            (
                "server.maxAdminConnections",
                self.max_admin_connections as u128,
            ),
        ];
        match fields.iter().find(|(_, value)| *value == 0) {
            Some((field, _)) => Err(((*field).to_owned(), "must be at least 1".to_owned())),
            None => Ok(()),
        }
    }

    /// Where the ext_proc service listens.
    pub fn extproc_addr(&self) -> SocketAddr {
        SocketAddr::new(self.bind_address, self.extproc_port)
    }

    /// Where the gRPC health service listens.
    pub fn health_addr(&self) -> SocketAddr {
        SocketAddr::new(self.bind_address, self.health_port)
    }

    /// Where the admin endpoints listen.
    pub fn admin_addr(&self) -> SocketAddr {
        SocketAddr::new(self.bind_address, self.metrics_port)
    }

    /// Where the HTTP gateway listens.
    pub fn http_addr(&self) -> SocketAddr {
        SocketAddr::new(self.bind_address, self.http_port)
    }
}
