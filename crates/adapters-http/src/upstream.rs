//! Talking to the model servers: one pooled HTTP/1.1 client, and sending a request down the
//! decision's endpoints until one answers.
//!
//! The scheduler's [`Decision`](shepherd_scheduler_core::decision::Decision) names a primary
//! endpoint and ordered fallbacks. The request goes to the primary; if the exchange fails
//! *before any response byte* — connection refused, connect timeout, connection reset or
//! closed while waiting for the status line — nothing reached the client yet, so the
//! request moves to the next fallback
//! ([`RequestHandle::move_to_fallback`], which moves its in-flight count too) and is sent
//! again with the same body. There are as many attempts as the decision has endpoints
//! (`scheduler.maxEndpoints`, 3 by default); when all failed the client gets 502.
//!
//! Once the status line has arrived, the response is the client's: a 5xx from the server is
//! passed through, and a stream that breaks off later breaks off for the client too.
//! A first-byte timeout (when configured) answers 504 without trying a fallback: a server
//! that accepted the request and went quiet may still be working on it.

use std::sync::Arc;
use std::time::Duration;

use axum::http::uri::{PathAndQuery, Scheme};
use axum::http::{HeaderMap, HeaderValue, Method, Request, Response, Uri, header};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use shepherd_runtime::telemetry::{Propagation, RequestTrace, TRACEPARENT, TRACESTATE, names};
use shepherd_runtime::throttle::Throttle;
use shepherd_scheduler_core::completion::RequestHandle;
use shepherd_scheduler_core::endpoint::Endpoint;

use crate::headers::REQUEST_ID;
use crate::{ApiError, GatewaySettings, GatewayStats};

/// The client every request to a model server goes through.
pub(crate) type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// How long an idle pooled connection to a model server is kept.
const POOL_IDLE: Duration = Duration::from_secs(90);

/// A pooled HTTP/1.1 client: `TCP_NODELAY`, the configured connect timeout.
pub(crate) fn client(settings: &GatewaySettings) -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(settings.connect_timeout));
    connector.enforce_http(true);
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(POOL_IDLE)
        .pool_timer(TokioTimer::new())
        .build(connector)
}

/// `http://{address}{path_and_query}`.
pub(crate) fn endpoint_uri(address: &str, path_and_query: &PathAndQuery) -> Option<Uri> {
    Uri::builder()
        .scheme(Scheme::HTTP)
        .authority(address)
        .path_and_query(path_and_query.clone())
        .build()
        .ok()
}

/// What one proxied request sends to whichever endpoint serves it.
pub(crate) struct Outgoing<'a> {
    pub(crate) method: Method,
    pub(crate) path_and_query: PathAndQuery,
    /// The client's headers, already filtered ([`upstream_request_headers`](crate::headers::upstream_request_headers)).
    pub(crate) headers: HeaderMap,
    /// The client's `Authorization`, when it is to be forwarded.
    pub(crate) client_authorization: Option<HeaderValue>,
    pub(crate) request_id: HeaderValue,
    pub(crate) body: Bytes,
    pub(crate) settings: &'a GatewaySettings,
}

impl Outgoing<'_> {
    /// The request to `endpoint`, carrying `trace`'s context when the request is traced.
    fn to(
        &self,
        endpoint: &Endpoint,
        trace: Option<Propagation>,
    ) -> Result<Request<Full<Bytes>>, ApiError> {
        let uri = endpoint_uri(endpoint.address(), &self.path_and_query).ok_or_else(|| {
            ApiError::internal(format!(
                "endpoint address `{}` is not a valid authority",
                endpoint.address()
            ))
        })?;
        let mut request = Request::new(Full::new(self.body.clone()));
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = uri;
        let headers = request.headers_mut();
        headers.reserve(self.headers.len() + 3);
        for (name, value) in &self.headers {
            headers.append(name.clone(), value.clone());
        }
        headers.insert(REQUEST_ID, self.request_id.clone());
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(self.body.len()));
        let key = self
            .settings
            .upstream_keys
            .for_endpoint(endpoint.address())
            .or(self.client_authorization.as_ref());
        if let Some(key) = key {
            headers.insert(header::AUTHORIZATION, key.clone());
        }
        if let Some(trace) = trace
            && let Ok(parent) = HeaderValue::from_str(&trace.traceparent)
        {
            headers.insert(TRACEPARENT, parent);
            headers.remove(TRACESTATE);
            if let Some(state) = trace
                .tracestate
                .and_then(|s| HeaderValue::from_str(&s).ok())
            {
                headers.insert(TRACESTATE, state);
            }
        }
        Ok(request)
    }
}

/// Sends `outgoing` to the handle's endpoint, then down its fallbacks, until one answers
/// with a status line. See the [module docs](self).
pub(crate) async fn send(
    client: &HttpClient,
    stats: &Arc<GatewayStats>,
    handle: &mut RequestHandle,
    outgoing: &Outgoing<'_>,
    trace: &RequestTrace,
) -> Result<Response<Incoming>, ApiError> {
    let attempts = handle.endpoints().len().max(1);
    for attempt in 1..=attempts {
        let endpoint = Arc::clone(handle.endpoint());
        let span = trace.upstream(
            endpoint.address(),
            u32::try_from(attempt).unwrap_or(u32::MAX),
        );
        let request = outgoing.to(&endpoint, span.propagation())?;
        let sent = client.request(request);
        let result = match outgoing.settings.first_byte_timeout {
            Some(limit) => match tokio::time::timeout(limit, sent).await {
                Ok(result) => result,
                Err(_) => {
                    span.set_error("first_byte_timeout", "no response within the timeout");
                    tracing::warn!(
                        endpoint = endpoint.address(),
                        request_id = handle.id(),
                        "no response within the first-byte timeout"
                    );
                    return Err(ApiError::upstream_timeout(
                        u64::try_from(limit.as_millis()).unwrap_or(u64::MAX),
                    ));
                }
            },
            None => sent.await,
        };
        match result {
            Ok(response) => {
                span.set_i64(names::HTTP_STATUS, i64::from(response.status().as_u16()));
                return Ok(response);
            }
            Err(error) => {
                span.set_error("connection_failed", &ErrorChain(&error).to_string());
                stats.upstream_error_before_response();
                let retrying = attempt < attempts && handle.move_to_fallback().is_some();
                // A dead server fails every request sent to it: one line a period, with how
                // many were held back (each is counted in the upstream-error metric).
                if let Some(held_back) = FAILED_LOG.allow() {
                    tracing::warn!(
                        endpoint = endpoint.address(),
                        request_id = handle.id(),
                        error = %ErrorChain(&error),
                        retrying,
                        held_back,
                        "model server failed before answering (logged at most once every 10 s)"
                    );
                }
                if !retrying {
                    return Err(ApiError::upstream_unreachable(attempt));
                }
            }
        }
    }
    Err(ApiError::upstream_unreachable(attempts))
}

/// The log of exchanges that failed before a response: once per [`LOG_EVERY`](shepherd_runtime::throttle::LOG_EVERY).
static FAILED_LOG: std::sync::LazyLock<Throttle> = std::sync::LazyLock::new(Throttle::default);

/// An error and its sources, `: `-separated (hyper's client errors say little by themselves).
struct ErrorChain<'a>(&'a (dyn std::error::Error + 'static));

impl std::fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(error) = source {
            write!(f, ": {error}")?;
            source = error.source();
        }
        Ok(())
    }
}
