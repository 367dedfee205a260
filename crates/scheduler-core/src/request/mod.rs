//! The request model: what the scheduler knows about one inference request.
//!
//! Adapters turn an HTTP path and body into an [`InferenceRequest`] with the [`ParserSet`]
//! of the config in force (upstream's parser registry: OpenAI, Anthropic, vLLM and SGLang
//! generate, passthrough) or, for OpenAI paths alone, [`parse_openai_request`]; then add what only they know (the id from `x-request-id`, with
//! [`InferenceRequest::assign_id`]; headers, priority, fairness id). A request scheduled
//! without an id is given a generated one.
//!
//! ```
//! use shepherd_scheduler_core::request::{parse_openai_request, ParseLimits, Prompt};
//!
//! let body = br#"{"model":"llama","prompt":"Hello","stream":true}"#;
//! let req = parse_openai_request("/v1/completions", body, &ParseLimits::default()).unwrap();
//! assert_eq!(req.model, "llama");
//! assert!(req.stream);
//! assert_eq!(req.prompt, Prompt::Text("Hello".into()));
//! ```

mod chat;
mod configured_headers;
mod error;
mod id;
mod parse;
mod parser_kind;
mod parser_set;
mod plugin_headers;
mod types;

pub use chat::{ChatMessage, ChatMessages};
pub use configured_headers::{CONFIGURED_HEADERS, ConfiguredHeaders, MAX_CONFIGURED_HEADERS};
pub use error::ParseError;
pub use id::{MAX_REQUEST_ID_LEN, generate_request_id, is_valid_request_id};
pub use parse::{ApiKind, ParseLimits, parse_openai_request};
pub use parser_kind::ParserKind;
pub use parser_set::{ParserEntry, ParserSet, SkipReason, SkippedParser};
pub use plugin_headers::{
    LLM_D_SLO_TTFT_HEADER, MAX_PLUGIN_HEADER_LEN, PLUGIN_HEADERS, SLO_TPOT_HEADER, SLO_TTFT_HEADER,
};
pub use types::{InferenceRequest, Prompt};
