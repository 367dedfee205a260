//! A bounded set of item hashes that forgets the least recently added first.

use std::collections::VecDeque;

use ahash::AHashMap;

/// At most `capacity` hashes; adding one past that forgets the least recently added (or
/// re-added) hash. Membership checks do not change the order, as upstream's `Contains`.
///
/// The order is kept in a queue of `(hash, stamp)` entries; re-adding a hash pushes a fresh
/// entry and leaves the old one stale. Stale entries are skipped when evicting, and the queue
/// is rebuilt when it grows past twice the capacity, so memory stays within a small multiple
/// of `capacity`.
#[derive(Debug, Clone)]
pub(crate) struct HashLru {
    capacity: usize,
    stamps: AHashMap<u64, u64>,
    order: VecDeque<(u64, u64)>,
    next: u64,
}

impl HashLru {
    /// An empty set of at most `capacity` hashes (at least 1).
    pub(crate) fn new(capacity: usize) -> Self {
        HashLru {
            capacity: capacity.max(1),
            stamps: AHashMap::new(),
            order: VecDeque::new(),
            next: 0,
        }
    }

    /// Whether `hash` is held.
    pub(crate) fn contains(&self, hash: u64) -> bool {
        self.stamps.contains_key(&hash)
    }

    /// How many hashes are held.
    pub(crate) fn len(&self) -> usize {
        self.stamps.len()
    }

    /// Adds `hash` as the most recent one, forgetting the oldest when full.
    pub(crate) fn add(&mut self, hash: u64) {
        let stamp = self.next;
        self.next += 1;
        self.stamps.insert(hash, stamp);
        self.order.push_back((hash, stamp));
        while self.stamps.len() > self.capacity {
            let Some((oldest, at)) = self.order.pop_front() else {
                break;
            };
            if self.stamps.get(&oldest) == Some(&at) {
                self.stamps.remove(&oldest);
            }
        }
        if self.order.len() > 2 * self.capacity {
            let stamps = &self.stamps;
            self.order.retain(|(h, at)| stamps.get(h) == Some(at));
        }
    }

    /// Changes the capacity, forgetting the oldest hashes over the new one.
    pub(crate) fn resize(&mut self, capacity: usize) {
        self.capacity = capacity.max(1);
        while self.stamps.len() > self.capacity {
            let Some((oldest, at)) = self.order.pop_front() else {
                break;
            };
            if self.stamps.get(&oldest) == Some(&at) {
                self.stamps.remove(&oldest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgets_the_least_recently_added_first() {
        let mut lru = HashLru::new(2);
        lru.add(1);
        lru.add(2);
        lru.add(1); // 1 is now the most recent
        lru.add(3); // forgets 2
        assert!(lru.contains(1) && lru.contains(3) && !lru.contains(2));
        assert_eq!(lru.len(), 2);
    }

    #[test]
    fn the_queue_stays_bounded_under_repeated_adds() {
        let mut lru = HashLru::new(4);
        for i in 0..10_000u64 {
            lru.add(i % 3);
        }
        assert_eq!(lru.len(), 3);
        assert!(lru.order.len() <= 8);
        lru.resize(1);
        assert_eq!(lru.len(), 1);
        assert!(lru.contains(9_999 % 3));
    }
}
