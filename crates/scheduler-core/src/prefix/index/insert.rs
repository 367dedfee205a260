//! Recording and forgetting blocks for an endpoint.

use super::{PrefixIndex, ShardGuard};
use crate::endpoint::EndpointId;
use crate::prefix::locking;
use crate::prefix::table::{MAX_ENDPOINT_ID, MAX_STRETCH, tag_of};
use crate::prefix::{BlockChain, BlockKey};
use crate::request::Prompt;

/// The keys one insert added, in order: one stretch's worth on the stack, the rest (inserts of
/// more than [`MAX_STRETCH`] new blocks) on the heap.
struct AddedKeys {
    first: [u64; MAX_STRETCH],
    len: usize,
    more: Vec<u64>,
}

impl Default for AddedKeys {
    fn default() -> Self {
        AddedKeys {
            first: [0; MAX_STRETCH],
            len: 0,
            more: Vec::new(),
        }
    }
}

impl AddedKeys {
    #[inline]
    fn push(&mut self, key: u64) {
        match self.first.get_mut(self.len) {
            Some(slot) => *slot = key,
            None => self.more.push(key),
        }
        self.len += 1;
    }

    fn len(&self) -> usize {
        self.len
    }

    fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        let stacked = self.len.min(MAX_STRETCH);
        self.first[..stacked].iter().chain(&self.more).copied()
    }
}

impl PrefixIndex {
    /// Records that `endpoint` now holds every block of `chain` (finishing its hashing).
    /// `capacity`, when given, updates the endpoint's capacity in blocks (capped at
    /// [`MAX_CAPACITY_PER_ENDPOINT`](crate::prefix::MAX_CAPACITY_PER_ENDPOINT)).
    pub fn insert_chain(
        &self,
        endpoint: EndpointId,
        chain: &mut BlockChain,
        prompt: &Prompt,
        capacity: Option<usize>,
    ) {
        let keys = chain.complete(prompt);
        self.journal.note(endpoint, keys);
        self.insert_keys(endpoint, keys, capacity, true);
    }

    /// Records that `endpoint` holds `keys` (a chain's keys in order, or any keys a KV event
    /// reports), evicting its coldest blocks beyond its capacity. Later keys of the slice are
    /// evicted before earlier ones, as a model server frees a sequence's tail first. Ignored for
    /// endpoints that left the pool. `capacity` as for [`insert_chain`](Self::insert_chain).
    pub fn insert_blocks(&self, endpoint: EndpointId, keys: &[BlockKey], capacity: Option<usize>) {
        self.insert_keys(endpoint, keys, capacity, false);
    }

    /// [`insert_blocks`](Self::insert_blocks); `whole_chain` when `keys` are every key of one
    /// chain in order from its first block, so runs of blocks with the same holders may be
    /// recorded for lookups to skip over.
    fn insert_keys(
        &self,
        endpoint: EndpointId,
        keys: &[BlockKey],
        capacity: Option<usize>,
        whole_chain: bool,
    ) {
        if keys.is_empty() || endpoint.0 > MAX_ENDPOINT_ID {
            return;
        }
        let Some(state) = self.endpoint_state(endpoint) else {
            return;
        };
        // The tables first, with the endpoint unlocked: inserts for one endpoint from several
        // threads overlap, and only the queue work below is serialized.
        let tag = tag_of(endpoint.0);
        let mut added_keys = AddedKeys::default();
        let mut guard: ShardGuard<'_> = None;
        let mut following = None;
        // Backwards in stretches of keys in one shard (a chain is all one stretch of its
        // shard), each located in one batch.
        let mut raw = [0u64; MAX_STRETCH];
        let mut end = keys.len();
        while let Some(last) = end.checked_sub(1).and_then(|i| keys.get(i)) {
            let shard = last.shard();
            let start = end.saturating_sub(MAX_STRETCH);
            let start = keys[start..end]
                .iter()
                .rposition(|k| k.shard() != shard)
                .map_or(start, |i| start + i + 1);
            let stretch = &mut raw[..end - start];
            for (r, k) in stretch.iter_mut().zip(&keys[start..end]) {
                *r = k.get();
            }
            self.lock_shard(&mut guard, shard).add_stretch(
                stretch,
                tag,
                whole_chain,
                &mut following,
                |key| added_keys.push(key),
            );
            end = start;
        }
        drop(guard);
        let mut ep = locking::lock(&state);
        if ep.retired {
            // The endpoint left meanwhile: take back what was added for it.
            drop(ep);
            let mut guard: ShardGuard<'_> = None;
            for key in added_keys.iter() {
                self.lock_shard(&mut guard, BlockKey::from_raw(key).shard())
                    .remove(key, tag);
            }
            return;
        }
        if let Some(capacity) = capacity {
            ep.set_capacity(capacity);
        }
        let before = ep.live;
        ep.queue.extend(added_keys.iter());
        ep.counted(added_keys.len());
        self.counters.inserted(added_keys.len());
        self.counters.held(before, ep.live);
        self.evict(&state, ep, tag);
    }

    /// Records that `endpoint` no longer holds `keys` (for KV-cache removal events).
    pub fn remove_blocks(&self, endpoint: EndpointId, keys: &[BlockKey]) {
        if endpoint.0 > MAX_ENDPOINT_ID {
            return;
        }
        let Some(state) = self.endpoints.get(endpoint) else {
            return;
        };
        let mut ep = locking::lock(&state);
        if ep.retired {
            // The endpoint left meanwhile: its entries are gone already.
            return;
        }
        let tag = tag_of(endpoint.0);
        let before = ep.live;
        let mut guard: ShardGuard<'_> = None;
        for key in keys {
            if self
                .lock_shard(&mut guard, key.shard())
                .remove(key.get(), tag)
            {
                ep.forgot(1);
            }
        }
        self.counters.held(before, ep.live);
        if ep.queue_bloated() {
            self.compact(&mut ep, tag, &mut guard);
        }
    }

    /// [`set_capacity`](Self::set_capacity) without the cap (for tests of the eviction
    /// arithmetic near `usize::MAX`).
    #[cfg(test)]
    pub(crate) fn set_capacity_unchecked(&self, endpoint: EndpointId, capacity: usize) {
        let Some(state) = self.endpoint_state(endpoint) else {
            return;
        };
        let mut ep = locking::lock(&state);
        ep.set_capacity_unchecked(capacity);
        self.evict(&state, ep, tag_of(endpoint.0));
    }

    /// Sets `endpoint`'s capacity in blocks (capped at
    /// [`MAX_CAPACITY_PER_ENDPOINT`](crate::prefix::MAX_CAPACITY_PER_ENDPOINT)), evicting at
    /// once if it now holds too many.
    pub fn set_capacity(&self, endpoint: EndpointId, capacity: usize) {
        if endpoint.0 > MAX_ENDPOINT_ID {
            return;
        }
        let Some(state) = self.endpoint_state(endpoint) else {
            return;
        };
        let mut ep = locking::lock(&state);
        ep.set_capacity(capacity);
        self.evict(&state, ep, tag_of(endpoint.0));
    }
}
