use thiserror::Error;

/// Why a request body could not be turned into an [`InferenceRequest`](super::InferenceRequest).
///
/// Every variant maps to HTTP 400 except [`ParseError::BodyTooLarge`] (413) and
/// [`ParseError::UnsupportedPath`] (404); see [`ParseError::http_status`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ParseError {
    /// The body is larger than the configured limit.
    #[error("request body of {size} bytes exceeds the limit of {limit} bytes")]
    BodyTooLarge {
        /// Body size in bytes.
        size: usize,
        /// Configured limit in bytes.
        limit: usize,
    },
    /// The body is not UTF-8.
    #[error("request body is not valid UTF-8 (at byte {valid_up_to})")]
    InvalidUtf8 {
        /// Length of the valid prefix.
        valid_up_to: usize,
    },
    /// The body is not well-formed JSON.
    #[error("request body is not valid JSON: {0}")]
    InvalidJson(String),
    /// The body is JSON but not an object.
    #[error("request body must be a JSON object")]
    NotAnObject,
    /// A required field is missing.
    #[error("missing required field `{0}`")]
    MissingField(&'static str),
    /// A field has the wrong type or an invalid value.
    #[error("invalid field `{field}`: {reason}")]
    InvalidField {
        /// Field path, e.g. `messages[2].content`.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The prompt is empty.
    #[error("the prompt is empty")]
    EmptyPrompt,
    /// A gRPC request body is not one uncompressed, complete message of the expected type
    /// (`vllmgrpc-parser`, `vertexai-parser`).
    #[error("invalid gRPC request: {0}")]
    InvalidGrpc(String),
    /// The path is not an inference API this parser knows.
    #[error("unsupported path `{0}`")]
    UnsupportedPath(String),
}

impl ParseError {
    /// The HTTP status an adapter should answer with.
    pub fn http_status(&self) -> u16 {
        match self {
            ParseError::BodyTooLarge { .. } => 413,
            ParseError::UnsupportedPath(_) => 404,
            _ => 400,
        }
    }
}
