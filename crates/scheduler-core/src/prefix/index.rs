//! The sharded prefix index.

use std::sync::Arc;

use ahash::{AHashMap, AHashSet};
use arc_swap::ArcSwap;
use parking_lot::{Mutex, MutexGuard, RwLock, RwLockWriteGuard};

use super::chain::{HASH_BATCH, MAX_HASH_SPAN, SHARDS};
use super::endpoint_blocks::EndpointBlocks;
use super::table::{ABSENT, Added, BlockTable, ClockHand, MAX_ENDPOINT_ID, Run, id_of, tag_of};
use super::{BlockChain, BlockKey, PrefixIndexConfig, PrefixMatch};
use crate::endpoint::{EndpointId, MembershipListener};
use crate::request::Prompt;

/// One shard on its own cache lines, so two threads working on two shards do not share one.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard(RwLock<BlockTable>);

type EndpointState = Arc<Mutex<EndpointBlocks>>;

#[derive(Debug, Clone, Default)]
struct Endpoints {
    live: AHashMap<EndpointId, EndpointState>,
    /// Endpoints that left the pool: ids are never reused, so late inserts for them are dropped.
    retired: AHashSet<EndpointId>,
}

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
    endpoints: ArcSwap<Endpoints>,
    endpoints_write: Mutex<()>,
}

/// Most queue entries one eviction batch takes at once.
const MAX_EVICT_BATCH: usize = 4096;

/// Blocks whose home slots a lookup loads at once.
const PROBE_BATCH: usize = 32;

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
            endpoints: ArcSwap::from_pointee(Endpoints::default()),
            endpoints_write: Mutex::new(()),
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

    /// Looks `chain` up: how many leading blocks each endpoint holds.
    pub fn match_prefix(&self, chain: &mut BlockChain, prompt: &Prompt) -> PrefixMatch {
        let mut out = PrefixMatch::new();
        self.match_into(chain, prompt, &mut out);
        out
    }

    /// Like [`match_prefix`](Self::match_prefix), refilling `out`. Hashes `chain` only as far as
    /// the walk needs (plus at most a quarter of what matched, or a small first batch).
    pub fn match_into(&self, chain: &mut BlockChain, prompt: &Prompt, out: &mut PrefixMatch) {
        let total = chain.total_blocks();
        out.reset(total);
        let Some(&first) = chain.extend_to(prompt, HASH_BATCH).first() else {
            return;
        };
        let table = self.shards[first.shard()].0.read();
        let at = table.locate(first.get());
        let Some(holders) = table.holders_at(at) else {
            return;
        };
        let PrefixMatch {
            matched, active, ..
        } = out;
        holders.for_each(|t| active.push(t));
        let mut last = holders.signature();
        let mut run = table.run_at(at).map(|r| (0, r));
        // The last key of a run this chain did not follow: the runs on the following blocks
        // of the same insert end there too, and are not tried again.
        let mut left_run = None;
        // Where the current stretch of block-by-block walking began (after a skipped run, the
        // next block is as likely to end the match as the first one).
        let mut stretch = 0;
        let mut i = 1;
        let mut found = [ABSENT; PROBE_BATCH];
        // Chains are hot (shared) then cold (own tail): probe first where the last block was.
        let mut hot = true;
        let mut raw = [0u64; PROBE_BATCH];
        'walk: while !active.is_empty() && i < total {
            // A valid run recorded on the last block seen: when this chain reaches the run's
            // last key at the same distance, every block in between has the same holders.
            if let Some((from, r)) = run.take()
                && left_run != Some(r.end)
            {
                match skip_run(&table, chain, prompt, from, r, last) {
                    Some(next) => {
                        i = next;
                        stretch = next;
                        continue;
                    }
                    None => left_run = Some(r.end),
                }
            }
            // Hash a span that grows with the stretch (so a lookup hashes at most half again
            // what it matched), then probe it in batches with nothing in between: the probes'
            // cache misses overlap each other instead of alternating with hashing.
            let span = ((i - stretch) / 2).clamp(HASH_BATCH, MAX_HASH_SPAN);
            let span_end = (i + span).min(total);
            let computed = chain.extend_to(prompt, span_end);
            let span_end = span_end.min(computed.len());
            if i >= span_end {
                break;
            }
            while i < span_end {
                let end = (i + PROBE_BATCH).min(span_end);
                let batch = end - i;
                for (r, k) in raw.iter_mut().zip(&computed[i..end]) {
                    *r = k.get();
                }
                table.find_batch(&raw[..batch], &mut found[..batch], hot);
                for (j, &at) in found[..batch].iter().enumerate() {
                    let block = i + j;
                    let Some(holders) = table.holders_at(at) else {
                        matched.extend(active.drain(..).map(|t| (EndpointId(id_of(t)), block)));
                        break 'walk;
                    };
                    hot = BlockTable::is_hot(at);
                    let signature = holders.signature();
                    // Same holders as the previous block: every active endpoint still matches.
                    if signature != last {
                        active.retain(|&t| {
                            let keep = holders.contains(t);
                            if !keep {
                                matched.push((EndpointId(id_of(t)), block));
                            }
                            keep
                        });
                        last = signature;
                        if active.is_empty() {
                            break 'walk;
                        }
                    }
                    if let Some(r) = table.run_at(at) {
                        run = Some((block, r));
                        i = block + 1;
                        continue 'walk;
                    }
                }
                i = end;
            }
        }
        // Whoever is still active holds every block (or every block the chain could hash).
        let reached = i.min(total);
        matched.extend(active.drain(..).map(|t| (EndpointId(id_of(t)), reached)));
        matched.sort_unstable_by_key(|m| m.0);
    }

    /// Records that `endpoint` now holds every block of `chain` (finishing its hashing).
    /// `capacity`, when given, updates the endpoint's capacity in blocks.
    pub fn insert_chain(
        &self,
        endpoint: EndpointId,
        chain: &mut BlockChain,
        prompt: &Prompt,
        capacity: Option<usize>,
    ) {
        let keys = chain.complete(prompt);
        self.insert_keys(endpoint, keys, capacity, true);
    }

    /// Records that `endpoint` holds `keys` (a chain's keys in order, or any keys a KV event
    /// reports), evicting its coldest blocks beyond its capacity. Later keys of the slice are
    /// evicted before earlier ones, as a model server frees a sequence's tail first. Ignored for
    /// endpoints that left the pool.
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
        let mut added_keys = Vec::with_capacity(keys.len());
        let mut guard: ShardGuard<'_> = None;
        let mut following = None;
        if whole_chain && let Some(first) = keys.first() {
            // A chain lives in one shard: bring its slots in with overlapping misses first.
            let mut raw = [0u64; 64];
            let table = self.lock_shard(&mut guard, first.shard());
            for chunk in keys.chunks(64) {
                for (r, k) in raw.iter_mut().zip(chunk) {
                    *r = k.get();
                }
                table.warm(&raw[..chunk.len()]);
            }
        }
        for key in keys.iter().rev() {
            let table = self.lock_shard(&mut guard, key.shard());
            let added = if whole_chain {
                let (added, run) = table.add_in_chain(key.get(), tag, following);
                following = run;
                added
            } else {
                table.add(key.get(), tag)
            };
            if added == Added::New {
                added_keys.push(key.get());
            }
        }
        drop(guard);
        let mut ep = state.lock();
        if ep.retired {
            // The endpoint left meanwhile: take back what was added for it.
            drop(ep);
            let mut guard: ShardGuard<'_> = None;
            for &key in &added_keys {
                self.lock_shard(&mut guard, BlockKey::from_raw(key).shard())
                    .remove(key, tag);
            }
            return;
        }
        if let Some(capacity) = capacity {
            ep.capacity = capacity;
        }
        ep.queue.extend(added_keys.iter().copied());
        ep.counted(added_keys.len());
        self.evict(ep, tag);
    }

    /// Records that `endpoint` no longer holds `keys` (for KV-cache removal events).
    pub fn remove_blocks(&self, endpoint: EndpointId, keys: &[BlockKey]) {
        if endpoint.0 > MAX_ENDPOINT_ID {
            return;
        }
        let Some(state) = self.endpoints.load().live.get(&endpoint).cloned() else {
            return;
        };
        let mut ep = state.lock();
        let tag = tag_of(endpoint.0);
        let mut guard: ShardGuard<'_> = None;
        for key in keys {
            if self
                .lock_shard(&mut guard, key.shard())
                .remove(key.get(), tag)
            {
                ep.forgot(1);
            }
        }
        if ep.queue.len() > 2 * ep.live + 64 {
            self.compact(&mut ep, tag, &mut guard);
        }
    }

    /// Forgets `endpoint` entirely; later inserts for it are ignored (ids are never reused).
    pub fn remove_endpoint(&self, endpoint: EndpointId) {
        let state = {
            let _write = self.endpoints_write.lock();
            let mut next = Endpoints::clone(&self.endpoints.load());
            let state = next.live.remove(&endpoint);
            next.retired.insert(endpoint);
            self.endpoints.store(Arc::new(next));
            state
        };
        let Some(state) = state else {
            return;
        };
        let mut ep = state.lock();
        ep.retired = true;
        let tag = tag_of(endpoint.0);
        let mut guard: ShardGuard<'_> = None;
        for key in std::mem::take(&mut ep.queue) {
            self.lock_shard(&mut guard, BlockKey::from_raw(key).shard())
                .remove(key, tag);
        }
        ep.live = 0;
        ep.deficit = 0;
    }

    /// Sets `endpoint`'s capacity in blocks, evicting at once if it now holds too many.
    pub fn set_capacity(&self, endpoint: EndpointId, capacity: usize) {
        if endpoint.0 > MAX_ENDPOINT_ID {
            return;
        }
        let Some(state) = self.endpoint_state(endpoint) else {
            return;
        };
        let mut ep = state.lock();
        ep.capacity = capacity;
        self.evict(ep, tag_of(endpoint.0));
    }

    /// `endpoint`'s capacity in blocks, when the index knows the endpoint.
    pub fn capacity_of(&self, endpoint: EndpointId) -> Option<usize> {
        let state = self.endpoints.load().live.get(&endpoint).cloned()?;
        let capacity = state.lock().capacity;
        Some(capacity)
    }

    /// Blocks `endpoint` is believed to hold.
    pub fn endpoint_entries(&self, endpoint: EndpointId) -> usize {
        let state = self.endpoints.load().live.get(&endpoint).cloned();
        state.map_or(0, |s| s.lock().live)
    }

    /// (block, endpoint) entries in the index.
    pub fn entries(&self) -> usize {
        let endpoints = self.endpoints.load();
        endpoints.live.values().map(|s| s.lock().live).sum()
    }

    /// Distinct blocks held by at least one endpoint.
    pub fn blocks(&self) -> usize {
        self.shards.iter().map(|s| s.0.read().len()).sum()
    }

    /// Endpoints the index currently remembers.
    pub fn endpoints(&self) -> Vec<EndpointId> {
        let mut ids: Vec<EndpointId> = self.endpoints.load().live.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// Whether `endpoint` is believed to hold `key`.
    pub fn holds(&self, endpoint: EndpointId, key: BlockKey) -> bool {
        if endpoint.0 > MAX_ENDPOINT_ID {
            return false;
        }
        let table = self.shards[key.shard()].0.read();
        table
            .holders(key.get())
            .is_some_and(|h| h.contains(tag_of(endpoint.0)))
    }

    /// Heap bytes the index owns (tables and eviction queues), as its own accounting sees them.
    pub fn heap_bytes(&self) -> usize {
        let tables: usize = self.shards.iter().map(|s| s.0.read().heap_bytes()).sum();
        let endpoints = self.endpoints.load();
        let queues: usize = endpoints
            .live
            .values()
            .map(|s| s.lock().queue.capacity() * 8)
            .sum();
        tables + queues
    }

    fn endpoint_state(&self, endpoint: EndpointId) -> Option<EndpointState> {
        {
            let endpoints = self.endpoints.load();
            if let Some(state) = endpoints.live.get(&endpoint) {
                return Some(Arc::clone(state));
            }
            if endpoints.retired.contains(&endpoint) {
                return None;
            }
        }
        let _write = self.endpoints_write.lock();
        let current = self.endpoints.load_full();
        if let Some(state) = current.live.get(&endpoint) {
            return Some(Arc::clone(state));
        }
        if current.retired.contains(&endpoint) {
            return None;
        }
        let state = Arc::new(Mutex::new(EndpointBlocks::new(
            self.config.default_capacity,
        )));
        let mut next = Endpoints::clone(&current);
        next.live.insert(endpoint, Arc::clone(&state));
        self.endpoints.store(Arc::new(next));
        Some(state)
    }

    fn lock_shard<'g, 'a: 'g>(
        &'a self,
        guard: &'g mut ShardGuard<'a>,
        shard: usize,
    ) -> &'g mut BlockTable {
        if guard.as_ref().map(|g| g.0) != Some(shard) {
            *guard = None;
        }
        let (_, table) = guard.get_or_insert_with(|| (shard, self.shards[shard].0.write()));
        table
    }

    /// Runs the clock hand until `ep` fits its capacity.
    ///
    /// The hand takes the entries it needs off the queue front in one batch, then runs the
    /// clock over them with the endpoint unlocked (so inserts for the same endpoint from
    /// other threads wait only for the queue work, not for the table work), and relocks to
    /// account for what it evicted and to requeue the entries given a second chance. Entries
    /// in flight still count as held, so the endpoint never holds more than its capacity once
    /// every eviction has finished; another thread's insert meanwhile evicts only what the
    /// batches in flight do not already cover.
    fn evict(&self, mut ep: MutexGuard<'_, EndpointBlocks>, tag: u32) {
        // Each full turn clears every reference bit, so two turns always suffice.
        let mut budget = 2 * ep.queue.len() + 1;
        // Another eviction in flight has the buffer: this one gets a fresh one.
        let mut batch = std::mem::take(&mut ep.batch);
        while !ep.retired && budget > 0 {
            let excess = ep.live.saturating_sub(ep.capacity + ep.evicting);
            let take = excess.min(ep.queue.len()).min(budget).min(MAX_EVICT_BATCH);
            if take == 0 {
                break;
            }
            budget -= take;
            batch.clear();
            batch.extend(ep.queue.drain(..take));
            ep.evicting += take;
            let evicted = MutexGuard::unlocked(&mut ep, || self.run_clock(&mut batch, tag));
            ep.evicting -= take;
            if ep.retired {
                // The endpoint left meanwhile: what the clock kept must go too.
                let mut guard: ShardGuard<'_> = None;
                for &key in &batch {
                    self.lock_shard(&mut guard, BlockKey::from_raw(key).shard())
                        .remove(key, tag);
                }
                return;
            }
            ep.forgot(evicted);
            ep.queue.extend(batch.iter().copied());
        }
        if batch.capacity() <= MAX_EVICT_BATCH {
            batch.clear();
            ep.batch = batch;
        }
        if ep.queue.len() > 2 * ep.live + 64 {
            let mut guard: ShardGuard<'_> = None;
            self.compact(&mut ep, tag, &mut guard);
        }
    }

    /// Runs the eviction clock over endpoint `tag`'s entries for the keys of `batch` (taken
    /// off its queue, in queue order), a shard's write lock taken once per stretch of keys in
    /// that shard, whose slots are loaded ahead together. Leaves in `batch` the keys given a
    /// second chance, in order; returns how many entries were evicted.
    fn run_clock(&self, batch: &mut Vec<u64>, tag: u32) -> usize {
        let mut evicted = 0;
        let mut kept = 0;
        let mut guard: ShardGuard<'_> = None;
        let mut at = 0;
        while let Some(&first) = batch.get(at) {
            let shard = BlockKey::from_raw(first).shard();
            let stretch = batch[at..]
                .iter()
                .take(64)
                .take_while(|&&k| BlockKey::from_raw(k).shard() == shard)
                .count();
            let table = self.lock_shard(&mut guard, shard);
            table.warm(&batch[at..at + stretch]);
            for i in at..at + stretch {
                let key = batch[i];
                match table.clock(key, tag) {
                    ClockHand::SecondChance => {
                        batch[kept] = key;
                        kept += 1;
                    }
                    ClockHand::Evicted => evicted += 1,
                    ClockHand::Absent => {}
                }
            }
            at += stretch;
        }
        batch.truncate(kept);
        evicted
    }

    /// Drops stale and duplicate queue entries.
    fn compact<'a>(&'a self, ep: &mut EndpointBlocks, tag: u32, guard: &mut ShardGuard<'a>) {
        let mut seen = AHashSet::with_capacity(ep.live);
        let queue = std::mem::take(&mut ep.queue);
        for key in queue {
            let table = self.lock_shard(guard, BlockKey::from_raw(key).shard());
            let present = table.holders(key).is_some_and(|h| h.contains(tag));
            if present && seen.insert(key) {
                ep.queue.push_back(key);
            }
        }
        ep.queue.shrink_to_fit();
    }

    /// Every (key, endpoint) entry of the tables, sorted (for tests).
    #[cfg(test)]
    pub(crate) fn audit(&self) -> Vec<(u64, EndpointId)> {
        let mut out: Vec<(u64, EndpointId)> = self
            .shards
            .iter()
            .flat_map(|s| s.0.read().entries())
            .map(|(k, t)| (k, EndpointId(id_of(t))))
            .collect();
        out.sort_unstable();
        out
    }
}

/// Skips the run `run` recorded on block `from` of `chain` (whose holders have signature
/// `holders`): hashes on in growing spans, checking at each span end that the chain still has
/// a block with the same holders (else it left the run: give up early, having hashed at most
/// twice what it matched, or 16 blocks), and at the run's last position that the chain has the run's last
/// key — then, chained keys being equal, the chain *is* the recorded one up to there and every
/// block of the run still has the recorded holders. Returns the block after the run.
fn skip_run(
    table: &BlockTable,
    chain: &mut BlockChain,
    prompt: &Prompt,
    from: usize,
    run: Run,
    holders: u64,
) -> Option<usize> {
    let last = from + run.len as usize - 1;
    if last >= chain.total_blocks() {
        return None;
    }
    let mut at = from + 1;
    loop {
        let span = (at - from).clamp(2 * HASH_BATCH, MAX_HASH_SPAN);
        let upto = (at + span).min(last + 1);
        let keys = chain.extend_to(prompt, upto);
        if upto > last {
            return (keys.get(last)?.get() == run.end).then_some(last + 1);
        }
        let probe = keys.get(upto - 1)?.get();
        if table.holders_at(table.locate(probe))?.signature() != holders {
            return None;
        }
        at = upto;
    }
}

impl MembershipListener for PrefixIndex {
    fn on_removed(&self, removed: &[EndpointId]) {
        for &endpoint in removed {
            self.remove_endpoint(endpoint);
        }
    }
}
