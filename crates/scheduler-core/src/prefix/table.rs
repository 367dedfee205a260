//! One shard's map from block key to the endpoints holding that block.
//!
//! Open addressing with linear probing over 16-byte slots: the key and two words. A block held
//! by one or two endpoints keeps their tags inline (`a`, `b`; `b` = 0 when there is one). A
//! block held by three or more refers to an interned [`HolderSets`] set: `a` is the set id with
//! [`SHARED_BIT`] set and `b` holds the holders' reference bits by position in the sorted set
//! (holders past the 31st share bit 31). A holder tag is `endpoint id + 1`, with [`REF_BIT`] set
//! (inline) when the block was touched again since the endpoint's eviction clock last passed it.

use super::holder_sets::{HolderSets, MAX_SETS};

/// Set on an inline holder tag when its block was re-used (a second chance for the clock).
pub(crate) const REF_BIT: u32 = 1 << 31;
/// Set on `a` when the slot refers to an interned holder set.
const SHARED_BIT: u32 = 1 << 30;
/// Largest endpoint id the index can hold (tags must stay below [`SHARED_BIT`]).
pub(crate) const MAX_ENDPOINT_ID: u32 = SHARED_BIT - 2;
const MIN_SLOTS: usize = 16;
/// Most blocks one shard holds (every interned set is used by a slot, so ids always fit).
const MAX_LEN: usize = MAX_SETS - 2;

/// The tag of endpoint `id` (without the reference bit).
pub(crate) fn tag_of(id: u32) -> u32 {
    id + 1
}

/// The endpoint id of `tag` (reference bit ignored).
pub(crate) fn id_of(tag: u32) -> u32 {
    (tag & !REF_BIT) - 1
}

/// The reference bit of the holder at `position` of a shared set.
#[inline]
fn position_bit(position: usize) -> u32 {
    1 << position.min(31)
}

/// Reference bits after a holder is inserted at `position` (later holders move up one).
fn bits_after_insert(bits: u32, position: usize) -> u32 {
    if position >= 31 {
        return bits;
    }
    let below = (1u32 << position) - 1;
    (bits & below) | ((bits & !below) << 1) | (bits & (1 << 31))
}

/// Reference bits after the holder at `position` leaves (later holders move down one).
fn bits_after_remove(bits: u32, position: usize) -> u32 {
    if position >= 31 {
        return bits;
    }
    let below = (1u32 << position) - 1;
    (bits & below) | ((bits >> 1) & !below) | (bits & (1 << 31))
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
    /// An interned set (its id and sorted bare tags).
    Shared(u32, &'a [u32]),
}

impl Holders<'_> {
    /// Whether the (bare) `tag` holds the block.
    #[inline]
    pub(crate) fn contains(&self, tag: u32) -> bool {
        match *self {
            Holders::Inline(a, b) => a == tag || b == tag,
            Holders::Shared(_, list) => list.binary_search(&tag).is_ok(),
        }
    }

    /// Equal for two blocks with the same holders in the same representation (different
    /// values may still be equal sets).
    #[inline]
    pub(crate) fn signature(&self) -> u64 {
        match *self {
            Holders::Inline(a, b) => (u64::from(a) << 32) | u64::from(b),
            Holders::Shared(id, _) => u64::from(id | SHARED_BIT) << 32,
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
            Holders::Shared(_, list) => list.iter().for_each(|&t| f(t)),
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
    /// The shard is full; nothing was recorded.
    Full,
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

/// The last change of holder set, remembered because the blocks of one chain usually make the
/// same change one after the other: (holders before, tag added or removed, set id after).
#[derive(Debug, Clone, Copy)]
struct Transition {
    from: u64,
    tag: u32,
    to: u32,
}

/// A shard's block table.
#[derive(Debug, Default)]
pub(crate) struct BlockTable {
    slots: Vec<Slot>,
    len: usize,
    sets: HolderSets,
    added: Option<Transition>,
    removed: Option<Transition>,
    scratch: Vec<u32>,
}

impl BlockTable {
    /// Number of blocks held by at least one endpoint.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Heap bytes owned by the table (slots and interned sets).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot>()
            + self.sets.heap_bytes()
            + self.scratch.capacity() * 4
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

    /// Loads the home slot of each of `keys` into `homes`, with no dependency between the
    /// loads, so their cache misses overlap (with each other and with whatever the caller does
    /// before [`resolve`](Self::resolve)).
    #[inline]
    pub(crate) fn load_homes(&self, keys: &[u64], homes: &mut [u64]) {
        if self.slots.is_empty() {
            return;
        }
        let mask = self.slots.len() - 1;
        for (home, &key) in homes.iter_mut().zip(keys) {
            *home = self.slots[key as usize & mask].key;
        }
    }

    /// The slots of `keys` given their home slots' keys from [`load_homes`](Self::load_homes):
    /// `out[j]` is the slot of `keys[j]`, or `usize::MAX` when absent.
    #[inline]
    pub(crate) fn resolve(&self, keys: &[u64], homes: &[u64], out: &mut [usize]) {
        if self.slots.is_empty() {
            out.fill(usize::MAX);
            return;
        }
        let mask = self.slots.len() - 1;
        for ((slot, &key), &home) in out.iter_mut().zip(keys).zip(homes) {
            *slot = if home == key {
                key as usize & mask
            } else if home == 0 {
                usize::MAX
            } else {
                self.find(key).unwrap_or(usize::MAX)
            };
        }
    }

    #[inline]
    fn holders_of(&self, slot: &Slot) -> Holders<'_> {
        if slot.a & SHARED_BIT != 0 {
            let id = slot.a & !SHARED_BIT;
            Holders::Shared(id, self.sets.members(id))
        } else {
            Holders::Inline(slot.a & !REF_BIT, slot.b & !REF_BIT)
        }
    }

    /// The holders in slot `index` (from [`resolve`](Self::resolve)); `None` for
    /// `usize::MAX`.
    #[inline]
    pub(crate) fn holders_at(&self, index: usize) -> Option<Holders<'_>> {
        let slot = self.slots.get(index)?;
        Some(self.holders_of(slot))
    }

    /// The holders of `key`, when anyone holds it.
    #[inline]
    pub(crate) fn holders(&self, key: u64) -> Option<Holders<'_>> {
        let slot = &self.slots[self.find(key)?];
        Some(self.holders_of(slot))
    }

    /// The id of the set `members` (sorted), reusing `memo` when it describes this very change.
    fn set_for(&mut self, from: u64, tag: u32, adding: bool) -> Option<u32> {
        let memo = if adding { self.added } else { self.removed };
        if let Some(t) = memo
            && t.from == from
            && t.tag == tag
        {
            self.sets.reuse(t.to);
            return Some(t.to);
        }
        let to = self.sets.acquire(&self.scratch)?;
        let t = Some(Transition { from, tag, to });
        if adding {
            self.added = t;
        } else {
            self.removed = t;
        }
        Some(to)
    }

    /// Releases one use of set `id`, forgetting remembered transitions if that freed it.
    fn release(&mut self, id: u32) {
        if self.sets.release(id) {
            self.added = None;
            self.removed = None;
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
                if self.len >= MAX_LEN {
                    return Added::Full;
                }
                self.slots[i] = Slot { key, a: tag, b: 0 };
                self.len += 1;
                return Added::New;
            }
            if slot.key == key {
                break;
            }
            i = (i + 1) & mask;
        }
        let slot = self.slots[i];
        if slot.a & SHARED_BIT != 0 {
            let id = slot.a & !SHARED_BIT;
            let members = self.sets.members(id);
            let position = match members.binary_search(&tag) {
                Ok(p) => {
                    self.slots[i].b |= position_bit(p);
                    return Added::Touched;
                }
                Err(p) => p,
            };
            self.scratch.clear();
            self.scratch.extend_from_slice(members);
            self.scratch.insert(position, tag);
            let from = u64::from(slot.a) << 32;
            let Some(to) = self.set_for(from, tag, true) else {
                return Added::Full;
            };
            self.release(id);
            self.slots[i].a = to | SHARED_BIT;
            self.slots[i].b = bits_after_insert(slot.b, position);
            return Added::New;
        }
        let (a, b) = (slot.a & !REF_BIT, slot.b & !REF_BIT);
        if a == tag {
            self.slots[i].a |= REF_BIT;
            return Added::Touched;
        }
        if b == tag {
            self.slots[i].b |= REF_BIT;
            return Added::Touched;
        }
        if b == 0 {
            self.slots[i].b = tag;
            return Added::New;
        }
        // A third holder: move the three to an interned set.
        let mut members = [
            (a, slot.a & REF_BIT != 0),
            (b, slot.b & REF_BIT != 0),
            (tag, false),
        ];
        members.sort_unstable_by_key(|m| m.0);
        self.scratch.clear();
        self.scratch.extend(members.iter().map(|m| m.0));
        let from = (u64::from(a.min(b)) << 32) | u64::from(a.max(b));
        let Some(to) = self.set_for(from, tag, true) else {
            return Added::Full;
        };
        let bits = members
            .iter()
            .enumerate()
            .filter(|(_, m)| m.1)
            .fold(0, |bits, (p, _)| bits | position_bit(p));
        self.slots[i].a = to | SHARED_BIT;
        self.slots[i].b = bits;
        Added::New
    }

    /// Runs the eviction clock over endpoint `tag`'s entry for `key`.
    pub(crate) fn clock(&mut self, key: u64, tag: u32) -> ClockHand {
        let Some(i) = self.find(key) else {
            return ClockHand::Absent;
        };
        let slot = &mut self.slots[i];
        if slot.a & SHARED_BIT != 0 {
            let members = self.sets.members(slot.a & !SHARED_BIT);
            let Ok(position) = members.binary_search(&tag) else {
                return ClockHand::Absent;
            };
            let bit = position_bit(position);
            if slot.b & bit != 0 {
                slot.b &= !bit;
                return ClockHand::SecondChance;
            }
        } else {
            let t = if slot.a & !REF_BIT == tag {
                &mut slot.a
            } else if slot.b & !REF_BIT == tag {
                &mut slot.b
            } else {
                return ClockHand::Absent;
            };
            if *t & REF_BIT != 0 {
                *t &= !REF_BIT;
                return ClockHand::SecondChance;
            }
        }
        self.remove_at(i, tag);
        ClockHand::Evicted
    }

    /// Forgets that endpoint `tag` holds `key`; returns whether it did.
    pub(crate) fn remove(&mut self, key: u64, tag: u32) -> bool {
        match self.find(key) {
            Some(i) => self.remove_at(i, tag),
            None => false,
        }
    }

    fn remove_at(&mut self, i: usize, tag: u32) -> bool {
        let slot = self.slots[i];
        if slot.a & SHARED_BIT != 0 {
            let id = slot.a & !SHARED_BIT;
            let members = self.sets.members(id);
            let Ok(position) = members.binary_search(&tag) else {
                return false;
            };
            if members.len() <= 3 {
                // Back to two inline holders, keeping their reference bits.
                let mut inline = [0u32; 2];
                for (slot_tag, (p, &m)) in inline
                    .iter_mut()
                    .zip(members.iter().enumerate().filter(|(p, _)| *p != position))
                {
                    let referenced = slot.b & position_bit(p) != 0;
                    *slot_tag = if referenced { m | REF_BIT } else { m };
                }
                self.slots[i].a = inline[0];
                self.slots[i].b = inline[1];
                self.release(id);
                return true;
            }
            self.scratch.clear();
            self.scratch.extend_from_slice(members);
            self.scratch.remove(position);
            let from = u64::from(slot.a) << 32;
            match self.set_for(from, tag, false) {
                Some(to) => {
                    self.slots[i].a = to | SHARED_BIT;
                    self.slots[i].b = bits_after_remove(slot.b, position);
                    self.release(id);
                }
                None => {
                    // Unreachable (a shard never holds more sets than blocks): drop the block.
                    self.release(id);
                    self.delete_slot(i);
                }
            }
            return true;
        }
        if slot.a & !REF_BIT == tag {
            self.slots[i].a = slot.b;
            self.slots[i].b = 0;
        } else if slot.b & !REF_BIT == tag {
            self.slots[i].b = 0;
        } else {
            return false;
        }
        if self.slots[i].a == 0 {
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

    /// Distinct interned sets alive (for tests).
    #[cfg(test)]
    pub(crate) fn live_sets(&self) -> usize {
        self.sets.live()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};

    proptest! {
        /// The table against a plain model: a map from key to holders with their reference
        /// bits (exact below 31 holders per block), and no interned set outliving its blocks.
        #[test]
        fn behaves_like_a_map_of_sets(ops in prop::collection::vec((0u8..3, 1u64..40, 1u32..7), 0..500)) {
            let mut table = BlockTable::default();
            let mut model: BTreeMap<u64, BTreeMap<u32, bool>> = BTreeMap::new();
            for (op, key, tag) in ops {
                // Small keys collide in the low bits: exercise long probe runs.
                let key = key << 3;
                match op {
                    0 => {
                        let added = table.add(key, tag);
                        let holders = model.entry(key).or_default();
                        let new = !holders.contains_key(&tag);
                        holders.insert(tag, !new);
                        prop_assert_eq!(added, if new { Added::New } else { Added::Touched });
                    }
                    1 => {
                        let removed = table.remove(key, tag);
                        let had = model.get_mut(&key).is_some_and(|s| s.remove(&tag).is_some());
                        prop_assert_eq!(removed, had);
                    }
                    _ => {
                        let hand = table.clock(key, tag);
                        let expected = match model.get_mut(&key).and_then(|s| s.get_mut(&tag)) {
                            None => ClockHand::Absent,
                            Some(referenced) if *referenced => {
                                *referenced = false;
                                ClockHand::SecondChance
                            }
                            Some(_) => ClockHand::Evicted,
                        };
                        if expected == ClockHand::Evicted {
                            model.get_mut(&key).map(|s| s.remove(&tag));
                        }
                        prop_assert_eq!(hand, expected);
                    }
                }
                model.retain(|_, s| !s.is_empty());
                prop_assert_eq!(table.len(), model.len());
                for (k, set) in &model {
                    let holders = table.holders(*k);
                    prop_assert!(holders.is_some());
                    for t in set.keys() {
                        prop_assert!(holders.is_some_and(|h| h.contains(*t)));
                    }
                }
                let distinct: BTreeSet<Vec<u32>> = model
                    .values()
                    .filter(|s| s.len() >= 3)
                    .map(|s| s.keys().copied().collect())
                    .collect();
                prop_assert_eq!(table.live_sets(), distinct.len());
            }
            let mut entries = table.entries();
            entries.sort_unstable();
            let expected: Vec<(u64, u32)> =
                model.iter().flat_map(|(k, s)| s.keys().map(move |t| (*k, *t))).collect();
            prop_assert_eq!(entries, expected);
        }
    }

    #[test]
    fn blocks_with_the_same_holders_share_one_set() {
        let mut table = BlockTable::default();
        for key in 1..=100u64 {
            for tag in [5, 3, 9, 1] {
                assert_eq!(table.add(key << 8, tag), Added::New);
            }
        }
        assert_eq!(table.live_sets(), 1);
        let signature = |t: &BlockTable, key: u64| t.holders(key).map(|h| h.signature());
        assert_eq!(signature(&table, 1 << 8), signature(&table, 100 << 8));
        for key in 1..=100u64 {
            assert!(table.remove(key << 8, 9));
        }
        assert_eq!(table.live_sets(), 1);
        for key in 1..=100u64 {
            assert!(table.remove(key << 8, 1));
        }
        assert_eq!(table.live_sets(), 0);
        assert_eq!(table.entries().len(), 200);
    }

    #[test]
    fn many_holders_share_the_last_reference_bit() {
        let mut table = BlockTable::default();
        for tag in 1..=40 {
            table.add(8, tag);
        }
        // Touching holder 40 (position 39) sets the bit shared by positions 31 and up.
        assert_eq!(table.add(8, 40), Added::Touched);
        assert_eq!(table.clock(8, 1), ClockHand::Evicted);
        assert_eq!(table.clock(8, 35), ClockHand::SecondChance);
        assert_eq!(table.clock(8, 40), ClockHand::Evicted);
        assert_eq!(table.entries().len(), 38);
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
