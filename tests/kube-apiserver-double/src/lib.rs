//! # shepherd-kube-apiserver-double
//!
//! A Kubernetes API server double for tests: it speaks the list/watch protocol the real
//! `kube` client (and its `runtime::watcher`) uses, over plain HTTP on loopback, so Shepherd's
//! Kubernetes discovery is tested with the real client, unmodified. Test code only.
//!
//! What it serves (tests change objects in process with [`ApiServerDouble::apply`] and
//! [`ApiServerDouble::delete`]; clients write with POST and PUT):
//!
//! - `/api/v1/[namespaces/NS/]pods[/NAME]` and `/apis/GROUP/VERSION/[namespaces/NS/]PLURAL[/NAME]`
//!   for the registered [`Resource`]s (Pods, both InferencePool groups, and any added with
//!   [`ApiServerDouble::register`]);
//! - lists with `metadata.resourceVersion`, `limit` and `continue` (an expired token is
//!   `410 Gone`), `labelSelector` (`=`, `==`, `!=`, exists, `!`, `in`, `notin`) and
//!   `fieldSelector` (`metadata.name`, `metadata.namespace`, `=`/`==`/`!=`);
//! - watches (`watch=true`): a chunked stream of `WatchEvent` JSON lines (ADDED, MODIFIED,
//!   DELETED, BOOKMARK with `allowWatchBookmarks`, ERROR) from `resourceVersion` (empty or
//!   `0`: the current objects as ADDED first), ended after `timeoutSeconds`; objects entering
//!   or leaving a selector come as ADDED / DELETED; a resourceVersion older than the retained
//!   history is answered by an ERROR event with a `410 Expired` Status inside a 200 stream, as
//!   the API server does;
//! - writes: `POST` creates (409 `AlreadyExists`), `PUT` replaces, refused with 409
//!   `Conflict` when the body's `metadata.resourceVersion` is not the stored one (the
//!   optimistic concurrency leader election relies on);
//! - API discovery: `/apis/GROUP/VERSION` lists the kinds served there (404 when none);
//! - [`stop`](ApiServerDouble::stop) drops every connection and the listener;
//!   [`restart`](ApiServerDouble::restart) listens again on the same port with the same
//!   objects (an outage); [`compact`](ApiServerDouble::compact) makes every resourceVersion
//!   issued so far too old (the next watch gets 410 and the client relists).
//!
//! Differences from a real API server: one global resourceVersion counter for every kind (as
//! etcd's), a list's pages read the current objects (not a snapshot), no authentication, no
//! PATCH or DELETE over HTTP, no protobuf, no server-side apply.
//!
//! ```
//! # #![allow(clippy::unwrap_used)]
//! use shepherd_kube_apiserver_double::{ApiServerDouble, Resource, objects};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let server = ApiServerDouble::start().await.unwrap();
//! server.apply(&Resource::pods(), objects::pod("ns", "vllm-0", &[("app", "vllm")], Some("10.0.0.1"), true, &[8000]));
//! let url = format!("{}/api/v1/namespaces/ns/pods?labelSelector=app%3Dvllm", server.url());
//! let (status, body) = server.get(&url).await.unwrap();
//! assert_eq!(status, 200);
//! assert!(body.contains("vllm-0"));
//! # }
//! ```

mod http;
pub mod objects;
mod query;
mod selectors;
mod store;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::broadcast;
use tokio::task::{JoinHandle, JoinSet};

pub use selectors::{FieldSelector, LabelSelector};
pub use store::{Change, ChangeKind, Resource};

/// Counts of what the double was asked.
#[derive(Debug, Default)]
pub struct Stats {
    requests: AtomicU64,
    lists: AtomicU64,
    watches: AtomicU64,
    gone: AtomicU64,
}

impl Stats {
    /// Requests of any kind.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
    /// List requests (every page counts).
    pub fn lists(&self) -> u64 {
        self.lists.load(Ordering::Relaxed)
    }
    /// Watch requests.
    pub fn watches(&self) -> u64 {
        self.watches.load(Ordering::Relaxed)
    }
    /// Watches answered with 410 Gone.
    pub fn gone(&self) -> u64 {
        self.gone.load(Ordering::Relaxed)
    }
}

pub(crate) struct Shared {
    pub(crate) store: Mutex<store::Store>,
    pub(crate) resources: Vec<Resource>,
    pub(crate) stats: Stats,
    pub(crate) bookmark_interval: Duration,
    pub(crate) stop_watches: broadcast::Sender<()>,
}

/// The double: objects, and an HTTP listener that can be stopped and restarted.
pub struct ApiServerDouble {
    shared: Arc<Shared>,
    addr: SocketAddr,
    server: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for ApiServerDouble {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServerDouble")
            .field("addr", &self.addr)
            .field("objects", &self.shared.store.lock().len())
            .finish()
    }
}

/// Settings of a double.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Changes kept for watches to replay (older resourceVersions get 410).
    pub history: usize,
    /// Time between two bookmarks on a watch that asked for them.
    pub bookmark_interval: Duration,
    /// The kinds served (and listed by API discovery): by default Pods, both InferencePool
    /// groups, Leases, and `llm-d.ai`'s InferenceObjective and InferenceModelRewrite.
    pub resources: Vec<Resource>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            history: 100_000,
            bookmark_interval: Duration::from_secs(1),
            resources: vec![
                Resource::pods(),
                Resource::inference_pools(),
                Resource::inference_pools_v1alpha2(),
                Resource::leases(),
                Resource::inference_objectives(),
                Resource::inference_model_rewrites(),
            ],
        }
    }
}

impl ApiServerDouble {
    /// A double on a free loopback port, with default settings.
    pub async fn start() -> std::io::Result<Self> {
        Self::start_with(Settings::default()).await
    }

    /// A double on a free loopback port.
    pub async fn start_with(settings: Settings) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (stop_watches, _) = broadcast::channel(4);
        let shared = Arc::new(Shared {
            store: Mutex::new(store::Store::new(settings.history)),
            resources: settings.resources,
            stats: Stats::default(),
            bookmark_interval: settings.bookmark_interval.max(Duration::from_millis(10)),
            stop_watches,
        });
        let server = tokio::spawn(serve(listener, Arc::clone(&shared)));
        Ok(ApiServerDouble {
            shared,
            addr,
            server: Mutex::new(Some(server)),
        })
    }

    /// Also serve `resource` (before the client asks for it).
    pub fn register(&mut self, resource: Resource) {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.resources.push(resource);
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What the double was asked.
    pub fn stats(&self) -> &Stats {
        &self.shared.stats
    }

    /// Creates or replaces an object (by `metadata.namespace`/`metadata.name`); returns it
    /// as stored, with its new resourceVersion.
    pub fn apply(&self, resource: &Resource, object: Value) -> Value {
        self.shared.store.lock().apply(resource, object)
    }

    /// Deletes an object; returns whether it existed.
    pub fn delete(&self, resource: &Resource, namespace: &str, name: &str) -> bool {
        self.shared.store.lock().delete(resource, namespace, name)
    }

    /// The object, as stored.
    pub fn object(&self, resource: &Resource, namespace: &str, name: &str) -> Option<Value> {
        self.shared
            .store
            .lock()
            .get(resource, namespace, name)
            .cloned()
    }

    /// Objects stored (every kind).
    pub fn len(&self) -> usize {
        self.shared.store.lock().len()
    }

    /// Whether no object is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The latest resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.store.lock().rv
    }

    /// Forgets the history: every resourceVersion issued so far is too old, so the next
    /// watch from one gets 410 Gone and the client relists. Open watches are ended.
    pub fn compact(&self) {
        self.shared.store.lock().compact();
        self.end_watches();
    }

    /// Ends every open watch stream normally (clients re-watch from their resourceVersion).
    pub fn end_watches(&self) {
        let _ = self.shared.stop_watches.send(());
    }

    /// Stops listening and drops every open connection (the objects stay).
    pub fn stop(&self) {
        if let Some(server) = self.server.lock().take() {
            server.abort();
        }
        self.end_watches();
    }

    /// Listens again on the same port after [`stop`](Self::stop).
    pub async fn restart(&self) -> std::io::Result<()> {
        self.stop();
        // The aborted accept loop releases the port once its task is dropped.
        let mut tries = 0;
        let listener = loop {
            match TcpListener::bind(self.addr).await {
                Ok(listener) => break listener,
                Err(error) if tries < 50 => {
                    let _ = error;
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(error) => return Err(error),
            }
        };
        *self.server.lock() = Some(tokio::spawn(serve(listener, Arc::clone(&self.shared))));
        Ok(())
    }

    /// Whether it is listening.
    pub fn is_running(&self) -> bool {
        self.server.lock().is_some()
    }

    /// A kubeconfig naming the double (plain HTTP, no credentials) with `namespace` as the
    /// context's namespace, written to `path` (for binaries: `KUBECONFIG=path`).
    pub fn write_kubeconfig(&self, path: &Path, namespace: &str) -> std::io::Result<()> {
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: double\n  cluster:\n    server: {url}\ncontexts:\n- name: double\n  context:\n    cluster: double\n    user: tester\n    namespace: {namespace}\ncurrent-context: double\nusers:\n- name: tester\n  user: {{}}\n",
            url = self.url()
        );
        std::fs::write(path, text)
    }

    /// A plain GET through a fresh connection: the status code and body (for checks of the
    /// double itself).
    pub async fn get(&self, url: &str) -> std::io::Result<(u16, String)> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let path = url.strip_prefix(&self.url()).unwrap_or(url);
        let mut stream = tokio::net::TcpStream::connect(self.addr).await?;
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.addr
        );
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        let text = String::from_utf8_lossy(&response).into_owned();
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let body = text
            .split_once("\r\n\r\n")
            .map_or("", |(_, b)| b)
            .to_string();
        Ok((status, body))
    }
}

impl Drop for ApiServerDouble {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    // Connections live in this set: aborting the accept task drops it, which aborts them.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let shared = Arc::clone(&shared);
                connections.spawn(async move {
                    let service = service_fn(move |request| {
                        let shared = Arc::clone(&shared);
                        async move { Ok::<_, std::convert::Infallible>(http::handle(shared, request).await) }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}
