//! The admin routes.

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::AdminState;

/// Prometheus text exposition, version 0.0.4.
const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

pub(super) async fn metrics(State(state): State<AdminState>) -> Response {
    (
        [(header::CONTENT_TYPE, PROMETHEUS_CONTENT_TYPE)],
        state.render_metrics(),
    )
        .into_response()
}

pub(super) async fn healthz() -> &'static str {
    "ok\n"
}

pub(super) async fn readyz(State(state): State<AdminState>) -> Response {
    if state.is_ready() {
        (StatusCode::OK, "ready\n").into_response()
    } else if state.shutdown.is_shutting_down() {
        (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response()
    } else if !state.is_leader() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "follower: another replica holds the leader lease\n",
        )
            .into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "no endpoint has fresh metrics\n",
        )
            .into_response()
    }
}

pub(super) async fn adaptive(
    State(state): State<AdminState>,
    RawQuery(query): RawQuery,
) -> Response {
    if !state.debug_budget.try_take() {
        return too_often();
    }
    Json(state.adaptive_json(limit(query.as_deref()))).into_response()
}

pub(super) async fn config(State(state): State<AdminState>) -> Response {
    if !state.debug_budget.try_take() {
        return too_often();
    }
    Json(state.config().to_json()).into_response()
}

/// 429: the debug views' render budget is spent for now.
fn too_often() -> Response {
    (
        StatusCode::TOO_MANY_REQUESTS,
        [(header::RETRY_AFTER, "1")],
        "debug views are rendered at most 10 times a second; retry later\n",
    )
        .into_response()
}

/// `limit=N` from a query string.
fn limit(query: Option<&str>) -> Option<usize> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(key, _)| *key == "limit")
        .and_then(|(_, value)| value.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::limit;

    #[test]
    fn limit_is_read_from_the_query() {
        assert_eq!(limit(Some("limit=5")), Some(5));
        assert_eq!(limit(Some("a=1&limit=20")), Some(20));
        assert_eq!(limit(Some("limit=x")), None);
        assert_eq!(limit(None), None);
    }
}
