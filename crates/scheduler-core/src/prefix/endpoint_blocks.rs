//! One endpoint's blocks in eviction order.

use super::chunk_queue::ChunkQueue;

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
    pub(crate) queue: ChunkQueue,
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
            queue: ChunkQueue::default(),
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

    /// Sets the capacity without the cap, as a corrupted or future caller might (for tests of
    /// the arithmetic near `usize::MAX`).
    #[cfg(test)]
    pub(crate) fn set_capacity_unchecked(&mut self, capacity: usize) {
        self.capacity = capacity;
    }

    /// Entries beyond the capacity that no eviction in flight covers yet. Saturating: a
    /// capacity near `usize::MAX` means no excess, never an overflow.
    pub(crate) fn excess(&self) -> usize {
        self.live
            .saturating_sub(self.capacity.saturating_add(self.evicting))
    }

    /// Whether stale and duplicate queue entries have piled up enough to compact the queue.
    pub(crate) fn queue_bloated(&self) -> bool {
        self.queue.len() > self.live.saturating_mul(2).saturating_add(64)
    }

    /// Counts `n` entries added to the table.
    pub(crate) fn counted(&mut self, n: usize) {
        self.live = self.live.saturating_add(n);
        let settled = self.deficit.min(self.live);
        self.live -= settled;
        self.deficit -= settled;
    }

    /// Counts `n` entries removed from the table (some may belong to an insert in flight
    /// that has not counted them yet).
    pub(crate) fn forgot(&mut self, n: usize) {
        let early = n.saturating_sub(self.live);
        self.live -= n - early;
        self.deficit = self.deficit.saturating_add(early);
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

    #[test]
    fn the_arithmetic_saturates_near_usize_max() {
        let mut ep = EndpointBlocks::new(10);
        ep.counted(usize::MAX - 1);
        ep.evicting = usize::MAX - 2;
        ep.set_capacity_unchecked(usize::MAX - 3);
        assert_eq!(ep.excess(), 0);
        assert!(!ep.queue_bloated());
        ep.counted(5);
        assert_eq!(ep.live, usize::MAX);
        ep.set_capacity_unchecked(0);
        ep.evicting = 0;
        assert_eq!(ep.excess(), usize::MAX);
    }
}
