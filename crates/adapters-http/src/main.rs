//! `shepherd-gateway`: Shepherd's OpenAI-compatible HTTP gateway.
//!
//! ```sh
//! shepherd-gateway --config shepherd.yaml
//! # on Kubernetes: the ready pods of an InferencePool (docs/kubernetes.md)
//! shepherd-gateway --config shepherd.yaml --pool-name vllm-llama3-8b
//! # an upstream EndpointPickerConfig as it is, the model servers and ports given here:
//! shepherd-gateway --config default-plugins.yaml --endpoints 10.0.0.1:8000,10.0.0.2:8000 --port 8080
//! ```
//!
//! Reads the runtime config file (`endpoints`, `scraping`, `server`, `gateway`, and the
//! policy; `docs/gateway.md`), serves the OpenAI API on `server.httpPort` (8080 on 127.0.0.1
//! by default) and the admin endpoints on `server.metricsPort` (9090), and stops gracefully on
//! SIGTERM or Ctrl-C. Once listening it prints
//! `shepherd-gateway: listening on http://ADDR` on stdout. Logs go to stderr; `SHEPHERD_LOG`
//! sets their level (`error`, `warn`, `info` (default), `debug`, `trace`). OpenTelemetry
//! tracing is off unless `OTEL_TRACES_EXPORTER` is `otlp` or `console` (`docs/tracing.md`).
#![forbid(unsafe_code)]

#[path = "../../adapters-extproc/src/kube_flags.rs"]
mod kube_flags;

#[cfg(not(feature = "otel"))]
use std::io::IsTerminal;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use kube_flags::{KubeFlags, KubeParts};
use shepherd_adapters_http::GatewayServer;
use shepherd_runtime::RuntimeOptions;
use shepherd_runtime::config::{EndpointSpec, RuntimeConfig};
use shepherd_runtime::discovery::{EndpointSet, StaticDiscovery};
use tracing_subscriber::filter::LevelFilter;

/// Shepherd's OpenAI-compatible HTTP gateway.
#[derive(Debug, Parser)]
#[command(name = "shepherd-gateway", version)]
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
    /// The runtime config file (watched: policy and endpoint edits apply while running).
    #[arg(long, short, default_value = "shepherd.yaml")]
    config: PathBuf,
    /// Seconds in-flight requests get to finish after SIGTERM or Ctrl-C.
    #[arg(long, default_value_t = 30)]
    shutdown_timeout: u64,
    /// Do not serve the admin endpoints on `server.metricsPort` (they stay on the gateway's
    /// port unless `gateway.adminRoutes` is off).
    #[arg(long)]
    no_admin_port: bool,
    /// How often the config file is checked for edits, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    config_poll_ms: u64,
    /// Check the config file as a start would (every plugin built, parameters and the
    /// `gateway` section checked), print what it would run and its warnings, and exit: 0 when
    /// it loads, 1 when not. Nothing is bound or contacted.
    #[arg(long)]
    check_config: bool,
    /// Model servers, `ip:port`, comma-separated. Replaces the config file's `endpoints`
    /// (so an upstream config without Shepherd's sections can be used as it is).
    #[arg(long, value_delimiter = ',')]
    endpoints: Vec<SocketAddr>,
    #[command(flatten)]
    kubernetes: KubeFlags,
    /// Address the gateway and admin ports bind to (overrides `server.bindAddress`).
    #[arg(long)]
    address: Option<IpAddr>,
    /// The gateway's HTTP port (overrides `server.httpPort`).
    #[arg(long)]
    port: Option<u16>,
    /// Admin port: metrics, health, readiness, debug views (overrides `server.metricsPort`).
    #[arg(long)]
    metrics_port: Option<u16>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let level = std::env::var("SHEPHERD_LOG")
        .ok()
        .and_then(|l| l.parse::<LevelFilter>().ok())
        .unwrap_or(LevelFilter::INFO);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("shepherd-gateway: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    // Logs on stderr, and OpenTelemetry tracing when the OTEL_* variables ask for it (the
    // batch exporter runs on the runtime, so it is installed inside it).
    #[cfg(feature = "otel")]
    let telemetry = {
        let _inside = runtime.enter();
        match shepherd_runtime::telemetry::init("shepherd-gateway", level) {
            Ok(guard) => guard,
            Err(error) => {
                eprintln!("shepherd-gateway: {error}");
                return ExitCode::FAILURE;
            }
        }
    };
    #[cfg(not(feature = "otel"))]
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let outcome = runtime.block_on(run(args));
    // The last spans are flushed while the runtime still runs the exporter.
    #[cfg(feature = "otel")]
    drop(telemetry);
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("shepherd-gateway: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    if args.check_config {
        let options = RuntimeOptions {
            allow_experimental_plugins: args.allow_experimental_plugins,
            ..RuntimeOptions::default()
        };
        let check = GatewayServer::check(&args.config, &options).await?;
        println!("{}: {check}", args.config.display());
        return Ok(());
    }
    let mut options = RuntimeOptions {
        serve_admin: !args.no_admin_port,
        config_poll_interval: Duration::from_millis(args.config_poll_ms.max(10)),
        legacy_metric_names: args.legacy_metric_names.then_some(true),
        allow_experimental_plugins: args.allow_experimental_plugins,
        ..RuntimeOptions::default()
    };
    if !args.endpoints.is_empty() {
        if args.kubernetes.given() {
            return Err("give --endpoints or --pool-name / --endpoint-selector, not both".into());
        }
        let set = EndpointSet::new(args.endpoints.iter().copied().map(EndpointSpec::new));
        options.discovery = Some(Arc::new(StaticDiscovery::new(set)));
    }
    let mut kube = KubeParts::default();
    if args.endpoints.is_empty() {
        // The flags over the file's `discovery.kubernetes` section, or the section alone.
        let file = RuntimeConfig::load(&args.config).await?;
        kube = args
            .kubernetes
            .start(file.discovery.kubernetes.as_ref())
            .await?;
        if kube.discovery.is_some() {
            options.discovery = kube.discovery.clone();
        }
        options.leadership = kube.leadership();
    }
    let mut http_addr = None;
    if args.address.is_some() || args.port.is_some() || args.metrics_port.is_some() {
        // Read once here for the listen addresses; the runtime reads it again and watches it.
        let mut server = RuntimeConfig::load(&args.config).await?.server;
        if let Some(address) = args.address {
            server.bind_address = address;
        }
        if let Some(port) = args.port {
            server.http_port = port;
        }
        if let Some(port) = args.metrics_port {
            server.metrics_port = port;
        }
        http_addr = Some(server.http_addr());
        options.admin_addr = Some(server.admin_addr());
    }
    let server = GatewayServer::start_on(args.config.as_path(), options, http_addr).await?;
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(
            stdout,
            "shepherd-gateway: listening on http://{}",
            server.local_addr()
        )?;
        if let Some(admin) = server.runtime().admin_addr() {
            writeln!(
                stdout,
                "shepherd-gateway: admin endpoints on http://{admin}"
            )?;
        }
        stdout.flush()?;
    }
    let signal = stop_signal().await;
    tracing::info!(signal, "shutting down");
    if let Some(election) = kube.election.take() {
        election.release().await;
    }
    let report = server
        .shutdown(Duration::from_secs(args.shutdown_timeout))
        .await;
    if !report.drained {
        tracing::warn!(
            in_flight = report.in_flight,
            "stopped with requests still in flight"
        );
    }
    Ok(())
}

/// Waits for SIGTERM or Ctrl-C (SIGINT) and names it.
async fn stop_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            return tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = tokio::signal::ctrl_c() => "SIGINT",
            };
        }
    }
    let _ = tokio::signal::ctrl_c().await;
    "SIGINT"
}
