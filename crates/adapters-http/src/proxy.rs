//! One inference request, from the client's headers to the last byte of the answer.
//!
//! 1. **Admission**: the client's key ([`ClientKeys`](crate::settings::ClientKeys), 401),
//!    then the body, read whole within `gateway.maxBodyBytes`, `gateway.bodyReadTimeoutMs`
//!    and `gateway.maxBufferedBodyBytes` ([`body`](crate::body): 413, 408, 503), then a
//!    place under `gateway.maxConcurrentRequests` ([`limit`](crate::limit), 429).
//! 2. **Body**: parsed
//!    by the parser the config's `ParserSet` gives for the path (400 in OpenAI's shape; 404
//!    when no parser takes the path), the model checked against the pool's list
//!    ([`models`](crate::models), 404) when the parser read one (`passthrough-parser` and
//!    SGLang's `/generate` read none). The request's id is the client's
//!    `x-request-id` or a generated one; `x-session-id` is read as the ext_proc picker reads
//!    it, and `x-shepherd-priority` and `x-llm-d-inference-fairness-id` (or
//!    `x-gateway-inference-fairness-id`) only when `gateway.trustedHeaders` names them (by
//!    default a client cannot raise its own priority or choose its flow).
//! 3. **Flow control** (when the config has a `flowControl` section): the request waits while
//!    the pool is saturated and leaves by priority and fairness; sheddable requests are shed
//!    (429), a full band refuses (429), a request that waits its whole TTL gets 503, each with
//!    `x-shepherd-dropped-reason`. A client that goes away leaves the queue.
//! 4. **Pick**: the scheduler's decision (503 with `Retry-After` when there is no endpoint).
//!    From here the gateway keeps only the decision's small
//!    [`RequestHandle`](shepherd_scheduler_core::completion::RequestHandle) and the body
//!    bytes; the parsed request (whose prompt can be megabytes) is dropped.
//! 5. **Forward** ([`upstream`]): to the primary, then the fallbacks while
//!    the exchange fails before any response byte (502 when all fail).
//! 6. **Answer**: the server's status and headers at once, the body frame by frame through a
//!    [`TrackedBody`], which finishes the handle when the body ends, fails, or the client
//!    goes away.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Response, header};
use axum::response::IntoResponse;
use shepherd_runtime::flow::{DropReason, FlowPermit};
use shepherd_runtime::telemetry::{RequestTrace, TRACEPARENT, TRACESTATE, names};
use shepherd_runtime::upstream::{FlowOutcome, RequestObservation, error_code};
use shepherd_scheduler_core::completion::Completion;
use shepherd_scheduler_core::disagg::{
    ENCODER_ENDPOINTS_HEADER, KV_CACHE_SOURCE_HEADER, PREFILL_ENDPOINT_HEADER,
};
use shepherd_scheduler_core::request::{ApiKind, ConfiguredHeaders};
use shepherd_scheduler_core::scheduler::ScheduleOptions;

use crate::headers::{
    self, FAIRNESS_ID, FAIRNESS_ID_LEGACY, OBJECTIVE, OBJECTIVE_LEGACY, PRIORITY, REQUEST_ID,
    SESSION,
};
use crate::models::ModelCheck;
use crate::stats::Rejection;
use crate::tracked::TrackedBody;
use crate::upstream::{self, Outgoing};
use crate::{ApiError, Gateway};

/// Proxies one request to `path` (of API `api`, for the counters). See the [module docs](self).
pub(crate) async fn proxy(
    gateway: &Gateway,
    api: ApiKind,
    path: &str,
    request: Request,
) -> Response<Body> {
    let inner = &gateway.inner;
    inner.stats.request(api);
    let mut observation = None;
    let mut trace = inner.tracing.start(
        headers::text(request.headers(), TRACEPARENT),
        headers::text(request.headers(), TRACESTATE),
    );
    trace.set_str(names::HTTP_METHOD, request.method().as_str());
    trace.set_str(names::URL_PATH, path);
    let span = trace.span_handle();
    match span
        .instrument(forward(
            gateway,
            path,
            request,
            &mut observation,
            &mut trace,
        ))
        .await
    {
        Ok(response) => response,
        Err(error) => {
            if let Some(observation) = &mut observation {
                observation.error(error_code::for_status(error.status().as_u16()));
            }
            trace.set_i64(names::HTTP_STATUS, i64::from(error.status().as_u16()));
            trace.set_error(
                error.dropped_reason().unwrap_or("gateway_error"),
                &error.status().to_string(),
            );
            if error.dropped_reason() == Some(crate::api_error::BODY_BUFFER_FULL) {
                inner.stats.rejected(Rejection::BodyBufferFull);
            } else if error.dropped_reason().is_some() {
                inner.stats.rejected(Rejection::FlowControl);
            } else if error.status() != axum::http::StatusCode::UNAUTHORIZED {
                inner
                    .stats
                    .rejected(Rejection::for_status(error.status().as_u16()));
            }
            error.into_response()
        }
    }
}

async fn forward(
    gateway: &Gateway,
    path: &str,
    request: Request,
    observation: &mut Option<RequestObservation>,
    trace: &mut RequestTrace,
) -> Result<Response<Body>, ApiError> {
    let inner = &gateway.inner;
    let settings = &inner.settings;
    let (parts, body) = request.into_parts();
    gateway.authorize(&parts.headers)?;
    // The body first: a place under the concurrency cap is taken only once it is here, so a
    // slow client holds no place it does not use (its connection and bytes are bounded by the
    // server's limits and the body budget).
    let read = gateway.read_body(body, &parts.headers).await?;
    let admitted = inner
        .limit
        .try_admit(&inner.stats)
        .ok_or_else(|| ApiError::rate_limited(inner.limit.max(), settings.retry_after_seconds))?;
    let mut body = read.bytes().clone();
    let scheduler = inner.scheduler.load();
    // The reporters of the config that reads the request evaluate its response.
    let reporters = std::sync::Arc::clone(scheduler.reporters());
    // And its plugins' response headers (the conformance verifier, a screener's selectors).
    let stamps = std::sync::Arc::clone(scheduler.response_headers());
    let parsed = scheduler.parsers().parse(path, &body, &inner.parse_limits);
    drop(scheduler);
    let mut request = parsed.map_err(|e| ApiError::bad_body(&e))?;
    // The pool's InferenceModelRewrite: the proxied body names the new model.
    let rewritten = inner
        .policies
        .as_ref()
        .and_then(|p| p.rewrite(&mut request, &body, &inner.parse_limits));
    if let Some(rewrite) = &rewritten {
        if let Some(upstream) = &inner.upstream {
            upstream.record_rewrite(&rewrite.rule, &rewrite.incoming, &rewrite.target);
        }
        if let Some(new_body) = &rewrite.body {
            body = axum::body::Bytes::copy_from_slice(new_body);
        }
    }
    let client_headers = &parts.headers;
    request.assign_id(headers::text(client_headers, REQUEST_ID));
    // A client sets its own priority and flow only where `gateway.trustedHeaders` says so.
    let trusted = |name: &'static str| {
        settings
            .trusts(name)
            .then(|| headers::text(client_headers, name))
            .flatten()
    };
    if let Some(priority) = trusted(PRIORITY).and_then(|p| p.parse().ok()) {
        request.priority = priority;
    } else if let Some(policies) = &inner.policies {
        let objective = trusted(OBJECTIVE).or_else(|| trusted(OBJECTIVE_LEGACY));
        request.priority = policies.objective_priority(objective);
    }
    request.fairness_id = trusted(FAIRNESS_ID)
        .or_else(|| trusted(FAIRNESS_ID_LEGACY))
        .map(str::to_owned);
    request.session_key = headers::text(client_headers, SESSION).map(str::to_owned);
    let configured = ConfiguredHeaders::of(&inner.scheduler.shared().resources).names();
    request.headers = headers::plugin_headers(client_headers, &configured);
    *observation = inner.upstream.as_ref().map(|upstream| {
        upstream.observe(
            rewritten.as_ref().map_or(&request.model, |r| &r.incoming),
            request.target_model(),
            request.fairness_id.as_deref(),
            request.priority,
            body.len(),
            request.stream,
        )
    });
    trace.set_str(names::MODEL, request.target_model());
    trace.set_str(names::REQUEST_ID, &request.id);
    if !request.model.is_empty()
        && inner.models.check(request.target_model()).await == ModelCheck::Unknown
    {
        return Err(ApiError::unknown_model(request.target_model()));
    }

    // Flow control: wait while the pool is saturated (dropped with this future if the client
    // goes away), or be refused.
    let mut permit = match &inner.flow {
        Some(flow) => {
            if let Some(observation) = observation.as_mut() {
                observation.flow_enter(body.len());
            }
            let wait = trace.flow_control(request.priority.into(), request.fairness_id.as_deref());
            let admitted = flow.admit(flow.request_of(&request)).await;
            match &admitted {
                Ok(_) => wait.set_str(names::FLOW_OUTCOME, "dispatched"),
                Err(reason) => {
                    wait.set_str(names::FLOW_OUTCOME, reason.as_str());
                    wait.set_error(reason.as_str(), "flow control dropped the request");
                }
            }
            wait.end();
            if let Some(observation) = observation.as_mut() {
                observation.flow_done(match &admitted {
                    Ok(_) => FlowOutcome::Dispatched,
                    Err(reason) => FlowOutcome::dropped(*reason),
                });
            }
            Some(admitted.map_err(|reason| {
                tracing::info!(
                    request_id = %request.id,
                    priority = request.priority,
                    reason = reason.as_str(),
                    "flow control dropped a request"
                );
                ApiError::flow_dropped(reason, settings.retry_after_seconds)
            })?)
        }
        None => None,
    };
    // A token-producer with the `vllm` backend: the model server renders the prompt first
    // (the pick reads the ids; a failed render leaves the request without them).
    let rendered =
        shepherd_runtime::render::prepare(&inner.scheduler.load_full(), &request, &body).await;
    let scheduling = tokio::time::Instant::now();
    let scoring = trace.scoring();
    let scheduled = match scoring.observer() {
        Some(observer) => {
            inner
                .scheduler
                .schedule_observed(&request, ScheduleOptions::default(), observer)
        }
        None => inner
            .scheduler
            .schedule_with(&request, ScheduleOptions::default()),
    };
    scoring.finish(scheduled.as_ref());
    drop(rendered);
    if let Some(observation) = observation.as_mut() {
        observation.scheduled(
            scheduling.elapsed(),
            scheduled.as_ref().ok().map(|d| d.primary().address()),
        );
    }
    let decision = scheduled.map_err(|e| ApiError::unscheduled(&e, settings.retry_after_seconds));
    // With `enableEviction`, the request's lease lives as long as its response.
    let mut lease = permit.as_mut().and_then(FlowPermit::take_lease);
    drop(permit);
    let decision = decision?;
    trace.set_str(names::ENDPOINT, decision.primary().address());
    drop(request);
    // A disaggregated request: the decode side's routing sidecar prefills there first.
    let prefill = decision
        .prefill()
        .and_then(|stage| HeaderValue::from_str(stage.endpoint().address()).ok());
    // Its media encoded on separate servers: the sidecar hands them the encoding.
    let encode = decision
        .encode()
        .and_then(|stage| HeaderValue::from_str(&stage.header_value()).ok());
    // A server holding more of the prompt's KV cache: the sidecar pulls the blocks from it.
    let kv_source = decision
        .kv_cache_source()
        .and_then(|source| HeaderValue::from_str(source).ok());
    let mut handle = decision.into_handle();
    let request_id = HeaderValue::from_str(handle.id())
        .unwrap_or_else(|_| HeaderValue::from_static("invalid-request-id"));

    // A client key the gateway checked is not forwarded; otherwise the client's own
    // `Authorization` goes on (unless the server has a key of its own).
    let client_authorization = if settings.client_keys.is_enabled() {
        None
    } else {
        parts.headers.get(header::AUTHORIZATION).cloned()
    };
    let outgoing = Outgoing {
        method: parts.method.clone(),
        path_and_query: parts
            .uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| axum::http::uri::PathAndQuery::from_static("/")),
        headers: {
            let mut headers = headers::upstream_request_headers(&parts.headers);
            if let Some(prefill) = prefill {
                headers.insert(PREFILL_ENDPOINT_HEADER, prefill);
            }
            if let Some(encode) = encode {
                headers.insert(ENCODER_ENDPOINTS_HEADER, encode);
            }
            if let Some(source) = kv_source {
                headers.insert(KV_CACHE_SOURCE_HEADER, source);
            }
            headers
        },
        client_authorization,
        request_id: request_id.clone(),
        body,
        settings,
    };
    let sent = upstream::send(&inner.client, &inner.stats, &mut handle, &outgoing, trace);
    let evicted = async {
        match lease.as_mut() {
            Some(lease) => lease.evicted().await,
            None => std::future::pending().await,
        }
    };
    let answer = tokio::select! {
        sent = sent => sent,
        () = evicted => {
            // Flow control ended this sheddable request for a higher band: 429, as upstream.
            tracing::info!(request_id = %handle.id(), "flow control evicted a request in flight");
            trace.set_error("evicted", "request evicted by flow control");
            handle.finish(Completion::cancelled());
            return Err(ApiError::flow_dropped(DropReason::Evicted, settings.retry_after_seconds));
        }
    };
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => {
            handle.finish(Completion::failed());
            return Err(error);
        }
    };
    drop(outgoing);
    // The server has answered: the body's bytes leave the budget.
    drop(read);

    let (mut head, upstream_body) = answer.into_parts();
    let status = head.status.as_u16();
    inner.stats.response(status);
    let mut observation = observation.take();
    if !(200..300).contains(&status)
        && let Some(observation) = observation.as_mut()
    {
        observation.error(&status.to_string());
    }
    trace.set_i64(names::HTTP_STATUS, i64::from(status));
    let mut response_headers = headers::client_response_headers(&head.headers);
    if !response_headers.contains_key(REQUEST_ID) {
        response_headers.insert(REQUEST_ID, request_id);
    }
    if !stamps.is_empty() {
        // The gateway forwarded the request itself: the endpoint it reached is the report.
        let served = handle.endpoint();
        let stamped = shepherd_scheduler_core::response_headers::stamp(
            &stamps,
            shepherd_scheduler_core::response_headers::ServedReport::Address(served.address()),
            |key| served.labels().get(key).cloned(),
        );
        for (name, value) in stamped {
            if let (Ok(name), Ok(value)) = (
                header::HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(&value),
            ) {
                response_headers.insert(name, value);
            }
        }
    }
    head.headers = response_headers;
    let body = TrackedBody::new(
        upstream_body,
        status,
        handle,
        std::sync::Arc::clone(&inner.stats),
        admitted,
        settings.usage_scan_bytes,
        std::mem::take(trace),
    )
    .observed(observation)
    .reporting(reporters)
    .evictable(lease);
    Ok(Response::from_parts(head, Body::new(body)))
}
