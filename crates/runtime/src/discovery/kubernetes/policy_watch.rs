//! The task that keeps [`RequestPolicies`] in step with the pool's `InferenceObjective` and
//! `InferenceModelRewrite` objects.
//!
//! Each kind is looked up by API discovery first in `llm-d.ai/v1alpha2`, then in the older
//! `inference.networking.x-k8s.io/v1alpha2` (with a deprecation line), as upstream's picker
//! does; a kind served in neither is looked up again every minute (CRDs installed after the
//! picker starts are picked up) and, until then, requests get the default priority and no
//! rewrite. Watches resume and relist as the pool's do; an API error keeps the objects known
//! (the policies in force never empty because the API server is unreachable).

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};

use super::backoff::WatchBackoff;
use super::policy_objects::{objective_priority, references_pool, rewrite_object};
use crate::policies::{ModelRewrites, RequestPolicies, RewriteObject};

/// The API group-versions that serve the two kinds, preferred first.
pub const POLICY_GROUP_VERSIONS: [&str; 2] = [
    "llm-d.ai/v1alpha2",
    "inference.networking.x-k8s.io/v1alpha2",
];

/// How often a kind served nowhere is looked up again.
const LOOKUP_AGAIN: Duration = Duration::from_secs(60);

type Events = Pin<Box<dyn Stream<Item = Result<Event<DynamicObject>, watcher::Error>> + Send>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Objective,
    Rewrite,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Objective => "InferenceObjective",
            Kind::Rewrite => "InferenceModelRewrite",
        }
    }

    fn plural(self) -> &'static str {
        match self {
            Kind::Objective => "inferenceobjectives",
            Kind::Rewrite => "inferencemodelrewrites",
        }
    }
}

/// What the task needs.
pub(crate) struct PolicyWatch {
    pub(crate) client: Client,
    pub(crate) namespace: String,
    pub(crate) pool_name: String,
    pub(crate) pool_group: String,
    pub(crate) backoff: WatchBackoff,
    pub(crate) watch_timeout_secs: u32,
    pub(crate) policies: Arc<RequestPolicies>,
}

/// One kind's objects of this pool, with the list being rebuilt during a relist.
struct Mirror<T> {
    kind: Kind,
    known: BTreeMap<String, T>,
    relisting: Option<BTreeMap<String, T>>,
    failing: bool,
}

impl<T: PartialEq> Mirror<T> {
    fn new(kind: Kind) -> Self {
        Mirror {
            kind,
            known: BTreeMap::new(),
            relisting: None,
            failing: false,
        }
    }

    /// Takes one watch event; `read` gives the object's value when it belongs to the pool.
    /// Returns whether the known objects changed.
    fn on_event(
        &mut self,
        event: Result<Event<DynamicObject>, watcher::Error>,
        read: impl Fn(&DynamicObject) -> Option<T>,
    ) -> bool {
        let event = match event {
            Ok(event) => {
                if std::mem::take(&mut self.failing) {
                    tracing::info!(kind = self.kind.name(), "watch resumed");
                }
                event
            }
            Err(error) => {
                if !std::mem::replace(&mut self.failing, true) {
                    tracing::warn!(
                        kind = self.kind.name(),
                        %error,
                        known = self.known.len(),
                        "watch failing; the objects known stay in force while retrying"
                    );
                }
                return false;
            }
        };
        let name = |object: &DynamicObject| object.metadata.name.clone().unwrap_or_default();
        match event {
            Event::Init => {
                self.relisting = Some(BTreeMap::new());
                false
            }
            Event::InitApply(object) => {
                if let (Some(list), Some(value)) = (self.relisting.as_mut(), read(&object)) {
                    list.insert(name(&object), value);
                }
                false
            }
            Event::InitDone => {
                let list = self.relisting.take().unwrap_or_default();
                let changed = list != self.known;
                self.known = list;
                changed
            }
            Event::Apply(object) => {
                let key = name(&object);
                let deleting = object.metadata.deletion_timestamp.is_some();
                match read(&object).filter(|_| !deleting) {
                    Some(value) => {
                        let changed = self.known.get(&key) != Some(&value);
                        self.known.insert(key, value);
                        changed
                    }
                    None => self.known.remove(&key).is_some(),
                }
            }
            Event::Delete(object) => self.known.remove(&name(&object)).is_some(),
        }
    }
}

impl PolicyWatch {
    /// Runs until aborted.
    pub(crate) async fn run(self) {
        let mut objectives: Option<Events> = None;
        let mut rewrites: Option<Events> = None;
        let mut objective_mirror = Mirror::<Option<i32>>::new(Kind::Objective);
        let mut rewrite_mirror = Mirror::<RewriteObject>::new(Kind::Rewrite);
        let mut announced = [false; 2];
        let mut lookup = tokio::time::interval(LOOKUP_AGAIN);
        let (name, group) = (self.pool_name.clone(), self.pool_group.clone());
        loop {
            tokio::select! {
                _ = lookup.tick(), if objectives.is_none() || rewrites.is_none() => {
                    if objectives.is_none() {
                        objectives = self.watch(Kind::Objective, &mut announced[0]).await;
                    }
                    if rewrites.is_none() {
                        rewrites = self.watch(Kind::Rewrite, &mut announced[1]).await;
                    }
                }
                Some(event) = next(&mut objectives) => {
                    let read = |o: &DynamicObject| {
                        references_pool(&o.data, &name, &group).then(|| objective_priority(&o.data))
                    };
                    if objective_mirror.on_event(event, read) {
                        let table = objective_mirror.known.clone().into_iter().collect();
                        self.policies.set_objectives(table);
                        tracing::info!(objectives = objective_mirror.known.len(), "InferenceObjectives in force");
                    }
                }
                Some(event) = next(&mut rewrites) => {
                    let read = |o: &DynamicObject| {
                        references_pool(&o.data, &name, &group).then(|| {
                            // A DynamicObject keeps `metadata` apart from `data`.
                            let mut object = rewrite_object(&o.data);
                            object.name = o.metadata.name.clone().unwrap_or_default();
                            object.created = o
                                .metadata
                                .creation_timestamp
                                .as_ref()
                                .map(|t| t.0.to_string())
                                .unwrap_or_default();
                            object
                        })
                    };
                    if rewrite_mirror.on_event(event, read) {
                        let objects: Vec<RewriteObject> = rewrite_mirror.known.values().cloned().collect();
                        self.policies.set_rewrites(ModelRewrites::new(objects));
                        tracing::info!(rewrites = rewrite_mirror.known.len(), "InferenceModelRewrites in force");
                    }
                }
            }
        }
    }

    /// Finds where `kind` is served and starts watching it there (`None`: served nowhere, or
    /// the API server did not answer; looked up again later).
    async fn watch(&self, kind: Kind, announced: &mut bool) -> Option<Events> {
        for (i, group_version) in POLICY_GROUP_VERSIONS.iter().enumerate() {
            let served = tokio::time::timeout(
                Duration::from_secs(10),
                self.client.list_api_group_resources(group_version),
            )
            .await;
            let Ok(Ok(list)) = served else { continue };
            if !list.resources.iter().any(|r| r.kind == kind.name()) {
                continue;
            }
            let (group, version) = group_version.split_once('/').unwrap_or((group_version, ""));
            if i > 0 {
                tracing::warn!(
                    kind = kind.name(),
                    api_version = group_version,
                    replacement = POLICY_GROUP_VERSIONS[0],
                    "DEPRECATION: this API group is deprecated; watching it since the new one is not served"
                );
            }
            tracing::info!(
                kind = kind.name(),
                api_version = group_version,
                pool = %self.pool_name,
                namespace = %self.namespace,
                "watching the pool's objects"
            );
            let resource = ApiResource {
                group: group.to_string(),
                version: version.to_string(),
                api_version: group_version.to_string(),
                kind: kind.name().to_string(),
                plural: kind.plural().to_string(),
            };
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), &self.namespace, &resource);
            let config = watcher::Config::default().timeout(self.watch_timeout_secs);
            return Some(Box::pin(
                watcher::watcher(api, config).backoff(self.backoff.clone()),
            ));
        }
        if !std::mem::replace(announced, true) {
            tracing::info!(
                kind = kind.name(),
                "not served by the API server (no CRD in llm-d.ai/v1alpha2 or inference.networking.x-k8s.io/v1alpha2): requests get the default priority / no model rewrite; looked up again every minute"
            );
        }
        None
    }
}

async fn next(stream: &mut Option<Events>) -> Option<Result<Event<DynamicObject>, watcher::Error>> {
    match stream {
        Some(stream) => stream.next().await,
        None => std::future::pending().await,
    }
}
