//! The index's counters, for a runtime to export as metrics.

use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of the prefix index's counters, from [`PrefixIndex::stats`](super::PrefixIndex::stats).
///
/// Reading them costs a few relaxed atomic loads and no lock, so a metrics scrape never
/// waits for the index. They are kept by inserts, evictions and removals, under the endpoint
/// lock those already take; lookups update nothing. Each figure is exact on its own, but
/// read while calls are in flight the figures may be from slightly different moments (an
/// insert's entries can show before its evictions do).
///
/// ```
/// use shepherd_scheduler_core::endpoint::EndpointId;
/// use shepherd_scheduler_core::prefix::{PrefixIndex, chain_seed};
/// use shepherd_scheduler_core::request::Prompt;
///
/// let index = PrefixIndex::default();
/// let prompt = Prompt::Text("You are a helpful assistant. ".repeat(40)); // 4 full blocks
/// let mut chain = index.chain(chain_seed("llama", None, ""), &prompt);
/// index.insert_chain(EndpointId(1), &mut chain, &prompt, None);
/// let stats = index.stats();
/// assert_eq!((stats.inserts, stats.inserted_blocks, stats.entries), (1, 4, 4));
///
/// index.remove_endpoint(EndpointId(1));
/// let stats = index.stats();
/// assert_eq!((stats.entries, stats.endpoints, stats.removed_endpoints), (0, 0, 1));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PrefixIndexStats {
    /// (block, endpoint) entries held now, a gauge: [`PrefixIndex::entries`] without
    /// locking every endpoint.
    ///
    /// [`PrefixIndex::entries`]: super::PrefixIndex::entries
    pub entries: u64,
    /// Endpoints remembered now, a gauge.
    pub endpoints: u64,
    /// Inserts recorded since the index was made, a counter: calls of `insert_chain` or
    /// `insert_blocks` with at least one block, for an endpoint still in the pool.
    pub inserts: u64,
    /// (block, endpoint) entries those inserts added, a counter (a block the endpoint already
    /// held adds none).
    pub inserted_blocks: u64,
    /// Entries the eviction clock removed to keep endpoints within their capacity, a counter.
    pub evictions: u64,
    /// Endpoints forgotten after leaving the pool, a counter.
    pub removed_endpoints: u64,
}

/// The live counters behind [`PrefixIndexStats`], on cache lines of their own so that they
/// do not share one with a shard lock.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Counters {
    entries: AtomicU64,
    inserts: AtomicU64,
    inserted_blocks: AtomicU64,
    evictions: AtomicU64,
    removed_endpoints: AtomicU64,
}

impl Counters {
    /// One insert recorded, which added `blocks` entries to the tables.
    pub(crate) fn inserted(&self, blocks: usize) {
        self.inserts.fetch_add(1, Ordering::Relaxed);
        self.inserted_blocks
            .fetch_add(blocks as u64, Ordering::Relaxed);
    }

    /// An endpoint's count of held entries changed from `before` to `after`. Called under
    /// that endpoint's lock, so the gauge is the sum of the counts and never goes below zero.
    pub(crate) fn held(&self, before: usize, after: usize) {
        if after > before {
            self.entries
                .fetch_add((after - before) as u64, Ordering::Relaxed);
        } else if before > after {
            self.entries
                .fetch_sub((before - after) as u64, Ordering::Relaxed);
        }
    }

    /// The clock evicted `n` entries.
    pub(crate) fn evicted(&self, n: usize) {
        if n > 0 {
            self.evictions.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    /// `n` endpoints were forgotten.
    pub(crate) fn removed_endpoints(&self, n: usize) {
        if n > 0 {
            self.removed_endpoints
                .fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    /// A snapshot, with `endpoints` remembered now.
    pub(crate) fn snapshot(&self, endpoints: usize) -> PrefixIndexStats {
        PrefixIndexStats {
            entries: self.entries.load(Ordering::Relaxed),
            endpoints: endpoints as u64,
            inserts: self.inserts.load(Ordering::Relaxed),
            inserted_blocks: self.inserted_blocks.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            removed_endpoints: self.removed_endpoints.load(Ordering::Relaxed),
        }
    }
}
