//! `shepherd-gateway`: Shepherd's OpenAI-compatible HTTP gateway.
//!
//! ```sh
//! shepherd-gateway --config shepherd.yaml
//! ```
//!
//! Reads the runtime config file (`endpoints`, `scraping`, `server`, `gateway`, and the
//! policy; `docs/gateway.md`), serves the OpenAI API on `server.httpPort` (8080 on 127.0.0.1
//! by default) and the admin endpoints on `server.metricsPort` (9090), and stops gracefully on
//! SIGTERM or Ctrl-C. Once listening it prints
//! `shepherd-gateway: listening on http://ADDR` on stdout. Logs go to stderr; `SHEPHERD_LOG`
//! sets their level (`error`, `warn`, `info` (default), `debug`, `trace`).
#![forbid(unsafe_code)]

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use shepherd_adapters_http::GatewayServer;
use shepherd_runtime::RuntimeOptions;
use tracing_subscriber::filter::LevelFilter;

/// Shepherd's OpenAI-compatible HTTP gateway.
#[derive(Debug, Parser)]
#[command(name = "shepherd-gateway", version)]
struct Args {
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
}

fn main() -> ExitCode {
    let args = Args::parse();
    let level = std::env::var("SHEPHERD_LOG")
        .ok()
        .and_then(|l| l.parse::<LevelFilter>().ok())
        .unwrap_or(LevelFilter::INFO);
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
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
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("shepherd-gateway: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let options = RuntimeOptions {
        serve_admin: !args.no_admin_port,
        config_poll_interval: Duration::from_millis(args.config_poll_ms.max(10)),
        ..RuntimeOptions::default()
    };
    let server = GatewayServer::start(args.config.as_path(), options).await?;
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
