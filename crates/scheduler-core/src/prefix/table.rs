//! One shard's map from block key to the endpoints holding that block.
//!
//! Open addressing with linear probing over 16-byte slots: the key and two inline holder tags.
//! A block held by more than two endpoints moves its holders to a spill list in a slab, whose
//! index the slot keeps in place of its first holder. A holder tag
//! is `endpoint id + 1` with [`REF_BIT`] set when the block was touched again since the
//! endpoint's eviction clock last passed it.

/// Set on a holder tag when its block was re-used (a second chance for the eviction clock).
pub(crate) const REF_BIT: u32 = 1 << 31;
/// Inline `b` value meaning the holders live in the spill slab at index `a`.
const SPILLED: u32 = u32::MAX;
/// Largest endpoint id the index can hold (tags must stay below `SPILLED & !REF_BIT`).
pub(crate) const MAX_ENDPOINT_ID: u32 = (SPILLED & !REF_BIT) - 2;
const MIN_SLOTS: usize = 16;

/// The tag of endpoint `id` (without the reference bit).
pub(crate) fn tag_of(id: u32) -> u32 {
    id + 1
}

/// The endpoint id of `tag` (reference bit ignored).
pub(crate) fn id_of(tag: u32) -> u32 {
    (tag & !REF_BIT) - 1
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    key: u64,
    a: u32,
    b: u32,
}

/// The holders of one block, as a lookup sees them.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Holders<'a> {
    /// Up to two tags (0 means none), reference bits cleared.
    Inline(u32, u32),
    /// More than two tags (reference bits may be set).
    Spilled(&'a [u32]),
}

impl Holders<'_> {
    /// Whether the (bare) `tag` holds the block.
    #[inline]
    pub(crate) fn contains(&self, tag: u32) -> bool {
        match *self {
            Holders::Inline(a, b) => a == tag || b == tag,
            Holders::Spilled(list) => list.iter().any(|&t| t & !REF_BIT == tag),
        }
    }

    /// Calls `f` with every bare tag.
    pub(crate) fn for_each(&self, mut f: impl FnMut(u32)) {
        match *self {
            Holders::Inline(a, b) => {
                if a != 0 {
                    f(a);
                }
                if b != 0 {
                    f(b);
                }
            }
            Holders::Spilled(list) => list.iter().for_each(|&t| f(t & !REF_BIT)),
        }
    }
}

/// What adding a holder did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Added {
    /// The endpoint did not hold the block; now it does.
    New,
    /// The endpoint already held it; its reference bit is now set.
    Touched,
}

/// What the eviction clock found for one (block, endpoint) entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClockHand {
    /// The entry was referenced: the bit is now cleared, keep it.
    SecondChance,
    /// The entry was removed.
    Evicted,
    /// The endpoint no longer held the block.
    Absent,
}

/// A shard's block table.
#[derive(Debug, Default)]
pub(crate) struct BlockTable {
    slots: Vec<Slot>,
    len: usize,
    spill: Vec<Vec<u32>>,
    spill_free: Vec<u32>,
}

impl BlockTable {
    /// Number of blocks held by at least one endpoint.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Heap bytes owned by the table (slots, spill map entries and lists).
    pub(crate) fn heap_bytes(&self) -> usize {
        let spill_lists: usize = self.spill.iter().map(|v| v.capacity() * 4).sum();
        self.slots.capacity() * std::mem::size_of::<Slot>()
            + self.spill.capacity() * std::mem::size_of::<Vec<u32>>()
            + self.spill_free.capacity() * 4
            + spill_lists
    }

    #[inline]
    fn find(&self, key: u64) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = key as usize & mask;
        loop {
            let slot = &self.slots[i];
            if slot.key == key {
                return Some(i);
            }
            if slot.key == 0 {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// Finds the slots of several keys at once: their home slots are loaded first, with no
    /// dependency between the loads, so the cache misses of a batch overlap. `out[j]` is the
    /// slot of `keys[j]`, or `usize::MAX` when absent.
    #[inline]
    pub(crate) fn find_batch(&self, keys: &[u64], out: &mut [usize]) {
        if self.slots.is_empty() {
            out.fill(usize::MAX);
            return;
        }
        let mask = self.slots.len() - 1;
        let mut homes = [0u64; 16];
        for (home, &key) in homes.iter_mut().zip(keys) {
            *home = self.slots[key as usize & mask].key;
        }
        for ((slot, &key), &home) in out.iter_mut().zip(keys).zip(&homes) {
            *slot = if home == key {
                key as usize & mask
            } else if home == 0 {
                usize::MAX
            } else {
                self.find(key).unwrap_or(usize::MAX)
            };
        }
        // Touch the spilled holder lists of the batch the same way, so their misses overlap
        // too instead of stalling the walk one block at a time.
        let mut touched = 0u32;
        for &index in out.iter() {
            if let Some(slot) = self.slots.get(index)
                && slot.b == SPILLED
                && let Some(list) = self.spill.get(slot.a as usize)
            {
                touched ^= list.first().copied().unwrap_or(0);
            }
        }
        std::hint::black_box(touched);
    }

    /// The holders in slot `index` (from [`find_batch`](Self::find_batch)); `None` for
    /// `usize::MAX`.
    #[inline]
    pub(crate) fn holders_at(&self, index: usize) -> Option<Holders<'_>> {
        let slot = self.slots.get(index)?;
        Some(if slot.b == SPILLED {
            Holders::Spilled(
                self.spill
                    .get(slot.a as usize)
                    .map_or(&[][..], Vec::as_slice),
            )
        } else {
            Holders::Inline(slot.a & !REF_BIT, slot.b & !REF_BIT)
        })
    }

    /// The holders of `key`, when anyone holds it.
    #[inline]
    pub(crate) fn holders(&self, key: u64) -> Option<Holders<'_>> {
        let slot = &self.slots[self.find(key)?];
        if slot.b == SPILLED {
            let list = self
                .spill
                .get(slot.a as usize)
                .map_or(&[][..], Vec::as_slice);
            Some(Holders::Spilled(list))
        } else {
            Some(Holders::Inline(slot.a & !REF_BIT, slot.b & !REF_BIT))
        }
    }

    /// Records that endpoint `tag` holds `key` (setting its reference bit if it already did).
    pub(crate) fn add(&mut self, key: u64, tag: u32) -> Added {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.resize((self.slots.len() * 2).max(MIN_SLOTS));
        }
        let mask = self.slots.len() - 1;
        let mut i = key as usize & mask;
        loop {
            let slot = self.slots[i];
            if slot.key == 0 {
                self.slots[i] = Slot { key, a: tag, b: 0 };
                self.len += 1;
                return Added::New;
            }
            if slot.key == key {
                break;
            }
            i = (i + 1) & mask;
        }
        let slot = &mut self.slots[i];
        if slot.b == SPILLED {
            let Some(list) = self.spill.get_mut(slot.a as usize) else {
                return Added::Touched;
            };
            if let Some(t) = list.iter_mut().find(|t| **t & !REF_BIT == tag) {
                *t |= REF_BIT;
                return Added::Touched;
            }
            list.push(tag);
            return Added::New;
        }
        for t in [&mut slot.a, &mut slot.b] {
            if *t & !REF_BIT == tag {
                *t |= REF_BIT;
                return Added::Touched;
            }
        }
        for t in [&mut slot.a, &mut slot.b] {
            if *t == 0 {
                *t = tag;
                return Added::New;
            }
        }
        let list = vec![slot.a, slot.b, tag];
        let index = match self.spill_free.pop() {
            Some(free) => {
                self.spill[free as usize] = list;
                free
            }
            None => {
                self.spill.push(list);
                (self.spill.len() - 1) as u32
            }
        };
        slot.a = index;
        slot.b = SPILLED;
        Added::New
    }

    /// Runs the eviction clock over endpoint `tag`'s entry for `key`.
    pub(crate) fn clock(&mut self, key: u64, tag: u32) -> ClockHand {
        let Some(i) = self.find(key) else {
            return ClockHand::Absent;
        };
        let referenced = {
            let slot = &mut self.slots[i];
            let found = if slot.b == SPILLED {
                self.spill
                    .get_mut(slot.a as usize)
                    .and_then(|list| list.iter_mut().find(|t| **t & !REF_BIT == tag))
            } else {
                [&mut slot.a, &mut slot.b]
                    .into_iter()
                    .find(|t| **t & !REF_BIT == tag)
            };
            match found {
                None => return ClockHand::Absent,
                Some(t) if *t & REF_BIT != 0 => {
                    *t &= !REF_BIT;
                    true
                }
                Some(_) => false,
            }
        };
        if referenced {
            ClockHand::SecondChance
        } else {
            self.remove_at(i, tag);
            ClockHand::Evicted
        }
    }

    /// Forgets that endpoint `tag` holds `key`; returns whether it did.
    pub(crate) fn remove(&mut self, key: u64, tag: u32) -> bool {
        match self.find(key) {
            Some(i) => self.remove_at(i, tag),
            None => false,
        }
    }

    fn remove_at(&mut self, i: usize, tag: u32) -> bool {
        let slot = &mut self.slots[i];
        if slot.b == SPILLED {
            let index = slot.a as usize;
            let Some(list) = self.spill.get_mut(index) else {
                return false;
            };
            let Some(pos) = list.iter().position(|t| *t & !REF_BIT == tag) else {
                return false;
            };
            list.swap_remove(pos);
            if list.len() <= 2 {
                slot.a = list.first().copied().unwrap_or(0);
                slot.b = list.get(1).copied().unwrap_or(0);
                *list = Vec::new();
                self.spill_free.push(index as u32);
            }
            return true;
        }
        if slot.a & !REF_BIT == tag {
            slot.a = slot.b;
            slot.b = 0;
        } else if slot.b & !REF_BIT == tag {
            slot.b = 0;
        } else {
            return false;
        }
        if slot.a == 0 {
            self.delete_slot(i);
        }
        true
    }

    /// Empties slot `i` and shifts later members of its probe run back (no tombstones).
    fn delete_slot(&mut self, mut hole: usize) {
        let mask = self.slots.len() - 1;
        self.slots[hole] = Slot::default();
        self.len -= 1;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let slot = self.slots[j];
            if slot.key == 0 {
                break;
            }
            let home = slot.key as usize & mask;
            // Move `j` into the hole unless its home lies cyclically in (hole, j].
            let stays = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !stays {
                self.slots[hole] = slot;
                self.slots[j] = Slot::default();
                hole = j;
            }
        }
        if self.slots.len() > MIN_SLOTS && self.len * 8 < self.slots.len() {
            self.resize((self.len * 2).next_power_of_two().max(MIN_SLOTS));
        }
    }

    fn resize(&mut self, slots: usize) {
        let old = std::mem::replace(&mut self.slots, vec![Slot::default(); slots]);
        let mask = slots - 1;
        for slot in old.into_iter().filter(|s| s.key != 0) {
            let mut i = slot.key as usize & mask;
            while self.slots[i].key != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = slot;
        }
    }

    /// Every (key, bare tag) pair (for tests and audits).
    #[cfg(test)]
    pub(crate) fn entries(&self) -> Vec<(u64, u32)> {
        let mut out = Vec::new();
        for slot in self.slots.iter().filter(|s| s.key != 0) {
            if let Some(h) = self.holders(slot.key) {
                h.for_each(|t| out.push((slot.key, t)));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};

    proptest! {
        #[test]
        fn behaves_like_a_map_of_sets(ops in prop::collection::vec((0u8..3, 1u64..40, 1u32..6), 0..400)) {
            let mut table = BlockTable::default();
            let mut model: BTreeMap<u64, BTreeSet<u32>> = BTreeMap::new();
            for (op, key, tag) in ops {
                // Small keys collide in the low bits: exercise long probe runs.
                let key = key << 3;
                match op {
                    0 => {
                        let added = table.add(key, tag);
                        let new = model.entry(key).or_default().insert(tag);
                        prop_assert_eq!(added == Added::New, new);
                    }
                    1 => {
                        let removed = table.remove(key, tag);
                        let had = model.get_mut(&key).is_some_and(|s| s.remove(&tag));
                        prop_assert_eq!(removed, had);
                    }
                    _ => {
                        let hand = table.clock(key, tag);
                        let had = model.get(&key).is_some_and(|s| s.contains(&tag));
                        prop_assert_eq!(hand != ClockHand::Absent, had);
                        if hand == ClockHand::Evicted {
                            model.get_mut(&key).map(|s| s.remove(&tag));
                        }
                    }
                }
                model.retain(|_, s| !s.is_empty());
                prop_assert_eq!(table.len(), model.len());
                for (k, set) in &model {
                    let holders = table.holders(*k);
                    prop_assert!(holders.is_some());
                    for t in set {
                        prop_assert!(holders.is_some_and(|h| h.contains(*t)));
                    }
                }
            }
            let mut entries = table.entries();
            entries.sort_unstable();
            let expected: Vec<(u64, u32)> =
                model.iter().flat_map(|(k, s)| s.iter().map(move |t| (*k, *t))).collect();
            prop_assert_eq!(entries, expected);
        }
    }

    #[test]
    fn touched_entries_get_a_second_chance() {
        let mut table = BlockTable::default();
        assert_eq!(table.add(8, 1), Added::New);
        assert_eq!(table.add(8, 1), Added::Touched);
        assert_eq!(table.clock(8, 1), ClockHand::SecondChance);
        assert_eq!(table.clock(8, 1), ClockHand::Evicted);
        assert_eq!(table.clock(8, 1), ClockHand::Absent);
        assert_eq!(table.len(), 0);
    }
}
