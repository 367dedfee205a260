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

/// Listen addresses. Every port may be 0 to let the OS pick one (tests do).
///
/// ```
/// use shepherd_runtime::config::ServerConfig;
///
/// let server: ServerConfig = serde_norway::from_str("metricsPort: 9191").unwrap();
/// assert_eq!(server.admin_addr().to_string(), "127.0.0.1:9191");
/// assert_eq!(server.extproc_addr().port(), 9002);
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
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind_address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            extproc_port: DEFAULT_EXTPROC_PORT,
            health_port: DEFAULT_HEALTH_PORT,
            metrics_port: DEFAULT_METRICS_PORT,
            http_port: DEFAULT_HTTP_PORT,
        }
    }
}

impl ServerConfig {
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
