//! What an [`ExtProcService`](crate::ExtProcService) can be told: body limits, the chunk size of
//! the body it streams back, and the names of every header and metadata key of the protocol.
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

/// Largest body chunk sent back to Envoy: Envoy caps a streamed chunk at 64 KiB, and this
/// leaves a margin (the llm-d router uses the same figure).
pub const DEFAULT_CHUNK_SIZE: usize = 62_000;

/// Default largest request body (16 MiB, the core parser's default).
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

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

    /// The largest gRPC message the server must accept: a whole body in BUFFERED mode, plus
    /// room for its headers and metadata.
    pub fn max_message_bytes(&self) -> usize {
        self.max_body_bytes.saturating_add(1024 * 1024)
    }
}
