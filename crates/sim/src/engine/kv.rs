//! The KV-cache block pool with automatic prefix caching, as vLLM V1 manages it.
//!
//! Every block holds `block_size` tokens. A block is either *in use* (reference count > 0) or
//! *free*; free blocks wait in an LRU queue, and a free block that still carries a hash stays
//! findable in the cache until it is reused for something else (evicted). Allocation takes
//! the block at the front of the queue; freeing appends to the back, so a finished request's
//! blocks, freed tail first, make its tail the first to go.
//!
//! ```
//! use shepherd_sim::engine::BlockPool;
//!
//! let mut pool = BlockPool::new(4);
//! let a = pool.allocate().unwrap();
//! pool.register(a, 0xAB);
//! pool.release(&[a]);
//! assert_eq!(pool.free_blocks(), 4);
//! // The freed block is still cached: touching it takes it back out of the free queue.
//! assert_eq!(pool.lookup(0xAB), Some(a));
//! pool.touch(a);
//! assert_eq!(pool.free_blocks(), 3);
//! ```

use ahash::AHashMap;

const NIL: u32 = u32::MAX;

/// A fixed set of KV blocks, an LRU free queue, and the hash → block map of cached blocks.
#[derive(Debug, Clone)]
pub struct BlockPool {
    ref_count: Vec<u32>,
    hash: Vec<Option<u64>>,
    prev: Vec<u32>,
    next: Vec<u32>,
    head: u32,
    tail: u32,
    free: usize,
    cached: AHashMap<u64, u32>,
    evictions: u64,
    /// Hashes dropped from the cache since the last [`BlockPool::take_evicted`], in order;
    /// `None` unless [`BlockPool::record_evictions`] turned the log on.
    evicted: Option<Vec<u64>>,
}

impl BlockPool {
    /// A pool of `total` blocks, all free and empty.
    pub fn new(total: u32) -> Self {
        let n = total as usize;
        let mut pool = BlockPool {
            ref_count: vec![0; n],
            hash: vec![None; n],
            prev: vec![NIL; n],
            next: vec![NIL; n],
            head: NIL,
            tail: NIL,
            free: 0,
            cached: AHashMap::new(),
            evictions: 0,
            evicted: None,
        };
        for b in 0..total {
            pool.push_back(b);
        }
        pool
    }

    /// Total number of blocks.
    pub fn total_blocks(&self) -> usize {
        self.ref_count.len()
    }

    /// Blocks in the free queue (cached or not).
    pub fn free_blocks(&self) -> usize {
        self.free
    }

    /// Blocks referenced by at least one request.
    pub fn used_blocks(&self) -> usize {
        self.total_blocks() - self.free
    }

    /// Number of cached blocks dropped from the cache to make room.
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Number of distinct hashes cached right now (blocks in use or free).
    pub fn cached_blocks(&self) -> usize {
        self.cached.len()
    }

    /// Starts logging the hash of every block dropped from the cache (for KV-cache events);
    /// [`BlockPool::take_evicted`] hands the log over.
    pub fn record_evictions(&mut self) {
        self.evicted.get_or_insert_with(Vec::new);
    }

    /// Appends the hashes evicted since the last call to `out`, oldest first (nothing unless
    /// [`BlockPool::record_evictions`] was called).
    pub fn take_evicted(&mut self, out: &mut Vec<u64>) {
        if let Some(log) = &mut self.evicted {
            out.append(log);
        }
    }

    /// Drops every cached hash, as vLLM's `reset_prefix_cache` does, when no block is in use;
    /// returns whether it did. The dropped hashes are not logged as evictions: the caller
    /// announces the reset as a whole.
    pub fn reset_prefix_cache(&mut self) -> bool {
        if self.used_blocks() > 0 {
            return false;
        }
        self.cached.clear();
        self.hash.fill(None);
        if let Some(log) = &mut self.evicted {
            log.clear();
        }
        true
    }

    /// Counts blocks by state, walking every block: `(in use, in the free queue)`. For
    /// invariant checks; O(total).
    pub fn audit(&self) -> (usize, usize) {
        let used = self.ref_count.iter().filter(|&&r| r > 0).count();
        let mut queued = 0;
        let mut b = self.head;
        while b != NIL {
            queued += 1;
            b = self.next[b as usize];
        }
        (used, queued)
    }

    /// The block holding the content with `hash`, when cached.
    pub fn lookup(&self, hash: u64) -> Option<u32> {
        self.cached.get(&hash).copied()
    }

    /// Whether block `b` is in the free queue.
    pub fn is_free(&self, b: u32) -> bool {
        self.ref_count.get(b as usize).is_some_and(|&r| r == 0)
    }

    /// Takes a reference on cached block `b`, pulling it out of the free queue if needed.
    pub fn touch(&mut self, b: u32) {
        let i = b as usize;
        if self.ref_count[i] == 0 {
            self.unlink(b);
        }
        self.ref_count[i] += 1;
    }

    /// Takes the least recently freed block for new content (evicting its cached content), or
    /// `None` when every block is in use.
    pub fn allocate(&mut self) -> Option<u32> {
        let b = self.head;
        if b == NIL {
            return None;
        }
        self.unlink(b);
        if let Some(h) = self.hash[b as usize].take() {
            if self.cached.get(&h) == Some(&b) {
                self.cached.remove(&h);
                if let Some(log) = &mut self.evicted {
                    log.push(h);
                }
            }
            self.evictions += 1;
        }
        self.ref_count[b as usize] = 1;
        Some(b)
    }

    /// Marks block `b` (full, in use) as holding the content with `hash`, so later requests
    /// can reuse it, and returns `true`. When another block already caches that content, `b`
    /// stays uncached and the answer is `false`.
    pub fn register(&mut self, b: u32, hash: u64) -> bool {
        if self.cached.contains_key(&hash) {
            return false;
        }
        self.cached.insert(hash, b);
        self.hash[b as usize] = Some(hash);
        true
    }

    /// Drops one reference on each of `blocks`, in the order given; blocks that reach zero go
    /// to the back of the free queue (callers pass a request's blocks tail first).
    pub fn release(&mut self, blocks: &[u32]) {
        for &b in blocks {
            let i = b as usize;
            debug_assert!(self.ref_count[i] > 0, "double free of block {b}");
            self.ref_count[i] = self.ref_count[i].saturating_sub(1);
            if self.ref_count[i] == 0 {
                self.push_back(b);
            }
        }
    }

    fn push_back(&mut self, b: u32) {
        let i = b as usize;
        self.prev[i] = self.tail;
        self.next[i] = NIL;
        if self.tail == NIL {
            self.head = b;
        } else {
            self.next[self.tail as usize] = b;
        }
        self.tail = b;
        self.free += 1;
    }

    fn unlink(&mut self, b: u32) {
        let i = b as usize;
        let (p, n) = (self.prev[i], self.next[i]);
        if p == NIL {
            self.head = n;
        } else {
            self.next[p as usize] = n;
        }
        if n == NIL {
            self.tail = p;
        } else {
            self.prev[n as usize] = p;
        }
        self.prev[i] = NIL;
        self.next[i] = NIL;
        self.free -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_evicts_least_recently_freed_first() {
        let mut pool = BlockPool::new(3);
        let a = pool.allocate().unwrap();
        let b = pool.allocate().unwrap();
        pool.register(a, 1);
        pool.register(b, 2);
        // Freed tail first: b then a; b is evicted first.
        pool.release(&[b, a]);
        let c = pool.allocate().unwrap(); // the never-used third block
        assert!(c != a && c != b);
        let d = pool.allocate().unwrap();
        assert_eq!(d, b);
        assert_eq!(pool.lookup(2), None);
        assert_eq!(pool.lookup(1), Some(a));
        assert_eq!(pool.evictions(), 1);
    }

    #[test]
    fn shared_block_is_freed_once_both_release() {
        let mut pool = BlockPool::new(2);
        let a = pool.allocate().unwrap();
        pool.register(a, 7);
        pool.touch(a);
        pool.release(&[a]);
        assert_eq!(pool.free_blocks(), 1);
        pool.release(&[a]);
        assert_eq!(pool.free_blocks(), 2);
        assert_eq!(pool.audit(), (0, 2));
    }
}
