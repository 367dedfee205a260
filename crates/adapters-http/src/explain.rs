//! `POST /debug/explain/v1/...`: which endpoint would serve this body, and why.
//!
//! Off unless `gateway.explain` is on, since the answer shows the pool's layout and load. The
//! body is parsed as it would be on the API route after `/debug/explain` (for example
//! `/debug/explain/v1/chat/completions`) and scheduled as a *dry run*: nothing is recorded in
//! the prefix index or the session tables, no pick is counted, and the decision is dropped at
//! once. The answer:
//!
//! ```json
//! {
//!   "requestId": "…", "model": "…", "api": "ChatCompletions", "stream": false,
//!   "promptBytes": 1234, "estimatedPromptTokens": 308,
//!   "endpoints": ["127.0.0.1:8001", "127.0.0.1:8000", "127.0.0.1:8002"],
//!   "breakdown": {"profile": "default", "picker": "max-score-picker",
//!                 "candidates_before_filters": 3, "scorers": […], "rows": […]}
//! }
//! ```
//!
//! `endpoints` is the primary then the fallbacks; `breakdown` has every scorer's weight and
//! every candidate's raw scores, weighted total and rank.

use axum::extract::{Path, Request, State};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use shepherd_scheduler_core::request::ConfiguredHeaders;
use shepherd_scheduler_core::scheduler::ScheduleOptions;

use crate::headers::{self, REQUEST_ID, SESSION};
use crate::{ApiError, Gateway};

/// The explain handler. See the [module docs](self).
pub(crate) async fn explain(
    State(gateway): State<Gateway>,
    Path(api_path): Path<String>,
    request: Request,
) -> Response {
    match run(&gateway, &api_path, request).await {
        Ok(answer) => axum::Json(answer).into_response(),
        Err(error) => error.into_response(),
    }
}

async fn run(
    gateway: &Gateway,
    api_path: &str,
    request: Request,
) -> Result<serde_json::Value, ApiError> {
    let inner = &gateway.inner;
    let (parts, body) = request.into_parts();
    gateway.authorize(&parts.headers)?;
    let read = gateway.read_body(body, &parts.headers).await?;
    let body = read.bytes();
    let path = format!("/{}", api_path.trim_start_matches('/'));
    let parsed = inner
        .scheduler
        .load()
        .parsers()
        .parse(&path, body, &inner.parse_limits);
    let mut request = parsed.map_err(|e| ApiError::bad_body(&e))?;
    request.assign_id(headers::text(&parts.headers, REQUEST_ID));
    request.session_key = headers::text(&parts.headers, SESSION).map(str::to_owned);
    let configured = ConfiguredHeaders::of(&inner.scheduler.shared().resources).names();
    request.headers = headers::plugin_headers(&parts.headers, &configured);
    let options = ScheduleOptions {
        dry_run: true,
        ..ScheduleOptions::default()
    };
    let decision = inner
        .scheduler
        .schedule_with(&request, options)
        .map_err(|e| ApiError::unscheduled(&e, inner.settings.retry_after_seconds))?;
    let endpoints: Vec<&str> = decision.endpoints().iter().map(|e| e.address()).collect();
    let answer = json!({
        "requestId": decision.request_id(),
        "model": request.target_model(),
        "api": format!("{:?}", request.api),
        "stream": request.stream,
        "promptBytes": request.prompt.len_bytes(),
        "estimatedPromptTokens": request.prompt.estimated_tokens(),
        "endpoints": endpoints,
        "breakdown": decision.breakdown,
    });
    // A dry run's decision holds an in-flight count and nothing else: drop it now.
    drop(decision);
    Ok(answer)
}
