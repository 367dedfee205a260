//! A bounded cache of token ids per text segment, so that text sent again (the earlier turns of
//! a conversation, a shared system prompt) is not tokenized again.
//!
//! Keys are the xxh3-128 hash and length of the segment's text (a collision between two texts
//! is astronomically unlikely and would only misroute); values are the segment's ids. The
//! cache is split into shards, each an LRU bounded by the tokens it holds; a segment larger
//! than a shard's budget is not kept. Tokenizing happens outside the locks: two requests that
//! miss on the same segment both tokenize it, and the second insert is a no-op.
//!
//! Hashing a whole segment costs a pass over its text (tens of microseconds for 400 KB), so a
//! lookup first checks a *head* key, the hash of the segment's first [`HEAD_BYTES`] bytes,
//! against the heads of the segments held: a text never seen is told apart without reading
//! it whole, or even knowing where it ends (`SegmentCache::may_hold`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use xxhash_rust::xxh3::{xxh3_64, xxh3_128};

const SHARDS: usize = 8;

/// Bytes of a segment its head key hashes.
pub(super) const HEAD_BYTES: usize = 64;

/// A segment's key: the hash and length of its text.
type Key = (u128, usize);

/// A segment's head key: the hash of its first [`HEAD_BYTES`] bytes (all of them when it is
/// shorter).
type Head = u64;

/// The cache's key for `text`.
pub(super) fn key(text: &str) -> Key {
    (xxh3_128(text.as_bytes()), text.len())
}

fn head(text: &str) -> Head {
    head_of(text.as_bytes())
}

/// The head key of a segment starting with `start` (its first [`HEAD_BYTES`] bytes, or all
/// of a shorter one).
fn head_of(start: &[u8]) -> Head {
    xxh3_64(&start[..start.len().min(HEAD_BYTES)])
}

#[derive(Debug, Default)]
struct Shard {
    /// key → (ids, last use, head key).
    entries: HashMap<Key, (Arc<[u32]>, u64, Head)>,
    /// head key → segments held with it.
    heads: HashMap<Head, u32>,
    /// last use → key, oldest first.
    order: BTreeMap<u64, Key>,
    tokens: usize,
    tick: u64,
}

impl Shard {
    fn get(&mut self, key: &Key) -> Option<Arc<[u32]>> {
        self.tick += 1;
        let tick = self.tick;
        let (ids, used, _) = self.entries.get_mut(key)?;
        self.order.remove(used);
        *used = tick;
        self.order.insert(tick, *key);
        Some(Arc::clone(ids))
    }

    fn insert(&mut self, key: Key, head: Head, ids: Arc<[u32]>, budget: usize) {
        if ids.len() > budget || self.entries.contains_key(&key) {
            return;
        }
        while self.tokens + ids.len() > budget {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            if let Some((evicted, _, evicted_head)) = self.entries.remove(&oldest) {
                self.tokens -= evicted.len();
                if let Some(count) = self.heads.get_mut(&evicted_head) {
                    *count -= 1;
                    if *count == 0 {
                        self.heads.remove(&evicted_head);
                    }
                }
            }
        }
        self.tick += 1;
        self.tokens += ids.len();
        self.order.insert(self.tick, key);
        self.entries.insert(key, (ids, self.tick, head));
        *self.heads.entry(head).or_insert(0) += 1;
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

    fn shard(&self, head: &Head) -> &Mutex<Shard> {
        let index = (*head as usize) % self.shards.len().max(1);
        &self.shards[index]
    }

    /// Whether a segment starting with `start` may be held: `start` is the segment's first
    /// [`HEAD_BYTES`] bytes, or the whole segment when it is shorter. `false` is certain.
    pub(super) fn may_hold(&self, start: &[u8]) -> bool {
        let head = head_of(start);
        self.shard(&head).lock().heads.contains_key(&head)
    }

    /// Counts a lookup that [`SegmentCache::may_hold`] answered.
    pub(super) fn count_miss(&self) {
        self.misses.fetch_add(1, Ordering::Relaxed);
    }

    /// The ids of `text` when they are held (counted as a hit, else as a miss). A text whose
    /// head key no held segment has is a miss without hashing it whole.
    pub(super) fn get(&self, text: &str) -> Option<Arc<[u32]>> {
        let head = head(text);
        let shard = self.shard(&head);
        let found = if shard.lock().heads.contains_key(&head) {
            let key = key(text);
            shard.lock().get(&key)
        } else {
            None
        };
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Keeps `ids` as the ids of `text` (a no-op when held, or larger than a shard's budget).
    pub(super) fn insert(&self, text: &str, ids: Arc<[u32]>) {
        if !self.enabled() || ids.len() > self.shard_budget {
            return;
        }
        let head = head(text);
        let key = key(text);
        self.shard(&head)
            .lock()
            .insert(key, head, ids, self.shard_budget);
    }

    /// The ids of `text`: cached, or computed by `tokenize` and kept.
    pub(super) fn get_or_tokenize<E>(
        &self,
        text: &str,
        tokenize: impl FnOnce(&str) -> Result<Vec<u32>, E>,
    ) -> Result<Arc<[u32]>, E> {
        if let Some(ids) = self.get(text) {
            return Ok(ids);
        }
        let ids: Arc<[u32]> = tokenize(text)?.into();
        self.insert(text, Arc::clone(&ids));
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
        shard.insert(key("a"), head("a"), ids(4).unwrap().into(), 10);
        shard.insert(key("b"), head("b"), ids(4).unwrap().into(), 10);
        assert!(shard.get(&key("a")).is_some());
        shard.insert(key("c"), head("c"), ids(4).unwrap().into(), 10);
        assert!(
            shard.get(&key("b")).is_none(),
            "b was the least recently used"
        );
        assert!(shard.get(&key("a")).is_some());
        assert_eq!(shard.tokens, 8);
        shard.insert(key("huge"), head("huge"), ids(11).unwrap().into(), 10);
        assert!(shard.get(&key("huge")).is_none());
        assert_eq!(
            shard.heads.len(),
            2,
            "the evicted segment's head is forgotten"
        );

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
        // Two texts with the same head are told apart by their whole hash.
        let same_head = format!("{}{}", "h".repeat(HEAD_BYTES), "a");
        let other = format!("{}{}", "h".repeat(HEAD_BYTES), "bb");
        cache.insert(&same_head, vec![1].into());
        assert!(cache.may_hold(other.as_bytes()));
        assert!(cache.get(&other).is_none());
        assert_eq!(cache.get(&same_head).as_deref(), Some(&[1][..]));
        assert!(!cache.may_hold(b"never seen"));
        assert!(!SegmentCache::new(0).enabled());
    }
}
