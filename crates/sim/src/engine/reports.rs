//! What an [`Engine`](super::Engine) reports: the events of its steps ([`EngineEvent`]), what
//! its `/metrics` would say now ([`EngineSnapshot`]) and its lifetime counters
//! ([`EngineStats`]).

/// Something that happened to a request during a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineEvent {
    /// The request was put in a batch for the first time (at the step's start).
    Scheduled {
        /// Request id.
        id: u64,
    },
    /// The first output token was produced (at the step's end).
    FirstToken {
        /// Request id.
        id: u64,
    },
    /// The last output token was produced; the request left the engine.
    Finished {
        /// Request id.
        id: u64,
        /// Prompt tokens found in the prefix cache at first admission.
        cached_tokens: u32,
        /// Times it was preempted.
        preemptions: u32,
    },
}

/// What a server's `/metrics` would say right now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EngineSnapshot {
    /// Requests waiting.
    pub waiting: u32,
    /// Requests running.
    pub running: u32,
    /// Fraction of KV blocks in use.
    pub kv_utilization: f64,
    /// Tokens per block.
    pub block_size: u32,
    /// Blocks in total.
    pub num_gpu_blocks: u32,
}

/// Counters over the engine's life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Steps run.
    pub steps: u64,
    /// Preemptions.
    pub preemptions: u64,
    /// Prompt tokens admitted for the first time.
    pub prompt_tokens: u64,
    /// Of those, tokens found in the prefix cache.
    pub cached_tokens: u64,
    /// Tokens generated.
    pub generated_tokens: u64,
    /// Prompt tokens whose KV arrived from another server and was used at admission (beyond
    /// what the prefix cache held).
    pub transferred_tokens: u64,
}
