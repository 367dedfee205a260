//! Applying one received payload to a precise index: decode, find the endpoint, keep its
//! capacity current, apply, log what reset it.

use std::sync::Arc;

use shepherd_scheduler_core::endpoint::{Endpoint, Pool};
use shepherd_scheduler_core::kv_events::ResetReason;
use shepherd_scheduler_core::kv_events::wire::{DecodeLimits, decode_batch};
use shepherd_scorers::producers::PreciseKvEvents;

use super::stats::KvEventStats;

/// A precise index, the pool its endpoints are in, and the counters.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) feed: Arc<PreciseKvEvents>,
    pub(crate) pool: Arc<Pool>,
    pub(crate) stats: Arc<KvEventStats>,
}

impl Target {
    /// The pool's endpoint at `address`, when it is a member.
    pub(crate) fn endpoint(&self, address: &str) -> Option<Arc<Endpoint>> {
        self.pool.snapshot().get_by_address(address).cloned()
    }

    /// Decodes `payload` and applies it to `endpoint`'s entries. Returns whether it was
    /// applied (an undecodable payload is counted, logged at most now and then, and skipped).
    pub(crate) fn apply(&self, endpoint: &Endpoint, payload: &[u8]) -> bool {
        let batch = match decode_batch(payload, &DecodeLimits::default()) {
            Ok(batch) => batch,
            Err(error) => {
                KvEventStats::bump(&self.stats.undecodable);
                tracing::warn!(
                    endpoint = endpoint.address(),
                    plugin = self.feed.name,
                    %error,
                    bytes = payload.len(),
                    "KV-event batch could not be decoded; skipped"
                );
                return false;
            }
        };
        self.keep_capacity(endpoint);
        let applied = self.feed.index.apply(endpoint.id(), &batch);
        KvEventStats::bump(&self.stats.batches);
        if let Some(reason) = applied.reset {
            match reason {
                ResetReason::Cleared => tracing::info!(
                    endpoint = endpoint.address(),
                    plugin = self.feed.name,
                    "the server cleared its prefix cache (AllBlocksCleared); its precise entries were dropped"
                ),
                _ => tracing::warn!(
                    endpoint = endpoint.address(),
                    plugin = self.feed.name,
                    %reason,
                    "the server reports more blocks than it can hold: removals were missed, its precise entries were dropped"
                ),
            }
        }
        true
    }

    /// Drops `endpoint`'s entries for `reason`.
    pub(crate) fn reset(&self, endpoint: &Endpoint, reason: ResetReason) {
        let dropped = self.feed.index.reset(endpoint.id(), reason);
        tracing::warn!(
            endpoint = endpoint.address(),
            plugin = self.feed.name,
            %reason,
            dropped,
            "precise prefix-cache entries of the endpoint dropped"
        );
    }

    /// Sets the index's capacity for `endpoint` from its metrics (`num_gpu_blocks` blocks of
    /// `block_size` tokens, in index blocks).
    fn keep_capacity(&self, endpoint: &Endpoint) {
        let metrics = endpoint.metrics();
        if let (Some(blocks), Some(size)) = (metrics.num_gpu_blocks, metrics.block_size)
            && blocks > 0
            && size > 0
        {
            let per_block = self.feed.index.config().block_tokens.max(1) as u64;
            let capacity = blocks.saturating_mul(u64::from(size)) / per_block;
            let capacity = usize::try_from(capacity).unwrap_or(usize::MAX);
            let capacity = capacity.min(shepherd_scheduler_core::prefix::MAX_CAPACITY_PER_ENDPOINT);
            if self.feed.index.capacity_of(endpoint.id()) != Some(capacity) {
                self.feed.index.set_capacity(endpoint.id(), capacity);
            }
        }
    }
}
