//! The OpenAI wire format: whole responses, SSE chunks, the usage chunk, and error bodies.
//!
//! Shapes follow vLLM's OpenAI-compatible server: `text_completion` objects for
//! `/v1/completions`, `chat.completion` and `chat.completion.chunk` for chat, usage with
//! `prompt_tokens_details.cached_tokens`, and errors as
//! `{"error":{"message","type","param","code"}}`. The generated text is filler: one
//! [`FILLER_TOKEN`] per output token.

use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use shepherd_scheduler_core::request::ApiKind;

/// The text of one generated token (4 bytes: one pseudo token, as Shepherd counts text).
pub(crate) const FILLER_TOKEN: &str = " tok";

/// The SSE event that ends a stream.
pub(crate) const DONE: &[u8] = b"data: [DONE]\n\n";

/// `tokens` filler tokens.
pub(crate) fn filler(tokens: u32) -> String {
    FILLER_TOKEN.repeat(tokens as usize)
}

/// Token counts of one finished request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Usage {
    /// Prompt tokens.
    pub(crate) prompt_tokens: u32,
    /// Generated tokens.
    pub(crate) completion_tokens: u32,
    /// Prompt tokens found in the prefix cache.
    pub(crate) cached_tokens: u32,
}

impl Usage {
    fn to_json(self) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "total_tokens": u64::from(self.prompt_tokens) + u64::from(self.completion_tokens),
            "completion_tokens": self.completion_tokens,
            "prompt_tokens_details": { "cached_tokens": self.cached_tokens },
        })
    }
}

/// What every body of one response shares: id, creation time, model, API.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    /// `cmpl-…` or `chatcmpl-…`.
    pub(crate) id: String,
    /// Unix seconds.
    pub(crate) created: u64,
    /// The model name as the client asked for it.
    pub(crate) model: String,
    /// Chat or plain completions.
    pub(crate) chat: bool,
    /// `length` or `stop`.
    pub(crate) finish_reason: &'static str,
}

impl Reply {
    /// A reply for a request to `api` with server-unique number `seq`.
    pub(crate) fn new(
        api: ApiKind,
        server: usize,
        seq: u64,
        model: String,
        finish_reason: &'static str,
    ) -> Self {
        let chat = api == ApiKind::ChatCompletions;
        let prefix = if chat { "chatcmpl" } else { "cmpl" };
        let created = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Reply {
            id: format!("{prefix}-sim{server}-{seq:016x}"),
            created,
            model,
            chat,
            finish_reason,
        }
    }

    fn object(&self, chunk: bool) -> &'static str {
        match (self.chat, chunk) {
            (true, false) => "chat.completion",
            (true, true) => "chat.completion.chunk",
            (false, _) => "text_completion",
        }
    }

    /// The whole (non-streamed) response.
    pub(crate) fn full(&self, usage: Usage) -> Value {
        let text = filler(usage.completion_tokens);
        let choice = if self.chat {
            json!({
                "index": 0,
                "message": { "role": "assistant", "content": text },
                "logprobs": null,
                "finish_reason": self.finish_reason,
            })
        } else {
            json!({
                "index": 0,
                "text": text,
                "logprobs": null,
                "finish_reason": self.finish_reason,
                "stop_reason": null,
            })
        };
        json!({
            "id": self.id,
            "object": self.object(false),
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": usage.to_json(),
        })
    }

    /// One SSE event carrying `tokens` new tokens; `first` adds the assistant role (chat),
    /// `last` the finish reason.
    pub(crate) fn chunk(&self, tokens: u32, first: bool, last: bool) -> Bytes {
        let text = filler(tokens);
        let finish = if last {
            Value::from(self.finish_reason)
        } else {
            Value::Null
        };
        let choice = if self.chat {
            let delta = if first {
                json!({ "role": "assistant", "content": text })
            } else {
                json!({ "content": text })
            };
            json!({ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish })
        } else {
            json!({
                "index": 0,
                "text": text,
                "logprobs": null,
                "finish_reason": finish,
                "stop_reason": null,
            })
        };
        self.event(json!({
            "id": self.id,
            "object": self.object(true),
            "created": self.created,
            "model": self.model,
            "choices": [choice],
        }))
    }

    /// The SSE event with empty `choices` and the usage (`stream_options.include_usage`).
    pub(crate) fn usage_chunk(&self, usage: Usage) -> Bytes {
        self.event(json!({
            "id": self.id,
            "object": self.object(true),
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": usage.to_json(),
        }))
    }

    fn event(&self, value: Value) -> Bytes {
        let mut out = b"data: ".to_vec();
        // Serializing a `Value` into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut out, &value);
        out.extend_from_slice(b"\n\n");
        Bytes::from(out)
    }
}

/// An error answered in the OpenAI shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiError {
    /// HTTP status.
    pub(crate) status: StatusCode,
    /// The field at fault, when one is.
    pub(crate) param: Option<&'static str>,
    /// What went wrong.
    pub(crate) message: String,
}

impl ApiError {
    /// 400 with `message`.
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    /// An error with `status` and `message`.
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            param: None,
            message: message.into(),
        }
    }

    /// 404 for a model this server does not serve.
    pub(crate) fn unknown_model(model: &str) -> Self {
        ApiError {
            status: StatusCode::NOT_FOUND,
            param: Some("model"),
            message: format!("The model `{model}` does not exist."),
        }
    }

    /// 503: the server holds as many requests as it may.
    pub(crate) fn overloaded() -> Self {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "The server is overloaded: too many requests in flight.",
        )
    }

    /// The error type name vLLM uses for this status.
    fn kind(&self) -> &'static str {
        match self.status {
            StatusCode::BAD_REQUEST => "BadRequestError",
            StatusCode::NOT_FOUND => "NotFoundError",
            StatusCode::PAYLOAD_TOO_LARGE => "RequestEntityTooLarge",
            StatusCode::SERVICE_UNAVAILABLE => "ServiceUnavailableError",
            _ => "InternalServerError",
        }
    }

    /// The JSON body.
    pub(crate) fn body(&self) -> Value {
        json!({
            "error": {
                "message": self.message,
                "type": self.kind(),
                "param": self.param,
                "code": self.status.as_u16(),
            }
        })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&self.body()).unwrap_or_default();
        (
            self.status,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_event(bytes: &[u8]) -> Value {
        let text = std::str::from_utf8(bytes).unwrap();
        let json = text
            .strip_prefix("data: ")
            .unwrap()
            .strip_suffix("\n\n")
            .unwrap();
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn completion_and_chat_shapes() {
        let usage = Usage {
            prompt_tokens: 10,
            completion_tokens: 3,
            cached_tokens: 0,
        };
        let r = Reply::new(ApiKind::Completions, 1, 7, "m".into(), "length");
        let full = r.full(usage);
        assert_eq!(full["object"], "text_completion");
        assert_eq!(full["choices"][0]["text"], " tok tok tok");
        assert_eq!(full["usage"]["total_tokens"], 13);
        assert_eq!(full["usage"]["prompt_tokens_details"]["cached_tokens"], 0);

        let c = Reply::new(ApiKind::ChatCompletions, 1, 7, "m".into(), "stop");
        assert!(c.id.starts_with("chatcmpl-"));
        let full = c.full(usage);
        assert_eq!(full["choices"][0]["message"]["role"], "assistant");
        assert_eq!(full["choices"][0]["finish_reason"], "stop");
        let first = parse_event(&c.chunk(1, true, false));
        assert_eq!(first["object"], "chat.completion.chunk");
        assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
        assert!(first["choices"][0]["finish_reason"].is_null());
        let last = parse_event(&c.chunk(1, false, true));
        assert_eq!(last["choices"][0]["finish_reason"], "stop");
        let tail = parse_event(&c.usage_chunk(usage));
        assert_eq!(tail["choices"].as_array().map(Vec::len), Some(0));
        assert_eq!(tail["usage"]["completion_tokens"], 3);
    }

    #[test]
    fn errors_in_openai_shape() {
        let e = ApiError::unknown_model("nope").body();
        assert_eq!(e["error"]["code"], 404);
        assert_eq!(e["error"]["type"], "NotFoundError");
        assert_eq!(e["error"]["param"], "model");
    }
}
