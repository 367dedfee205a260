//! One open-addressing array of slots (linear probing, no tombstones), stored as plain words
//! so that a new array is allocated zeroed: the allocator hands out pages the system maps on
//! first touch, and growing a shard costs no pass over its new memory.

use super::Keyed;
use crate::prefix::home_filter::HomeFilter;

/// Where a key is among the first slots of its probe run ([`Array::find_near`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Near {
    /// At this index.
    Found(usize),
    /// Absent: its probe run ends at this empty slot (`usize::MAX` for an array with no slots).
    Vacant(usize),
    /// Not settled within those slots.
    Far,
}

/// Slots in words ([`Keyed::Raw`]), the number in use and, for a [`Keyed::FILTERED`] slot
/// type, which keys the array may hold.
#[derive(Debug)]
pub(super) struct Array<T: Keyed> {
    raw: Vec<T::Raw>,
    len: usize,
    filter: HomeFilter,
}

impl<T: Keyed> Default for Array<T> {
    fn default() -> Self {
        Array {
            raw: Vec::new(),
            len: 0,
            filter: HomeFilter::default(),
        }
    }
}

impl<T: Keyed> Array<T> {
    /// An empty array of `slots` slots (a power of two), allocated zeroed.
    pub(super) fn zeroed(slots: usize) -> Self {
        Array {
            // The words of an empty slot are all zero, so this is one zeroed allocation.
            raw: vec![T::Raw::default(); slots],
            len: 0,
            filter: if T::FILTERED {
                HomeFilter::new(slots)
            } else {
                HomeFilter::default()
            },
        }
    }

    /// Slots in all.
    #[inline]
    pub(super) fn slots(&self) -> usize {
        self.raw.len()
    }

    /// Keys present.
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.raw.capacity() * std::mem::size_of::<T::Raw>() + self.filter.heap_bytes()
    }

    /// The key in slot `i` (0: empty); 0 for an index out of range.
    #[inline]
    pub(super) fn key_at(&self, i: usize) -> u64 {
        self.raw.get(i).map_or(0, T::raw_key)
    }

    #[inline]
    pub(super) fn get(&self, i: usize) -> Option<T> {
        self.raw.get(i).map(|r| T::unpack(*r))
    }

    /// Replaces slot `i` (which must keep its key).
    #[inline]
    pub(super) fn set(&mut self, i: usize, slot: T) {
        if let Some(r) = self.raw.get_mut(i) {
            debug_assert_eq!(T::raw_key(r), slot.key());
            *r = slot.pack();
        }
    }

    #[cfg(test)]
    pub(super) fn iter(&self) -> impl Iterator<Item = T> + '_ {
        self.raw
            .iter()
            .filter(|r| T::raw_key(r) != 0)
            .map(|r| T::unpack(*r))
    }

    /// Whether `key` may be present (false: certainly not; true for an array with no slots).
    #[inline]
    pub(super) fn may_hold(&self, key: u64) -> bool {
        self.raw.is_empty() || self.filter.may_hold(key, self.raw.len() - 1)
    }

    /// Looks for `key` in the `G` slots from its home with no branch per slot.
    #[inline]
    pub(super) fn find_near<const G: usize>(&self, key: u64) -> Near {
        if self.raw.is_empty() {
            return Near::Vacant(usize::MAX);
        }
        let mask = self.raw.len() - 1;
        let home = key as usize & mask;
        let (mut hit, mut empty) = (G, G);
        for g in (0..G).rev() {
            let slot_key = T::raw_key(&self.raw[(home + g) & mask]);
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

    /// `Ok` with the index of `key`, else `Err` with the empty slot ending its probe run
    /// (`usize::MAX` for an array with no slots).
    #[inline]
    pub(super) fn probe(&self, key: u64) -> Result<usize, usize> {
        if self.raw.is_empty() {
            return Err(usize::MAX);
        }
        let mask = self.raw.len() - 1;
        let mut i = key as usize & mask;
        // The array is never full (at most 3/4 in use), so the loop ends.
        loop {
            let slot_key = T::raw_key(&self.raw[i]);
            if slot_key == key {
                return Ok(i);
            }
            if slot_key == 0 {
                return Err(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// The home slot's key of each of `keys` (0 for an array with no slots).
    #[inline]
    pub(super) fn load_homes(&self, keys: &[u64], homes: &mut [u64]) {
        if self.raw.is_empty() {
            homes.fill(0);
            return;
        }
        let mask = self.raw.len() - 1;
        for (home, &key) in homes.iter_mut().zip(keys) {
            *home = T::raw_key(&self.raw[key as usize & mask]);
        }
    }

    /// Loads the home slot of each of `keys` and the slot one cache line further on.
    pub(super) fn touch_runs(&self, keys: &[u64]) -> u64 {
        if self.raw.is_empty() {
            return 0;
        }
        let mask = self.raw.len() - 1;
        let ahead = (64 / std::mem::size_of::<T::Raw>()).max(1);
        keys.iter().fold(0, |x, &key| {
            let home = key as usize & mask;
            x ^ T::raw_key(&self.raw[home]) ^ T::raw_key(&self.raw[(home + ahead) & mask])
        })
    }

    /// Loads every cache line holding a key of the `span` slots from each key's home.
    pub(super) fn touch_spans(&self, keys: impl IntoIterator<Item = u64>, span: usize) -> u64 {
        if self.raw.is_empty() || span == 0 {
            return 0;
        }
        let mask = self.raw.len() - 1;
        let ahead = (64 / std::mem::size_of::<T::Raw>()).clamp(1, span);
        keys.into_iter().fold(0, |x, key| {
            let home = key as usize & mask;
            x ^ T::raw_key(&self.raw[home])
                ^ T::raw_key(&self.raw[(home + ahead) & mask])
                ^ T::raw_key(&self.raw[(home + span - 1) & mask])
        })
    }

    /// Stores `slot` (whose key must be absent and non-zero) at `vacancy` when that is still
    /// the empty slot ending the key's probe run (the caller knows), else where a probe puts
    /// it; returns its index. The array must have a free slot.
    #[inline]
    pub(super) fn store(&mut self, slot: T, vacancy: usize) -> usize {
        let mask = self.raw.len().wrapping_sub(1);
        let mut i = vacancy;
        if self.raw.get(i).is_none_or(|r| T::raw_key(r) != 0) {
            i = slot.key() as usize & mask;
            while self.raw.get(i).is_some_and(|r| T::raw_key(r) != 0) {
                i = (i + 1) & mask;
            }
        }
        let Some(r) = self.raw.get_mut(i) else {
            return usize::MAX;
        };
        *r = slot.pack();
        self.len += 1;
        if T::FILTERED {
            self.filter.add(slot.key(), mask);
        }
        i
    }

    /// Empties slot `hole` and shifts later members of its probe run back (no tombstones);
    /// returns what it held. With `keep_filter`, the filter forgets the key when no other key
    /// shares its bit (else it may keep answering "maybe" for it, which is never wrong).
    pub(super) fn remove(&mut self, mut hole: usize, keep_filter: bool) -> Option<T> {
        let gone = T::unpack(*self.raw.get(hole)?);
        if gone.key() == 0 {
            return None;
        }
        let mask = self.raw.len() - 1;
        self.raw[hole] = T::Raw::default();
        self.len -= 1;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let raw = self.raw[j];
            let key = T::raw_key(&raw);
            if key == 0 {
                break;
            }
            let home = key as usize & mask;
            // Move `j` into the hole unless its home lies cyclically in (hole, j].
            let stays = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !stays {
                self.raw[hole] = raw;
                self.raw[j] = T::Raw::default();
                hole = j;
            }
        }
        if T::FILTERED && keep_filter {
            // Every key sharing the gone key's bit has its home, so lies in the run from there.
            let gone = gone.key();
            let mut j = gone as usize & mask;
            let mut others = false;
            while !others && T::raw_key(&self.raw[j]) != 0 {
                others = HomeFilter::same_bit(T::raw_key(&self.raw[j]), gone, mask);
                j = (j + 1) & mask;
            }
            self.filter.remove(gone, mask, others);
        }
        Some(gone)
    }
}
