//! `/v1/models`: the models the pool serves, asked of every server and cached briefly.
//!
//! Each server behind the gateway serves its own model list (vLLM lists its base model and
//! any loaded LoRA adapters). [`ModelCatalog`] asks every endpoint of the pool at once, within
//! `gateway.modelsTimeoutMs`, merges the answers — each model once, under the first server's
//! description of it, in the pool's order — and keeps the result for
//! `gateway.modelsCacheMs`. Concurrent askers share one refresh.
//!
//! The same list lets the gateway answer 404 for a model nobody serves, with care:
//!
//! - only when the list is *complete* (every endpoint answered), since a server that did not
//!   answer may be the one serving the model;
//! - a model missing from a list older than a second triggers one refresh before the 404, so
//!   a server that just loaded an adapter is not refused for long;
//! - with no list yet (the gateway just started) requests are let through while a refresh
//!   runs in the background; on the request path a known model costs a lock and a hash
//!   lookup, nothing more.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use axum::http::uri::PathAndQuery;
use axum::http::{Method, Request, StatusCode, header};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use parking_lot::Mutex;
use serde_json::Value;
use shepherd_scheduler_core::endpoint::Pool;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::settings::UpstreamKeys;
use crate::upstream::{HttpClient, endpoint_uri};

/// Largest `/v1/models` answer read from one server.
const MAX_MODELS_BODY: usize = 1 << 20;
/// A model missing from a list at least this old is worth one refresh before a 404.
const RECHECK_AFTER: Duration = Duration::from_secs(1);

/// One merged model list.
#[derive(Debug)]
pub struct ModelList {
    /// The model objects, each id once.
    pub data: Vec<Value>,
    /// Their ids.
    pub ids: HashSet<String>,
    /// Whether every endpoint of the pool answered.
    pub complete: bool,
    /// When it was fetched.
    pub fetched_at: Instant,
}

impl ModelList {
    /// The list as `/v1/models` answers it.
    pub fn to_json(&self) -> Value {
        serde_json::json!({ "object": "list", "data": self.data })
    }

    /// The model object with id `id`.
    pub fn get(&self, id: &str) -> Option<&Value> {
        self.data
            .iter()
            .find(|m| m.get("id").and_then(Value::as_str) == Some(id))
    }
}

/// Whether a request's model can be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelCheck {
    /// A server lists it, or no complete list is known: let it through.
    Allowed,
    /// A complete, recent list does not have it: 404.
    Unknown,
}

/// The pool's models. See the [module docs](self).
#[derive(Debug)]
pub struct ModelCatalog {
    client: HttpClient,
    pool: Arc<Pool>,
    keys: UpstreamKeys,
    ttl: Duration,
    timeout: Duration,
    cached: Mutex<Option<Arc<ModelList>>>,
    refreshing: tokio::sync::Mutex<()>,
}

impl ModelCatalog {
    pub(crate) fn new(
        client: HttpClient,
        pool: Arc<Pool>,
        keys: UpstreamKeys,
        ttl: Duration,
        timeout: Duration,
    ) -> Self {
        ModelCatalog {
            client,
            pool,
            keys,
            ttl,
            timeout,
            cached: Mutex::new(None),
            refreshing: tokio::sync::Mutex::new(()),
        }
    }

    /// The list as last fetched, however old.
    pub fn cached(&self) -> Option<Arc<ModelList>> {
        self.cached.lock().clone()
    }

    fn is_fresh(&self, list: &ModelList) -> bool {
        list.fetched_at.elapsed() < self.ttl
    }

    /// A list no older than the cache lifetime (fetched now if needed); `None` when no
    /// server answered.
    pub async fn list(&self) -> Option<Arc<ModelList>> {
        if let Some(list) = self.cached()
            && self.is_fresh(&list)
        {
            return Some(list);
        }
        self.refresh(None).await
    }

    /// Whether a request for `model` may go on. See the [module docs](self).
    pub async fn check(self: &Arc<Self>, model: &str) -> ModelCheck {
        let Some(list) = self.cached() else {
            self.refresh_in_background();
            return ModelCheck::Allowed;
        };
        if list.ids.contains(model) {
            if !self.is_fresh(&list) {
                self.refresh_in_background();
            }
            return ModelCheck::Allowed;
        }
        let list = if list.fetched_at.elapsed() >= RECHECK_AFTER {
            match self.refresh(Some(RECHECK_AFTER)).await {
                Some(list) => list,
                None => return ModelCheck::Allowed,
            }
        } else {
            list
        };
        if list.complete && !list.ids.contains(model) {
            ModelCheck::Unknown
        } else {
            ModelCheck::Allowed
        }
    }

    fn refresh_in_background(self: &Arc<Self>) {
        // One refresh at a time: if one runs, its result will do.
        if self.refreshing.try_lock().is_err() {
            return;
        }
        let catalog = Arc::clone(self);
        tokio::spawn(async move {
            catalog.refresh(None).await;
        });
    }

    /// Fetches a new list unless one younger than `max_age` (default: the cache lifetime)
    /// arrived while waiting for the refresh lock.
    async fn refresh(&self, max_age: Option<Duration>) -> Option<Arc<ModelList>> {
        let _serial = self.refreshing.lock().await;
        let max_age = max_age.unwrap_or(self.ttl);
        if let Some(list) = self.cached()
            && list.fetched_at.elapsed() < max_age
        {
            return Some(list);
        }
        let fetched = self.fetch_all().await;
        match fetched {
            Some(list) => {
                let list = Arc::new(list);
                *self.cached.lock() = Some(Arc::clone(&list));
                Some(list)
            }
            // Nobody answered: keep what we had.
            None => self.cached(),
        }
    }

    async fn fetch_all(&self) -> Option<ModelList> {
        let endpoints: Vec<String> = self
            .pool
            .snapshot()
            .endpoints()
            .iter()
            .map(|e| e.address().to_owned())
            .collect();
        let mut tasks = JoinSet::new();
        for (index, address) in endpoints.iter().enumerate() {
            let client = self.client.clone();
            let key = self.keys.for_endpoint(address).cloned();
            let address = address.clone();
            let timeout = self.timeout;
            tasks.spawn(async move {
                let fetched = tokio::time::timeout(timeout, fetch_one(&client, &address, key))
                    .await
                    .unwrap_or(None);
                (index, fetched)
            });
        }
        let mut answers: Vec<Option<Vec<Value>>> = vec![None; endpoints.len()];
        while let Some(joined) = tasks.join_next().await {
            if let Ok((index, fetched)) = joined
                && let Some(slot) = answers.get_mut(index)
            {
                *slot = fetched;
            }
        }
        let answered = answers.iter().filter(|a| a.is_some()).count();
        if answered == 0 {
            return None;
        }
        let mut data = Vec::new();
        let mut ids = HashSet::new();
        for model in answers.into_iter().flatten().flatten() {
            if let Some(id) = model.get("id").and_then(Value::as_str)
                && ids.insert(id.to_owned())
            {
                data.push(model);
            }
        }
        Some(ModelList {
            data,
            ids,
            complete: answered == endpoints.len(),
            fetched_at: Instant::now(),
        })
    }
}

/// The `data` of one server's `/v1/models`, or `None` if it did not answer well.
async fn fetch_one(
    client: &HttpClient,
    address: &str,
    key: Option<axum::http::HeaderValue>,
) -> Option<Vec<Value>> {
    let uri = endpoint_uri(address, &PathAndQuery::from_static("/v1/models"))?;
    let mut request = Request::new(Full::new(Bytes::new()));
    *request.method_mut() = Method::GET;
    *request.uri_mut() = uri;
    if let Some(key) = key {
        request.headers_mut().insert(header::AUTHORIZATION, key);
    }
    let response = client.request(request).await.ok()?;
    if response.status() != StatusCode::OK {
        return None;
    }
    let body = Limited::new(response.into_body(), MAX_MODELS_BODY)
        .collect()
        .await
        .ok()?
        .to_bytes();
    let mut value: Value = serde_json::from_slice(&body).ok()?;
    match value.get_mut("data")?.take() {
        Value::Array(models) => Some(models),
        _ => None,
    }
}
