//! Precise prefix-cache routing from the model servers' KV-cache events.
//!
//! - [`event`]: the events (`BlockStored`, `BlockRemoved`, `AllBlocksCleared`) as Shepherd
//!   reads them;
//! - [`wire`]: their msgpack encoding and the ZeroMQ frames they travel in.

pub mod event;
pub mod wire;

pub use event::{BlockRemoved, BlockStored, EngineBlockHash, ExtraKey, KvEvent, KvEventBatch};
