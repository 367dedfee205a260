//! What an [`ExtProcService`](crate::ExtProcService) can be told: body limits (per request, and
//! across every stream), the chunk size of the body it streams back, and the names of every
//! header and metadata key of the protocol.
//!
//! The defaults are the Gateway API Inference Extension's endpoint-picker protocol as Envoy
//! speaks it, so most embedders only change [`ExtProcOptions::max_body_bytes`]:
//!
//! ```
//! use shepherd_adapters_extproc::ExtProcOptions;
//!
//! let options = ExtProcOptions::default().with_max_body_bytes(8 << 20);
//! assert_eq!(options.chunk_size, 62_000);
//! assert_eq!(options.headers.destination, "x-gateway-destination-endpoint");
//! assert_eq!(options.metadata.namespace, "envoy.lb");
//! ```

use std::collections::HashSet;
use std::sync::Arc;

use shepherd_scheduler_core::request::ParseLimits;
use thiserror::Error;

use crate::budget::BodyBudget;

/// Largest body chunk sent back to Envoy: Envoy caps a streamed chunk at 64 KiB, and this
/// leaves a margin (the llm-d router uses the same figure).
pub const DEFAULT_CHUNK_SIZE: usize = 62_000;

/// Default largest request body (16 MiB, the core parser's default).
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// Default cap on request-body bytes buffered across every stream (256 MiB).
///
/// Why this figure: it holds 14 bodies of the default 16 MiB limit at once (large bodies get
/// seven eighths of the cap, see [`crate::budget`]), or thousands of ordinary prompts (a few
/// to a few hundred KiB each), which is far more than a picker has in hand at any moment —
/// Envoy streams a body in and the pick takes microseconds, so bodies are held for
/// milliseconds unless flow control queues them. And it keeps the body buffers of a picker
/// attacked by clients that park partial bodies well inside a 1–2 GiB container, instead of
/// growing with the number of streams.
pub const DEFAULT_MAX_BUFFERED_BYTES: usize = 256 * 1024 * 1024;

/// Default cap on the connections open at once on the ext_proc port (Envoy opens a few per
/// worker thread).
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// Default time a request's body may take to arrive whole, from its headers (30 s): Envoy
/// streams a body as its client sends it, so a client that stalls would otherwise hold the
/// stream and its buffered bytes for as long as it likes.
pub const DEFAULT_BODY_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Default bytes of a response body's end kept to find its `usage`.
pub const DEFAULT_USAGE_SCAN_BYTES: usize = 16 * 1024;

/// How Envoy sends a request or response body to the processor
/// (`envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BodyMode {
    /// `NONE`: the body is not sent.
    None,
    /// `STREAMED`: chunk by chunk, each answered before the next.
    Streamed,
    /// `BUFFERED`: the whole body in one message, after the headers were answered.
    Buffered,
    /// `BUFFERED_PARTIAL`: like `BUFFERED`, but cut at Envoy's buffer limit.
    BufferedPartial,
    /// `FULL_DUPLEX_STREAMED`: chunks as they arrive, without waiting for answers; the
    /// processor streams the body back in chunks of its own.
    FullDuplexStreamed,
    /// A mode this crate does not know (`GRPC`, or a newer one), by its protocol number.
    Other(i32),
}

impl BodyMode {
    /// The mode for a protocol enum value.
    pub fn from_proto(value: i32) -> Self {
        match value {
            0 => BodyMode::None,
            1 => BodyMode::Streamed,
            2 => BodyMode::Buffered,
            3 => BodyMode::BufferedPartial,
            4 => BodyMode::FullDuplexStreamed,
            other => BodyMode::Other(other),
        }
    }

    /// Whether the whole body arrives in one message after the headers were answered.
    pub fn is_buffered(self) -> bool {
        matches!(self, BodyMode::Buffered | BodyMode::BufferedPartial)
    }
}

/// Header names the picker reads and writes (all lower-case, as Envoy sends them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderNames {
    /// Where the picked endpoints go: `x-gateway-destination-endpoint`.
    pub destination: String,
    /// The endpoint that served the response, when a gateway reports it as a response header:
    /// `x-gateway-destination-endpoint-served`.
    pub served: String,
    /// The reason of a rejection, on every ImmediateResponse: `x-shepherd-dropped-reason`.
    pub dropped_reason: String,
    /// The caller's request id: `x-request-id`.
    pub request_id: String,
    /// The fairness id (flow) of a request: `x-llm-d-inference-fairness-id`.
    pub fairness_id: String,
    /// Its older name, read when the first is absent: `x-gateway-inference-fairness-id`.
    pub fairness_id_legacy: String,
    /// The request's priority, an integer (negative = sheddable): `x-shepherd-priority`.
    pub priority: String,
    /// The session key for session affinity: `x-session-id`.
    pub session: String,
    /// Routing headers the picker owns: removed from every request it routes when a client
    /// sent them (the destination header itself is always overwritten).
    pub owned: Vec<String>,
}

impl Default for HeaderNames {
    fn default() -> Self {
        HeaderNames {
            destination: "x-gateway-destination-endpoint".into(),
            served: "x-gateway-destination-endpoint-served".into(),
            dropped_reason: "x-shepherd-dropped-reason".into(),
            request_id: "x-request-id".into(),
            fairness_id: "x-llm-d-inference-fairness-id".into(),
            fairness_id_legacy: "x-gateway-inference-fairness-id".into(),
            priority: "x-shepherd-priority".into(),
            session: "x-session-id".into(),
            owned: vec![
                "x-gateway-destination-endpoint-served".into(),
                "x-gateway-destination-endpoint-subset".into(),
                "x-shepherd-dropped-reason".into(),
                // Set by the picker itself for a disaggregated request, never by a client.
                shepherd_scheduler_core::disagg::PREFILL_ENDPOINT_HEADER.into(),
                shepherd_scheduler_core::disagg::ENCODER_ENDPOINTS_HEADER.into(),
                shepherd_scheduler_core::disagg::KV_CACHE_SOURCE_HEADER.into(),
            ],
        }
    }
}

/// Dynamic-metadata namespaces and keys of the protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataKeys {
    /// Namespace of the picked endpoints (and of the served-endpoint report): `envoy.lb`.
    pub namespace: String,
    /// Key of the picked endpoints: `x-gateway-destination-endpoint`.
    pub destination: String,
    /// Key of the served-endpoint report: `x-gateway-destination-endpoint-served`.
    pub served: String,
    /// Namespaces searched, in order, for the subset hint: the protocol's
    /// `envoy.lb.subset_hint`, then `envoy.lb`.
    pub subset_namespaces: Vec<String>,
    /// Key of the subset hint: `x-gateway-destination-endpoint-subset`.
    pub subset: String,
}

impl Default for MetadataKeys {
    fn default() -> Self {
        MetadataKeys {
            namespace: "envoy.lb".into(),
            destination: "x-gateway-destination-endpoint".into(),
            served: "x-gateway-destination-endpoint-served".into(),
            subset_namespaces: vec!["envoy.lb.subset_hint".into(), "envoy.lb".into()],
            subset: "x-gateway-destination-endpoint-subset".into(),
        }
    }
}

/// Everything an [`ExtProcService`](crate::ExtProcService) is configured with. See the
/// [module docs](self).
#[derive(Debug, Clone)]
pub struct ExtProcOptions {
    /// Largest request body accepted; a larger one is answered 413 as soon as it is known to be
    /// larger (from `content-length`, or while it streams in). Default 16 MiB.
    pub max_body_bytes: usize,
    /// Cap on request-body bytes buffered across every stream of a service; a body that would
    /// take the total over it is answered 503 `body_buffer_full` (see [`crate::budget`]).
    /// Default [`DEFAULT_MAX_BUFFERED_BYTES`] (256 MiB).
    pub max_buffered_bytes: usize,
    /// Time a request's body may take to arrive whole, from its headers; a body still
    /// arriving then is answered 408 `body_timeout`. Default [`DEFAULT_BODY_READ_TIMEOUT`].
    pub body_read_timeout: std::time::Duration,
    /// Connections open at once on the ext_proc port; more are closed as they arrive (see
    /// [`crate::connections`]). Default [`DEFAULT_MAX_CONNECTIONS`].
    pub max_connections: usize,
    /// Largest body chunk streamed back to Envoy. Default [`DEFAULT_CHUNK_SIZE`] (62,000).
    pub chunk_size: usize,
    /// Bytes at the end of a response body kept to find its `usage`. Default 16 KiB.
    pub usage_scan_bytes: usize,
    /// The body mode assumed when Envoy does not say (older Envoys send no
    /// `protocol_config`). Default [`BodyMode::FullDuplexStreamed`].
    pub default_request_body_mode: BodyMode,
    /// The response body mode assumed when Envoy does not say. Default
    /// [`BodyMode::FullDuplexStreamed`].
    pub default_response_body_mode: BodyMode,
    /// The models (or LoRA adapters) served; a request for another is answered 404. `None`
    /// (the default) accepts every model.
    pub known_models: Option<Arc<HashSet<String>>>,
    /// Parser options (LoRA adapters); its body limit is replaced by `max_body_bytes`.
    pub parse_limits: ParseLimits,
    /// Header names.
    pub headers: HeaderNames,
    /// Metadata namespaces and keys.
    pub metadata: MetadataKeys,
}

impl Default for ExtProcOptions {
    fn default() -> Self {
        ExtProcOptions {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_buffered_bytes: DEFAULT_MAX_BUFFERED_BYTES,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            chunk_size: DEFAULT_CHUNK_SIZE,
            usage_scan_bytes: DEFAULT_USAGE_SCAN_BYTES,
            default_request_body_mode: BodyMode::FullDuplexStreamed,
            default_response_body_mode: BodyMode::FullDuplexStreamed,
            known_models: None,
            parse_limits: ParseLimits::default(),
            headers: HeaderNames::default(),
            metadata: MetadataKeys::default(),
        }
    }
}

impl ExtProcOptions {
    /// Sets the largest request body accepted.
    pub fn with_max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// Sets the cap on request-body bytes buffered across every stream.
    pub fn with_max_buffered_bytes(mut self, bytes: usize) -> Self {
        self.max_buffered_bytes = bytes;
        self
    }

    /// Sets [`ExtProcOptions::max_connections`].
    pub fn with_max_connections(mut self, max: usize) -> Self {
        self.max_connections = max;
        self
    }

    /// Sets [`ExtProcOptions::body_read_timeout`].
    pub fn with_body_read_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.body_read_timeout = timeout;
        self
    }

    /// Checks that the limits can work together: a body of `max_body_bytes` must fit in the
    /// share of `max_buffered_bytes` large bodies may use.
    pub fn validate(&self) -> Result<(), OptionsError> {
        if self.max_body_bytes == 0 {
            return Err(OptionsError::ZeroBodyLimit);
        }
        let share = BodyBudget::new(self.max_buffered_bytes).large_body_ceiling();
        if share < self.max_body_bytes {
            return Err(OptionsError::BufferedBelowBody {
                buffered: self.max_buffered_bytes,
                body: self.max_body_bytes,
                least: least_buffered_for(self.max_body_bytes),
            });
        }
        Ok(())
    }

    /// Sets the largest chunk streamed back (at least 1 byte).
    pub fn with_chunk_size(mut self, bytes: usize) -> Self {
        self.chunk_size = bytes.max(1);
        self
    }

    /// Accepts only requests for `models` (others are answered 404).
    pub fn with_known_models<I, S>(mut self, models: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.known_models = Some(Arc::new(models.into_iter().map(Into::into).collect()));
        self
    }

    /// The parser limits in force: [`Self::parse_limits`] with [`Self::max_body_bytes`].
    pub(crate) fn effective_parse_limits(&self) -> ParseLimits {
        self.parse_limits
            .clone()
            .with_max_body_bytes(self.max_body_bytes)
    }

    /// The largest gRPC message the server accepts: a whole body in BUFFERED mode, plus a
    /// margin of a quarter of the body limit (at least 1 MiB), so that a body somewhat over
    /// the limit still reaches the picker and is answered 413 `body_too_large`. A message
    /// larger than this ends its stream with gRPC `RESOURCE_EXHAUSTED`.
    pub fn max_message_bytes(&self) -> usize {
        let margin = (self.max_body_bytes / 4).max(1024 * 1024);
        self.max_body_bytes.saturating_add(margin)
    }
}

/// The smallest cap on buffered bodies whose share for large bodies (the cap less an eighth,
/// rounded down) holds one body of `body` bytes (at least 1).
fn least_buffered_for(body: usize) -> usize {
    let least = (body.max(1) as u128 - 1) * 8 / 7 + 1;
    usize::try_from(least).unwrap_or(usize::MAX)
}

/// Limits that cannot work together ([`ExtProcOptions::validate`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum OptionsError {
    /// The body limit is zero: no request with a body could be routed.
    #[error("the request body limit must be at least 1 byte")]
    ZeroBodyLimit,
    /// The cap on buffered bodies leaves no room for one body at the body limit.
    #[error(
        "the cap on buffered request bodies ({buffered} bytes) leaves no room for one body of \
         the {body}-byte limit: bodies over 64 KiB may use seven eighths of the cap, so give \
         at least {least} bytes"
    )]
    BufferedBelowBody {
        /// The cap on buffered bodies.
        buffered: usize,
        /// The body limit.
        body: usize,
        /// The smallest cap that fits one body at the limit.
        least: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_fit_together_and_the_least_cap_named_fits() {
        assert_eq!(ExtProcOptions::default().validate(), Ok(()));
        for body in [1, 7, 1000, 1 << 20, DEFAULT_MAX_BODY_BYTES, 100_000_007] {
            let options = ExtProcOptions::default().with_max_body_bytes(body);
            let least = match options.clone().with_max_buffered_bytes(0).validate() {
                Err(OptionsError::BufferedBelowBody { least, .. }) => least,
                other => panic!("{body}: {other:?}"),
            };
            assert_eq!(
                options.clone().with_max_buffered_bytes(least).validate(),
                Ok(())
            );
            assert!(
                options
                    .with_max_buffered_bytes(least - 1)
                    .validate()
                    .is_err()
            );
        }
        let zero = ExtProcOptions::default().with_max_body_bytes(0);
        assert_eq!(zero.validate(), Err(OptionsError::ZeroBodyLimit));
    }

    #[test]
    fn the_message_limit_leaves_room_over_the_body_limit() {
        let options = ExtProcOptions::default();
        assert_eq!(options.max_message_bytes(), 20 << 20);
        assert_eq!(
            options.with_max_body_bytes(1000).max_message_bytes(),
            1000 + (1 << 20)
        );
    }
}
