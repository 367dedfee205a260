//! Serving: the ext_proc service on one listener, gRPC health (`grpc.health.v1`) on another.
//!
//! Both take a bound [`TcpListener`] (bind port 0 in tests and read the address back) and a
//! shutdown future: when it completes, the server stops accepting and lets open streams end.
//! Accepted connections get `TCP_NODELAY`: ext_proc answers are small messages on a
//! latency-critical path, and Nagle's algorithm would hold them back.
//!
//! ```no_run
//! # async fn run(service: shepherd_adapters_extproc::ExtProcService) -> Result<(), Box<dyn std::error::Error>> {
//! use shepherd_adapters_extproc::{serve, serve_health};
//! use tokio::net::TcpListener;
//!
//! let grpc = TcpListener::bind("127.0.0.1:9002").await?;
//! let health = TcpListener::bind("127.0.0.1:9003").await?;
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! tokio::spawn(serve_health(health, async { let _ = stopped.await; }));
//! serve(grpc, service, std::future::pending()).await?;
//! # drop(stop); Ok(()) }
//! ```

use std::future::Future;

use envoy_types::pb::envoy::service::ext_proc::v3::external_processor_server::ExternalProcessorServer;
use tokio::net::{TcpListener, TcpStream};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::server::NamedService;
use tonic::transport::Server;
use tonic_health::ServingStatus;

use crate::error::ServeError;
use crate::service::ExtProcService;

/// The gRPC name of the ext_proc service, as health checks ask for it.
pub const SERVICE_NAME: &str = <ExternalProcessorServer<ExtProcService> as NamedService>::NAME;

fn incoming(listener: TcpListener) -> impl tokio_stream::Stream<Item = std::io::Result<TcpStream>> {
    TcpListenerStream::new(listener).map(|stream| {
        let stream = stream?;
        stream.set_nodelay(true)?;
        Ok(stream)
    })
}

/// Serves `service` on `listener` until `shutdown` completes.
pub async fn serve<F>(
    listener: TcpListener,
    service: ExtProcService,
    shutdown: F,
) -> Result<(), ServeError>
where
    F: Future<Output = ()> + Send,
{
    Server::builder()
        .add_service(service.into_server())
        .serve_with_incoming_shutdown(incoming(listener), shutdown)
        .await?;
    Ok(())
}

/// Serves gRPC health on `listener` until `shutdown` completes, reporting `SERVING` for the
/// whole server (`""`) and for the ext_proc service.
pub async fn serve_health<F>(listener: TcpListener, shutdown: F) -> Result<(), ServeError>
where
    F: Future<Output = ()> + Send,
{
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("", ServingStatus::Serving)
        .await;
    reporter
        .set_service_status(SERVICE_NAME, ServingStatus::Serving)
        .await;
    Server::builder()
        .add_service(health)
        .serve_with_incoming_shutdown(incoming(listener), shutdown)
        .await?;
    Ok(())
}
