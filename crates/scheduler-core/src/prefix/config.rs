//! Index configuration.

use crate::endpoint::EndpointMetrics;

use super::BlockLayout;

/// How the prefix index cuts prompts and how much it remembers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefixIndexConfig {
    /// How prompts are cut into blocks.
    pub layout: BlockLayout,
    /// Blocks remembered per endpoint when its metrics do not say (`num_gpu_blocks` unknown).
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
    /// known and positive; else the default.
    pub fn capacity_for(&self, metrics: &EndpointMetrics) -> usize {
        match (metrics.num_gpu_blocks, metrics.block_size) {
            (Some(blocks), Some(size)) if blocks > 0 && size > 0 => {
                let tokens = blocks.saturating_mul(u64::from(size));
                let per_block = self.layout.block_tokens() as u64;
                usize::try_from((tokens / per_block).max(1)).unwrap_or(usize::MAX)
            }
            _ => self.default_capacity,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
