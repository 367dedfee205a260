//! A bounded cache of token ids per text segment, so that text sent again (the earlier turns of
//! a conversation, a shared system prompt) is not tokenized again.
//!
//! Keys are the xxh3-128 hash and length of the segment's text (a collision between two texts
//! is astronomically unlikely and would only misroute); values are the segment's ids. The
//! cache is split into shards, each an LRU bounded by the tokens it holds; a segment larger
//! than a shard's budget is not kept. Tokenizing happens outside the locks: two requests that
//! miss on the same segment both tokenize it, and the second insert is a no-op.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use xxhash_rust::xxh3::xxh3_128;

const SHARDS: usize = 8;

/// A segment's key: the hash and length of its text.
type Key = (u128, usize);

/// The cache's key for `text`.
pub(super) fn key(text: &str) -> Key {
    (xxh3_128(text.as_bytes()), text.len())
}

#[derive(Debug, Default)]
struct Shard {
    /// key → (ids, last use).
    entries: HashMap<Key, (Arc<[u32]>, u64)>,
    /// last use → key, oldest first.
    order: BTreeMap<u64, Key>,
    tokens: usize,
    tick: u64,
}

impl Shard {
    fn get(&mut self, key: &Key) -> Option<Arc<[u32]>> {
        self.tick += 1;
        let tick = self.tick;
        let (ids, used) = self.entries.get_mut(key)?;
        self.order.remove(used);
        *used = tick;
        self.order.insert(tick, *key);
        Some(Arc::clone(ids))
    }

    fn insert(&mut self, key: Key, ids: Arc<[u32]>, budget: usize) {
        if ids.len() > budget || self.entries.contains_key(&key) {
            return;
        }
        while self.tokens + ids.len() > budget {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            if let Some((evicted, _)) = self.entries.remove(&oldest) {
                self.tokens -= evicted.len();
            }
        }
        self.tick += 1;
        self.tokens += ids.len();
        self.order.insert(self.tick, key);
        self.entries.insert(key, (ids, self.tick));
    }
}

/// Hit and miss counts, and what the cache holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Segments found.
    pub hits: u64,
    /// Segments tokenized.
    pub misses: u64,
    /// Segments held.
    pub entries: usize,
    /// Tokens held.
    pub tokens: usize,
}

/// The segment cache (see the module docs). A budget of 0 disables it.
#[derive(Debug)]
pub(super) struct SegmentCache {
    shards: Vec<Mutex<Shard>>,
    shard_budget: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl SegmentCache {
    /// A cache holding at most `max_tokens` tokens.
    pub(super) fn new(max_tokens: usize) -> Self {
        SegmentCache {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            shard_budget: max_tokens / SHARDS,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Whether the cache keeps anything.
    pub(super) fn enabled(&self) -> bool {
        self.shard_budget > 0
    }

    fn shard(&self, key: &Key) -> &Mutex<Shard> {
        let index = (key.0 as usize) % self.shards.len().max(1);
        &self.shards[index]
    }

    /// The ids of `text`: cached, or computed by `tokenize` and kept.
    pub(super) fn get_or_tokenize<E>(
        &self,
        text: &str,
        tokenize: impl FnOnce(&str) -> Result<Vec<u32>, E>,
    ) -> Result<Arc<[u32]>, E> {
        let key = key(text);
        if let Some(ids) = self.shard(&key).lock().get(&key) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(ids);
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let ids: Arc<[u32]> = tokenize(text)?.into();
        self.shard(&key)
            .lock()
            .insert(key, Arc::clone(&ids), self.shard_budget);
        Ok(ids)
    }

    /// Counts and contents.
    pub(super) fn stats(&self) -> CacheStats {
        let mut stats = CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            ..CacheStats::default()
        };
        for shard in &self.shards {
            let shard = shard.lock();
            stats.entries += shard.entries.len();
            stats.tokens += shard.tokens;
        }
        stats
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn ids(n: usize) -> Result<Vec<u32>, ()> {
        Ok((0..n as u32).collect())
    }

    #[test]
    fn hits_evicts_least_recent_and_stays_bounded() {
        let mut shard = Shard::default();
        shard.insert(key("a"), ids(4).unwrap().into(), 10);
        shard.insert(key("b"), ids(4).unwrap().into(), 10);
        assert!(shard.get(&key("a")).is_some());
        shard.insert(key("c"), ids(4).unwrap().into(), 10);
        assert!(
            shard.get(&key("b")).is_none(),
            "b was the least recently used"
        );
        assert!(shard.get(&key("a")).is_some());
        assert_eq!(shard.tokens, 8);
        shard.insert(key("huge"), ids(11).unwrap().into(), 10);
        assert!(shard.get(&key("huge")).is_none());

        let cache = SegmentCache::new(8 * 100);
        let first = cache.get_or_tokenize("hello", |_| ids(3)).unwrap();
        let again = cache.get_or_tokenize("hello", |_| Err(())).unwrap();
        assert_eq!(first, again);
        let stats = cache.stats();
        assert_eq!(
            (stats.hits, stats.misses, stats.entries, stats.tokens),
            (1, 1, 1, 3)
        );
        for i in 0..1000 {
            cache.get_or_tokenize(&i.to_string(), |_| ids(7)).unwrap();
        }
        assert!(cache.stats().tokens <= 800);
        assert!(!SegmentCache::new(0).enabled());
    }
}
