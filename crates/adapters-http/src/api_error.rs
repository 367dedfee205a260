//! Answers the gateway makes itself, in OpenAI's error shape.
//!
//! Every OpenAI client library turns a non-2xx answer into a typed exception by its status
//! (`BadRequestError` for 400, `AuthenticationError` for 401, `NotFoundError` for 404,
//! `RateLimitError` for 429, `InternalServerError` for 5xx) and shows the body's
//! `error.message`. So every answer the gateway makes on its own is
//! `{"error": {"message", "type", "param", "code"}}`, with `Retry-After` on 429 and 503:
//!
//! | status | when | `type` | `code` |
//! |---|---|---|---|
//! | 400 | the body is not a valid request for its route | `invalid_request_error` | `invalid_json`, `missing_field`, `invalid_field`, `empty_prompt`, `invalid_body` |
//! | 401 | client keys are configured and the request has none of them | `invalid_request_error` | `invalid_api_key` |
//! | 404 | unknown route, or a model no server lists | `invalid_request_error` | `not_found`, `model_not_found` |
//! | 405 | wrong method on a known route | `invalid_request_error` | `method_not_allowed` |
//! | 408 | the body did not arrive within `gateway.bodyReadTimeoutMs` | `invalid_request_error` | `request_timeout` |
//! | 413 | the body is over `gateway.maxBodyBytes` | `invalid_request_error` | `request_too_large` |
//! | 429 | `gateway.maxConcurrentRequests` requests are already in flight | `rate_limit_error` | `rate_limit_exceeded` |
//! | 429 | flow control shed a sheddable request, or its priority band is full (`x-shepherd-dropped-reason`) | `rate_limit_error` | `shed`, `queue_full` |
//! | 502 | every endpoint tried refused or dropped the connection before answering | `server_error` | `upstream_unreachable` |
//! | 503 | the scheduler has no endpoint (`Retry-After`) | `server_error` | the scheduler's reason: `no_endpoints`, `no_healthy_endpoint`, `no_candidates`, ... |
//! | 503 | the bodies held fill `gateway.maxBufferedBodyBytes` (`x-shepherd-dropped-reason: body_buffer_full`) | `server_error` | `body_buffer_full` |
//! | 503 | flow control: the request waited its whole time-to-live, or the gateway is shutting down (`x-shepherd-dropped-reason`) | `server_error` | `ttl_expired`, `shutting_down` |
//! | 504 | no response byte within `gateway.firstByteTimeoutMs` | `server_error` | `upstream_timeout` |
//!
//! Answers from model servers (their own 4xx and 5xx included) are passed through as they
//! are. What the client sent is quoted at most [`MAX_ECHO_BYTES`] at a time, and no message
//! is longer than [`MAX_MESSAGE_BYTES`].
//!
//! ```
//! use axum::response::IntoResponse;
//! use shepherd_adapters_http::ApiError;
//!
//! let error = ApiError::rate_limited(64, 1);
//! assert_eq!(error.status().as_u16(), 429);
//! assert_eq!(error.to_json()["error"]["code"], "rate_limit_exceeded");
//! let response = error.into_response();
//! assert_eq!(response.headers()["retry-after"], "1");
//! ```

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use shepherd_scheduler_core::flow::DropReason;
use shepherd_scheduler_core::request::ParseError;
use shepherd_scheduler_core::scheduler::ScheduleError;

/// `type` of errors caused by the request.
const INVALID_REQUEST: &str = "invalid_request_error";
/// `type` of errors on the gateway's or the servers' side.
const SERVER_ERROR: &str = "server_error";
/// `x-shepherd-dropped-reason` and `error.code` of a body refused because the bodies held fill
/// `gateway.maxBufferedBodyBytes`.
pub const BODY_BUFFER_FULL: &str = "body_buffer_full";
pub use shepherd_scheduler_core::echo::{MAX_ECHO_BYTES, MAX_MESSAGE_BYTES, truncated};

/// An answer the gateway makes itself. See the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    status: StatusCode,
    message: String,
    kind: &'static str,
    param: Option<String>,
    code: &'static str,
    retry_after: Option<u64>,
    dropped_reason: Option<&'static str>,
}

impl ApiError {
    /// An error answer with `status`, OpenAI `type` `kind`, `code` and `message`.
    pub fn new(
        status: StatusCode,
        kind: &'static str,
        code: &'static str,
        message: impl Into<String>,
    ) -> Self {
        let message = message.into();
        let message = match truncated(&message, MAX_MESSAGE_BYTES) {
            std::borrow::Cow::Borrowed(_) => message,
            std::borrow::Cow::Owned(cut) => cut,
        };
        ApiError {
            status,
            message,
            kind,
            param: None,
            code,
            retry_after: None,
            dropped_reason: None,
        }
    }

    /// Names the request field at fault (at most [`MAX_ECHO_BYTES`] of it).
    pub fn with_param(mut self, param: impl Into<String>) -> Self {
        let param = param.into();
        self.param = Some(truncated(&param, MAX_ECHO_BYTES).into_owned());
        self
    }

    /// Adds `Retry-After: seconds`.
    pub fn with_retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    /// 400 (or 404 / 413, as the parser says) for a body the core's parser refused.
    pub fn bad_body(error: &ParseError) -> Self {
        let status = StatusCode::from_u16(error.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
        let (code, param) = match error {
            ParseError::InvalidJson(_) | ParseError::InvalidUtf8 { .. } => ("invalid_json", None),
            ParseError::NotAnObject => ("invalid_json", None),
            ParseError::MissingField(field) => ("missing_field", Some((*field).to_owned())),
            ParseError::InvalidField { field, .. } => (
                "invalid_field",
                Some(truncated(field, MAX_ECHO_BYTES).into_owned()),
            ),
            ParseError::EmptyPrompt => ("empty_prompt", None),
            ParseError::BodyTooLarge { .. } => ("request_too_large", None),
            ParseError::UnsupportedPath(_) => ("not_found", None),
            _ => ("invalid_body", None),
        };
        let mut error = ApiError::new(status, INVALID_REQUEST, code, error.to_string());
        error.param = param;
        error
    }

    /// 401: the request carries none of the configured client keys.
    pub fn unauthorized() -> Self {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            INVALID_REQUEST,
            "invalid_api_key",
            "Incorrect or missing API key: send `Authorization: Bearer <key>` with a key this \
             gateway accepts.",
        )
    }

    /// 404: no server lists `model`.
    pub fn unknown_model(model: &str) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            INVALID_REQUEST,
            "model_not_found",
            format!(
                "The model `{}` does not exist: no server behind this gateway lists it.",
                truncated(model, MAX_ECHO_BYTES)
            ),
        )
        .with_param("model")
    }

    /// 404: no such route.
    pub fn not_found(path: &str) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            INVALID_REQUEST,
            "not_found",
            format!("Unknown route `{}`.", truncated(path, MAX_ECHO_BYTES)),
        )
    }

    /// 405: the route exists, but not for this method.
    pub fn method_not_allowed() -> Self {
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            INVALID_REQUEST,
            "method_not_allowed",
            "This route does not accept this method.",
        )
    }

    /// 413: the body is over `limit` bytes (`size` when the client declared it).
    pub fn body_too_large(size: Option<usize>, limit: usize) -> Self {
        let message = match size {
            Some(size) => {
                format!("The request body of {size} bytes exceeds the limit of {limit} bytes.")
            }
            None => format!("The request body exceeds the limit of {limit} bytes."),
        };
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            INVALID_REQUEST,
            "request_too_large",
            message,
        )
    }

    /// 400: the request body could not be read (the client broke it off).
    pub fn unreadable_body(reason: impl std::fmt::Display) -> Self {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            "invalid_body",
            format!("The request body could not be read: {reason}"),
        )
    }

    /// 408: the body did not arrive within `gateway.bodyReadTimeoutMs`.
    pub fn body_timeout(waited_ms: u64) -> Self {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            INVALID_REQUEST,
            "request_timeout",
            format!("The request body did not arrive within {waited_ms} ms."),
        )
    }

    /// 503: the bodies being held already fill `gateway.maxBufferedBodyBytes`
    /// (`x-shepherd-dropped-reason: body_buffer_full`).
    pub fn body_buffer_full(retry_after: u64) -> Self {
        let mut error = ApiError::unavailable(
            BODY_BUFFER_FULL,
            "The gateway holds as many request bodies as it may; retry later.",
            retry_after,
        );
        error.dropped_reason = Some(BODY_BUFFER_FULL);
        error
    }

    /// 429: `limit` requests are already in flight.
    pub fn rate_limited(limit: usize, retry_after: u64) -> Self {
        ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            "rate_limit_exceeded",
            format!(
                "The gateway is serving its limit of {limit} concurrent requests; retry later."
            ),
        )
        .with_retry_after(retry_after)
    }

    /// Flow control dropped the request: 429 (`shed`, `queue_full`, `evicted`) or 503
    /// (`ttl_expired`, `shutting_down`), with `Retry-After` and `x-shepherd-dropped-reason`.
    pub fn flow_dropped(reason: DropReason, retry_after: u64) -> Self {
        let (status, kind, message) = match reason {
            DropReason::Shed => (
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "The model servers are saturated and this request is sheddable (negative priority); retry later.",
            ),
            DropReason::QueueFull => (
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "The model servers are saturated and this request's priority band is full; retry later.",
            ),
            DropReason::TtlExpired => (
                StatusCode::SERVICE_UNAVAILABLE,
                SERVER_ERROR,
                "The request waited its whole time-to-live for a model server with room; retry later.",
            ),
            DropReason::ShuttingDown => (
                StatusCode::SERVICE_UNAVAILABLE,
                SERVER_ERROR,
                "The gateway is shutting down; retry on another replica.",
            ),
            DropReason::Evicted => (
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "request evicted by flow control: this sheddable request (negative priority) was ended to make room for higher-priority requests; retry later.",
            ),
        };
        let mut error =
            ApiError::new(status, kind, reason.as_str(), message).with_retry_after(retry_after);
        error.dropped_reason = Some(reason.as_str());
        error
    }

    /// The scheduler found no endpoint: 503 with `Retry-After` (500 for a policy fault); an
    /// admitter refused the request (no endpoint predicted to meet its objectives): 429
    /// `rate_limit_error` with `Retry-After`.
    pub fn unscheduled(error: &ScheduleError, retry_after: u64) -> Self {
        let status =
            StatusCode::from_u16(error.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let kind = if status == StatusCode::TOO_MANY_REQUESTS {
            "rate_limit_error"
        } else {
            SERVER_ERROR
        };
        let answer = ApiError::new(status, kind, error.reason(), error.to_string());
        if status == StatusCode::SERVICE_UNAVAILABLE || status == StatusCode::TOO_MANY_REQUESTS {
            answer.with_retry_after(retry_after)
        } else {
            answer
        }
    }

    /// 502: every endpoint tried (`tried` of them) failed before answering.
    pub fn upstream_unreachable(tried: usize) -> Self {
        ApiError::new(
            StatusCode::BAD_GATEWAY,
            SERVER_ERROR,
            "upstream_unreachable",
            format!(
                "No model server could be reached: {tried} tried, each refused or dropped the \
                 connection before answering."
            ),
        )
    }

    /// 504: the server sent nothing within the first-byte timeout.
    pub fn upstream_timeout(waited_ms: u64) -> Self {
        ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            SERVER_ERROR,
            "upstream_timeout",
            format!("The model server sent no response within {waited_ms} ms."),
        )
    }

    /// 500: something the gateway should not have met.
    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            SERVER_ERROR,
            "internal_error",
            message,
        )
    }

    /// 503 without a scheduler reason (no server answered `/v1/models`).
    pub fn unavailable(code: &'static str, message: impl Into<String>, retry_after: u64) -> Self {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, SERVER_ERROR, code, message)
            .with_retry_after(retry_after)
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// Why flow control dropped the request (`x-shepherd-dropped-reason`), if it did.
    pub fn dropped_reason(&self) -> Option<&'static str> {
        self.dropped_reason
    }

    /// The `error.code`.
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// The `error.message`.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The `Retry-After` seconds, when sent.
    pub fn retry_after(&self) -> Option<u64> {
        self.retry_after
    }

    /// The body: `{"error": {"message", "type", "param", "code"}}`.
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        })
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.code,
            self.message
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.to_json())).into_response();
        let headers = response.headers_mut();
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if let Some(reason) = self.dropped_reason {
            headers.insert(
                crate::headers::DROPPED_REASON,
                HeaderValue::from_static(reason),
            );
        }
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_errors_name_their_field() {
        let error = ApiError::bad_body(&ParseError::MissingField("messages"));
        assert_eq!(error.status(), StatusCode::BAD_REQUEST);
        assert_eq!(error.to_json()["error"]["param"], "messages");
        assert_eq!(error.code(), "missing_field");
        let error = ApiError::bad_body(&ParseError::BodyTooLarge { size: 9, limit: 8 });
        assert_eq!(error.status(), StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[test]
    fn client_text_is_echoed_bounded() {
        let model = "m".repeat(15 << 20);
        let error = ApiError::unknown_model(&model);
        assert!(error.message().len() <= MAX_MESSAGE_BYTES);
        assert!(error.message().contains('…'));
        let path = format!("/{}", "é".repeat(1000));
        let error = ApiError::not_found(&path);
        assert!(
            error.message().len() < MAX_ECHO_BYTES + 64,
            "{}",
            error.message()
        );
    }

    #[test]
    fn no_endpoint_is_503_with_retry_after() {
        let error = ApiError::unscheduled(&ScheduleError::NoEndpoints, 2);
        assert_eq!(error.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            (error.code(), error.retry_after()),
            ("no_endpoints", Some(2))
        );
        let fault = ApiError::unscheduled(&ScheduleError::UnknownProfile("x".into()), 2);
        assert_eq!(fault.retry_after(), None);
    }

    #[test]
    fn an_admitters_refusal_is_a_429_rate_limit_error_with_retry_after() {
        let refused = ScheduleError::Rejected {
            plugin: "latency-slo-admitter".into(),
            reason: "no endpoint is predicted to meet the request's latency objectives".into(),
        };
        let error = ApiError::unscheduled(&refused, 3);
        assert_eq!(error.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!((error.code(), error.retry_after()), ("rejected", Some(3)));
        assert_eq!(error.to_json()["error"]["type"], "rate_limit_error");
    }
}
