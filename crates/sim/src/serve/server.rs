//! Starting and stopping the pool: listeners, connection tasks, driver tasks.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::task::{JoinHandle, JoinSet};

use super::driver::{self, KvSink, Shared};
use super::handlers::{self, Server};
use super::publisher::{self, KvControl, KvEventEndpoints, KvEventStats, Publisher};
use super::{ServeConfig, ServeError};

/// Starts one simulated server per address of `config` on the current tokio runtime and
/// returns once every listener is bound.
///
/// Each server is a driver task owning its engine plus an accept task owning its listener
/// and connections (plus, with [`ServeConfig::kv_events`], a publisher task owning its PUB
/// and replay sockets); [`ServeHandle::stop`] ends them all, so the ports refuse connections
/// and open connections are reset, as when a real server dies.
pub async fn spawn(config: ServeConfig) -> Result<ServeHandle, ServeError> {
    config.validate()?;
    let config = Arc::new(config);
    let servers = config.addrs.len();
    // Built as the servers start, so that a failure stops the ones already running.
    let mut handle = ServeHandle {
        config: Arc::clone(&config),
        addrs: Vec::with_capacity(servers),
        kv: Vec::with_capacity(servers),
        servers: Vec::with_capacity(servers),
    };
    for (index, &asked) in config.addrs.iter().enumerate() {
        let kv = match &config.kv_events {
            Some(kv) => {
                let (publish, replay) = kv.ports(index).ok_or(ServeError::Config {
                    option: "kv-events-port-base",
                    reason: "passes port 65535".to_owned(),
                })?;
                Some((
                    SocketAddr::new(asked.ip(), publish),
                    SocketAddr::new(asked.ip(), replay),
                ))
            }
            None => None,
        };
        let started = start(index, &config, asked, kv).await?;
        handle.addrs.push(started.addr);
        handle.kv.push(started.kv);
        handle.servers.push(Some(started.server));
    }
    Ok(handle)
}

/// Runs the pool of `config` until Ctrl-C, printing each server's address on stderr.
pub async fn run(config: ServeConfig) -> Result<(), ServeError> {
    let speed = config.speed;
    let model = config.model.clone();
    let roles = config.roles.clone();
    let handle = spawn(config).await?;
    for (index, addr) in handle.addrs().iter().enumerate() {
        let role = roles
            .get(index)
            .map(|r| format!(", role {r}"))
            .unwrap_or_default();
        eprintln!(
            "shepherd-sim serve: server {index} on http://{addr} ({model}, speed {speed}{role})"
        );
        if let Some(kv) = handle.kv_events(index) {
            eprintln!(
                "shepherd-sim serve: server {index} publishes KV events on {} (replay {}), topic {}",
                kv.publish_endpoint(),
                kv.replay_endpoint(),
                kv.topic
            );
        }
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
    config: Arc<ServeConfig>,
    addrs: Vec<SocketAddr>,
    kv: Vec<Option<KvEventEndpoints>>,
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

    /// Requests in server `index`'s running batch as of its engine's last step (`None` once
    /// it is stopped): a test waits on it to act while a request is being served.
    pub fn running_requests(&self, index: usize) -> Option<u32> {
        let server = self.servers.get(index)?.as_ref()?;
        Some(server.shared.gauges().snapshot.running)
    }

    /// Where server `index` publishes its KV-cache events (`None` without
    /// [`ServeConfig::kv_events`]); the addresses stay the same across
    /// [`ServeHandle::restart`].
    pub fn kv_events(&self, index: usize) -> Option<&KvEventEndpoints> {
        self.kv.get(index).and_then(Option::as_ref)
    }

    /// The KV-event publisher counters of server `index` since it last (re)started, while it
    /// runs with KV events on.
    pub fn kv_event_stats(&self, index: usize) -> Option<KvEventStats> {
        self.running(index)
            .and_then(|s| s.publisher.as_ref())
            .map(|p| p.control.stats())
    }

    /// Test hook, for a subscriber's recovery: the next `n` batches server `index`'s
    /// publisher handles are not sent on the PUB socket, their sequence numbers spent. With
    /// `replayable` they still go into the replay buffer (a lost message that a replay
    /// fills); without, they are not buffered either (a gap no replay can fill). Replaces any
    /// earlier plan; `false` when the server is not running or publishes no events.
    pub fn drop_kv_batches(&self, index: usize, n: u64, replayable: bool) -> bool {
        match self.running(index).and_then(|s| s.publisher.as_ref()) {
            Some(publisher) => {
                publisher.control.drop_next(n, replayable);
                true
            }
            None => false,
        }
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

    /// Test hook, for a subscriber's recovery: server `index` restarts like a restarted vLLM.
    /// It stops (if running), then comes back on the same HTTP, PUB and replay ports with an
    /// empty engine (no cached blocks, no requests, counters at zero) and a publisher whose
    /// sequence starts at 0 again with an empty replay buffer.
    pub async fn restart(&mut self, index: usize) -> Result<(), ServeError> {
        let addr = self.addr(index).ok_or(ServeError::NoSuchServer(index))?;
        self.stop(index).await;
        let kv = self.kv_events(index).map(|kv| (kv.publish, kv.replay));
        let started = start(index, &self.config, addr, kv).await?;
        if let Some(slot) = self.servers.get_mut(index) {
            *slot = Some(started.server);
        }
        Ok(())
    }

    /// Stops every server.
    pub async fn shutdown(mut self) {
        for server in self.servers.iter_mut().filter_map(Option::take) {
            server.stop().await;
        }
    }

    fn running(&self, index: usize) -> Option<&RunningServer> {
        self.servers.get(index).and_then(Option::as_ref)
    }
}

/// A server just started.
struct Started {
    addr: SocketAddr,
    kv: Option<KvEventEndpoints>,
    server: RunningServer,
}

/// Starts server `index` on `http`, publishing KV events on `kv` (PUB, replay) when the pool
/// has them on.
async fn start(
    index: usize,
    config: &Arc<ServeConfig>,
    http: SocketAddr,
    kv: Option<(SocketAddr, SocketAddr)>,
) -> Result<Started, ServeError> {
    let bind_error = |source| ServeError::Bind { addr: http, source };
    let listener = TcpListener::bind(http).await.map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    let (publisher, sink, endpoints) = match (&config.kv_events, kv) {
        (Some(kv_config), Some((publish, replay))) => {
            let control = Arc::new(KvControl::default());
            let (publisher, endpoints) = Publisher::bind(
                addr,
                publish,
                replay,
                &config.model,
                kv_config,
                Arc::clone(&control),
            )
            .await?;
            let (batches, queue) = mpsc::channel(kv_config.queue_capacity);
            let (shutdown, shutdown_rx) = oneshot::channel();
            let task = tokio::spawn(publisher.run(queue, shutdown_rx));
            let sink = KvSink {
                batches,
                control: Arc::clone(&control),
            };
            let publisher = PublisherTask {
                task,
                shutdown,
                control,
            };
            (Some(publisher), Some(sink), Some(endpoints))
        }
        _ => (None, None, None),
    };
    let shared = Arc::new(Shared::new(index, addr, Arc::clone(config)));
    let (submit, inbox) = mpsc::channel(config.max_pending);
    let driver = tokio::spawn(driver::drive(Arc::clone(&shared), inbox, sink));
    let app = handlers::router(Server {
        shared: Arc::clone(&shared),
        submit,
        client: reqwest::Client::new(),
    });
    let accept = tokio::spawn(accept_loop(listener, app));
    Ok(Started {
        addr,
        kv: endpoints,
        server: RunningServer {
            shared: Arc::clone(&shared),
            accept,
            driver,
            publisher,
        },
    })
}

#[derive(Debug)]
struct RunningServer {
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
    driver: JoinHandle<()>,
    publisher: Option<PublisherTask>,
}

#[derive(Debug)]
struct PublisherTask {
    task: JoinHandle<()>,
    shutdown: oneshot::Sender<()>,
    control: Arc<KvControl>,
}

impl RunningServer {
    async fn stop(self) {
        // The connections go first: were the engine gone while a connection still ran, its
        // handler would answer "the engine stopped" (a 500), which a dead server never
        // does. Aborted tasks drop their futures (listener, connections, engine) before the
        // join handles complete. The publisher closes its sockets before it returns, so
        // their ports are free for a restart.
        self.accept.abort();
        let _ = self.accept.await;
        self.driver.abort();
        let _ = self.driver.await;
        if let Some(p) = self.publisher {
            publisher::stop(p.task, p.shutdown).await;
        }
    }
}

impl Drop for ServeHandle {
    fn drop(&mut self) {
        for server in self.servers.iter().flatten() {
            server.accept.abort();
            server.driver.abort();
            if let Some(p) = &server.publisher {
                p.task.abort();
            }
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
