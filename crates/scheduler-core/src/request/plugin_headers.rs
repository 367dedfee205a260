//! Request headers the adapters hand to plugins in [`InferenceRequest::headers`]: the
//! latency objectives a client may set, with upstream's names.
//!
//! Both adapters (the ext_proc picker and the HTTP gateway) copy every header of
//! [`PLUGIN_HEADERS`] the client sent, trimmed, into the request before scheduling; plugins read
//! them with [`InferenceRequest::header`].
//!
//! ```
//! use shepherd_scheduler_core::request::{InferenceRequest, Prompt, SLO_TTFT_HEADER};
//!
//! let mut request = InferenceRequest::new("r", "m", Prompt::Text("hi".into()));
//! request.headers.push((SLO_TTFT_HEADER.into(), "250".into()));
//! assert_eq!(request.header("X-SLO-TTFT-MS"), Some("250"));
//! ```
//!
//! [`InferenceRequest::headers`]: super::InferenceRequest::headers
//! [`InferenceRequest::header`]: super::InferenceRequest::header

/// The request's time-to-first-token objective, in milliseconds.
pub const SLO_TTFT_HEADER: &str = "x-slo-ttft-ms";

/// The same objective under upstream's current name (the `slo-deadline-ordering-policy`
/// reads it first, then [`SLO_TTFT_HEADER`], its deprecated alias).
pub const LLM_D_SLO_TTFT_HEADER: &str = "x-llm-d-slo-ttft-ms";

/// The request's time-per-output-token objective, in milliseconds.
pub const SLO_TPOT_HEADER: &str = "x-slo-tpot-ms";

/// Every header the adapters copy into the request for plugins (lower-case).
pub const PLUGIN_HEADERS: &[&str] = &[SLO_TTFT_HEADER, SLO_TPOT_HEADER, LLM_D_SLO_TTFT_HEADER];

/// Longest header value copied (longer ones are not objectives: they are left out).
pub const MAX_PLUGIN_HEADER_LEN: usize = 64;
