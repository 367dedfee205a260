//! `shepherd-epp`: Shepherd's endpoint picker for Envoy, on the shared runtime.
//!
//! ```sh
//! shepherd-epp --config shepherd.yaml
//! shepherd-epp --endpoints 127.0.0.1:8000,127.0.0.1:8001      # no file: the adaptive preset
//! shepherd-epp --pool-name vllm-llama3-8b                      # the InferencePool's pods
//! ```
//!
//! On Kubernetes the endpoints are the ready pods of an InferencePool (`--pool-name`,
//! `--pool-namespace`, `--pool-group`) or of a label selector (`--endpoint-selector`,
//! `--endpoint-target-ports`), as with upstream's picker (`docs/kubernetes.md`).
//!
//! It starts [`shepherd_runtime::Runtime`] on the config file (the file is watched: edits to the
//! policy and the endpoint list apply live), then serves:
//!
//! - the ext_proc service on `server.extprocPort` (9002),
//! - gRPC health on `server.healthPort` (9003),
//! - the admin endpoints (`/metrics`, `/healthz`, `/readyz`, `/debug/...`) on
//!   `server.metricsPort` (9090), served by the runtime,
//!
//! all on `server.bindAddress` (127.0.0.1). Logs go to stderr through `tracing`, filtered by
//! `RUST_LOG` (default `info`). On SIGTERM or Ctrl-C it stops accepting, lets the requests in
//! flight finish up to `--drain-timeout-secs`, and exits.
//!
//! Once every listener is bound it logs one line naming them, which scripts and tests read
//! when they ask for port 0:
//! `shepherd-epp listening extproc=127.0.0.1:9002 health=127.0.0.1:9003 admin=127.0.0.1:9090`.
//!
//! If it cannot start (a bad config file, a port taken, limits that cannot work together) it
//! prints the error's message and its causes to stderr, one per line, and exits with status 1.
#![forbid(unsafe_code)]

mod flow_admission;
mod kube_flags;

use flow_admission::FlowAdmission;
use kube_flags::{KubeFlags, KubeParts};
use std::error::Error;
#[cfg(not(feature = "otel"))]
use std::io::IsTerminal;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use shepherd_adapters_extproc::connections::ConnectionCounts;
use shepherd_adapters_extproc::options::{DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_BUFFERED_BYTES};
use shepherd_adapters_extproc::{
    BodyBudget, ExtProcOptions, ExtProcService, serve, serve_health_leading,
};
use shepherd_runtime::config::{EndpointSpec, RuntimeConfig, ServerConfig};
use shepherd_runtime::discovery::{EndpointSet, StaticDiscovery};
use shepherd_runtime::telemetry::RequestTracing;
use shepherd_runtime::{ConfigSource, Runtime, RuntimeOptions};
use tokio::net::TcpListener;
use tracing_subscriber::EnvFilter;

/// Shepherd's Envoy ext_proc endpoint picker.
#[derive(Debug, Parser)]
#[command(name = "shepherd-epp", version)]
struct Args {
    /// Also export the deprecated `inference_objective_*`, `inference_pool_*` and
    /// `inference_extension_*` metric names (as `metrics.legacyNames: true` in the config).
    #[arg(long)]
    legacy_metric_names: bool,
    /// Load plugins of the types upstream marks Alpha (experimental), as upstream's flag of
    /// the same name; without it a config declaring one is refused (`--allow-experimental-plugins`
    /// or `--allow-experimental-plugins=true`).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    allow_experimental_plugins: bool,
    /// Shepherd config file (the picker's `EndpointPickerConfig` plus `endpoints`, `scraping`
    /// and `server`; see docs/runtime.md). Watched: edits apply without a restart.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Model servers, `ip:port`, comma-separated. Replaces the config file's `endpoints`
    /// (which are then not watched); without `--config`, the adaptive preset routes over them.
    #[arg(long, value_delimiter = ',')]
    endpoints: Vec<SocketAddr>,
    #[command(flatten)]
    kubernetes: KubeFlags,
    /// Address every listener binds to (overrides `server.bindAddress`).
    #[arg(long)]
    address: Option<IpAddr>,
    /// ext_proc gRPC port (overrides `server.extprocPort`).
    #[arg(long)]
    port: Option<u16>,
    /// gRPC health port (overrides `server.healthPort`).
    #[arg(long)]
    health_port: Option<u16>,
    /// Admin port: metrics, health, readiness, debug views (overrides `server.metricsPort`).
    #[arg(long)]
    metrics_port: Option<u16>,
    /// Largest request body accepted, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: usize,
    /// Cap on request-body bytes buffered across every stream; a body that would take the
    /// total over it is answered 503 (bodies over 64 KiB may use seven eighths of it).
    #[arg(long, default_value_t = DEFAULT_MAX_BUFFERED_BYTES)]
    max_buffered_bytes: usize,
    /// Connections open at once on the ext_proc port; more are closed as they arrive.
    #[arg(long, default_value_t = shepherd_adapters_extproc::options::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
    /// Time a request body may take to arrive whole, from its headers, in milliseconds; a
    /// body still arriving then is answered 408.
    #[arg(long, default_value_t = 30_000)]
    body_read_timeout_ms: u64,
    /// On SIGTERM or Ctrl-C, how long requests in flight may take to finish.
    #[arg(long, default_value_t = 30)]
    drain_timeout_secs: u64,
    /// How often the config file is checked for edits, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    config_poll_ms: u64,
    /// Check the `--config` file as a start would (every plugin built, parameters checked),
    /// print what it would run and its warnings, and exit: 0 when it loads, 1 when not.
    /// Nothing is bound or contacted.
    #[arg(long)]
    check_config: bool,
}

impl Args {
    /// The listen addresses: the config's, with the command line's overrides.
    fn server(&self, config: &ServerConfig) -> ServerConfig {
        let mut server = config.clone();
        if let Some(address) = self.address {
            server.bind_address = address;
        }
        if let Some(port) = self.port {
            server.extproc_port = port;
        }
        if let Some(port) = self.health_port {
            server.health_port = port;
        }
        if let Some(port) = self.metrics_port {
            server.metrics_port = port;
        }
        server
    }

    /// The ext_proc service's options, checked.
    fn extproc_options(&self) -> Result<ExtProcOptions, Box<dyn Error>> {
        let options = ExtProcOptions::default()
            .with_max_body_bytes(self.max_body_bytes)
            .with_max_buffered_bytes(self.max_buffered_bytes)
            .with_max_connections(self.max_connections.max(1))
            .with_body_read_timeout(Duration::from_millis(self.body_read_timeout_ms.max(1)));
        options
            .validate()
            .map_err(|e| format!("--max-body-bytes / --max-buffered-bytes: {e}"))?;
        Ok(options)
    }

    fn endpoint_set(&self) -> EndpointSet {
        EndpointSet::new(self.endpoints.iter().copied().map(EndpointSpec::new))
    }
}

#[cfg(not(feature = "otel"))]
fn init_logging() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

/// SIGTERM and Ctrl-C, listened for from the start, so a signal that comes while the servers
/// are starting is not lost (or left to the default action, which kills the process).
struct StopSignals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    fn listen() -> Self {
        StopSignals {
            #[cfg(unix)]
            term: match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => Some(term),
                Err(error) => {
                    tracing::warn!(%error, "cannot listen for SIGTERM; only Ctrl-C stops");
                    None
                }
            },
        }
    }

    /// Resolves on SIGTERM or Ctrl-C.
    async fn requested(&mut self) {
        #[cfg(unix)]
        if let Some(term) = &mut self.term {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM received"),
                _ = tokio::signal::ctrl_c() => tracing::info!("interrupt received"),
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("interrupt received");
    }
}

async fn bind(addr: SocketAddr, what: &str) -> Result<TcpListener, Box<dyn Error>> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen for {what} on {addr}: {e}").into())
}

/// Prints `error` and its causes to stderr, one per line; a cause whose text the lines above
/// already carry is skipped (many errors repeat their source in their own message).
fn print_error(error: &dyn Error) {
    let mut printed = error.to_string();
    eprintln!("shepherd-epp: error: {printed}");
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !printed.contains(&text) {
            eprintln!("  caused by: {text}");
            printed.push('\n');
            printed.push_str(&text);
        }
        source = cause.source();
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            print_error(&error);
            return ExitCode::FAILURE;
        }
    };
    // Logs on stderr (RUST_LOG), and OpenTelemetry tracing when the OTEL_* variables ask for
    // it (the batch exporter runs on the runtime, so it is installed inside it).
    #[cfg(feature = "otel")]
    let telemetry = {
        let _inside = runtime.enter();
        let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
        match shepherd_runtime::telemetry::init_with("shepherd-epp", filter) {
            Ok(guard) => guard,
            Err(error) => {
                print_error(&error);
                return ExitCode::FAILURE;
            }
        }
    };
    #[cfg(not(feature = "otel"))]
    init_logging();
    let outcome = runtime.block_on(run(args));
    // The last spans are flushed while the runtime still runs the exporter.
    #[cfg(feature = "otel")]
    drop(telemetry);
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            print_error(&*error);
            ExitCode::FAILURE
        }
    }
}

/// `--check-config`: the file checked, the outcome printed.
async fn check_config(args: &Args) -> Result<(), Box<dyn Error>> {
    let Some(path) = &args.config else {
        return Err("--check-config checks the file given with --config".into());
    };
    let options = RuntimeOptions {
        allow_experimental_plugins: args.allow_experimental_plugins,
        ..RuntimeOptions::default()
    };
    let check = Runtime::check(ConfigSource::File(path.clone()), &options).await?;
    println!("{}: {check}", path.display());
    Ok(())
}

async fn run(args: Args) -> Result<(), Box<dyn Error>> {
    if args.check_config {
        return check_config(&args).await;
    }
    let mut stop = StopSignals::listen();
    let extproc_options = args.extproc_options()?;
    // One cap on buffered bodies for every stream, exported on the admin port's /metrics.
    let budget = Arc::new(BodyBudget::new(extproc_options.max_buffered_bytes));
    let messages = Arc::new(BodyBudget::for_messages(extproc_options.max_buffered_bytes));

    let mut options = RuntimeOptions {
        config_poll_interval: Duration::from_millis(args.config_poll_ms.max(10)),
        legacy_metric_names: args.legacy_metric_names.then_some(true),
        allow_experimental_plugins: args.allow_experimental_plugins,
        ..RuntimeOptions::default()
    };
    options.metrics_sources.push(budget.clone());
    options.metrics_sources.push(messages.clone());
    let connections = Arc::new(ConnectionCounts::new("extproc"));
    options.metrics_sources.push(connections.clone());
    let health_connections = Arc::new(ConnectionCounts::new("health"));
    options.metrics_sources.push(health_connections.clone());
    if args.kubernetes.given() && !args.endpoints.is_empty() {
        return Err("give --endpoints or --pool-name / --endpoint-selector, not both".into());
    }
    let mut kube = KubeParts::default();
    let (source, file_server) = match &args.config {
        Some(path) => {
            // Read once here for the listen addresses; the runtime reads it again and watches
            // it. Errors name the file, the field and the line.
            let config = RuntimeConfig::load(path).await?;
            if args.endpoints.is_empty() && config.discovery.file.is_some() {
                // Upstream's file-discovery mode runs without Kubernetes: the endpoints file
                // is the pool's source, and `--pool-name` only names the pool.
                if args.kubernetes.given() {
                    tracing::warn!(
                        "the config's endpoints file (file-discovery) is the pool's source; \
                         --pool-name / --endpoint-selector start no Kubernetes discovery"
                    );
                }
            } else if args.endpoints.is_empty() {
                kube = args
                    .kubernetes
                    .start(config.discovery.kubernetes.as_ref())
                    .await?;
                options.discovery = kube.discovery.clone();
            } else {
                options.discovery = Some(Arc::new(StaticDiscovery::new(args.endpoint_set())));
            }
            (ConfigSource::File(path.clone()), config.server)
        }
        None if args.kubernetes.given() => {
            kube = args.kubernetes.start(None).await?;
            options.discovery = kube.discovery.clone();
            let config = RuntimeConfig::default();
            let server = config.server.clone();
            (ConfigSource::Config(Box::new(config)), server)
        }
        None if !args.endpoints.is_empty() => {
            let config = RuntimeConfig {
                endpoints: args.endpoint_set().endpoints().to_vec(),
                ..RuntimeConfig::default()
            };
            let server = config.server.clone();
            (ConfigSource::Config(Box::new(config)), server)
        }
        None => {
            return Err(
                "give a config file (--config shepherd.yaml), --endpoints, or --pool-name / --endpoint-selector"
                    .into(),
            );
        }
    };
    options.leadership = kube.leadership();
    let server = args.server(&file_server);
    options.admin_addr = Some(server.admin_addr());

    let handle = Runtime::start(source, options).await?;
    let grpc = bind(server.extproc_addr(), "ext_proc").await?;
    let health = bind(server.health_addr(), "gRPC health").await?;
    let extproc_addr = grpc.local_addr()?;
    let health_addr = health.local_addr()?;
    let admin = handle
        .admin_addr()
        .map_or_else(|| "-".to_string(), |a| a.to_string());

    let mut service = ExtProcService::new(Arc::clone(handle.scheduler()), extproc_options)
        .with_body_budget(budget)
        .with_message_budget(messages)
        .with_connection_counts(connections)
        .with_upstream_metrics(Arc::clone(handle.upstream_metrics()))
        .with_tracing({
            let adaptive = Arc::clone(handle.adaptive());
            RequestTracing::new().with_mode_source(move || {
                adaptive
                    .controller()
                    .map(|controller| controller.state().mode.to_string())
            })
        });
    if let Some(flow) = handle.flow() {
        service = service.with_admission(Arc::new(FlowAdmission(flow.clone())));
    }
    if let Some(policies) = handle.request_policies() {
        service = service.with_request_policies(policies);
    }
    let signal = handle.shutdown_signal();
    let leadership = kube.leadership();
    let health_task = tokio::spawn({
        let signal = signal.clone();
        async move { serve_health_leading(health, health_connections, leadership, signal.wait()).await }
    });
    let mut grpc_task = tokio::spawn({
        let signal = signal.clone();
        async move { serve(grpc, service, signal.wait()).await }
    });
    tracing::info!(
        extproc = %extproc_addr,
        health = %health_addr,
        admin = %admin,
        endpoints = handle.pool().snapshot().len(),
        "shepherd-epp listening"
    );

    let grpc_ended = tokio::select! {
        () = stop.requested() => None,
        result = &mut grpc_task => Some(result),
    };
    if let Some(result) = &grpc_ended {
        // The ext_proc server must not end on its own: say why, and stop the rest.
        tracing::error!(?result, "ext_proc server stopped");
    }

    let deadline = Duration::from_secs(args.drain_timeout_secs);
    tracing::info!(
        deadline_secs = args.drain_timeout_secs,
        "shutting down: no new requests, waiting for those in flight"
    );
    if let Some(election) = kube.election.take() {
        // Hand the lease over first: a follower takes the traffic while this one drains.
        election.release().await;
    }
    let report = handle.shutdown(deadline).await;
    // The servers stopped accepting when shutdown began; give their connections a moment to
    // close, then leave.
    let mut tasks = vec![("health", health_task)];
    if grpc_ended.is_none() {
        tasks.push(("ext_proc", grpc_task));
    }
    for (name, task) in tasks {
        match tokio::time::timeout(Duration::from_secs(2), task).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(error))) => tracing::warn!(%error, server = name, "server failed"),
            Ok(Err(error)) => tracing::warn!(%error, server = name, "server task failed"),
            Err(_) => tracing::warn!(server = name, "connections still open at exit"),
        }
    }
    if !report.drained {
        tracing::warn!(
            in_flight = report.in_flight,
            "requests still in flight at the deadline"
        );
    }
    match grpc_ended {
        Some(Ok(Err(error))) => Err(error.into()),
        Some(Err(error)) => Err(error.into()),
        _ => Ok(()),
    }
}
