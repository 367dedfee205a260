//! The discovery's one task: it follows the InferencePool's watch and the pods' watch (kube's
//! `runtime::watcher`: list, then watch from the list's resourceVersion, resumed after a
//! dropped stream, relisted after 410 Gone, with [`WatchBackoff`] between failed tries),
//! keeps the state, and publishes endpoint sets at most once per publish interval.
//!
//! What it never does: empty the pool because the API server is unreachable. Errors only
//! mark the discovery stale (a log line and `shepherd_discovery_stale`); the set in force
//! changes only on what the API server says.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;
use tokio::time::Instant;

use super::backoff::WatchBackoff;
use super::pool::PoolSpec;
use super::state::PodTable;
use super::stats::{DiscoveryStats, Watched};
use crate::discovery::EndpointSet;

type Events<K> = Pin<Box<dyn Stream<Item = Result<Event<K>, watcher::Error>> + Send>>;

/// Which pods are the pool.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// Those an InferencePool selects.
    Pool {
        name: String,
        group: String,
        resource: ApiResource,
    },
    /// Those of a fixed selector and ports (`--endpoint-selector`).
    Selector(PoolSpec),
}

/// Everything the task needs.
pub(crate) struct Driver {
    pub(crate) client: Client,
    pub(crate) namespace: String,
    pub(crate) target: Target,
    pub(crate) backoff: WatchBackoff,
    pub(crate) watch_timeout_secs: u32,
    pub(crate) publish_interval: Duration,
    pub(crate) tx: watch::Sender<Arc<EndpointSet>>,
    pub(crate) stats: Arc<DiscoveryStats>,
}

/// The state the task keeps between events.
struct Running {
    driver: Driver,
    spec: Option<PoolSpec>,
    table: PodTable,
    pods: Option<Events<Pod>>,
    /// Whether the pool's (re)list in progress has listed the pool.
    pool_listed: bool,
    /// A new selector's pods are being listed: the set in force stays until they are.
    holding: bool,
    dirty: bool,
    last_publish: Option<Instant>,
}

impl Driver {
    /// Runs until the task is aborted.
    pub(crate) async fn run(self) {
        let mut pool_events = match &self.target {
            Target::Pool { name, resource, .. } => {
                let api: Api<DynamicObject> =
                    Api::namespaced_with(self.client.clone(), &self.namespace, resource);
                let config = watcher::Config::default()
                    .fields(&format!("metadata.name={name}"))
                    .timeout(self.watch_timeout_secs);
                Some(boxed(watcher::watcher(api, config), &self.backoff))
            }
            Target::Selector(_) => None,
        };
        let spec = match &self.target {
            Target::Selector(spec) => Some(spec.clone()),
            Target::Pool { .. } => None,
        };
        let mut running = Running {
            driver: self,
            spec: None,
            table: PodTable::default(),
            pods: None,
            pool_listed: false,
            holding: false,
            dirty: false,
            last_publish: None,
        };
        if let Some(spec) = spec {
            running.use_spec(spec);
        }
        let probe_every = running
            .driver
            .backoff
            .clone()
            .next()
            .unwrap_or(Duration::from_millis(500))
            .max(Duration::from_millis(100));
        loop {
            let publish_at = running.publish_at();
            let stale = running.driver.stats.stale();
            tokio::select! {
                Some(event) = next(&mut pool_events) => running.on_pool(event),
                Some(event) = next(&mut running.pods) => running.on_pods(event),
                () = tokio::time::sleep_until(publish_at), if running.dirty => running.publish(),
                () = tokio::time::sleep(probe_every), if stale => running.probe().await,
            }
        }
    }
}

/// The next item of an optional stream; pending forever without one.
async fn next<T, S: Stream<Item = T> + Unpin>(stream: &mut Option<S>) -> Option<T> {
    match stream {
        Some(stream) => stream.next().await,
        None => std::future::pending().await,
    }
}

fn boxed<K, S>(stream: S, backoff: &WatchBackoff) -> Events<K>
where
    S: Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
{
    Box::pin(stream.backoff(backoff.clone()))
}

impl Running {
    fn publish_at(&self) -> Instant {
        let now = Instant::now();
        match self.last_publish {
            Some(last) => (last + self.driver.publish_interval).max(now),
            None => now,
        }
    }

    fn pool_name(&self) -> &str {
        match &self.driver.target {
            Target::Pool { name, .. } => name,
            Target::Selector(_) => "-",
        }
    }

    /// Puts `spec` in force: a new selector starts a new pods watch, and the set in force
    /// stays until its list is done (then the pool moves in one step).
    fn use_spec(&mut self, spec: PoolSpec) {
        let selector_changed = self
            .spec
            .as_ref()
            .is_none_or(|s| s.selector != spec.selector);
        if selector_changed {
            self.holding = self.spec.is_some();
            let api: Api<Pod> = Api::namespaced(self.driver.client.clone(), &self.driver.namespace);
            let config = watcher::Config::default()
                .labels(&spec.selector.to_string())
                .timeout(self.driver.watch_timeout_secs);
            self.pods = Some(boxed(watcher::watcher(api, config), &self.driver.backoff));
        }
        self.driver
            .stats
            .pool_present
            .store(true, Ordering::Relaxed);
        self.spec = Some(spec);
        self.dirty = true;
    }

    fn on_pool(&mut self, event: Result<Event<DynamicObject>, watcher::Error>) {
        let event = match event {
            Ok(event) => {
                self.fresh(Watched::Pool);
                event
            }
            Err(error) => return self.failed(Watched::Pool, &error),
        };
        match event {
            Event::Init => self.pool_listed = false,
            Event::InitApply(pool) => {
                self.pool_listed = true;
                self.driver.stats.event(Watched::Pool);
                self.pool_applied(&pool);
            }
            Event::InitDone => {
                self.driver.stats.relisted(Watched::Pool);
                if !self.pool_listed {
                    self.pool_gone("not found");
                }
            }
            Event::Apply(pool) => {
                self.driver.stats.event(Watched::Pool);
                self.pool_applied(&pool);
            }
            Event::Delete(_) => {
                self.driver.stats.event(Watched::Pool);
                self.pool_gone("deleted");
            }
        }
    }

    fn pool_applied(&mut self, pool: &DynamicObject) {
        let Target::Pool { group, .. } = &self.driver.target else {
            return;
        };
        match PoolSpec::from_object(group, &pool.data) {
            Ok(spec) if self.spec.as_ref() == Some(&spec) => {}
            Ok(spec) => {
                tracing::info!(
                    pool = self.pool_name(),
                    namespace = %self.driver.namespace,
                    selector = %spec.selector,
                    target_ports = ?spec.target_ports,
                    app_protocol = spec.app_protocol.as_deref().unwrap_or("-"),
                    endpoint_picker = spec.endpoint_picker.as_deref().unwrap_or("-"),
                    "InferencePool in force"
                );
                self.use_spec(spec);
            }
            Err(error) => {
                self.driver.stats.refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    pool = self.pool_name(),
                    namespace = %self.driver.namespace,
                    %error,
                    kept = self.spec.is_some(),
                    "InferencePool refused; the last valid pool stays in force"
                );
            }
        }
    }

    fn pool_gone(&mut self, why: &str) {
        if self.spec.is_some() {
            tracing::warn!(
                pool = self.pool_name(),
                namespace = %self.driver.namespace,
                "InferencePool {why}: the pool is now empty (requests wait or fail as with no endpoints)"
            );
        } else {
            tracing::warn!(
                pool = self.pool_name(),
                namespace = %self.driver.namespace,
                "InferencePool {why}: no endpoints until it exists"
            );
        }
        self.spec = None;
        self.pods = None;
        self.holding = false;
        self.table.clear();
        self.driver
            .stats
            .pool_present
            .store(false, Ordering::Relaxed);
        self.dirty = true;
    }

    fn on_pods(&mut self, event: Result<Event<Pod>, watcher::Error>) {
        let event = match event {
            Ok(event) => {
                self.fresh(Watched::Pods);
                event
            }
            Err(error) => return self.failed(Watched::Pods, &error),
        };
        let changed = match event {
            Event::Init => {
                self.table.begin_relist();
                false
            }
            Event::InitApply(pod) => {
                self.driver.stats.event(Watched::Pods);
                self.table.relisted(&pod);
                false
            }
            Event::InitDone => {
                self.driver.stats.relisted(Watched::Pods);
                let held = std::mem::take(&mut self.holding);
                self.table.finish_relist() || held
            }
            Event::Apply(pod) => {
                self.driver.stats.event(Watched::Pods);
                self.table.apply(&pod)
            }
            Event::Delete(pod) => {
                self.driver.stats.event(Watched::Pods);
                self.table.delete(&pod)
            }
        };
        self.dirty |= changed;
    }

    fn stale_flag(&self, watched: Watched) -> &std::sync::atomic::AtomicBool {
        match watched {
            Watched::Pool => &self.driver.stats.stale_pool,
            Watched::Pods => &self.driver.stats.stale_pods,
        }
    }

    fn failed(&mut self, watched: Watched, error: &watcher::Error) {
        self.driver.stats.error(watched);
        let was_stale = self.driver.stats.stale();
        if !self.stale_flag(watched).swap(true, Ordering::Relaxed) && !was_stale {
            tracing::warn!(
                %error,
                endpoints = self.driver.tx.borrow().len(),
                "Kubernetes discovery is stale: the API server cannot be watched; the last endpoint set stays in force while retrying"
            );
        } else {
            tracing::debug!(%error, ?watched, "Kubernetes watch still failing");
        }
    }

    fn fresh(&mut self, watched: Watched) {
        if self.stale_flag(watched).swap(false, Ordering::Relaxed) && !self.driver.stats.stale() {
            tracing::info!("Kubernetes discovery resumed: the API server answers again");
        }
    }

    /// While stale: asks the API server for one pod. A watch that resumes quietly (no
    /// change to report) yields no event, so this is how the discovery learns that the API
    /// server answers again; the watches themselves resume on their own.
    async fn probe(&mut self) {
        let api: Api<Pod> = Api::namespaced(self.driver.client.clone(), &self.driver.namespace);
        let params = kube::api::ListParams::default().limit(1);
        let answered = tokio::time::timeout(Duration::from_secs(2), api.list(&params))
            .await
            .is_ok_and(|r| r.is_ok());
        if answered {
            self.fresh(Watched::Pool);
            self.fresh(Watched::Pods);
        }
    }

    fn publish(&mut self) {
        self.dirty = false;
        if self.holding {
            return;
        }
        self.last_publish = Some(Instant::now());
        let set = match &self.spec {
            Some(spec) => self.table.endpoints(spec),
            None => EndpointSet::default(),
        };
        let stats = &self.driver.stats;
        stats.pods.store(self.table.len() as u64, Ordering::Relaxed);
        stats.endpoints.store(set.len() as u64, Ordering::Relaxed);
        let changed = self.driver.tx.send_if_modified(|current| {
            if **current == set {
                false
            } else {
                *current = Arc::new(set);
                true
            }
        });
        if changed {
            stats.published.fetch_add(1, Ordering::Relaxed);
        }
    }
}
