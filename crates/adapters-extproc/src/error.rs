//! What can go wrong, in three kinds that end differently:
//!
//! - a [`Rejection`]: this *request* cannot be routed (bad body, unknown model, too large, shed,
//!   no endpoint, the body buffers full). The picker answers it with an `ImmediateResponse` carrying the HTTP status,
//!   the `x-shepherd-dropped-reason` header and a small JSON body (see [`crate::reject`]);
//! - a [`ProtocolError`]: the *stream* cannot go on (messages out of order, a body mode the
//!   picker cannot work with). The stream ends with a gRPC error status, so Envoy fails the
//!   request instead of forwarding it without a destination;
//! - a [`ServeError`]: the server itself could not run.
//!
//! ```
//! use shepherd_adapters_extproc::Rejection;
//!
//! let r = Rejection::UnknownModel("gpt-9".into());
//! assert_eq!((r.http_status(), r.reason()), (404, "unknown_model"));
//! ```

use shepherd_scheduler_core::flow::DropReason;
use shepherd_scheduler_core::request::ParseError;
use shepherd_scheduler_core::scheduler::ScheduleError;
use thiserror::Error;

use crate::budget::BudgetExhausted;

/// Why a request was not routed; answered with an `ImmediateResponse`. See the
/// [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Rejection {
    /// The body could not be parsed (400), or names no inference API (404), or is too large
    /// for the parser (413).
    #[error("bad request: {0}")]
    BadBody(#[source] ParseError),
    /// The body is larger than the configured limit (413), found out before it all arrived.
    #[error("request body of at least {size} bytes exceeds the limit of {limit} bytes")]
    BodyTooLarge {
        /// Bytes seen (or announced by `content-length`).
        size: usize,
        /// The configured limit.
        limit: usize,
    },
    /// The picker's buffers for request bodies are full: this body would have taken the bytes
    /// held across every stream over the cap (503; see [`crate::budget`]).
    #[error("the endpoint picker's request-body buffers are full ({limit} bytes): try again")]
    BodyBufferFull {
        /// The cap on buffered request-body bytes.
        limit: usize,
    },
    /// The body did not arrive whole within the body-read timeout (408).
    #[error("the request body did not arrive within {waited_ms} ms")]
    BodyTimeout {
        /// The timeout, in milliseconds.
        waited_ms: u64,
    },
    /// The model is not one of the configured models (404).
    #[error("unknown model `{0}`")]
    UnknownModel(String),
    /// Admission control shed the request (429).
    #[error("request shed: {0}")]
    Shed(String),
    /// Admission control gave up waiting for capacity (503).
    #[error("no capacity: {0}")]
    Unavailable(String),
    /// Flow control dropped the request: shed or queue full (429), time-to-live expired or
    /// shutting down (503); the reason header says which.
    #[error("flow control: {0}")]
    Dropped(DropReason),
    /// The gateway's subset hint is present but empty (503).
    #[error("the endpoint subset hint is empty")]
    EmptySubset,
    /// The scheduler could not pick (503, or 500 for a broken configuration).
    #[error("no endpoint picked: {0}")]
    Schedule(#[from] ScheduleError),
    /// Something inside the picker failed (500).
    #[error("internal error: {0}")]
    Internal(String),
}

impl Rejection {
    /// The HTTP status answered.
    pub fn http_status(&self) -> u16 {
        match self {
            Rejection::BadBody(e) => e.http_status(),
            Rejection::BodyTooLarge { .. } => 413,
            Rejection::BodyTimeout { .. } => 408,
            Rejection::UnknownModel(_) => 404,
            Rejection::Shed(_) => 429,
            Rejection::Dropped(reason) => reason.http_status(),
            Rejection::Unavailable(_)
            | Rejection::EmptySubset
            | Rejection::BodyBufferFull { .. } => 503,
            Rejection::Schedule(e) => e.http_status(),
            Rejection::Internal(_) => 500,
        }
    }

    /// A short machine-readable reason, sent in `x-shepherd-dropped-reason`.
    pub fn reason(&self) -> &'static str {
        match self {
            Rejection::BadBody(e) => parse_reason(e),
            Rejection::BodyTooLarge { .. } => "body_too_large",
            Rejection::BodyBufferFull { .. } => "body_buffer_full",
            Rejection::BodyTimeout { .. } => "body_timeout",
            Rejection::UnknownModel(_) => "unknown_model",
            Rejection::Shed(_) => "shed",
            Rejection::Dropped(reason) => reason.as_str(),
            Rejection::Unavailable(_) => "unavailable",
            Rejection::EmptySubset => "empty_subset",
            Rejection::Schedule(e) => e.reason(),
            Rejection::Internal(_) => "internal",
        }
    }
}

fn parse_reason(error: &ParseError) -> &'static str {
    match error {
        ParseError::BodyTooLarge { .. } => "body_too_large",
        ParseError::UnsupportedPath(_) => "unsupported_path",
        ParseError::InvalidUtf8 { .. } => "invalid_utf8",
        ParseError::InvalidJson(_) => "invalid_json",
        ParseError::NotAnObject => "not_an_object",
        ParseError::MissingField(_) => "missing_field",
        ParseError::InvalidField { .. } => "invalid_field",
        ParseError::EmptyPrompt => "empty_prompt",
        _ => "bad_request",
    }
}

impl From<BudgetExhausted> for Rejection {
    fn from(error: BudgetExhausted) -> Self {
        Rejection::BodyBufferFull { limit: error.limit }
    }
}

/// Why a stream cannot go on; it ends with a gRPC error status. See the
/// [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// Envoy sends the request body in a mode the picker cannot route from (`NONE` with a
    /// body, `STREAMED`, `GRPC`): the processing mode must be `FULL_DUPLEX_STREAMED` or
    /// `BUFFERED`.
    #[error("request body mode {0} is not supported: use FULL_DUPLEX_STREAMED or BUFFERED")]
    UnsupportedBodyMode(String),
    /// A message arrived that the protocol does not allow at this point.
    #[error("unexpected {message} while {state}")]
    Unexpected {
        /// The message that arrived.
        message: &'static str,
        /// What the stream was waiting for.
        state: &'static str,
    },
    /// A message carried no request.
    #[error("a processing request carried no message")]
    Empty,
}

impl ProtocolError {
    /// The gRPC status that ends the stream.
    pub fn to_status(&self) -> tonic::Status {
        match self {
            ProtocolError::UnsupportedBodyMode(_) => {
                tonic::Status::failed_precondition(self.to_string())
            }
            ProtocolError::Unexpected { .. } | ProtocolError::Empty => {
                tonic::Status::invalid_argument(self.to_string())
            }
        }
    }
}

/// Why a server could not run.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The gRPC transport failed.
    #[error("gRPC server failed: {0}")]
    Transport(#[from] tonic::transport::Error),
    /// A listener could not be read.
    #[error("listener: {0}")]
    Io(#[from] std::io::Error),
}
