//! One endpoint's blocks in eviction order.

use std::collections::VecDeque;

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
    /// Most entries this endpoint may hold.
    pub(crate) capacity: usize,
    /// Entries taken off the queue by an eviction in progress (still counted in `live`) whose
    /// clock runs with the endpoint unlocked.
    pub(crate) evicting: usize,
    /// A buffer for an eviction batch, kept between evictions so they do not allocate.
    pub(crate) batch: Vec<u64>,
    /// Set once the endpoint left the pool: nothing may be inserted any more.
    pub(crate) retired: bool,
}

impl EndpointBlocks {
    pub(crate) fn new(capacity: usize) -> Self {
        EndpointBlocks {
            queue: VecDeque::new(),
            live: 0,
            capacity,
            evicting: 0,
            batch: Vec::new(),
            retired: false,
        }
    }
}
