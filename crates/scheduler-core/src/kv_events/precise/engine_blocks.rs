//! One endpoint's engine blocks: the engine's hash of each cached block, mapped to the link of
//! Shepherd's chain for the same block.

use std::collections::VecDeque;

use ahash::{AHashMap, AHashSet};

use crate::clock::Timestamp;
use crate::prefix::{BlockKey, ChainLink};

use super::ResetReason;

/// What the index knows of one endpoint's cache, as its events told it.
#[derive(Debug, Default)]
pub(super) struct EngineBlocks {
    /// Engine block hash → Shepherd's link for that block (its key, and what follows chains on).
    pub(super) links: AHashMap<u64, ChainLink>,
    /// The raw keys of those links: what the engine confirmed it holds.
    pub(super) confirmed: AHashSet<u64>,
    /// Speculative entries (recorded at pick time, not yet confirmed): raw key → how many
    /// live speculations name it.
    pub(super) speculative: AHashMap<u64, u32>,
    /// When each speculation expires, in order.
    pub(super) expiry: VecDeque<(Timestamp, Vec<BlockKey>)>,
    /// The engine's capacity in blocks, when its metrics said.
    pub(super) capacity: Option<usize>,
    /// Resets so far, and the last one's reason.
    pub(super) resets: u64,
    pub(super) last_reset: Option<ResetReason>,
    /// Whether the endpoint left the pool (nothing is recorded for it any more).
    pub(super) gone: bool,
}

impl EngineBlocks {
    /// Most links held before the endpoint is judged to have missed removals: the capacity
    /// plus 1/16 and 16 blocks of slack (events of one step may store before they remove).
    pub(super) fn limit(&self, default_capacity: usize) -> usize {
        let capacity = self.capacity.unwrap_or(default_capacity);
        capacity.saturating_add(capacity / 16).saturating_add(16)
    }
}
