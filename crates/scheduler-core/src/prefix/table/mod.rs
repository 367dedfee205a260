//! One shard's map from block key to the endpoints holding that block.
//!
//! Two open-addressing arrays of 16-byte [`Slot`]s (the key and two words). A block held by one
//! or two endpoints lives in the *cold* array with their tags inline. A block held by three or
//! more lives in the *hot* array and refers to an interned [`HolderSets`] set (how a slot says
//! which: [`slot`]). Shared prefixes are what lookups walk most, and the hot array holds only
//! them, so it is a small fraction of the table and stays in cache while the cold array (every
//! request's unique tail) does not. The hot array keeps a few filter bits per slot
//! ([`HomeFilter`](super::home_filter::HomeFilter)) that settle most absent keys without
//! reading it, so an insert looks for each block of a request's tail in the cold array alone.
//!
//! One file per part:
//!
//! - [`slot`]: how a slot encodes its holders (tags, reference bits, shared-set ids);
//! - [`probe`]: finding keys, one at a time or in batches whose cache misses overlap;
//! - [`holders`]: adding and removing a block's holders, moving it between the arrays;
//! - [`runs`]: the runs of same-holder blocks an insert records for lookups to skip;
//! - [`stretch`]: adding a stretch of keys located together;
//! - [`clock`]: the eviction clock's step over one (block, endpoint) entry.

mod clock;
mod holders;
mod probe;
mod runs;
mod slot;
mod stretch;
#[cfg(test)]
mod tests;

pub(crate) use clock::ClockHand;
pub(crate) use probe::ABSENT;
pub(crate) use runs::Run;
pub(crate) use slot::{MAX_ENDPOINT_ID, id_of, tag_of};
pub(crate) use stretch::MAX_STRETCH;

use super::holder_sets::{HolderSets, MAX_SETS};
use super::slots::{Keyed, Slot, Slots};
use holders::Transition;

/// Most blocks one shard holds (every interned set is used by a slot, so ids always fit).
const MAX_LEN: usize = MAX_SETS - 2;

/// A hot block: its slot and the run of blocks that followed it with the same holders.
#[derive(Debug, Clone, Copy, Default)]
struct HotSlot {
    slot: Slot,
    run: Run,
}

impl Keyed for HotSlot {
    const FILTERED: bool = true;
    type Raw = [u64; 4];

    #[inline]
    fn key(&self) -> u64 {
        self.slot.key
    }

    #[inline]
    fn raw_key(raw: &[u64; 4]) -> u64 {
        raw[0]
    }

    #[inline]
    fn pack(self) -> [u64; 4] {
        let [key, ab] = self.slot.pack();
        let [end, rest] = self.run.pack();
        [key, ab, end, rest]
    }

    #[inline]
    fn unpack(raw: [u64; 4]) -> Self {
        HotSlot {
            slot: Slot::unpack([raw[0], raw[1]]),
            run: Run::unpack([raw[2], raw[3]]),
        }
    }
}

/// A shard's block table.
#[derive(Debug, Default)]
pub(crate) struct BlockTable {
    /// Blocks with one or two holders (inline tags).
    cold: Slots<Slot>,
    /// Blocks with three or more holders (interned sets), with their runs.
    hot: Slots<HotSlot>,
    sets: HolderSets,
    added: Option<Transition>,
    removed: Option<Transition>,
    scratch: Vec<u32>,
}

/// Where a key lives.
#[derive(Debug, Clone, Copy)]
enum At {
    Hot(usize),
    Cold(usize),
}

impl BlockTable {
    /// Number of blocks held by at least one endpoint.
    pub(crate) fn len(&self) -> usize {
        self.cold.len() + self.hot.len()
    }

    /// Heap bytes owned by the table (slots and interned sets).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.cold.heap_bytes()
            + self.hot.heap_bytes()
            + self.sets.heap_bytes()
            + self.scratch.capacity() * 4
    }

    /// Every (key, bare tag) pair (for tests and audits).
    #[cfg(test)]
    pub(crate) fn entries(&self) -> Vec<(u64, u32)> {
        let mut out = Vec::new();
        for slot in self.hot.iter().map(|h| h.slot).chain(self.cold.iter()) {
            self.holders_of(&slot).for_each(|t| out.push((slot.key, t)));
        }
        out
    }

    /// Whether the hot array's filter lets every hot block through (for tests).
    #[cfg(test)]
    pub(crate) fn filter_holds_every_hot_block(&self) -> bool {
        self.hot.iter().all(|h| self.hot.may_hold(h.slot.key))
    }

    /// Distinct interned sets alive (for tests).
    #[cfg(test)]
    pub(crate) fn live_sets(&self) -> usize {
        self.sets.live()
    }
}
