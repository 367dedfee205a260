//! An open-addressing array of 16-byte slots keyed by block key (linear probing, no
//! tombstones), the storage under a shard's [`BlockTable`](super::table::BlockTable).

use super::home_filter::HomeFilter;

const MIN_SLOTS: usize = 16;

/// Arrays this small (in bytes) never shrink: a shard holding a few chains gains and loses a
/// whole chain's blocks at once, and would otherwise halve and double over and over.
const SHRINK_FLOOR_BYTES: usize = 16 * 1024;

/// A slot type: anything with a block key (0 = empty).
pub(crate) trait Keyed: Copy + Default {
    /// Whether arrays of this slot keep a [`HomeFilter`], so that
    /// [`may_hold`](Slots::may_hold) can settle most absent keys without a probe.
    const FILTERED: bool = false;

    /// The block key, 0 when the slot is empty.
    fn key(&self) -> u64;
}

/// One block: its key (0 = empty) and two words whose meaning the table defines.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Slot {
    pub(crate) key: u64,
    pub(crate) a: u32,
    pub(crate) b: u32,
}

impl Keyed for Slot {
    #[inline]
    fn key(&self) -> u64 {
        self.key
    }
}

/// Slots with at most 3/4 in use (the array doubles beyond) and, once larger than
/// [`SHRINK_FLOOR_BYTES`], at least 1/8 (it shrinks below).
#[derive(Debug)]
pub(crate) struct Slots<T> {
    slots: Vec<T>,
    len: usize,
    /// Changes that may have moved keys or emptied slots (deletions and resizes), counted so
    /// that a vacancy found earlier can be trusted while the count is unchanged.
    moves: u32,
    /// For a [`Keyed::FILTERED`] slot type, which keys the array may hold.
    filter: HomeFilter,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots {
            slots: Vec::new(),
            len: 0,
            moves: 0,
            filter: HomeFilter::default(),
        }
    }
}

/// Where a key is among the first slots of its probe run ([`Slots::find_near`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Near {
    /// At this index.
    Found(usize),
    /// Absent: its probe run ends at this empty slot, where
    /// [`insert_at`](Slots::insert_at) stores it (`usize::MAX` for an array with no slots).
    Vacant(usize),
    /// Not settled within those slots.
    Far,
}

impl<T: Keyed> Slots<T> {
    /// Keys present.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Heap bytes owned.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<T>() + self.filter.heap_bytes()
    }

    /// Whether `key` may be present: false settles that it is not, without reading a slot
    /// (always true for a slot type with no filter).
    #[inline]
    pub(crate) fn may_hold(&self, key: u64) -> bool {
        !T::FILTERED || self.slots.is_empty() || self.filter.may_hold(key, self.slots.len() - 1)
    }

    /// Slot `i` (an index from this array's `find`, `resolve` or `insert`).
    #[inline]
    pub(crate) fn get(&self, i: usize) -> Option<&T> {
        self.slots.get(i)
    }

    /// Slot `i` for changing anything but its key.
    #[inline]
    pub(crate) fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        self.slots.get_mut(i)
    }

    /// Every slot in use.
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().filter(|s| s.key() != 0)
    }

    /// Deletions and resizes so far (wrapping): while unchanged, an empty slot found by a
    /// probe is still where the probe run of its key ends, unless something was stored there.
    #[inline]
    pub(crate) fn moves(&self) -> u32 {
        self.moves
    }

    /// Looks for `key` in the `G` slots from its home with no branch per slot: the probe of a
    /// batch of keys then costs a few mispredicted branches in all rather than one per key.
    #[inline]
    pub(crate) fn find_near<const G: usize>(&self, key: u64) -> Near {
        if self.slots.is_empty() {
            return Near::Vacant(usize::MAX);
        }
        let mask = self.slots.len() - 1;
        let home = key as usize & mask;
        let (mut hit, mut empty) = (G, G);
        for g in (0..G).rev() {
            let slot_key = self.slots[(home + g) & mask].key();
            hit = if slot_key == key { g } else { hit };
            empty = if slot_key == 0 { g } else { empty };
        }
        if hit < empty {
            Near::Found((home + hit) & mask)
        } else if empty < G {
            Near::Vacant((home + empty) & mask)
        } else {
            Near::Far
        }
    }

    /// The index of `key`, when present.
    #[inline]
    pub(crate) fn find(&self, key: u64) -> Option<usize> {
        self.probe(key).ok()
    }

    /// Loads the home slot of each of `keys` into `homes`, with no dependency between the
    /// loads, so their cache misses overlap.
    #[inline]
    pub(crate) fn load_homes(&self, keys: &[u64], homes: &mut [u64]) {
        if self.slots.is_empty() {
            homes.fill(0);
            return;
        }
        let mask = self.slots.len() - 1;
        for (home, &key) in homes.iter_mut().zip(keys) {
            *home = self.slots[key as usize & mask].key();
        }
    }

    /// Loads the home slot of each of `keys` and the slot one cache line further on (where a
    /// probe run for an absent key usually ends); returns a value depending on all of them.
    pub(crate) fn touch_runs(&self, keys: &[u64]) -> u64 {
        if self.slots.is_empty() {
            return 0;
        }
        let mask = self.slots.len() - 1;
        let ahead = (64 / std::mem::size_of::<T>()).max(1);
        keys.iter().fold(0, |x, &key| {
            let home = key as usize & mask;
            x ^ self.slots[home].key() ^ self.slots[(home + ahead) & mask].key()
        })
    }

    /// Loads, for each of `keys`, every cache line holding a key of the `span` slots from its
    /// home (the slots the lines start and end at: the home, one line on, the last), so that
    /// a [`find_near`](Self::find_near) over them reads only loaded lines; returns a value
    /// depending on all of them.
    pub(crate) fn touch_spans(&self, keys: impl IntoIterator<Item = u64>, span: usize) -> u64 {
        if self.slots.is_empty() || span == 0 {
            return 0;
        }
        let mask = self.slots.len() - 1;
        let ahead = (64 / std::mem::size_of::<T>()).clamp(1, span);
        keys.into_iter().fold(0, |x, key| {
            let home = key as usize & mask;
            x ^ self.slots[home].key()
                ^ self.slots[(home + ahead) & mask].key()
                ^ self.slots[(home + span - 1) & mask].key()
        })
    }

    /// The index of `key` given its home slot's key from [`load_homes`](Self::load_homes).
    #[inline]
    pub(crate) fn resolve(&self, key: u64, home: u64) -> Option<usize> {
        if home == key {
            Some(key as usize & (self.slots.len() - 1))
        } else if home == 0 {
            None
        } else {
            self.find(key)
        }
    }

    /// `Ok` with the index of `key` when present, else `Err` with the empty slot ending its
    /// probe run (where [`insert_at`](Self::insert_at) stores it), or `Err(usize::MAX)` for
    /// an array with no slots yet. One probe run serves both the search and the insert.
    #[inline]
    pub(crate) fn probe(&self, key: u64) -> Result<usize, usize> {
        if self.slots.is_empty() {
            return Err(usize::MAX);
        }
        let mask = self.slots.len() - 1;
        let mut i = key as usize & mask;
        loop {
            let slot_key = self.slots[i].key();
            if slot_key == key {
                return Ok(i);
            }
            if slot_key == 0 {
                return Err(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// Stores `slot` (whose key must be absent and non-zero); returns its index.
    pub(crate) fn insert(&mut self, slot: T) -> usize {
        self.insert_at(slot, usize::MAX)
    }

    /// [`insert`](Self::insert) at `vacancy`, the empty slot a [`probe`](Self::probe) for
    /// the key just found with no change to the array since (anything else: it probes again).
    #[inline]
    pub(crate) fn insert_at(&mut self, slot: T, vacancy: usize) -> usize {
        let mut i = vacancy;
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.resize((self.slots.len() * 2).max(MIN_SLOTS));
            i = usize::MAX;
        }
        let mask = self.slots.len() - 1;
        if self.slots.get(i).is_none_or(|s| s.key() != 0) {
            i = slot.key() as usize & mask;
            while self.slots[i].key() != 0 {
                i = (i + 1) & mask;
            }
        }
        self.slots[i] = slot;
        self.len += 1;
        if T::FILTERED {
            self.filter.add(slot.key(), mask);
        }
        i
    }

    /// Empties slot `hole` and shifts later members of its probe run back (no tombstones).
    pub(crate) fn delete(&mut self, mut hole: usize) {
        let mask = self.slots.len() - 1;
        let gone = self.slots[hole].key();
        self.slots[hole] = T::default();
        self.len -= 1;
        self.moves = self.moves.wrapping_add(1);
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let slot = self.slots[j];
            if slot.key() == 0 {
                break;
            }
            let home = slot.key() as usize & mask;
            // Move `j` into the hole unless its home lies cyclically in (hole, j].
            let stays = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !stays {
                self.slots[hole] = slot;
                self.slots[j] = T::default();
                hole = j;
            }
        }
        if T::FILTERED {
            // Every key sharing the gone key's bit has its home, so lies in the run from there.
            let mut j = gone as usize & mask;
            let mut others = false;
            while !others && self.slots[j].key() != 0 {
                others = HomeFilter::same_bit(self.slots[j].key(), gone, mask);
                j = (j + 1) & mask;
            }
            self.filter.remove(gone, mask, others);
        }
        if self.slots.len() * std::mem::size_of::<T>() > SHRINK_FLOOR_BYTES
            && self.len * 8 < self.slots.len()
        {
            self.resize((self.len * 2).next_power_of_two().max(MIN_SLOTS));
        }
    }

    fn resize(&mut self, slots: usize) {
        self.moves = self.moves.wrapping_add(1);
        let old = std::mem::replace(&mut self.slots, vec![T::default(); slots]);
        let mask = slots - 1;
        if T::FILTERED {
            self.filter = HomeFilter::new(slots);
        }
        for slot in old.into_iter().filter(|s| s.key() != 0) {
            let mut i = slot.key() as usize & mask;
            while self.slots[i].key() != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = slot;
            if T::FILTERED {
                self.filter.add(slot.key(), mask);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(n: u64) -> Slots<Slot> {
        let mut slots = Slots::default();
        for key in 1..=n {
            slots.insert(Slot { key, a: 1, b: 0 });
        }
        slots
    }

    fn empty_out(slots: &mut Slots<Slot>, n: u64) {
        for key in 1..=n {
            if let Some(i) = slots.find(key) {
                slots.delete(i);
            }
        }
    }

    #[test]
    fn small_arrays_keep_their_slots_when_emptied() {
        let mut slots = filled(200);
        let bytes = slots.heap_bytes();
        empty_out(&mut slots, 200);
        assert_eq!(slots.len(), 0);
        assert_eq!(slots.heap_bytes(), bytes);
        // Refilling does not grow it again either.
        for key in 1..=200 {
            slots.insert(Slot { key, a: 1, b: 0 });
        }
        assert_eq!(slots.heap_bytes(), bytes);
    }

    #[test]
    fn large_arrays_shrink_when_mostly_empty() {
        let mut slots = filled(10_000);
        let bytes = slots.heap_bytes();
        empty_out(&mut slots, 9_990);
        assert_eq!(slots.len(), 10);
        assert!(slots.heap_bytes() <= SHRINK_FLOOR_BYTES.max(bytes / 8));
        for key in 9_991..=10_000 {
            assert!(slots.find(key).is_some());
        }
    }
}
