//! The KV-cache events a model server publishes, as Shepherd reads them.
//!
//! These mirror vLLM's `KVEventBatch` of `BlockStored` / `BlockRemoved` / `AllBlocksCleared`
//! (`vllm/distributed/kv_events.py`); SGLang publishes the same shapes. The wire encoding
//! (msgpack, positional or field-name maps) lives in [`wire`](super::wire).

/// A block hash as the engine publishes it, folded to 64 bits.
///
/// vLLM sends its hashes as msgpack integers (signed or unsigned, 64-bit) or, with its SHA-256
/// hashing, as byte strings. Integers keep their 64 bits (a negative `i64` is reinterpreted
/// as `u64`); byte strings are folded with XXH3-64. The value is only ever compared with other
/// hashes from the same engine, so the fold keeps what matters: equal hashes stay equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EngineBlockHash(pub u64);

/// One element of a block's `extra_keys`: what, besides its tokens, the engine hashed into the
/// block (a LoRA name, a cache salt, multimodal hashes, prompt-embedding hashes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtraKey {
    /// A string element (a LoRA name, a cache salt, a multimodal hash).
    Text(String),
    /// Anything else (integers, byte strings, nested tuples): kept only as "something".
    Other,
}

/// `BlockStored`: the engine cached these consecutive full blocks.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BlockStored {
    /// The blocks' hashes, in order.
    pub block_hashes: Vec<EngineBlockHash>,
    /// The hash of the block just before the first one, `None` when the first block starts a
    /// sequence.
    pub parent_block_hash: Option<EngineBlockHash>,
    /// The tokens of every block, `block_size` per block, in order.
    pub token_ids: Vec<u32>,
    /// Tokens per block.
    pub block_size: u32,
    /// The LoRA adapter's id (deprecated upstream in favour of `lora_name`).
    pub lora_id: Option<i64>,
    /// Where the blocks live (`"GPU"`, `"CPU"`, ...); `None` means the GPU.
    pub medium: Option<String>,
    /// The LoRA adapter's name, `None` for the base model.
    pub lora_name: Option<String>,
    /// Per block, the extra keys the engine hashed with its tokens (`None` for a block without
    /// any); empty when the event carried no `extra_keys` at all.
    pub extra_keys: Vec<Option<Vec<ExtraKey>>>,
    /// The KV-cache group (hybrid-attention models publish one event per group).
    pub group_idx: Option<u32>,
    /// The group's cache kind (`"full_attention"`, `"sliding_window"`, ...).
    pub kv_cache_spec_kind: Option<String>,
}

/// `BlockRemoved`: the engine evicted these blocks.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BlockRemoved {
    /// The evicted blocks' hashes.
    pub block_hashes: Vec<EngineBlockHash>,
    /// Where the blocks lived; `None` means the GPU.
    pub medium: Option<String>,
    /// The KV-cache group.
    pub group_idx: Option<u32>,
}

/// One KV-cache event.
#[derive(Debug, Clone, PartialEq)]
pub enum KvEvent {
    /// Blocks were cached.
    BlockStored(BlockStored),
    /// Blocks were evicted.
    BlockRemoved(BlockRemoved),
    /// The whole prefix cache was dropped (vLLM's `reset_prefix_cache`).
    AllBlocksCleared,
    /// An event of a kind Shepherd does not know (its tag), skipped.
    Unknown(String),
}

/// One published batch: the events of one engine step.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KvEventBatch {
    /// When the engine published it (seconds since the epoch).
    pub ts: f64,
    /// The events, in order.
    pub events: Vec<KvEvent>,
    /// The data-parallel rank that published it, when the engine says.
    pub data_parallel_rank: Option<u32>,
}
