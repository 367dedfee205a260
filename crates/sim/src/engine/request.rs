//! What the engine accepts ([`EngineRequest`]) and why it may refuse it ([`EngineError`]).

use std::sync::Arc;

use thiserror::Error;

/// A request as the engine sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineRequest {
    /// Caller's id, unique among live requests.
    pub id: u64,
    /// Prompt tokens (at least 1).
    pub prompt_len: u32,
    /// Tokens to generate (at least 1).
    pub output_len: u32,
    /// Chained hash of every full block of the prompt followed by the output; blocks beyond
    /// the list are never cached.
    pub block_hashes: Vec<u64>,
    /// The tokens `block_hashes` were computed over (prompt, then output), for the
    /// `token_ids` of KV-cache events; `None` when the caller does not have them (the request
    /// then publishes no `BlockStored`, see [the engine's docs](crate::engine#kv-cache-events)).
    pub tokens: Option<Arc<[u32]>>,
}

/// Why the engine refused a request.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EngineError {
    /// Prompt or output is empty.
    #[error("request {0}: prompt and output must each have at least one token")]
    Empty(u64),
    /// The request can never fit in the KV cache.
    #[error("request {id}: needs {needed} KV blocks, the cache has {capacity}")]
    TooLong {
        /// Request id.
        id: u64,
        /// Blocks it needs.
        needed: u64,
        /// Blocks the engine has.
        capacity: u32,
    },
    /// The id is already in use.
    #[error("request {0}: id already in use")]
    DuplicateId(u64),
}
