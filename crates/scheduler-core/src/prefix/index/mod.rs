//! The sharded prefix index.
//!
//! One file per part:
//!
//! - [`lookup`]: the walk down a request's chain under one shard read lock;
//! - [`insert`]: recording and forgetting blocks for an endpoint;
//! - [`evict`]: the eviction clock that keeps each endpoint within its capacity;
//! - [`endpoints`]: the registry of endpoints the index knows, and forgetting one;
//! - [`journal`]: the picks' inserts kept for peer replicas (off by default).

mod endpoints;
mod evict;
mod insert;
pub(super) mod journal;
mod lookup;

use parking_lot::{RwLock, RwLockWriteGuard};

use super::chain::SHARDS;
use super::locking;
use super::stats::{Counters, PrefixIndexStats};
#[cfg(test)]
use super::table::id_of;
use super::table::{BlockTable, MAX_ENDPOINT_ID, tag_of};
use super::{BlockChain, BlockKey, PrefixIndexConfig};
use crate::endpoint::{EndpointId, MembershipListener};
use crate::request::Prompt;
use endpoints::Registry;

/// One shard on its own cache lines, so two threads working on two shards do not share one.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard(RwLock<BlockTable>);

/// A write guard on one shard, kept while consecutive keys stay in that shard. At most one shard
/// lock is held at a time, so writers cannot deadlock.
type ShardGuard<'a> = Option<(usize, RwLockWriteGuard<'a, BlockTable>)>;

/// Which endpoints are believed to hold which prompt blocks.
///
/// Lookups walk a request's [`BlockChain`] under one shard read lock, hashing only as far as
/// some endpoint still matches. Inserts record a chain for the endpoint a request was sent to;
/// each endpoint remembers at most its capacity in blocks, evicting (approximately) the least
/// recently used. The same [`insert_blocks`](PrefixIndex::insert_blocks) /
/// [`remove_blocks`](PrefixIndex::remove_blocks) pair can be fed by model-server KV-cache events
/// instead of guesses.
#[derive(Debug)]
pub struct PrefixIndex {
    config: PrefixIndexConfig,
    shards: Box<[Shard]>,
    endpoints: Registry,
    counters: Counters,
    journal: journal::InsertJournal,
}

impl Default for PrefixIndex {
    fn default() -> Self {
        PrefixIndex::new(PrefixIndexConfig::default())
    }
}

impl PrefixIndex {
    /// An empty index.
    pub fn new(config: PrefixIndexConfig) -> Self {
        PrefixIndex {
            config,
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            endpoints: Registry::default(),
            counters: Counters::default(),
            journal: journal::InsertJournal::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &PrefixIndexConfig {
        &self.config
    }

    /// A lazily hashed chain for `prompt`, seeded with `seed` (see [`chain_seed`](super::chain_seed)).
    pub fn chain(&self, seed: u64, prompt: &Prompt) -> BlockChain {
        BlockChain::new(&self.config.layout, seed, prompt)
    }

    /// Makes `chain` a new chain of `prompt` for this index (as [`chain`](Self::chain)),
    /// keeping its allocations.
    pub fn reset_chain(&self, chain: &mut BlockChain, seed: u64, prompt: &Prompt) {
        chain.reset(&self.config.layout, seed, prompt);
    }

    /// `endpoint`'s capacity in blocks, when the index knows the endpoint.
    pub fn capacity_of(&self, endpoint: EndpointId) -> Option<usize> {
        let state = self.endpoints.get(endpoint)?;
        let capacity = locking::lock(&state).capacity();
        Some(capacity)
    }

    /// Blocks `endpoint` is believed to hold.
    pub fn endpoint_entries(&self, endpoint: EndpointId) -> usize {
        let state = self.endpoints.get(endpoint);
        state.map_or(0, |s| locking::lock(&s).live)
    }

    /// (block, endpoint) entries in the index, locking every endpoint in turn
    /// ([`stats`](Self::stats) reads the same figure from a gauge).
    pub fn entries(&self) -> usize {
        let mut entries = 0;
        self.endpoints
            .for_each(|_, state| entries += locking::lock(state).live);
        entries
    }

    /// The index's counters for a metrics surface (entries, evictions, inserts, removed
    /// endpoints): a few relaxed atomic loads, no lock. Lookups never update them. See
    /// [`PrefixIndexStats`].
    pub fn stats(&self) -> PrefixIndexStats {
        self.counters.snapshot(self.endpoints.len())
    }

    /// Distinct blocks held by at least one endpoint.
    pub fn blocks(&self) -> usize {
        self.shards.iter().map(|s| locking::read(&s.0).len()).sum()
    }

    /// Endpoints the index currently remembers.
    pub fn endpoints(&self) -> Vec<EndpointId> {
        let mut ids = Vec::with_capacity(self.endpoints.len());
        self.endpoints.for_each(|id, _| ids.push(id));
        ids.sort_unstable();
        ids
    }

    /// Whether `endpoint` is believed to hold `key`.
    pub fn holds(&self, endpoint: EndpointId, key: BlockKey) -> bool {
        if endpoint.0 > MAX_ENDPOINT_ID {
            return false;
        }
        let table = locking::read(&self.shards[key.shard()].0);
        table
            .holders(key.get())
            .is_some_and(|h| h.contains(tag_of(endpoint.0)))
    }

    /// Heap bytes the index owns (tables and eviction queues), as its own accounting sees them.
    pub fn heap_bytes(&self) -> usize {
        let tables: usize = self
            .shards
            .iter()
            .map(|s| locking::read(&s.0).heap_bytes())
            .sum();
        let mut queues = 0;
        self.endpoints
            .for_each(|_, state| queues += locking::lock(state).queue.capacity() * 8);
        tables + queues
    }

    #[inline]
    fn lock_shard<'g, 'a: 'g>(
        &'a self,
        guard: &'g mut ShardGuard<'a>,
        shard: usize,
    ) -> &'g mut BlockTable {
        if guard.as_ref().map(|g| g.0) != Some(shard) {
            *guard = None;
        }
        let (_, table) =
            guard.get_or_insert_with(|| (shard, locking::write(&self.shards[shard].0)));
        table
    }

    /// Every (key, endpoint) entry of the tables, sorted (for tests).
    #[cfg(test)]
    pub(crate) fn audit(&self) -> Vec<(u64, EndpointId)> {
        let mut out: Vec<(u64, EndpointId)> = self
            .shards
            .iter()
            .flat_map(|s| locking::read(&s.0).entries())
            .map(|(k, t)| (k, EndpointId(id_of(t))))
            .collect();
        out.sort_unstable();
        out
    }

    /// Checks every known endpoint's bookkeeping once no call is in flight: nothing being
    /// evicted, no deficit, not retired, `live` equal to its entries in the tables, and every
    /// one of them queued for the clock (for tests).
    #[cfg(test)]
    pub(crate) fn check_settled(&self) -> Result<(), String> {
        let audit = self.audit();
        let mut states = Vec::new();
        self.endpoints
            .for_each(|id, state| states.push((id, std::sync::Arc::clone(state))));
        for (id, state) in states {
            let ep = locking::lock(&state);
            let held: Vec<u64> = audit
                .iter()
                .filter(|(_, e)| *e == id)
                .map(|(k, _)| *k)
                .collect();
            if ep.evicting != 0 || ep.deficit != 0 || ep.retired {
                return Err(format!(
                    "{id}: evicting {}, deficit {}, retired {}",
                    ep.evicting, ep.deficit, ep.retired
                ));
            }
            if ep.live != held.len() {
                return Err(format!("{id}: counts {} but holds {}", ep.live, held.len()));
            }
            let queued: ahash::AHashSet<u64> = ep.queue.iter().copied().collect();
            if let Some(key) = held.iter().find(|k| !queued.contains(k)) {
                return Err(format!("{id}: holds {key:#x}, which is not queued"));
            }
        }
        Ok(())
    }

    /// Space the retired ids take (for tests).
    #[cfg(test)]
    pub(crate) fn retired_footprint(&self) -> usize {
        self.endpoints.retired_ranges()
    }
}

impl MembershipListener for PrefixIndex {
    fn on_removed(&self, removed: &[EndpointId]) {
        self.remove_endpoints(removed);
    }
}
