//! The double's objects, their resourceVersions and the bounded log of changes that watches
//! replay from.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast;

/// A kind of object the double serves.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Resource {
    /// API group, empty for core.
    pub group: String,
    /// Version (`v1`, `v1alpha2`).
    pub version: String,
    /// Plural (`pods`, `inferencepools`).
    pub plural: String,
    /// Kind (`Pod`, `InferencePool`).
    pub kind: String,
}

impl Resource {
    /// A resource type.
    pub fn new(group: &str, version: &str, plural: &str, kind: &str) -> Self {
        Resource {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            kind: kind.into(),
        }
    }

    /// core/v1 Pod.
    pub fn pods() -> Self {
        Resource::new("", "v1", "pods", "Pod")
    }

    /// `inference.networking.k8s.io/v1` InferencePool.
    pub fn inference_pools() -> Self {
        Resource::new(
            "inference.networking.k8s.io",
            "v1",
            "inferencepools",
            "InferencePool",
        )
    }

    /// `inference.networking.x-k8s.io/v1alpha2` InferencePool (the older group).
    pub fn inference_pools_v1alpha2() -> Self {
        Resource::new(
            "inference.networking.x-k8s.io",
            "v1alpha2",
            "inferencepools",
            "InferencePool",
        )
    }

    /// `coordination.k8s.io/v1` Lease (leader election).
    pub fn leases() -> Self {
        Resource::new("coordination.k8s.io", "v1", "leases", "Lease")
    }

    /// `llm-d.ai/v1alpha2` InferenceObjective.
    pub fn inference_objectives() -> Self {
        Resource::new(
            "llm-d.ai",
            "v1alpha2",
            "inferenceobjectives",
            "InferenceObjective",
        )
    }

    /// `llm-d.ai/v1alpha2` InferenceModelRewrite.
    pub fn inference_model_rewrites() -> Self {
        Resource::new(
            "llm-d.ai",
            "v1alpha2",
            "inferencemodelrewrites",
            "InferenceModelRewrite",
        )
    }

    /// The same kind in the older `inference.networking.x-k8s.io/v1alpha2` group.
    pub fn in_legacy_group(&self) -> Self {
        Resource::new(
            "inference.networking.x-k8s.io",
            "v1alpha2",
            &self.plural,
            &self.kind,
        )
    }

    /// `apiVersion` of its objects.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// Created.
    Added,
    /// Replaced.
    Modified,
    /// Deleted.
    Deleted,
}

/// One change, as watches see it.
#[derive(Debug, Clone)]
pub struct Change {
    /// The resourceVersion it made.
    pub rv: u64,
    /// The object's kind.
    pub resource: Resource,
    /// Its namespace.
    pub namespace: String,
    /// What happened.
    pub kind: ChangeKind,
    /// The object before (modified, deleted).
    pub old: Option<Value>,
    /// The object after (for a deletion: as it was, with the deletion's resourceVersion).
    pub new: Value,
}

type Key = (Resource, String, String);

/// Why a write was refused.
#[derive(Debug)]
pub(crate) enum WriteError {
    Invalid(&'static str),
    AlreadyExists(String),
    NotFound(String),
    Conflict(String),
}

pub(crate) struct Store {
    pub(crate) rv: u64,
    /// resourceVersions below this are too old to watch from.
    pub(crate) compacted: u64,
    objects: BTreeMap<Key, Value>,
    log: VecDeque<Arc<Change>>,
    max_log: usize,
    uid: u64,
    pub(crate) changes: broadcast::Sender<Arc<Change>>,
}

impl Store {
    pub(crate) fn new(max_log: usize) -> Self {
        let (changes, _) = broadcast::channel(65_536);
        Store {
            rv: 1000,
            compacted: 0,
            objects: BTreeMap::new(),
            log: VecDeque::new(),
            max_log: max_log.max(1),
            uid: 0,
            changes,
        }
    }

    fn record(&mut self, change: Change) {
        let change = Arc::new(change);
        self.log.push_back(Arc::clone(&change));
        while self.log.len() > self.max_log {
            if let Some(old) = self.log.pop_front() {
                self.compacted = self.compacted.max(old.rv);
            }
        }
        let _ = self.changes.send(change);
    }

    /// Creates or replaces `object` (its `metadata.name` and `metadata.namespace`, default
    /// `default`); returns it as stored.
    pub(crate) fn apply(&mut self, resource: &Resource, mut object: Value) -> Value {
        self.rv += 1;
        let rv = self.rv;
        if !object.is_object() {
            object = json!({});
        }
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default")
            .to_string();
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("unnamed")
            .to_string();
        let key = (resource.clone(), namespace.clone(), name);
        let old = self.objects.get(&key).cloned();
        object["apiVersion"] = json!(resource.api_version());
        object["kind"] = json!(resource.kind);
        if !object.get("metadata").is_some_and(Value::is_object) {
            object["metadata"] = json!({});
        }
        let metadata = &mut object["metadata"];
        metadata["namespace"] = json!(namespace);
        metadata["resourceVersion"] = json!(rv.to_string());
        match &old {
            Some(old) => {
                metadata["uid"] = old["metadata"]["uid"].clone();
                metadata["creationTimestamp"] = old["metadata"]["creationTimestamp"].clone();
            }
            None => {
                self.uid += 1;
                metadata["uid"] = json!(format!("00000000-0000-4000-8000-{:012x}", self.uid));
                // One second apart, in creation order (what "oldest wins" rules read).
                let s = self.uid % 86_400;
                metadata["creationTimestamp"] = json!(format!(
                    "2026-01-01T{:02}:{:02}:{:02}Z",
                    s / 3600,
                    s / 60 % 60,
                    s % 60
                ));
            }
        }
        self.objects.insert(key, object.clone());
        self.record(Change {
            rv,
            resource: resource.clone(),
            namespace,
            kind: if old.is_some() {
                ChangeKind::Modified
            } else {
                ChangeKind::Added
            },
            old,
            new: object.clone(),
        });
        object
    }

    /// A write over HTTP: create (`expected` none; fails when the object exists) or replace
    /// (fails when it does not, or when `expected`, its `metadata.resourceVersion`, is not
    /// the stored one), as the API server's optimistic concurrency does.
    pub(crate) fn write(
        &mut self,
        resource: &Resource,
        namespace: &str,
        object: Value,
        create: bool,
    ) -> Result<Value, WriteError> {
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .ok_or(WriteError::Invalid("metadata.name is required"))?
            .to_string();
        let stored = self.get(resource, namespace, &name);
        match (create, stored) {
            (true, Some(_)) => return Err(WriteError::AlreadyExists(name)),
            (false, None) => return Err(WriteError::NotFound(name)),
            (false, Some(stored)) => {
                let expected = object
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str);
                let current = stored
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str);
                if expected.is_some() && expected != current {
                    return Err(WriteError::Conflict(name));
                }
            }
            (true, None) => {}
        }
        let mut object = object;
        object["metadata"]["namespace"] = json!(namespace);
        Ok(self.apply(resource, object))
    }

    /// Deletes an object; returns whether it existed.
    pub(crate) fn delete(&mut self, resource: &Resource, namespace: &str, name: &str) -> bool {
        let key = (resource.clone(), namespace.to_string(), name.to_string());
        let Some(mut object) = self.objects.remove(&key) else {
            return false;
        };
        self.rv += 1;
        object["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        self.record(Change {
            rv: self.rv,
            resource: resource.clone(),
            namespace: namespace.to_string(),
            kind: ChangeKind::Deleted,
            old: Some(object.clone()),
            new: object,
        });
        true
    }

    pub(crate) fn get(&self, resource: &Resource, namespace: &str, name: &str) -> Option<&Value> {
        self.objects
            .get(&(resource.clone(), namespace.to_string(), name.to_string()))
    }

    /// Objects of `resource`, in `namespace` when given, in (namespace, name) order.
    pub(crate) fn list<'a>(
        &'a self,
        resource: &'a Resource,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Value> + 'a {
        self.objects
            .iter()
            .filter(move |((r, ns, _), _)| r == resource && namespace.is_none_or(|n| n == ns))
            .map(|(_, v)| v)
    }

    /// Changes after `rv`, oldest first.
    pub(crate) fn since(&self, rv: u64) -> Vec<Arc<Change>> {
        self.log.iter().filter(|c| c.rv > rv).cloned().collect()
    }

    /// Makes every resourceVersion issued so far too old to watch from.
    pub(crate) fn compact(&mut self) {
        self.log.clear();
        self.compacted = self.rv + 1;
    }

    pub(crate) fn len(&self) -> usize {
        self.objects.len()
    }
}
