use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::clock::Timestamp;
use crate::endpoint::Endpoint;

/// Token usage reported by a model server's response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Generated tokens.
    pub completion_tokens: u64,
    /// Prompt tokens served from the server's prefix cache, when reported.
    pub cached_tokens: Option<u64>,
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[repr(u8)]
pub enum Outcome {
    /// The endpoint answered and the response was delivered.
    Success = 0,
    /// The endpoint failed (connection error, error status, broken stream).
    Failed = 1,
    /// The request was abandoned before it ended (the client went away, or the handle was
    /// dropped without [`finish`](super::RequestHandle::finish)).
    Cancelled = 2,
}

impl Outcome {
    /// The lowercase label (`success`, `failed`, `cancelled`).
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failed => "failed",
            Outcome::Cancelled => "cancelled",
        }
    }
}

/// What an adapter reports when a request ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Completion {
    /// How it ended.
    pub outcome: Outcome,
    /// Usage, when the response reported it.
    pub usage: Option<Usage>,
    /// When the first token arrived, if the adapter knows better than the handle (which
    /// records the time of [`RequestHandle::first_token`](super::RequestHandle::first_token)).
    pub first_token_at: Option<Timestamp>,
}

impl Completion {
    /// A successful response with `usage`.
    pub fn success(usage: Option<Usage>) -> Self {
        Completion {
            outcome: Outcome::Success,
            usage,
            first_token_at: None,
        }
    }

    /// A failed response.
    pub fn failed() -> Self {
        Completion {
            outcome: Outcome::Failed,
            usage: None,
            first_token_at: None,
        }
    }

    /// An abandoned request.
    pub fn cancelled() -> Self {
        Completion {
            outcome: Outcome::Cancelled,
            usage: None,
            first_token_at: None,
        }
    }

    /// Whether the endpoint answered successfully.
    pub fn is_success(&self) -> bool {
        self.outcome == Outcome::Success
    }
}

/// What a completion hook learns about the request that ended: a small summary kept by the
/// [`RequestHandle`](super::RequestHandle), never the request itself.
#[derive(Debug, Clone, Copy)]
pub struct CompletedRequest<'a> {
    /// The request id (the caller's `x-request-id`, or one generated at scheduling).
    pub id: &'a str,
    /// The model (or LoRA adapter) the request targeted.
    pub model: &'a str,
    /// The endpoint that served it (a fallback, if the adapter moved it to one).
    pub endpoint: &'a Arc<Endpoint>,
    /// Estimated prompt tokens at scheduling.
    pub prompt_tokens: u64,
    /// When it was scheduled.
    pub scheduled_at: Timestamp,
    /// When its first token arrived, if it did.
    pub first_token_at: Option<Timestamp>,
    /// When it ended.
    pub finished_at: Timestamp,
    /// Whether it was moved to a fallback endpoint.
    pub used_fallback: bool,
}

/// Runs once when a scheduled request ends, however it ends.
pub trait CompletionHook: Send + Sync {
    /// `request` ended as `completion` says.
    fn on_complete(&self, request: &CompletedRequest<'_>, completion: &Completion);
}
