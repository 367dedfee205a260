//! The precise index's counters.

use std::sync::atomic::{AtomicU64, Ordering};

use super::ResetReason;

/// Counters of a [`PreciseIndex`](super::PreciseIndex), for a runtime to export: a few relaxed
/// atomic loads, no lock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PreciseStats {
    /// Batches applied.
    pub batches: u64,
    /// Blocks `BlockStored` events reported and the index now holds.
    pub stored_blocks: u64,
    /// Blocks `BlockRemoved` events took out of the index.
    pub removed_blocks: u64,
    /// Removed blocks the index did not know (normal after a reset, or for blocks skipped).
    pub unknown_removed_blocks: u64,
    /// Stored blocks skipped because their parent block is unknown, so their prefix is too.
    pub orphan_blocks: u64,
    /// Stored blocks skipped because they are not on the GPU, belong to another KV-cache group
    /// than the first full-attention one, depend on extra keys beyond the LoRA adapter (a cache
    /// salt, multimodal inputs), or were malformed.
    pub skipped_blocks: u64,
    /// Stored blocks skipped because the engine's block size differs from the index's.
    pub block_size_mismatches: u64,
    /// Events of a kind Shepherd does not know.
    pub unknown_events: u64,
    /// Endpoint resets, by [`ResetReason`] (indexed as [`ResetReason::ALL`]).
    pub resets: [u64; 5],
    /// Blocks recorded speculatively at pick time (not yet reported by the engine).
    pub speculative_blocks: u64,
    /// Speculative blocks that expired without the engine reporting them (taken out).
    pub speculative_expired: u64,
}

impl PreciseStats {
    /// Resets for `reason`.
    pub fn resets_for(&self, reason: ResetReason) -> u64 {
        self.resets[reason.slot()]
    }
}

#[derive(Debug, Default)]
#[repr(align(128))]
pub(super) struct Counters {
    pub(super) batches: AtomicU64,
    pub(super) stored_blocks: AtomicU64,
    pub(super) removed_blocks: AtomicU64,
    pub(super) unknown_removed_blocks: AtomicU64,
    pub(super) orphan_blocks: AtomicU64,
    pub(super) skipped_blocks: AtomicU64,
    pub(super) block_size_mismatches: AtomicU64,
    pub(super) unknown_events: AtomicU64,
    pub(super) resets: [AtomicU64; 5],
    pub(super) speculative_blocks: AtomicU64,
    pub(super) speculative_expired: AtomicU64,
}

pub(super) fn add(counter: &AtomicU64, n: usize) {
    if n > 0 {
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }
}

impl Counters {
    pub(super) fn snapshot(&self) -> PreciseStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        PreciseStats {
            batches: get(&self.batches),
            stored_blocks: get(&self.stored_blocks),
            removed_blocks: get(&self.removed_blocks),
            unknown_removed_blocks: get(&self.unknown_removed_blocks),
            orphan_blocks: get(&self.orphan_blocks),
            skipped_blocks: get(&self.skipped_blocks),
            block_size_mismatches: get(&self.block_size_mismatches),
            unknown_events: get(&self.unknown_events),
            resets: std::array::from_fn(|i| get(&self.resets[i])),
            speculative_blocks: get(&self.speculative_blocks),
            speculative_expired: get(&self.speculative_expired),
        }
    }
}
