//! The eviction clock: keeps each endpoint within its capacity.

use ahash::AHashSet;
use parking_lot::{Mutex, MutexGuard};

use super::{PrefixIndex, ShardGuard};
use crate::prefix::BlockKey;
use crate::prefix::endpoint_blocks::EndpointBlocks;
use crate::prefix::locking;
use crate::prefix::table::ClockHand;

/// Most queue entries one eviction batch takes at once.
const MAX_EVICT_BATCH: usize = 4096;

impl PrefixIndex {
    /// Runs the clock hand until `ep` fits its capacity.
    ///
    /// The hand takes the entries it needs off the queue front in one batch, then runs the
    /// clock over them with the endpoint unlocked (so inserts for the same endpoint from
    /// other threads wait only for the queue work, not for the table work), and relocks to
    /// account for what it evicted and to requeue the entries given a second chance. Entries
    /// in flight still count as held, so the endpoint never holds more than its capacity once
    /// every eviction has finished; another thread's insert meanwhile evicts only what the
    /// batches in flight do not already cover.
    pub(super) fn evict<'s>(
        &self,
        state: &'s Mutex<EndpointBlocks>,
        mut ep: MutexGuard<'s, EndpointBlocks>,
        tag: u32,
    ) {
        // Each full turn clears every reference bit, so two turns always suffice.
        let mut budget = ep.queue.len().saturating_mul(2).saturating_add(1);
        // Another eviction in flight has the buffer: this one gets a fresh one.
        let mut batch = std::mem::take(&mut ep.batch);
        while !ep.retired && budget > 0 {
            let take = ep
                .excess()
                .min(ep.queue.len())
                .min(budget)
                .min(MAX_EVICT_BATCH);
            if take == 0 {
                break;
            }
            budget -= take;
            batch.clear();
            ep.queue.take_front_into(take, &mut batch);
            ep.evicting = ep.evicting.saturating_add(take);
            drop(ep);
            let evicted = self.run_clock(&mut batch, tag);
            ep = locking::lock(state);
            ep.evicting = ep.evicting.saturating_sub(take);
            self.counters.evicted(evicted);
            if ep.retired {
                // The endpoint left meanwhile: what the clock kept must go too.
                let mut guard: ShardGuard<'_> = None;
                for &key in &batch {
                    self.lock_shard(&mut guard, BlockKey::from_raw(key).shard())
                        .remove(key, tag);
                }
                return;
            }
            let before = ep.live;
            ep.forgot(evicted);
            self.counters.held(before, ep.live);
            ep.queue.extend(batch.iter().copied());
        }
        if batch.capacity() <= MAX_EVICT_BATCH {
            batch.clear();
            ep.batch = batch;
        }
        if ep.queue_bloated() {
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
    pub(super) fn compact<'a>(
        &'a self,
        ep: &mut EndpointBlocks,
        tag: u32,
        guard: &mut ShardGuard<'a>,
    ) {
        let mut seen = AHashSet::with_capacity(ep.live);
        let queue = std::mem::take(&mut ep.queue);
        for key in queue.iter() {
            let table = self.lock_shard(guard, BlockKey::from_raw(key).shard());
            let present = table.holders(key).is_some_and(|h| h.contains(tag));
            if present && seen.insert(key) {
                ep.queue.push_back(key);
            }
        }
        ep.queue.shrink_to_fit();
    }
}
