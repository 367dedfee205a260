//! `shepherd-epp`: Shepherd's endpoint picker for Envoy, in its simplest form — a YAML
//! `EndpointPickerConfig`, a static list of model servers, the ext_proc service on port 9002
//! and gRPC health on 9003. Metrics scraping, discovery and the adaptive loop come from the
//! runtime crate when it is wired in.
//!
//! ```sh
//! shepherd-epp --endpoints 127.0.0.1:8000,127.0.0.1:8001 [--config picker.yaml]
//! ```
#![forbid(unsafe_code)]

use std::error::Error;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use clap::Parser;
use shepherd_adapters_extproc::{ExtProcOptions, ExtProcService, serve, serve_health};
use shepherd_scheduler_core::prelude::*;
use shepherd_scorers::{builtin_registry, default_config};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Shepherd's Envoy ext_proc endpoint picker.
#[derive(Debug, Parser)]
#[command(name = "shepherd-epp", version)]
struct Args {
    /// EndpointPickerConfig YAML file (default: the built-in default profile).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Model servers, `ip:port`, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    endpoints: Vec<String>,
    /// Address to listen on.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    address: IpAddr,
    /// ext_proc gRPC port.
    #[arg(long, default_value_t = 9002)]
    port: u16,
    /// gRPC health port.
    #[arg(long, default_value_t = 9003)]
    health_port: u16,
    /// Largest request body accepted, in bytes.
    #[arg(long, default_value_t = shepherd_adapters_extproc::options::DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: usize,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let args = Args::parse();
    let config = match &args.config {
        Some(path) => {
            let config = EndpointPickerConfig::from_yaml(&std::fs::read_to_string(path)?)?;
            for warning in config.warnings() {
                eprintln!(
                    "shepherd-epp: config section `{}`: {}",
                    warning.section, warning.message
                );
            }
            config
        }
        None => default_config(),
    };
    let shared = SharedState::new(Arc::new(Pool::new()));
    shared
        .pool
        .set_members(args.endpoints.iter().map(String::as_str));
    let scheduler = ReloadableScheduler::build(&config, &builtin_registry(), shared)?;
    let options = ExtProcOptions::default().with_max_body_bytes(args.max_body_bytes);
    let service = ExtProcService::new(Arc::new(scheduler), options);

    let grpc = TcpListener::bind(SocketAddr::new(args.address, args.port)).await?;
    let health = TcpListener::bind(SocketAddr::new(args.address, args.health_port)).await?;
    eprintln!(
        "shepherd-epp: ext_proc on {}, health on {}, {} endpoints",
        grpc.local_addr()?,
        health.local_addr()?,
        args.endpoints.len()
    );

    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let health_task = tokio::spawn(serve_health(health, stopped(stop_rx.clone())));
    let grpc_task = tokio::spawn(serve(grpc, service, stopped(stop_rx)));
    tokio::signal::ctrl_c().await?;
    eprintln!("shepherd-epp: shutting down");
    let _ = stop_tx.send(true);
    grpc_task.await??;
    health_task.await??;
    Ok(())
}
