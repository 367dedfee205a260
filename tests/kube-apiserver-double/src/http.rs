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
use crate::store::{Change, ChangeKind, Resource};

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
    if request.method() != Method::GET {
        return error(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "the double serves GET (list, get, watch) only",
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
