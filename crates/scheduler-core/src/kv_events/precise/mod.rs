//! The precise prefix index: what each model server's KV cache holds, as its KV-cache events
//! say, in the same [`PrefixIndex`] the approximate mode fills by guessing.
//!
//! A model server reports `BlockStored` (these consecutive full blocks, after this parent
//! block, with these tokens) and `BlockRemoved` (these blocks are gone). Shepherd does not
//! reproduce the engine's own block hash (vLLM's depends on its hash function, its seed and
//! `PYTHONHASHSEED`); it hashes the token ids each `BlockStored` carries with its own chained
//! hash ([`ChainLink::extend`]), keeping per endpoint a map from the engine's hash to
//! Shepherd's link so that a later event's parent and removals can be found. A request is cut
//! into the engine's block size and keyed with [`precise_seed`], so its keys equal the keys of
//! the blocks the engine reported: the match of a lookup is then what the engine holds.
//!
//! The engine alone decides what is evicted: the index's own LRU never evicts a precise entry
//! (its per-endpoint capacity is [`MAX_CAPACITY_PER_ENDPOINT`]); memory stays bounded by the
//! engines' capacities, because an endpoint holding more blocks than its engine can
//! ([`set_capacity`](PreciseIndex::set_capacity), from `num_gpu_blocks`) has missed removals
//! and is reset. Whenever the picture of an endpoint could be wrong — `AllBlocksCleared`, a gap
//! in the stream that no replay filled, a publisher restart, a broken connection — its entries
//! are dropped ([`reset`](PreciseIndex::reset)), not guessed: the index holds only what the
//! engine reported since.
//!
//! What is indexed: blocks on the GPU (`medium` absent or `GPU`), of the first KV-cache group
//! (`group_idx` absent or 0), whose extra keys are at most the LoRA adapter's name; the chain's
//! seed is the adapter's name (`lora_name`), not the model (an endpoint serves one base model).
//! A stored block whose parent is unknown (stored before a reset, say) cannot be keyed and is
//! skipped until the engine stores its prefix again. Data-parallel ranks of one endpoint share
//! its entries.
//!
//! ```
//! use shepherd_scheduler_core::endpoint::EndpointId;
//! use shepherd_scheduler_core::kv_events::{
//!     BlockRemoved, BlockStored, EngineBlockHash, KvEvent, KvEventBatch, PreciseIndex,
//!     PreciseIndexConfig, precise_seed,
//! };
//! use shepherd_scheduler_core::request::Prompt;
//!
//! let precise = PreciseIndex::new(PreciseIndexConfig::default()); // 16-token blocks
//! let tokens: Vec<u32> = (0..48).collect(); // 3 blocks
//! let stored = BlockStored {
//!     block_hashes: vec![EngineBlockHash(11), EngineBlockHash(12), EngineBlockHash(13)],
//!     token_ids: tokens.clone(),
//!     block_size: 16,
//!     ..BlockStored::default()
//! };
//! let batch = KvEventBatch { events: vec![KvEvent::BlockStored(stored)], ..Default::default() };
//! precise.apply(EndpointId(1), &batch);
//!
//! // A request with the same 48 tokens and 8 more matches all 3 blocks on endpoint 1.
//! let prompt = Prompt::Tokens((0..56).collect());
//! let index = precise.index();
//! let mut chain = index.chain(precise_seed(None), &prompt);
//! assert_eq!(index.match_prefix(&mut chain, &prompt).matched_blocks(EndpointId(1)), 3);
//!
//! // The engine evicts the second block: only the first still matches.
//! let removed = BlockRemoved { block_hashes: vec![EngineBlockHash(12)], ..Default::default() };
//! precise.apply(EndpointId(1), &KvEventBatch { events: vec![KvEvent::BlockRemoved(removed)], ..Default::default() });
//! let mut chain = index.chain(precise_seed(None), &prompt);
//! assert_eq!(index.match_prefix(&mut chain, &prompt).matched_blocks(EndpointId(1)), 1);
//! ```

mod engine_blocks;
mod reset;
mod stats;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ahash::{AHashMap, AHashSet};
use parking_lot::Mutex;

use crate::clock::Timestamp;

use crate::endpoint::{EndpointId, MembershipListener};
use crate::prefix::{
    BlockKey, BlockLayout, ChainLink, MAX_CAPACITY_PER_ENDPOINT, PrefixIndex, PrefixIndexConfig,
    chain_seed,
};

use super::event::{BlockRemoved, BlockStored, ExtraKey, KvEvent, KvEventBatch};
use engine_blocks::EngineBlocks;
pub use reset::ResetReason;
pub use stats::PreciseStats;
use stats::{Counters, add};

/// The chain seed of precise keys: the LoRA adapter's name only (see the [module docs](self)).
pub fn precise_seed(lora: Option<&str>) -> u64 {
    chain_seed("", lora, "")
}

/// How a [`PreciseIndex`] cuts prompts and bounds memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreciseIndexConfig {
    /// Tokens per block: the engine's block size (vLLM's default is 16).
    pub block_tokens: usize,
    /// Most blocks of a request looked up.
    pub max_blocks: usize,
    /// An endpoint's capacity in blocks while its metrics have not said (`num_gpu_blocks`).
    pub default_capacity: usize,
}

impl Default for PreciseIndexConfig {
    /// 16-token blocks, 131,072 tokens per request, 1,048,576 blocks per endpoint until its
    /// metrics say.
    fn default() -> Self {
        PreciseIndexConfig {
            block_tokens: 16,
            max_blocks: 131_072 / 16,
            default_capacity: 1 << 20,
        }
    }
}

/// What applying one batch did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Applied {
    /// Blocks recorded.
    pub stored: usize,
    /// Blocks forgotten.
    pub removed: usize,
    /// Blocks skipped (orphans, other tiers or groups, extra keys, block-size mismatches).
    pub skipped: usize,
    /// Set when the batch reset the endpoint (`AllBlocksCleared`, or an overflow).
    pub reset: Option<ResetReason>,
}

/// One endpoint's state, for debug views.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointSync {
    /// Blocks the index holds for it.
    pub blocks: usize,
    /// Its capacity in blocks, when known.
    pub capacity: Option<usize>,
    /// Times its entries were dropped.
    pub resets: u64,
    /// Why they were last dropped.
    pub last_reset: Option<ResetReason>,
}

/// The precise prefix index. See the [module docs](self).
#[derive(Debug)]
pub struct PreciseIndex {
    config: PreciseIndexConfig,
    index: Arc<PrefixIndex>,
    endpoints: Mutex<AHashMap<EndpointId, Arc<Mutex<EngineBlocks>>>>,
    counters: Counters,
    /// When every endpoint's speculations are next swept (ns).
    next_sweep: AtomicU64,
}

impl PreciseIndex {
    /// An empty precise index.
    pub fn new(config: PreciseIndexConfig) -> Self {
        let index = PrefixIndex::new(PrefixIndexConfig {
            layout: BlockLayout::new(config.block_tokens, config.max_blocks),
            default_capacity: MAX_CAPACITY_PER_ENDPOINT,
        });
        PreciseIndex {
            config,
            index: Arc::new(index),
            endpoints: Mutex::new(AHashMap::new()),
            counters: Counters::default(),
            next_sweep: AtomicU64::new(0),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &PreciseIndexConfig {
        &self.config
    }

    /// The prefix index lookups read (its entries are only ever written by events).
    pub fn index(&self) -> &Arc<PrefixIndex> {
        &self.index
    }

    /// The counters.
    pub fn stats(&self) -> PreciseStats {
        self.counters.snapshot()
    }

    fn state(&self, endpoint: EndpointId) -> Option<Arc<Mutex<EngineBlocks>>> {
        let mut endpoints = self.endpoints.lock();
        if let Some(state) = endpoints.get(&endpoint) {
            return Some(Arc::clone(state));
        }
        if self.index.has_left(endpoint) {
            return None;
        }
        let state = Arc::new(Mutex::new(EngineBlocks::default()));
        endpoints.insert(endpoint, Arc::clone(&state));
        Some(state)
    }

    /// Sets `endpoint`'s capacity in blocks (its engine's `num_gpu_blocks`), resetting it if
    /// it already holds more than that allows.
    pub fn set_capacity(&self, endpoint: EndpointId, blocks: usize) {
        let Some(state) = self.state(endpoint) else {
            return;
        };
        let mut ep = state.lock();
        ep.capacity = Some(blocks.min(MAX_CAPACITY_PER_ENDPOINT));
        if ep.links.len() > ep.limit(self.config.default_capacity) {
            self.reset_locked(endpoint, &mut ep, ResetReason::Overflow);
        }
    }

    /// Applies one batch of `endpoint`'s events, in order.
    pub fn apply(&self, endpoint: EndpointId, batch: &KvEventBatch) -> Applied {
        let mut applied = Applied::default();
        let Some(state) = self.state(endpoint) else {
            return applied;
        };
        let mut ep = state.lock();
        if ep.gone {
            return applied;
        }
        self.counters
            .batches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut links = Vec::new();
        let mut keys = Vec::new();
        for event in &batch.events {
            match event {
                KvEvent::BlockStored(stored) => {
                    self.store(
                        endpoint,
                        &mut ep,
                        stored,
                        &mut links,
                        &mut keys,
                        &mut applied,
                    );
                    if ep.links.len() > ep.limit(self.config.default_capacity) {
                        self.reset_locked(endpoint, &mut ep, ResetReason::Overflow);
                        applied.reset = Some(ResetReason::Overflow);
                    }
                }
                KvEvent::BlockRemoved(removed) => {
                    self.remove(endpoint, &mut ep, removed, &mut keys, &mut applied);
                }
                KvEvent::AllBlocksCleared => {
                    self.reset_locked(endpoint, &mut ep, ResetReason::Cleared);
                    applied.reset = Some(ResetReason::Cleared);
                }
                KvEvent::Unknown(_) => add(&self.counters.unknown_events, 1),
            }
        }
        applied
    }

    fn store(
        &self,
        endpoint: EndpointId,
        ep: &mut EngineBlocks,
        stored: &BlockStored,
        links: &mut Vec<ChainLink>,
        keys: &mut Vec<BlockKey>,
        applied: &mut Applied,
    ) {
        let blocks = stored.block_hashes.len();
        let on_gpu = stored
            .medium
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case("gpu"));
        let first_group = stored.group_idx.is_none_or(|g| g == 0);
        let dense = stored.block_size > 0
            && stored.token_ids.len() == blocks.saturating_mul(stored.block_size as usize);
        if !on_gpu || !first_group || !dense {
            add(&self.counters.skipped_blocks, blocks);
            applied.skipped += blocks;
            return;
        }
        if stored.block_size as usize != self.config.block_tokens {
            add(&self.counters.block_size_mismatches, blocks);
            applied.skipped += blocks;
            return;
        }
        let parent = match stored.parent_block_hash {
            None => None,
            Some(hash) => match ep.links.get(&hash.0) {
                Some(&link) => Some(link),
                None => {
                    add(&self.counters.orphan_blocks, blocks);
                    applied.skipped += blocks;
                    return;
                }
            },
        };
        // Blocks hashed with more than their tokens (and the adapter) break the chain there.
        let lora = stored.lora_name.as_deref();
        let keyable = stored
            .extra_keys
            .iter()
            .position(|extra| !only_adapter(extra.as_deref(), lora))
            .unwrap_or(blocks)
            .min(blocks);
        if keyable < blocks {
            add(&self.counters.skipped_blocks, blocks - keyable);
            applied.skipped += blocks - keyable;
        }
        if keyable == 0 {
            return;
        }
        let block_tokens = self.config.block_tokens;
        links.clear();
        ChainLink::extend(
            precise_seed(lora),
            parent,
            &stored.token_ids[..keyable * block_tokens],
            block_tokens,
            links,
        );
        keys.clear();
        for (hash, link) in stored.block_hashes.iter().zip(links.iter()) {
            ep.links.insert(hash.0, *link);
            ep.confirmed.insert(link.key().get());
            keys.push(link.key());
        }
        self.index.insert_blocks(endpoint, keys, None);
        add(&self.counters.stored_blocks, keys.len());
        applied.stored += keys.len();
    }

    fn remove(
        &self,
        endpoint: EndpointId,
        ep: &mut EngineBlocks,
        removed: &BlockRemoved,
        keys: &mut Vec<BlockKey>,
        applied: &mut Applied,
    ) {
        let on_gpu = removed
            .medium
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case("gpu"));
        if !on_gpu || removed.group_idx.is_some_and(|g| g != 0) {
            return;
        }
        keys.clear();
        for hash in &removed.block_hashes {
            match ep.links.remove(&hash.0) {
                Some(link) => {
                    ep.confirmed.remove(&link.key().get());
                    keys.push(link.key());
                }
                None => add(&self.counters.unknown_removed_blocks, 1),
            }
        }
        self.index.remove_blocks(endpoint, keys);
        add(&self.counters.removed_blocks, keys.len());
        applied.removed += keys.len();
    }

    /// Records, at pick time, that `endpoint` is about to hold `keys` (the picked request's
    /// blocks), for `ttl`: upstream's speculative indexing, which covers the time between a
    /// pick and the engine's events (the request's wait and prefill), so that requests sharing
    /// a new prefix follow the first instead of spreading. A speculative entry the engine
    /// confirms stays (as a fact); one it never reports is taken out when it expires. At most
    /// the endpoint's capacity in speculative blocks; beyond, nothing is recorded.
    pub fn speculate(
        &self,
        endpoint: EndpointId,
        keys: &[BlockKey],
        now: Timestamp,
        ttl: Duration,
    ) {
        self.sweep_all(now, ttl);
        let Some(state) = self.state(endpoint) else {
            return;
        };
        let mut ep = state.lock();
        if ep.gone || keys.is_empty() {
            return;
        }
        self.expire(endpoint, &mut ep, now);
        let capacity = ep.capacity.unwrap_or(self.config.default_capacity);
        if ep.speculative.len() + keys.len() > capacity {
            return;
        }
        let mut fresh = Vec::new();
        for key in keys {
            let refs = ep.speculative.entry(key.get()).or_insert(0);
            *refs += 1;
            if *refs == 1 && !ep.confirmed.contains(&key.get()) {
                fresh.push(*key);
            }
        }
        ep.expiry
            .push_back((now.saturating_add(ttl), keys.to_vec()));
        self.index.insert_blocks(endpoint, &fresh, None);
        add(&self.counters.speculative_blocks, fresh.len());
    }

    /// Takes out `endpoint`'s speculations that expired by `now` (those the engine did not
    /// confirm).
    fn expire(&self, endpoint: EndpointId, ep: &mut EngineBlocks, now: Timestamp) {
        let mut gone = Vec::new();
        while ep
            .expiry
            .front()
            .is_some_and(|(deadline, _)| *deadline <= now)
        {
            let Some((_, keys)) = ep.expiry.pop_front() else {
                break;
            };
            for key in keys {
                let raw = key.get();
                let Some(refs) = ep.speculative.get_mut(&raw) else {
                    continue;
                };
                *refs -= 1;
                if *refs == 0 {
                    ep.speculative.remove(&raw);
                    if !ep.confirmed.contains(&raw) {
                        gone.push(key);
                    }
                }
            }
        }
        if !gone.is_empty() {
            self.index.remove_blocks(endpoint, &gone);
            add(&self.counters.speculative_expired, gone.len());
        }
    }

    /// Sweeps every endpoint's expired speculations, at most every quarter `ttl`.
    fn sweep_all(&self, now: Timestamp, ttl: Duration) {
        let due = self.next_sweep.load(Ordering::Relaxed);
        if now.as_nanos() < due {
            return;
        }
        let next = now.saturating_add(ttl / 4).as_nanos();
        if self
            .next_sweep
            .compare_exchange(due, next, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return; // another pick is sweeping
        }
        let states = self.states();
        for (id, state) in states {
            let mut ep = state.lock();
            if !ep.expiry.is_empty() {
                self.expire(id, &mut ep, now);
            }
        }
    }

    /// Drops every entry of `endpoint` (see the [module docs](self) for when); returns how many
    /// blocks were dropped.
    pub fn reset(&self, endpoint: EndpointId, reason: ResetReason) -> usize {
        let Some(state) = self.state(endpoint) else {
            return 0;
        };
        let mut ep = state.lock();
        self.reset_locked(endpoint, &mut ep, reason)
    }

    fn reset_locked(
        &self,
        endpoint: EndpointId,
        ep: &mut EngineBlocks,
        reason: ResetReason,
    ) -> usize {
        let keys: Vec<BlockKey> = ep.links.drain().map(|(_, link)| link.key()).collect();
        ep.links.shrink_to(64);
        ep.confirmed = AHashSet::new();
        let speculative: Vec<BlockKey> = ep
            .speculative
            .drain()
            .map(|(key, _)| BlockKey::from_raw(key))
            .collect();
        ep.expiry.clear();
        self.index.remove_blocks(endpoint, &keys);
        self.index.remove_blocks(endpoint, &speculative);
        ep.resets += 1;
        ep.last_reset = Some(reason);
        add(&self.counters.resets[reason.slot()], 1);
        keys.len()
    }

    /// `endpoint`'s capacity in blocks, when [`set_capacity`](Self::set_capacity) gave one.
    pub fn capacity_of(&self, endpoint: EndpointId) -> Option<usize> {
        self.endpoints
            .lock()
            .get(&endpoint)
            .and_then(|s| s.lock().capacity)
    }

    /// Blocks held for `endpoint`.
    pub fn blocks_of(&self, endpoint: EndpointId) -> usize {
        self.endpoints
            .lock()
            .get(&endpoint)
            .map_or(0, |s| s.lock().links.len())
    }

    /// Every endpoint's state, taken out of the map so that each is locked on its own.
    fn states(&self) -> Vec<(EndpointId, Arc<Mutex<EngineBlocks>>)> {
        self.endpoints
            .lock()
            .iter()
            .map(|(&id, s)| (id, Arc::clone(s)))
            .collect()
    }

    /// Every endpoint's state, by id.
    pub fn endpoints(&self) -> Vec<(EndpointId, EndpointSync)> {
        let states = self.states();
        let mut out: Vec<(EndpointId, EndpointSync)> = states
            .into_iter()
            .map(|(id, state)| {
                let ep = state.lock();
                let sync = EndpointSync {
                    blocks: ep.links.len(),
                    capacity: ep.capacity,
                    resets: ep.resets,
                    last_reset: ep.last_reset,
                };
                (id, sync)
            })
            .collect();
        out.sort_unstable_by_key(|(id, _)| *id);
        out
    }
}

/// Whether a block's extra keys hold nothing but the adapter's name.
fn only_adapter(extra: Option<&[ExtraKey]>, lora: Option<&str>) -> bool {
    extra.is_none_or(|keys| {
        keys.iter()
            .all(|k| matches!((k, lora), (ExtraKey::Text(t), Some(l)) if t == l))
    })
}

impl MembershipListener for PreciseIndex {
    fn on_removed(&self, removed: &[EndpointId]) {
        self.index.on_removed(removed);
        let mut endpoints = self.endpoints.lock();
        for id in removed {
            if let Some(state) = endpoints.remove(id) {
                let mut ep = state.lock();
                ep.gone = true;
                ep.links = AHashMap::new();
                ep.confirmed = AHashSet::new();
                ep.speculative = AHashMap::new();
                ep.expiry.clear();
            }
        }
    }
}
