//! Starting and stopping the pool: listeners, connection tasks, driver tasks.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};

use super::driver::{self, Shared};
use super::handlers::{self, Server};
use super::{ServeConfig, ServeError};

/// Starts one simulated server per address of `config` on the current tokio runtime and
/// returns once every listener is bound.
///
/// Each server is a driver task owning its engine plus an accept task owning its listener
/// and connections; [`ServeHandle::stop`] ends both, so the port refuses connections and
/// open connections are reset, as when a real server dies.
pub async fn spawn(config: ServeConfig) -> Result<ServeHandle, ServeError> {
    config.validate()?;
    let config = Arc::new(config);
    let mut servers = Vec::with_capacity(config.addrs.len());
    let mut addrs = Vec::with_capacity(config.addrs.len());
    for (index, &asked) in config.addrs.iter().enumerate() {
        let bind_error = |source| ServeError::Bind {
            addr: asked,
            source,
        };
        let listener = TcpListener::bind(asked).await.map_err(bind_error)?;
        let addr = listener.local_addr().map_err(bind_error)?;
        let shared = Arc::new(Shared::new(index, addr, Arc::clone(&config)));
        let (submit, submissions) = mpsc::channel(config.max_pending);
        let driver = tokio::spawn(driver::drive(Arc::clone(&shared), submissions));
        let app = handlers::router(Server { shared, submit });
        let accept = tokio::spawn(accept_loop(listener, app));
        servers.push(Some(RunningServer { accept, driver }));
        addrs.push(addr);
    }
    Ok(ServeHandle { addrs, servers })
}

/// Runs the pool of `config` until Ctrl-C, printing each server's address on stderr.
pub async fn run(config: ServeConfig) -> Result<(), ServeError> {
    let speed = config.speed;
    let model = config.model.clone();
    let handle = spawn(config).await?;
    for (index, addr) in handle.addrs().iter().enumerate() {
        eprintln!("shepherd-sim serve: server {index} on http://{addr} ({model}, speed {speed})");
    }
    eprintln!("shepherd-sim serve: Ctrl-C stops");
    let waited = tokio::signal::ctrl_c().await;
    handle.shutdown().await;
    waited.map_err(ServeError::Signal)
}

/// The running pool: each server's bound address, and a way to stop each one.
///
/// Dropping the handle stops every server still running.
#[derive(Debug)]
pub struct ServeHandle {
    addrs: Vec<SocketAddr>,
    servers: Vec<Option<RunningServer>>,
}

impl ServeHandle {
    /// Every server's bound address, in server order (stopped servers included).
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The bound address of server `index`.
    pub fn addr(&self, index: usize) -> Option<SocketAddr> {
        self.addrs.get(index).copied()
    }

    /// How many servers the pool started with.
    pub fn len(&self) -> usize {
        self.addrs.len()
    }

    /// Whether the pool has no servers (never true for a spawned pool).
    pub fn is_empty(&self) -> bool {
        self.addrs.is_empty()
    }

    /// Whether server `index` is still running.
    pub fn is_running(&self, index: usize) -> bool {
        matches!(self.servers.get(index), Some(Some(_)))
    }

    /// Stops server `index` as if it died: its listener closes (new connections are
    /// refused), open connections are dropped and in-flight requests are lost. Returns once
    /// it is gone; `false` when there is no such server or it was already stopped.
    pub async fn stop(&mut self, index: usize) -> bool {
        match self.servers.get_mut(index).and_then(Option::take) {
            Some(server) => {
                server.stop().await;
                true
            }
            None => false,
        }
    }

    /// Stops every server.
    pub async fn shutdown(mut self) {
        for server in self.servers.iter_mut().filter_map(Option::take) {
            server.stop().await;
        }
    }
}

#[derive(Debug)]
struct RunningServer {
    accept: JoinHandle<()>,
    driver: JoinHandle<()>,
}

impl RunningServer {
    async fn stop(self) {
        // The connections go first: were the engine gone while a connection still ran, its
        // handler would answer "the engine stopped" (a 500), which a dead server never
        // does. Aborted tasks drop their futures (listener, connections, engine) before the
        // join handles complete.
        self.accept.abort();
        let _ = self.accept.await;
        self.driver.abort();
        let _ = self.driver.await;
    }
}

impl Drop for ServeHandle {
    fn drop(&mut self) {
        for server in self.servers.iter().flatten() {
            server.accept.abort();
            server.driver.abort();
        }
    }
}

/// Accepts HTTP/1.1 connections for `app` until aborted; the connections live in a
/// [`JoinSet`] owned by this task, so aborting it closes them all.
async fn accept_loop(listener: TcpListener, app: Router) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    let _ = stream.set_nodelay(true);
                    let service = TowerToHyperService::new(app.clone());
                    connections.spawn(async move {
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
                // Out of file descriptors or similar: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}
