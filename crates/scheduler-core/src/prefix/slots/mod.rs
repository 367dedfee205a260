//! Open-addressing arrays of slots keyed by block key (linear probing, no tombstones), the
//! storage under a shard's [`BlockTable`](super::table::BlockTable), growing and shrinking
//! without a pause.
//!
//! When the array must double (more than 3/4 in use) or halve (less than 1/8), a new array is
//! allocated zeroed and the old one is kept: every insert or delete afterwards moves at most
//! [`STEP`] slots' worth of keys from the old array to the new one, scanning the old array
//! from its first slot, until the old array is empty and freed. Meanwhile keys are looked for
//! in both, and new keys go to the new array. Moving a key out of the old array is a
//! deletion there (later members of its probe run shift back), so the old array stays a
//! valid table at every step and the slots before the scan position stay empty.
//!
//! Indices name a slot of either array: `0..new` the new array, from there on the old one.
//! An index is valid until the next change that may move keys ([`Slots::moves`] counts
//! them); moving keys into the new array only fills empty slots, so it leaves the probe run
//! of an absent key ending where it did unless the key's vacancy itself was filled.
//!
//! Growth is paced so that the old array is drained well before the new one fills: after a
//! doubling, at least a quarter of the new array's slots are inserted before the next, and
//! [`STEP`] units per insert drain an old array of `m` slots (`m` scan steps and at most
//! `3m/4` moves) within `7m/64` inserts, of the `3m/4` before the next doubling. One request
//! inserts hundreds of blocks into one shard, so its insert pays for hundreds of steps: a
//! smaller step spreads a doubling over more requests but raises the median (4 units
//! doubled the W2 insert median; 16 leaves it where it was). A shrink started while the table refills fast can
//! still find the new array full before the old one is drained; then the rest moves at once.

mod array;
#[cfg(test)]
mod tests;

use array::Array;
pub(crate) use array::Near;

const MIN_SLOTS: usize = 16;

/// Arrays this small (in bytes) never shrink: a shard holding a few chains gains and loses a
/// whole chain's blocks at once, and would otherwise halve and double over and over.
const SHRINK_FLOOR_BYTES: usize = 16 * 1024;

/// Work units one insert or delete spends moving keys out of an old array: a unit moves one
/// key or passes one empty slot.
const STEP: usize = 16;

/// A slot type: anything with a block key (0 = empty), stored as words that are all zero for
/// an empty slot.
pub(crate) trait Keyed: Copy + Default {
    /// Whether arrays of this slot keep a [`HomeFilter`](super::home_filter::HomeFilter), so
    /// that [`may_hold`](Slots::may_hold) can settle most absent keys without a probe.
    const FILTERED: bool = false;

    /// The stored form: words, key first, all zero when empty.
    type Raw: Copy + Default + std::fmt::Debug;

    /// The block key, 0 when the slot is empty.
    fn key(&self) -> u64;

    /// The key of a stored slot.
    fn raw_key(raw: &Self::Raw) -> u64;

    /// The stored form of this slot.
    fn pack(self) -> Self::Raw;

    /// The slot a stored form holds.
    fn unpack(raw: Self::Raw) -> Self;
}

/// One block: its key (0 = empty) and two words whose meaning the table defines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Slot {
    pub(crate) key: u64,
    pub(crate) a: u32,
    pub(crate) b: u32,
}

impl Keyed for Slot {
    type Raw = [u64; 2];

    #[inline]
    fn key(&self) -> u64 {
        self.key
    }

    #[inline]
    fn raw_key(raw: &[u64; 2]) -> u64 {
        raw[0]
    }

    #[inline]
    fn pack(self) -> [u64; 2] {
        [self.key, u64::from(self.a) | (u64::from(self.b) << 32)]
    }

    #[inline]
    fn unpack(raw: [u64; 2]) -> Self {
        Slot {
            key: raw[0],
            a: raw[1] as u32,
            b: (raw[1] >> 32) as u32,
        }
    }
}

/// Slots with at most 3/4 in use (the array doubles beyond) and, once larger than
/// [`SHRINK_FLOOR_BYTES`], at least 1/8 (it shrinks below); during a resize, in two arrays.
#[derive(Debug)]
pub(crate) struct Slots<T: Keyed> {
    /// The array keys are added to.
    new: Array<T>,
    /// The array being drained (no slots when no resize is under way).
    old: Array<T>,
    /// Slots of `old` before this one are empty.
    scan: usize,
    /// Changes that may have moved keys or emptied slots (deletions and resizes), counted so
    /// that a vacancy found earlier can be trusted while the count is unchanged.
    moves: u32,
}

impl<T: Keyed> Default for Slots<T> {
    fn default() -> Self {
        Slots {
            new: Array::default(),
            old: Array::default(),
            scan: 0,
            moves: 0,
        }
    }
}

impl<T: Keyed> Slots<T> {
    /// Keys present.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.new.len() + self.old.len()
    }

    /// Heap bytes owned.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.new.heap_bytes() + self.old.heap_bytes()
    }

    /// Whether a resize is under way (keys in two arrays).
    #[inline]
    pub(crate) fn resizing(&self) -> bool {
        self.old.len() > 0
    }

    /// Whether `key` may be present: false settles that it is not, without reading a slot
    /// (always true for a slot type with no filter).
    #[inline]
    pub(crate) fn may_hold(&self, key: u64) -> bool {
        !T::FILTERED || self.new.may_hold(key) || (self.resizing() && self.old.may_hold(key))
    }

    /// Slot `i` (an index from this array's `find`, `resolve` or `insert`).
    #[inline]
    pub(crate) fn get(&self, i: usize) -> Option<T> {
        match i.checked_sub(self.new.slots()) {
            None => self.new.get(i),
            Some(j) => self.old.get(j),
        }
    }

    /// Replaces slot `i` with `slot`, which must have the same key (nothing else may change
    /// a key).
    #[inline]
    pub(crate) fn set(&mut self, i: usize, slot: T) {
        match i.checked_sub(self.new.slots()) {
            None => self.new.set(i, slot),
            Some(j) => self.old.set(j, slot),
        }
    }

    /// Every slot in use.
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = T> + '_ {
        self.new.iter().chain(self.old.iter())
    }

    /// Deletions and resizes so far (wrapping): while unchanged, an empty slot found by a
    /// probe is still where the probe run of its key ends, unless something was stored there.
    #[inline]
    pub(crate) fn moves(&self) -> u32 {
        self.moves
    }

    /// Looks for `key` in the `G` slots from its home with no branch per slot: the probe of a
    /// batch of keys then costs a few mispredicted branches in all rather than one per key.
    /// A vacancy is in the new array.
    #[inline]
    pub(crate) fn find_near<const G: usize>(&self, key: u64) -> Near {
        let near = self.new.find_near::<G>(key);
        if matches!(near, Near::Found(_)) || !self.resizing() {
            return near;
        }
        match self.old.find_near::<G>(key) {
            Near::Found(j) => Near::Found(self.new.slots() + j),
            Near::Far => Near::Far,
            Near::Vacant(_) => near,
        }
    }

    /// The index of `key`, when present.
    #[inline]
    pub(crate) fn find(&self, key: u64) -> Option<usize> {
        self.probe(key).ok()
    }

    /// Loads the home slot of each of `keys` (in the new array) into `homes`, with no
    /// dependency between the loads, so their cache misses overlap.
    #[inline]
    pub(crate) fn load_homes(&self, keys: &[u64], homes: &mut [u64]) {
        self.new.load_homes(keys, homes);
    }

    /// Loads the home slot of each of `keys` and the slot one cache line further on (where a
    /// probe run for an absent key usually ends); returns a value depending on all of them.
    pub(crate) fn touch_runs(&self, keys: &[u64]) -> u64 {
        self.new.touch_runs(keys)
    }

    /// Loads, for each of `keys`, every cache line holding a key of the `span` slots from its
    /// home (the slots the lines start and end at: the home, one line on, the last), so that
    /// a [`find_near`](Self::find_near) over them reads only loaded lines; returns a value
    /// depending on all of them.
    pub(crate) fn touch_spans(&self, keys: impl IntoIterator<Item = u64>, span: usize) -> u64 {
        self.new.touch_spans(keys, span)
    }

    /// The index of `key` given its home slot's key from [`load_homes`](Self::load_homes).
    #[inline]
    pub(crate) fn resolve(&self, key: u64, home: u64) -> Option<usize> {
        if home == key {
            Some(key as usize & (self.new.slots() - 1))
        } else if home == 0 && !self.resizing() {
            None
        } else {
            self.find(key)
        }
    }

    /// `Ok` with the index of `key` when present, else `Err` with the empty slot of the new
    /// array ending its probe run (where [`insert_at`](Self::insert_at) stores it), or
    /// `Err(usize::MAX)` for an array with no slots yet. One probe run serves both the search
    /// and the insert.
    #[inline]
    pub(crate) fn probe(&self, key: u64) -> Result<usize, usize> {
        let vacancy = match self.new.probe(key) {
            Ok(i) => return Ok(i),
            Err(v) => v,
        };
        if self.resizing()
            && let Ok(j) = self.old.probe(key)
        {
            return Ok(self.new.slots() + j);
        }
        Err(vacancy)
    }

    /// Stores `slot` (whose key must be absent and non-zero); returns its index.
    pub(crate) fn insert(&mut self, slot: T) -> usize {
        self.insert_at(slot, usize::MAX)
    }

    /// [`insert`](Self::insert) at `vacancy`, the empty slot a [`probe`](Self::probe) for
    /// the key just found with no change to the array since (anything else: it probes again).
    #[inline]
    pub(crate) fn insert_at(&mut self, slot: T, vacancy: usize) -> usize {
        let mut vacancy = vacancy;
        if (self.len() + 1) * 4 > self.new.slots() * 3 {
            self.start_resize((self.new.slots() * 2).max(MIN_SLOTS));
            vacancy = usize::MAX;
        }
        let i = self.new.store(slot, vacancy);
        self.drain(STEP);
        i
    }

    /// Empties slot `i` and shifts later members of its probe run back (no tombstones).
    pub(crate) fn delete(&mut self, i: usize) {
        self.moves = self.moves.wrapping_add(1);
        match i.checked_sub(self.new.slots()) {
            None => self.new.remove(i, true),
            Some(j) => self.old.remove(j, true),
        };
        if !self.resizing()
            && self.new.slots() * std::mem::size_of::<T::Raw>() > SHRINK_FLOOR_BYTES
            && self.len() * 8 < self.new.slots()
        {
            self.start_resize((self.len() * 2).next_power_of_two().max(MIN_SLOTS));
        }
        self.drain(STEP);
    }

    /// Allocates a new array of `slots` slots (zeroed) and keeps the current one to drain
    /// (draining first, at once, what is left of an earlier resize).
    fn start_resize(&mut self, slots: usize) {
        self.drain(usize::MAX);
        self.moves = self.moves.wrapping_add(1);
        self.old = std::mem::replace(&mut self.new, Array::zeroed(slots));
        self.scan = 0;
    }

    /// Moves keys from the old array to the new one for at most `units` work units (one per
    /// key moved or empty slot passed); frees the old array once it is empty.
    fn drain(&mut self, units: usize) {
        let mut left = units;
        while self.resizing() && left > 0 {
            left -= 1;
            if self.scan >= self.old.slots() {
                // Unreachable (slots before the scan are empty and some key is left).
                self.scan = 0;
            }
            if self.old.key_at(self.scan) == 0 {
                self.scan += 1;
                continue;
            }
            // A deletion: a later member of the run may shift into this slot, and is moved
            // next. The slots before the scan stay empty.
            if let Some(slot) = self.old.remove(self.scan, false) {
                self.new.store(slot, usize::MAX);
            }
        }
        if !self.resizing() && self.old.slots() > 0 {
            self.old = Array::default();
            self.scan = 0;
        }
    }
}
