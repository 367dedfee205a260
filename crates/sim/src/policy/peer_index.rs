//! The approximate prefix index the peer routers keep: per endpoint, the chained hashes of the
//! prompt blocks it was sent (no feedback from the servers), bounded by an LRU per endpoint.

use ahash::AHashMap;
use shepherd_scheduler_core::endpoint::EndpointId;
use shepherd_scheduler_core::request::Prompt;
use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::workload::block_hashes;

/// Chained hashes of the full `block_size`-token blocks of a prompt (text counts 4 bytes per
/// token).
pub(crate) fn prompt_blocks(prompt: &Prompt, block_size: usize) -> Vec<u64> {
    let block_size = block_size.max(1);
    match prompt {
        // The same chain the simulated servers use for their own prefix caches.
        Prompt::Tokens(tokens) => block_hashes(tokens, block_size),
        Prompt::Text(text) => {
            let mut parent = 0u64;
            text.as_bytes()
                .chunks_exact(block_size * 4)
                .map(|block| {
                    parent = xxh3_64_with_seed(block, parent);
                    parent
                })
                .collect()
        }
    }
}

#[derive(Debug, Default)]
struct EndpointBlocks {
    last_use: AHashMap<u64, u64>,
}

/// Endpoint → blocks it was sent, with LRU eviction beyond `capacity` blocks per endpoint.
#[derive(Debug)]
pub(crate) struct PeerIndex {
    capacity: usize,
    clock: u64,
    endpoints: AHashMap<EndpointId, EndpointBlocks>,
}

impl PeerIndex {
    pub(crate) fn new(capacity: usize) -> Self {
        PeerIndex {
            capacity: capacity.max(1),
            clock: 0,
            endpoints: AHashMap::new(),
        }
    }

    /// Leading blocks of `blocks` that `endpoint` holds.
    pub(crate) fn matched(&self, endpoint: EndpointId, blocks: &[u64]) -> usize {
        self.endpoints.get(&endpoint).map_or(0, |e| {
            blocks
                .iter()
                .take_while(|b| e.last_use.contains_key(b))
                .count()
        })
    }

    /// Records that `endpoint` was sent `blocks`.
    pub(crate) fn insert(&mut self, endpoint: EndpointId, blocks: &[u64]) {
        self.clock += 1;
        let clock = self.clock;
        let entry = self.endpoints.entry(endpoint).or_default();
        for &b in blocks {
            entry.last_use.insert(b, clock);
        }
        if entry.last_use.len() > self.capacity {
            // Drop the oldest tenth in one pass, so eviction is amortized.
            let mut ages: Vec<u64> = entry.last_use.values().copied().collect();
            let cut = (entry.last_use.len() - self.capacity) + self.capacity / 10;
            let last = ages.len() - 1;
            let (_, &mut threshold, _) = ages.select_nth_unstable(cut.min(last));
            entry.last_use.retain(|_, &mut age| age > threshold);
        }
    }
}
