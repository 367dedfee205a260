use super::{InferenceRequest, ParseError, Prompt};

/// Which OpenAI-compatible API a request body belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApiKind {
    /// `/v1/completions`
    Completions,
    /// `/v1/chat/completions`
    ChatCompletions,
    /// `/v1/responses`
    Responses,
    /// `/v1/embeddings`
    Embeddings,
}

impl ApiKind {
    /// The API for a request path (query string ignored), when known.
    pub fn from_path(path: &str) -> Option<ApiKind> {
        let path = path.split('?').next().unwrap_or(path).trim_end_matches('/');
        match path {
            "/v1/completions" => Some(ApiKind::Completions),
            "/v1/chat/completions" => Some(ApiKind::ChatCompletions),
            "/v1/responses" => Some(ApiKind::Responses),
            "/v1/embeddings" => Some(ApiKind::Embeddings),
            _ => None,
        }
    }
}

/// Limits applied while parsing.
#[derive(Debug, Clone)]
pub struct ParseLimits {
    /// Largest accepted body, in bytes (default 16 MiB).
    pub max_body_bytes: usize,
}

impl Default for ParseLimits {
    fn default() -> Self {
        ParseLimits {
            max_body_bytes: 16 * 1024 * 1024,
        }
    }
}

/// Parses an OpenAI-compatible request body for `path`.
///
/// The returned request has an empty id, priority 0 and no headers: the adapter fills those in.
pub fn parse_openai_request(
    path: &str,
    body: &[u8],
    limits: &ParseLimits,
) -> Result<InferenceRequest, ParseError> {
    let _ = (path, body, limits, Prompt::Text(String::new()));
    Err(ParseError::UnsupportedPath(path.to_string()))
}
