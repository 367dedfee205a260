//! One endpoint's blocks in eviction order.

use std::collections::VecDeque;

use super::MAX_CAPACITY_PER_ENDPOINT;

/// The blocks one endpoint is believed to hold, oldest first, and how many it may hold.
///
/// The queue is the hand of a CLOCK (second-chance) eviction: a block touched again since it
/// was queued has its reference bit set in the table, and the hand re-queues it once instead of
/// evicting it. This approximates LRU with 8 bytes per entry and no pointers. Blocks removed
/// out of band (KV events) leave stale queue entries, skipped when the hand reaches them and
/// compacted away when they pile up.
#[derive(Debug)]
pub(crate) struct EndpointBlocks {
    /// Keys in eviction order (front = next to examine). May hold stale keys.
    pub(crate) queue: VecDeque<u64>,
    /// (block, endpoint) entries really present in the table.
    pub(crate) live: usize,
    /// Most entries this endpoint may hold (at most [`MAX_CAPACITY_PER_ENDPOINT`]).
    capacity: usize,
    /// Entries taken off the queue by an eviction in progress (still counted in `live`) whose
    /// clock runs with the endpoint unlocked.
    pub(crate) evicting: usize,
    /// Entries forgotten while `live` was zero: an insert in flight added them to the table
    /// but had not counted them yet. Taken off `live` when that insert counts its entries.
    pub(crate) deficit: usize,
    /// A buffer for an eviction batch, kept between evictions so they do not allocate.
    pub(crate) batch: Vec<u64>,
    /// Set once the endpoint left the pool: nothing may be inserted any more.
    pub(crate) retired: bool,
}

impl EndpointBlocks {
    /// No blocks yet, at most `capacity` (capped at [`MAX_CAPACITY_PER_ENDPOINT`]).
    pub(crate) fn new(capacity: usize) -> Self {
        EndpointBlocks {
            queue: VecDeque::new(),
            live: 0,
            capacity: capacity.min(MAX_CAPACITY_PER_ENDPOINT),
            evicting: 0,
            deficit: 0,
            batch: Vec::new(),
            retired: false,
        }
    }

    /// Most entries this endpoint may hold.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Sets the most entries this endpoint may hold, capped at [`MAX_CAPACITY_PER_ENDPOINT`]
    /// whatever the caller asks for.
    pub(crate) fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity.min(MAX_CAPACITY_PER_ENDPOINT);
    }

    /// Counts `n` entries added to the table.
    pub(crate) fn counted(&mut self, n: usize) {
        self.live += n;
        let settled = self.deficit.min(self.live);
        self.live -= settled;
        self.deficit -= settled;
    }

    /// Counts `n` entries removed from the table (some may belong to an insert in flight
    /// that has not counted them yet).
    pub(crate) fn forgot(&mut self, n: usize) {
        let early = n.saturating_sub(self.live);
        self.live -= n - early;
        self.deficit += early;
    }
}

#[cfg(test)]
mod tests {
    use super::EndpointBlocks;

    #[test]
    fn entries_forgotten_before_they_are_counted_settle_later() {
        let mut ep = EndpointBlocks::new(10);
        ep.counted(2);
        // Three removals, one of an entry an insert in flight has not counted yet.
        ep.forgot(3);
        assert_eq!((ep.live, ep.deficit), (0, 1));
        ep.counted(4);
        assert_eq!((ep.live, ep.deficit), (3, 0));
        ep.forgot(1);
        assert_eq!((ep.live, ep.deficit), (2, 0));
    }
}
