//! The HTTP side: routing, lists (with `limit`/`continue`), single gets and watch streams.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::Shared;
use crate::query::{Target, parse_path, parse_query};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::{Change, ChangeKind, Resource, WriteError};

pub(crate) type Body = BoxBody<Bytes, Infallible>;

fn full(status: StatusCode, value: &Value) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(value.to_string())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

/// A `Status` object, as the API server sends errors.
pub(crate) fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    })
}

fn error(code: StatusCode, reason: &str, message: &str) -> Response<Body> {
    full(code, &status(code.as_u16(), reason, message))
}

pub(crate) async fn handle(shared: Arc<Shared>, request: Request<Incoming>) -> Response<Body> {
    shared.stats.requests.fetch_add(1, Ordering::Relaxed);
    let method = request.method().clone();
    if method == Method::GET
        && let Some(answer) = discovery(&shared, request.uri().path())
    {
        return answer;
    }
    if method != Method::GET && method != Method::POST && method != Method::PUT {
        return error(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "the double serves GET (list, get, watch), POST and PUT only",
        );
    }
    let Some(target) = parse_path(request.uri().path()) else {
        return error(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource",
        );
    };
    let Some(resource) = shared.resources.iter().find(|r| target.matches(r)).cloned() else {
        return error(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource",
        );
    };
    if method != Method::GET {
        return write(&shared, &resource, &target, method == Method::POST, request).await;
    }
    let query = parse_query(request.uri().query());
    let labels = match LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str)) {
        Ok(s) => s,
        Err(e) => return error(StatusCode::BAD_REQUEST, "BadRequest", &e),
    };
    let fields = match FieldSelector::parse(query.get("fieldSelector").map_or("", String::as_str)) {
        Ok(s) => s,
        Err(e) => return error(StatusCode::BAD_REQUEST, "BadRequest", &e),
    };
    let selected = Selected { labels, fields };
    if let Some(name) = &target.name {
        return get(&shared, &resource, &target, name);
    }
    let watch = query.get("watch").is_some_and(|w| w == "true" || w == "1");
    if watch {
        shared.stats.watches.fetch_add(1, Ordering::Relaxed);
        watch_stream(shared, resource, target, selected, &query)
    } else {
        shared.stats.lists.fetch_add(1, Ordering::Relaxed);
        list(&shared, &resource, &target, &selected, &query)
    }
}

/// `/apis/GROUP/VERSION` (or `/api/v1`): the kinds served there, as an `APIResourceList`.
fn discovery(shared: &Shared, path: &str) -> Option<Response<Body>> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let (group, version) = match parts.as_slice() {
        ["apis", group, version] => (*group, *version),
        ["api", version] => ("", *version),
        _ => return None,
    };
    let served: Vec<Value> = shared
        .resources
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .map(|r| {
            json!({
                "name": r.plural,
                "singularName": r.kind.to_lowercase(),
                "namespaced": true,
                "kind": r.kind,
                "verbs": ["get", "list", "watch", "create", "update"],
            })
        })
        .collect();
    if served.is_empty() {
        return Some(error(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource",
        ));
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(full(
        StatusCode::OK,
        &json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": served,
        }),
    ))
}

/// POST (create) or PUT (replace) of one object, its body at most 1 MiB of JSON.
async fn write(
    shared: &Shared,
    resource: &Resource,
    target: &Target,
    create: bool,
    request: Request<Incoming>,
) -> Response<Body> {
    const MAX_BODY: usize = 1 << 20;
    let Some(namespace) = target.namespace.clone() else {
        return error(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "writes are namespaced",
        );
    };
    let body = match http_body_util::Limited::new(request.into_body(), MAX_BODY)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(e) => return error(StatusCode::BAD_REQUEST, "BadRequest", &e.to_string()),
    };
    let object: Value = match serde_json::from_slice(&body) {
        Ok(object) => object,
        Err(e) => return error(StatusCode::BAD_REQUEST, "BadRequest", &e.to_string()),
    };
    if !create && object.pointer("/metadata/name").and_then(Value::as_str) != target.name.as_deref()
    {
        return error(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "the body's metadata.name does not match the path",
        );
    }
    let written = shared
        .store
        .lock()
        .write(resource, &namespace, object, create);
    match written {
        Ok(stored) if create => full(StatusCode::CREATED, &stored),
        Ok(stored) => full(StatusCode::OK, &stored),
        Err(WriteError::Invalid(why)) => error(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", why),
        Err(WriteError::AlreadyExists(name)) => error(
            StatusCode::CONFLICT,
            "AlreadyExists",
            &format!("{} {name:?} already exists", resource.plural),
        ),
        Err(WriteError::NotFound(name)) => error(
            StatusCode::NOT_FOUND,
            "NotFound",
            &format!("{} {name:?} not found", resource.plural),
        ),
        Err(WriteError::Conflict(name)) => error(
            StatusCode::CONFLICT,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on {} {name:?}: the object has been modified; please apply your changes to the latest version and try again",
                resource.plural
            ),
        ),
    }
}

struct Selected {
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Selected {
    fn matches(&self, object: &Value) -> bool {
        self.labels.matches(object) && self.fields.matches(object)
    }
}

fn get(shared: &Shared, resource: &Resource, target: &Target, name: &str) -> Response<Body> {
    let store = shared.store.lock();
    let namespace = target.namespace.as_deref().unwrap_or("default");
    match store.get(resource, namespace, name) {
        Some(object) => full(StatusCode::OK, object),
        None => error(
            StatusCode::NOT_FOUND,
            "NotFound",
            &format!("{} {name:?} not found", resource.plural),
        ),
    }
}

fn list(
    shared: &Shared,
    resource: &Resource,
    target: &Target,
    selected: &Selected,
    query: &std::collections::HashMap<String, String>,
) -> Response<Body> {
    let store = shared.store.lock();
    let limit = query
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|&l| l > 0);
    // A continue token: "resourceVersion:offset".
    let (list_rv, offset) = match query.get("continue").filter(|c| !c.is_empty()) {
        Some(token) => {
            let parsed = token
                .split_once(':')
                .and_then(|(rv, off)| Some((rv.parse::<u64>().ok()?, off.parse::<usize>().ok()?)));
            match parsed {
                Some((rv, _)) if rv < store.compacted => {
                    return error(
                        StatusCode::GONE,
                        "Expired",
                        "The provided continue parameter is too old to display a consistent list result.",
                    );
                }
                Some(parsed) => parsed,
                None => {
                    return error(
                        StatusCode::BAD_REQUEST,
                        "BadRequest",
                        "invalid continue token",
                    );
                }
            }
        }
        None => (store.rv, 0),
    };
    let matching: Vec<&Value> = store
        .list(resource, target.namespace.as_deref())
        .filter(|o| selected.matches(o))
        .collect();
    let end = limit.map_or(matching.len(), |l| (offset + l).min(matching.len()));
    let items: Vec<&Value> = matching.get(offset..end).unwrap_or_default().to_vec();
    let mut metadata = json!({"resourceVersion": list_rv.to_string()});
    if end < matching.len() {
        metadata["continue"] = json!(format!("{list_rv}:{end}"));
        metadata["remainingItemCount"] = json!(matching.len() - end);
    }
    let body = json!({
        "kind": format!("{}List", resource.kind),
        "apiVersion": resource.api_version(),
        "metadata": metadata,
        "items": items,
    });
    full(StatusCode::OK, &body)
}

fn event_line(kind: &str, object: &Value) -> Bytes {
    let mut line = json!({"type": kind, "object": object}).to_string();
    line.push('\n');
    Bytes::from(line)
}

/// The event a watch with `selected` sees for `change`, if any: an object that starts
/// matching is ADDED, one that stops matching is DELETED, as the API server does.
fn visible(change: &Change, selected: &Selected) -> Option<&'static str> {
    let now = change.kind != ChangeKind::Deleted && selected.matches(&change.new);
    let before = change.old.as_ref().is_some_and(|o| selected.matches(o));
    match (before, now) {
        (true, true) => Some("MODIFIED"),
        (false, true) => Some("ADDED"),
        (true, false) => Some("DELETED"),
        (false, false) => None,
    }
}

fn watch_stream(
    shared: Arc<Shared>,
    resource: Resource,
    target: Target,
    selected: Selected,
    query: &std::collections::HashMap<String, String>,
) -> Response<Body> {
    let bookmarks = query
        .get("allowWatchBookmarks")
        .is_some_and(|b| b == "true" || b == "1");
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map_or(Duration::from_secs(1800), Duration::from_secs);
    let from = query.get("resourceVersion").cloned().unwrap_or_default();
    let (tx, rx) = mpsc::channel::<Bytes>(1024);
    let in_scope = {
        let namespace = target.namespace.clone();
        let resource = resource.clone();
        move |change: &Change| {
            change.resource == resource
                && namespace.as_deref().is_none_or(|n| n == change.namespace)
        }
    };

    // Subscribe and read the backlog under one lock, so nothing falls between them.
    let (mut changes, backlog, start_rv) = {
        let store = shared.store.lock();
        let changes = store.changes.subscribe();
        let mut backlog = Vec::new();
        let start_rv;
        if from.is_empty() || from == "0" {
            start_rv = store.rv;
            for object in store.list(&resource, target.namespace.as_deref()) {
                if selected.matches(object) {
                    backlog.push(event_line("ADDED", object));
                }
            }
        } else {
            let Ok(rv) = from.parse::<u64>() else {
                return error(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    "invalid resourceVersion",
                );
            };
            if rv < store.compacted {
                shared.stats.gone.fetch_add(1, Ordering::Relaxed);
                let status = status(
                    410,
                    "Expired",
                    &format!("too old resource version: {rv} ({})", store.compacted),
                );
                let line = event_line("ERROR", &status);
                let body = StreamBody::new(stream::iter([Ok::<_, Infallible>(Frame::data(line))]));
                return streaming(BodyExt::boxed(body));
            }
            start_rv = store.rv.max(rv);
            for change in store.since(rv) {
                if in_scope(&change)
                    && let Some(kind) = visible(&change, &selected)
                {
                    backlog.push(event_line(kind, &change.new));
                }
            }
        }
        (changes, backlog, start_rv)
    };

    let bookmark_every = shared.bookmark_interval;
    let kind = resource.kind.clone();
    let api_version = resource.api_version();
    let mut stop = shared.stop_watches.subscribe();
    tokio::spawn(async move {
        for line in backlog {
            if tx.send(line).await.is_err() {
                return;
            }
        }
        let mut seen_rv = start_rv;
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(bookmark_every);
        ticker.tick().await;
        loop {
            let line = tokio::select! {
                () = &mut deadline => return,
                _ = stop.recv() => return,
                _ = ticker.tick(), if bookmarks => {
                    let object = json!({
                        "kind": kind,
                        "apiVersion": api_version,
                        "metadata": {"resourceVersion": seen_rv.to_string()},
                    });
                    event_line("BOOKMARK", &object)
                }
                change = changes.recv() => match change {
                    Ok(change) => {
                        if change.rv <= seen_rv {
                            continue;
                        }
                        seen_rv = change.rv;
                        if !in_scope(&change) {
                            continue;
                        }
                        match visible(&change, &selected) {
                            Some(kind) => event_line(kind, &change.new),
                            None => continue,
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        let status = status(410, "Expired", "the watch fell behind; relist");
                        let _ = tx.send(event_line("ERROR", &status)).await;
                        return;
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
            };
            if tx.send(line).await.is_err() {
                return;
            }
        }
    });
    let body = StreamBody::new(stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|line| (Ok::<_, Infallible>(Frame::data(line)), rx))
    }));
    streaming(BodyExt::boxed(body))
}

fn streaming(body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}
