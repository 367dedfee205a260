//! Precise prefix-cache routing from the model servers' KV-cache events.
//!
//! - [`event`]: the events (`BlockStored`, `BlockRemoved`, `AllBlocksCleared`) as Shepherd
//!   reads them;
//! - [`wire`]: their msgpack encoding and the ZeroMQ frames they travel in;
//! - [`precise`]: the index they feed, and how an endpoint's picture is dropped when it could
//!   be wrong;
//! - [`sequence`]: telling a publisher's in-order batches from gaps and restarts.
//!
//! The transport (ZeroMQ subscriptions, replay requests, reconnects) is the runtime's; the
//! core only decodes, checks sequences and applies.

pub mod event;
pub mod precise;
pub mod sequence;
pub mod wire;

pub use event::{BlockRemoved, BlockStored, EngineBlockHash, ExtraKey, KvEvent, KvEventBatch};
pub use precise::{
    Applied, EndpointSync, PreciseIndex, PreciseIndexConfig, PreciseStats, ResetReason,
    precise_seed,
};
pub use sequence::{SequenceTracker, SequenceVerdict};
