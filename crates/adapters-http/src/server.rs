//! Running the gateway: the runtime, the gateway over its scheduler, and the HTTP server on
//! `server.httpPort`, with a graceful end.
//!
//! [`GatewayServer::start`] is everything `shepherd-gateway` does before it waits for a
//! signal; [`GatewayServer::shutdown`] is everything it does after. Shutdown stops the
//! listener and the runtime's loops at once (new connections are refused, `/readyz` answers
//! 503), lets the requests in flight finish — a streaming response runs to its end — until the
//! deadline, and then closes what is left.
//!
//! The port is served by [`shepherd_runtime::http::serve`]: a deadline for each request head
//! (`server.headerReadTimeoutMs`), an idle keep-alive timeout (`server.idleTimeoutMs`), a cap
//! on open connections (`server.maxConnections`), bounded read buffers; the gateway itself
//! bounds each body ([`crate::body`]).
//!
//! ```no_run
//! use std::time::Duration;
//! use shepherd_adapters_http::GatewayServer;
//! use shepherd_runtime::RuntimeOptions;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let server = GatewayServer::start(std::path::Path::new("shepherd.yaml"), RuntimeOptions::default()).await?;
//! println!("OpenAI API on http://{}/v1", server.local_addr());
//! tokio::signal::ctrl_c().await?;
//! let report = server.shutdown(Duration::from_secs(30)).await;
//! println!("drained: {}", report.drained);
//! # Ok(()) }
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use shepherd_runtime::config::RuntimeConfig;
use shepherd_runtime::http::{ConnectionLimits, ConnectionStats};
use shepherd_runtime::telemetry::RequestTracing;
use shepherd_runtime::{
    ConfigCheck, ConfigSource, Runtime, RuntimeError, RuntimeHandle, RuntimeOptions, ShutdownReport,
};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::{Gateway, GatewayError, GatewaySettings, GatewayStats};

/// The gateway, serving. See the [module docs](self).
#[derive(Debug)]
pub struct GatewayServer {
    runtime: RuntimeHandle,
    gateway: Gateway,
    local_addr: SocketAddr,
    task: JoinHandle<std::io::Result<()>>,
}

impl GatewayServer {
    /// Starts the runtime from `source` with `options` (the gateway's metrics are added to
    /// its `/metrics`), builds the gateway from the config's `gateway` section, and serves it
    /// on `server.bindAddress`:`server.httpPort` — with the admin routes unless
    /// `gateway.adminRoutes` is off.
    ///
    /// # Errors
    ///
    /// [`GatewayError`] when the runtime does not start, a key cannot be read, or the port
    /// cannot be bound (the runtime is stopped again then).
    pub async fn start(
        source: impl Into<ConfigSource>,
        options: RuntimeOptions,
    ) -> Result<Self, GatewayError> {
        Self::start_on(source, options, None).await
    }

    /// Checks a config file as [`GatewayServer::start`] would (the policy built, the
    /// `gateway` section read), without binding or contacting anything: what
    /// `shepherd-gateway --check-config` prints.
    ///
    /// # Errors
    ///
    /// The error a start would give for the same file, short of the ones only a running
    /// system can give (a port in use, credentials refused).
    pub async fn check(
        path: &std::path::Path,
        options: &RuntimeOptions,
    ) -> Result<ConfigCheck, GatewayError> {
        let config = RuntimeConfig::load(path)
            .await
            .map_err(RuntimeError::from)?;
        GatewaySettings::from_config(&config.gateway)?;
        Ok(Runtime::check(config, options).await?)
    }

    /// As [`GatewayServer::start`], serving on `addr` instead of the config's
    /// `server.bindAddress`:`server.httpPort` when given (a command-line override).
    ///
    /// # Errors
    ///
    /// As [`GatewayServer::start`].
    pub async fn start_on(
        source: impl Into<ConfigSource>,
        mut options: RuntimeOptions,
        addr: Option<SocketAddr>,
    ) -> Result<Self, GatewayError> {
        let stats = Arc::new(GatewayStats::default());
        options.metrics_sources.push(stats.clone());
        let connections = Arc::new(ConnectionStats::new("http"));
        options.metrics_sources.push(connections.clone());
        let runtime = Runtime::start(source, options).await?;
        let config = runtime.config();
        let settings = match GatewaySettings::from_config(&config.gateway) {
            Ok(settings) => settings,
            Err(error) => {
                runtime.shutdown(Duration::ZERO).await;
                return Err(error);
            }
        };
        let addr = addr.unwrap_or_else(|| config.server.http_addr());
        let listener = match TcpListener::bind(addr).await {
            Ok(listener) => listener,
            Err(source) => {
                runtime.shutdown(Duration::ZERO).await;
                return Err(GatewayError::Bind { addr, source });
            }
        };
        let local_addr = listener.local_addr().unwrap_or(addr);
        let adaptive = Arc::clone(runtime.adaptive());
        let tracing = RequestTracing::new().with_mode_source(move || {
            adaptive
                .controller()
                .map(|controller| controller.state().mode.to_string())
        });
        let mut gateway = Gateway::new(Arc::clone(runtime.scheduler()), settings, stats)
            .with_upstream_metrics(Arc::clone(runtime.upstream_metrics()))
            .with_tracing(tracing);
        if let Some(flow) = runtime.flow() {
            gateway = gateway.with_flow_control(flow.clone());
        }
        if let Some(policies) = runtime.request_policies() {
            gateway = gateway.with_request_policies(policies);
        }
        let admin = gateway
            .settings()
            .admin_routes
            .then(|| runtime.admin_router());
        let router = gateway.router_with(admin);
        let limits = ConnectionLimits::traffic(&config.server);
        let stop = runtime.shutdown_signal();
        let task = tokio::spawn(async move {
            shepherd_runtime::http::serve(listener, router, limits, connections, stop).await;
            Ok::<(), std::io::Error>(())
        });
        tracing::info!(addr = %local_addr, "OpenAI-compatible gateway listening");
        Ok(GatewayServer {
            runtime,
            gateway,
            local_addr,
            task,
        })
    }

    /// Where the gateway listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The runtime under the gateway.
    pub fn runtime(&self) -> &RuntimeHandle {
        &self.runtime
    }

    /// The gateway.
    pub fn gateway(&self) -> &Gateway {
        &self.gateway
    }

    /// Stops accepting, lets in-flight requests finish within `deadline`, then stops.
    pub async fn shutdown(self, deadline: Duration) -> ShutdownReport {
        let started = Instant::now();
        let report = self.runtime.shutdown(deadline).await;
        let left = deadline.saturating_sub(started.elapsed());
        let mut task = self.task;
        match tokio::time::timeout(left, &mut task).await {
            Ok(Ok(Err(error))) => tracing::error!(%error, "the gateway's server failed"),
            Ok(_) => {}
            Err(_) => task.abort(),
        }
        report
    }
}
