//! Index configuration.

use crate::endpoint::EndpointMetrics;

use super::BlockLayout;

/// The most blocks the index remembers for one endpoint, whatever its metrics say or a caller
/// asks for: 2^22 = 4,194,304 blocks.
///
/// Every capacity is capped at this: the ones [`PrefixIndexConfig::capacity_for`] derives
/// from a server's metrics, [`PrefixIndexConfig::default_capacity`], and the ones passed to
/// [`PrefixIndex::insert_chain`](super::PrefixIndex::insert_chain),
/// [`insert_blocks`](super::PrefixIndex::insert_blocks) and
/// [`set_capacity`](super::PrefixIndex::set_capacity). With the default 64-token blocks that is
/// 268M tokens, far more than one model server's KV cache holds (an 8-GPU node holds some
/// millions), while at about 32 bytes per (block, endpoint) entry it bounds the index at
/// about 128 MiB per endpoint even when a server reports garbage such as
/// `num_gpu_blocks = u64::MAX` (which would otherwise disable eviction altogether).
pub const MAX_CAPACITY_PER_ENDPOINT: usize = 1 << 22;

/// How the prefix index cuts prompts and how much it remembers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefixIndexConfig {
    /// How prompts are cut into blocks.
    pub layout: BlockLayout,
    /// Blocks remembered per endpoint when its metrics do not say (`num_gpu_blocks` unknown);
    /// capped at [`MAX_CAPACITY_PER_ENDPOINT`] when used.
    pub default_capacity: usize,
}

impl Default for PrefixIndexConfig {
    /// 64-token blocks, 2,048 per request at most, 31,250 blocks per endpoint by default.
    fn default() -> Self {
        PrefixIndexConfig {
            layout: BlockLayout::default(),
            default_capacity: 31_250,
        }
    }
}

impl PrefixIndexConfig {
    /// The capacity, in index blocks, of an endpoint with these metrics: the server's KV-cache
    /// tokens (`num_gpu_blocks × block_size`) over the index's tokens per block, when both are
    /// known and positive; else the default. Never more than [`MAX_CAPACITY_PER_ENDPOINT`],
    /// whatever the server reports.
    pub fn capacity_for(&self, metrics: &EndpointMetrics) -> usize {
        let capacity = match (metrics.num_gpu_blocks, metrics.block_size) {
            (Some(blocks), Some(size)) if blocks > 0 && size > 0 => {
                let tokens = blocks.saturating_mul(u64::from(size));
                let per_block = (self.layout.block_tokens() as u64).max(1);
                usize::try_from((tokens / per_block).max(1)).unwrap_or(usize::MAX)
            }
            _ => self.default_capacity,
        };
        capacity.min(MAX_CAPACITY_PER_ENDPOINT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn capacity_comes_from_metrics_when_known() {
        let config = PrefixIndexConfig::default();
        let mut metrics = EndpointMetrics::default();
        assert_eq!(config.capacity_for(&metrics), 31_250);
        metrics.num_gpu_blocks = Some(1000);
        assert_eq!(config.capacity_for(&metrics), 31_250);
        metrics.block_size = Some(16);
        assert_eq!(config.capacity_for(&metrics), 250);
        metrics.num_gpu_blocks = Some(0);
        assert_eq!(config.capacity_for(&metrics), 31_250);
    }

    #[test]
    fn garbage_metrics_give_a_capped_capacity() {
        let config = PrefixIndexConfig::default();
        let metrics = EndpointMetrics {
            num_gpu_blocks: Some(u64::MAX),
            block_size: Some(u32::MAX),
            ..EndpointMetrics::default()
        };
        assert_eq!(config.capacity_for(&metrics), MAX_CAPACITY_PER_ENDPOINT);
        let huge_default = PrefixIndexConfig {
            default_capacity: usize::MAX,
            ..config
        };
        assert_eq!(
            huge_default.capacity_for(&EndpointMetrics::default()),
            MAX_CAPACITY_PER_ENDPOINT
        );
    }

    proptest! {
        #[test]
        fn capacities_stay_within_bounds(
            blocks in prop::option::of(any::<u64>()),
            size in prop::option::of(any::<u32>()),
            block_tokens in 1usize..512,
            default_capacity in 1usize..=usize::MAX,
        ) {
            let config = PrefixIndexConfig {
                layout: BlockLayout::new(block_tokens, 64),
                default_capacity,
            };
            let metrics = EndpointMetrics {
                num_gpu_blocks: blocks,
                block_size: size,
                ..EndpointMetrics::default()
            };
            let capacity = config.capacity_for(&metrics);
            prop_assert!((1..=MAX_CAPACITY_PER_ENDPOINT).contains(&capacity));
        }
    }
}
