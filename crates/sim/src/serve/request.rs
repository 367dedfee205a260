//! From an OpenAI request body to what the engine needs: prompt length, output length and the
//! KV block hashes that key its prefix cache.
//!
//! The body goes through the core's parser ([`parse_openai_request`]), so the prompt is the
//! text Shepherd sees. Text counts one pseudo token per 4 bytes (Shepherd's estimate); each
//! token is its 4 bytes read little-endian (the last one zero-padded), so the chained block
//! hashes of [`block_hashes`] over these tokens are the chain over the prompt's bytes in
//! 64-byte blocks, the same chain the simulator's peer routers compute for text prompts. Token
//! id prompts are used as they are. The output ([`FILLER_TOKEN`] per token) is appended before
//! hashing, like the runner's output segment, so a finished request's blocks stay cached.

use std::sync::Arc;

use axum::http::StatusCode;
use serde::Deserialize;
use shepherd_scheduler_core::request::{ApiKind, ParseLimits, Prompt, parse_openai_request};

use crate::workload::block_hashes;

use super::ServeConfig;
use super::kv_params::KvTransferParams;
use super::openai::{ApiError, FILLER_TOKEN};

/// Bytes per pseudo token of a text prompt.
const BYTES_PER_TOKEN: usize = 4;

/// One parsed request, ready for the engine.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SimRequest {
    /// Completions or chat completions.
    pub(crate) api: ApiKind,
    /// The model name as the client wrote it.
    pub(crate) model: String,
    /// Answer as SSE events.
    pub(crate) stream: bool,
    /// Send a usage chunk before `[DONE]`.
    pub(crate) include_usage: bool,
    /// Prompt tokens.
    pub(crate) prompt_tokens: u32,
    /// Tokens to generate.
    pub(crate) output_tokens: u32,
    /// `length` when `max_tokens` bounded the output, `stop` for the default length.
    pub(crate) finish_reason: &'static str,
    /// Chained hashes of the full blocks of prompt + output.
    pub(crate) block_hashes: Vec<u64>,
    /// The tokens those hashes cover: the prompt's pseudo tokens, then the output's.
    pub(crate) tokens: Arc<[u32]>,
    /// The request's `kv_transfer_params` (prefill/decode disaggregation).
    pub(crate) kv_transfer: Option<KvTransferParams>,
}

#[derive(Debug, Default, Deserialize)]
struct Extras {
    #[serde(default)]
    stream_options: Option<StreamOptions>,
    #[serde(default)]
    kv_transfer_params: Option<KvTransferParams>,
}

#[derive(Debug, Default, Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
}

/// The token ids a render route answers for `body` (as sent to `path`): the prompt's pseudo
/// tokens, exactly those [`prepare`] hashes into the request's blocks.
pub(crate) fn render_tokens(
    path: &str,
    body: &[u8],
    config: &ServeConfig,
) -> Result<Vec<u32>, ApiError> {
    let limits = ParseLimits::default().with_max_body_bytes(config.max_body_bytes);
    let parsed = parse_openai_request(path, body, &limits).map_err(|e| {
        let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
        ApiError::new(status, e.to_string())
    })?;
    if !config.serves(&parsed.model) {
        return Err(ApiError::unknown_model(&parsed.model));
    }
    Ok(prompt_token_ids(&parsed.prompt))
}

/// Parses `body` sent to `path` for a server configured by `config`.
pub(crate) fn prepare(
    path: &str,
    body: &[u8],
    config: &ServeConfig,
) -> Result<SimRequest, ApiError> {
    let limits = ParseLimits::default().with_max_body_bytes(config.max_body_bytes);
    let parsed = parse_openai_request(path, body, &limits).map_err(|e| {
        let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
        ApiError::new(status, e.to_string())
    })?;
    if !config.serves(&parsed.model) {
        return Err(ApiError::unknown_model(&parsed.model));
    }
    // Fields the core parser does not keep; the body is known to be a JSON object by now.
    let extras: Extras = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid request field: {e}")))?;
    let kv_transfer = extras.kv_transfer_params;
    let include_usage = extras
        .stream_options
        .and_then(|o| o.include_usage)
        .unwrap_or(false);

    let (output_tokens, finish_reason) = match parsed.max_tokens {
        Some(0) => {
            return Err(ApiError {
                param: Some("max_tokens"),
                ..ApiError::bad_request("max_tokens must be at least 1, got 0.")
            });
        }
        Some(n) => (n.min(config.max_tokens_cap), "length"),
        None => (config.default_max_tokens.min(config.max_tokens_cap), "stop"),
    };
    let prompt_tokens = parsed.prompt.estimated_tokens();
    let total = prompt_tokens.saturating_add(output_tokens as usize);
    if total > config.max_model_len as usize {
        return Err(ApiError::bad_request(format!(
            "This model's maximum context length is {} tokens. However, you requested {total} \
             tokens ({prompt_tokens} in the prompt, {output_tokens} in the completion).",
            config.max_model_len
        )));
    }
    let block_size = config.engine.block_size.max(1) as usize;
    let kv_tokens = config.engine.num_gpu_blocks as usize * block_size;
    if total > kv_tokens {
        return Err(ApiError::bad_request(format!(
            "The request needs {total} tokens of KV cache; the server has {kv_tokens}."
        )));
    }
    // Bounded by max_model_len (a u32) above.
    let prompt_tokens = prompt_tokens as u32;

    let mut tokens = prompt_token_ids(&parsed.prompt);
    let filler = u32::from_le_bytes(filler_bytes());
    tokens.extend(std::iter::repeat_n(filler, output_tokens as usize));
    Ok(SimRequest {
        api: parsed.api,
        model: parsed.model,
        stream: parsed.stream,
        include_usage,
        prompt_tokens,
        output_tokens,
        finish_reason,
        block_hashes: block_hashes(&tokens, block_size),
        tokens: Arc::from(tokens),
        kv_transfer,
    })
}

fn filler_bytes() -> [u8; 4] {
    let mut out = [0u8; 4];
    for (o, b) in out.iter_mut().zip(FILLER_TOKEN.bytes()) {
        *o = b;
    }
    out
}

/// The prompt's pseudo token ids: token ids as given, text as 4-byte little-endian words.
fn prompt_token_ids(prompt: &Prompt) -> Vec<u32> {
    match prompt {
        Prompt::Tokens(tokens) => tokens.clone(),
        Prompt::Text(text) => text
            .as_bytes()
            .chunks(BYTES_PER_TOKEN)
            .map(|chunk| {
                let mut word = [0u8; BYTES_PER_TOKEN];
                word[..chunk.len()].copy_from_slice(chunk);
                u32::from_le_bytes(word)
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use xxhash_rust::xxh3::xxh3_64_with_seed;

    use super::*;

    fn config() -> ServeConfig {
        ServeConfig::ephemeral(1)
    }

    fn body(prompt: &str, extra: &str) -> Vec<u8> {
        format!(
            r#"{{"model":"{}","prompt":{}{extra}}}"#,
            config().model,
            serde_json::to_string(prompt).unwrap()
        )
        .into_bytes()
    }

    #[test]
    fn text_blocks_chain_over_prompt_bytes() {
        let prompt = "x".repeat(200);
        let r = prepare("/v1/completions", &body(&prompt, ""), &config()).unwrap();
        assert_eq!(r.prompt_tokens, 50);
        assert_eq!(r.output_tokens, 16);
        assert_eq!(r.finish_reason, "stop");
        // The first three blocks lie inside the prompt: the chain over its bytes.
        let mut parent = 0;
        for (i, block) in prompt.as_bytes().chunks_exact(64).enumerate() {
            parent = xxh3_64_with_seed(block, parent);
            assert_eq!(r.block_hashes[i], parent);
        }
        assert_eq!(r.block_hashes.len(), (50 + 16) / 16);
        // The tokens: 4-byte little-endian words of the prompt, then the filler.
        assert_eq!(r.tokens.len(), 50 + 16);
        assert_eq!(r.tokens[0], u32::from_le_bytes(*b"xxxx"));
        assert_eq!(r.tokens[50], u32::from_le_bytes(*b" tok"));
        assert_eq!(block_hashes(&r.tokens, 16), r.block_hashes);
    }

    #[test]
    fn shared_prefix_shares_blocks() {
        let head = "system prompt ".repeat(40);
        let a = prepare(
            "/v1/completions",
            &body(&format!("{head}A?"), ""),
            &config(),
        )
        .unwrap();
        let b = prepare(
            "/v1/completions",
            &body(&format!("{head}B!"), ""),
            &config(),
        )
        .unwrap();
        let shared = head.len() / 64;
        assert!(shared > 5);
        assert_eq!(a.block_hashes[..shared], b.block_hashes[..shared]);
    }

    #[test]
    fn output_length_and_usage_flags() {
        let r = prepare(
            "/v1/completions",
            &body(
                "hi",
                r#","max_tokens":100000,"stream":true,"stream_options":{"include_usage":true}"#,
            ),
            &config(),
        )
        .unwrap();
        assert_eq!(r.output_tokens, config().max_tokens_cap);
        assert_eq!(r.finish_reason, "length");
        assert!(r.stream && r.include_usage);
        let zero = prepare(
            "/v1/completions",
            &body("hi", r#","max_tokens":0"#),
            &config(),
        );
        assert_eq!(zero.unwrap_err().status, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn errors_map_to_statuses() {
        let cfg = config();
        let bad = prepare("/v1/completions", b"{not json", &cfg).unwrap_err();
        assert_eq!(bad.status, StatusCode::BAD_REQUEST);
        let unknown = prepare(
            "/v1/completions",
            br#"{"model":"other","prompt":"x"}"#,
            &cfg,
        );
        assert_eq!(unknown.unwrap_err().status, StatusCode::NOT_FOUND);
        let long = prepare("/v1/completions", &body(&"x".repeat(600_000), ""), &cfg);
        assert_eq!(long.unwrap_err().status, StatusCode::BAD_REQUEST);
        let options = prepare(
            "/v1/completions",
            &body("x", r#","stream_options":3"#),
            &cfg,
        );
        assert_eq!(options.unwrap_err().status, StatusCode::BAD_REQUEST);
    }
}
