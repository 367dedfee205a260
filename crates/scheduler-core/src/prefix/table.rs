//! One shard's map from block key to the endpoints holding that block.
//!
//! Two open-addressing arrays of 16-byte [`Slot`]s (the key and two words). A block held by one
//! or two endpoints lives in the *cold* array with their tags inline (`a`, `b`; `b` = 0 when
//! there is one). A block held by three or more lives in the *hot* array and refers to an
//! interned [`HolderSets`] set: `a` is the set id with [`SHARED_BIT`] set and `b` holds the
//! holders' reference bits by position in the sorted set (holders past the 31st share bit 31).
//! Shared prefixes are what lookups walk most, and the hot array holds only them, so it is a
//! small fraction of the table and stays in cache while the cold array (every request's unique
//! tail) does not. A holder tag is `endpoint id + 1`, with [`REF_BIT`] set
//! (inline) when the block was touched again since the endpoint's eviction clock last passed it.

use super::holder_sets::{HolderSets, MAX_SETS};
use super::slots::{Keyed, Slot, Slots};

/// Set on an inline holder tag when its block was re-used (a second chance for the clock).
pub(crate) const REF_BIT: u32 = 1 << 31;
/// Set on `a` when the slot refers to an interned holder set.
const SHARED_BIT: u32 = 1 << 30;
/// Largest endpoint id the index can hold (tags must stay below [`SHARED_BIT`]).
pub(crate) const MAX_ENDPOINT_ID: u32 = SHARED_BIT - 2;
/// Most blocks one shard holds (every interned set is used by a slot, so ids always fit).
const MAX_LEN: usize = MAX_SETS - 2;
/// Marks a [`BlockTable::find_batch`] result in the hot array.
const HOT: usize = 1 << (usize::BITS - 1);
/// A [`BlockTable::find_batch`] result for an absent key.
pub(crate) const ABSENT: usize = usize::MAX;

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

/// A run of consecutive blocks of one inserted chain that all had the same holder set: the
/// block it is stored on, the `len - 1` blocks after it, ending with the block keyed `end`.
/// Cleared when the block's own set changes; valid while the set's departure count still
/// equals `departures` (no block of the run has left the set).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Run {
    pub(crate) end: u64,
    pub(crate) len: u32,
    departures: u32,
}

/// The run recorded on the block after the one being recorded (inserts walk a chain backwards).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Following {
    set: u32,
    end: u64,
    len: u32,
}

/// A hot block: its slot and the run of blocks that followed it with the same holders.
#[derive(Debug, Clone, Copy, Default)]
struct HotSlot {
    slot: Slot,
    run: Run,
}

impl Keyed for HotSlot {
    #[inline]
    fn key(&self) -> u64 {
        self.slot.key
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

    /// Where `key` is. The cold array first: the keys found one at a time (eviction, KV-event
    /// removals) are mostly request tails, and most blocks are cold.
    #[inline]
    fn find(&self, key: u64) -> Option<At> {
        if let Some(i) = self.cold.find(key) {
            return Some(At::Cold(i));
        }
        self.hot.find(key).map(At::Hot)
    }

    /// Finds several keys at once: their home slots are loaded together, first in one array
    /// (the hot one when `hot_first`), then, for the keys not there, in the other (up to 8
    /// keys: in both at once), so the cache misses of a batch overlap. `out[j]` locates `keys[j]` for
    /// [`holders_at`](Self::holders_at), or is [`ABSENT`]. At most 64 keys.
    #[inline]
    pub(crate) fn find_batch(&self, keys: &[u64], out: &mut [usize], hot_first: bool) {
        let n = keys.len().min(out.len()).min(64);
        let mut homes = [0u64; 64];
        if n <= 8 {
            // A short batch (the walk's start, or just after a skipped run, where the match
            // often ends): load both arrays at once, one round of misses instead of two.
            let mut cold = [0u64; 8];
            self.hot.load_homes(&keys[..n], &mut homes[..n]);
            self.cold.load_homes(&keys[..n], &mut cold[..n]);
            for (j, ((&key, &hot), &cold)) in keys[..n].iter().zip(&homes).zip(&cold).enumerate() {
                out[j] = match self.hot.resolve(key, hot) {
                    Some(i) => i | HOT,
                    None => self.cold.resolve(key, cold).unwrap_or(ABSENT),
                };
            }
            return;
        }
        let mut rest_keys = [0u64; 64];
        let mut rest_at = [0usize; 64];
        let mut misses = 0;
        if hot_first {
            self.hot.load_homes(&keys[..n], &mut homes[..n]);
        } else {
            self.cold.load_homes(&keys[..n], &mut homes[..n]);
        }
        for (j, (&key, &home)) in keys[..n].iter().zip(&homes[..n]).enumerate() {
            let hit = if hot_first {
                self.hot.resolve(key, home).map(|i| i | HOT)
            } else {
                self.cold.resolve(key, home)
            };
            match hit {
                Some(at) => out[j] = at,
                None => {
                    rest_keys[misses] = key;
                    rest_at[misses] = j;
                    misses += 1;
                }
            }
        }
        if hot_first {
            self.cold
                .load_homes(&rest_keys[..misses], &mut homes[..misses]);
        } else {
            self.hot
                .load_homes(&rest_keys[..misses], &mut homes[..misses]);
        }
        for ((&key, &home), &j) in rest_keys[..misses]
            .iter()
            .zip(&homes[..misses])
            .zip(&rest_at[..misses])
        {
            out[j] = if hot_first {
                self.cold.resolve(key, home)
            } else {
                self.hot.resolve(key, home).map(|i| i | HOT)
            }
            .unwrap_or(ABSENT);
        }
    }

    /// Loads the slots where `keys` would be found or added in both arrays (the home slot and
    /// the next cache line), so that the cache misses of an insert or an eviction overlap
    /// instead of stalling it once per block.
    pub(crate) fn warm(&self, keys: &[u64]) {
        std::hint::black_box(self.hot.touch_runs(keys) ^ self.cold.touch_runs(keys));
    }

    /// Whether a [`find_batch`](Self::find_batch) result is in the hot array.
    #[inline]
    pub(crate) fn is_hot(found: usize) -> bool {
        found != ABSENT && found & HOT != 0
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

    /// The holders at `found` (from [`find_batch`](Self::find_batch)); `None` for [`ABSENT`].
    #[inline]
    pub(crate) fn holders_at(&self, found: usize) -> Option<Holders<'_>> {
        if found == ABSENT {
            return None;
        }
        let slot = if found & HOT != 0 {
            &self.hot.get(found & !HOT)?.slot
        } else {
            self.cold.get(found)?
        };
        Some(self.holders_of(slot))
    }

    /// Where `key` is, for [`holders_at`](Self::holders_at) and [`run_at`](Self::run_at) (or
    /// [`ABSENT`]): its home slots in both arrays are loaded at once, so a lookup pays one
    /// cache miss, not two, for a key it cannot guess the array of.
    #[inline]
    pub(crate) fn locate(&self, key: u64) -> usize {
        let (mut hot, mut cold) = ([0u64], [0u64]);
        self.hot.load_homes(&[key], &mut hot);
        self.cold.load_homes(&[key], &mut cold);
        match self.hot.resolve(key, hot[0]) {
            Some(i) => i | HOT,
            None => self.cold.resolve(key, cold[0]).unwrap_or(ABSENT),
        }
    }

    /// The holders of `key`, when anyone holds it.
    #[inline]
    pub(crate) fn holders(&self, key: u64) -> Option<Holders<'_>> {
        let slot = match self.find(key)? {
            At::Hot(i) => &self.hot.get(i)?.slot,
            At::Cold(i) => self.cold.get(i)?,
        };
        Some(self.holders_of(slot))
    }

    /// The id of the set in `scratch` (sorted), reusing the remembered transition when it
    /// describes this very change.
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
        self.add_locating(key, tag).0
    }

    /// [`add`](Self::add), then (the block being one of a whole chain inserted backwards)
    /// records the run of blocks from `key` on that share its holder set; `following` is what
    /// the call for the next block of the chain returned. Blocks with fewer than three holders
    /// have no run.
    pub(crate) fn add_in_chain(
        &mut self,
        key: u64,
        tag: u32,
        following: Option<Following>,
    ) -> (Added, Option<Following>) {
        let (added, hot) = self.add_locating(key, tag);
        let Some(hot) = hot.and_then(|i| self.hot.get_mut(i)) else {
            return (added, None);
        };
        let set = hot.slot.a & !SHARED_BIT;
        let (end, len) = match following {
            Some(f) if f.set == set && f.len < u32::MAX => (f.end, f.len + 1),
            _ => (key, 1),
        };
        hot.run = Run {
            end,
            len,
            departures: self.sets.departures(set),
        };
        (added, Some(Following { set, end, len }))
    }

    /// [`add`](Self::add), also returning the block's index in the hot array when it is there.
    fn add_locating(&mut self, key: u64, tag: u32) -> (Added, Option<usize>) {
        if let Some(i) = self.hot.find(key) {
            return (self.add_to_set(i, tag), Some(i));
        }
        self.add_cold(key, tag)
    }

    /// [`add`](Self::add) for a block not in the hot array; returns its hot index if it moved
    /// there.
    fn add_cold(&mut self, key: u64, tag: u32) -> (Added, Option<usize>) {
        let Some(i) = self.cold.find(key) else {
            if self.len() >= MAX_LEN {
                return (Added::Full, None);
            }
            self.cold.insert(Slot { key, a: tag, b: 0 });
            return (Added::New, None);
        };
        let Some(Slot {
            a: slot_a,
            b: slot_b,
            ..
        }) = self.cold.get_mut(i)
        else {
            return (Added::Full, None);
        };
        let (a, b) = (*slot_a & !REF_BIT, *slot_b & !REF_BIT);
        if a == tag {
            *slot_a |= REF_BIT;
            return (Added::Touched, None);
        }
        if b == tag {
            *slot_b |= REF_BIT;
            return (Added::Touched, None);
        }
        if b == 0 {
            *slot_b = tag;
            return (Added::New, None);
        }
        // A third holder: the block moves to the hot array with an interned set.
        let mut members = [
            (a, *slot_a & REF_BIT != 0),
            (b, *slot_b & REF_BIT != 0),
            (tag, false),
        ];
        members.sort_unstable_by_key(|m| m.0);
        self.scratch.clear();
        self.scratch.extend(members.iter().map(|m| m.0));
        let from = (u64::from(a.min(b)) << 32) | u64::from(a.max(b));
        let Some(to) = self.set_for(from, tag, true) else {
            return (Added::Full, None);
        };
        let bits = members
            .iter()
            .enumerate()
            .filter(|(_, m)| m.1)
            .fold(0, |bits, (p, _)| bits | position_bit(p));
        self.cold.delete(i);
        let at = self.hot.insert(HotSlot {
            slot: Slot {
                key,
                a: to | SHARED_BIT,
                b: bits,
            },
            run: Run::default(),
        });
        (Added::New, Some(at))
    }

    fn add_to_set(&mut self, i: usize, tag: u32) -> Added {
        let Some(&HotSlot { slot, .. }) = self.hot.get(i) else {
            return Added::Full;
        };
        let id = slot.a & !SHARED_BIT;
        let members = self.sets.members(id);
        let position = match members.binary_search(&tag) {
            Ok(p) => {
                if let Some(hot) = self.hot.get_mut(i) {
                    hot.slot.b |= position_bit(p);
                }
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
        if let Some(hot) = self.hot.get_mut(i) {
            hot.slot.a = to | SHARED_BIT;
            hot.slot.b = bits_after_insert(slot.b, position);
            // A run describes the block's set when it was recorded: that set is gone.
            hot.run = Run::default();
        }
        Added::New
    }

    /// Runs the eviction clock over endpoint `tag`'s entry for `key`.
    pub(crate) fn clock(&mut self, key: u64, tag: u32) -> ClockHand {
        let Some(at) = self.find(key) else {
            return ClockHand::Absent;
        };
        match at {
            At::Hot(i) => {
                let Some(hot) = self.hot.get(i) else {
                    return ClockHand::Absent;
                };
                let members = self.sets.members(hot.slot.a & !SHARED_BIT);
                let Ok(position) = members.binary_search(&tag) else {
                    return ClockHand::Absent;
                };
                let bit = position_bit(position);
                if let Some(hot) = self.hot.get_mut(i)
                    && hot.slot.b & bit != 0
                {
                    hot.slot.b &= !bit;
                    return ClockHand::SecondChance;
                }
            }
            At::Cold(i) => {
                let Some(Slot { a, b, .. }) = self.cold.get_mut(i) else {
                    return ClockHand::Absent;
                };
                let t = if *a & !REF_BIT == tag {
                    a
                } else if *b & !REF_BIT == tag {
                    b
                } else {
                    return ClockHand::Absent;
                };
                if *t & REF_BIT != 0 {
                    *t &= !REF_BIT;
                    return ClockHand::SecondChance;
                }
            }
        }
        self.remove_at(at, tag);
        ClockHand::Evicted
    }

    /// Forgets that endpoint `tag` holds `key`; returns whether it did.
    pub(crate) fn remove(&mut self, key: u64, tag: u32) -> bool {
        match self.find(key) {
            Some(at) => self.remove_at(at, tag),
            None => false,
        }
    }

    fn remove_at(&mut self, at: At, tag: u32) -> bool {
        let i = match at {
            At::Hot(i) => return self.remove_from_set(i, tag),
            At::Cold(i) => i,
        };
        let Some(Slot { a, b, .. }) = self.cold.get_mut(i) else {
            return false;
        };
        if *a & !REF_BIT == tag {
            *a = *b;
            *b = 0;
        } else if *b & !REF_BIT == tag {
            *b = 0;
        } else {
            return false;
        }
        if *a == 0 {
            self.cold.delete(i);
        }
        true
    }

    fn remove_from_set(&mut self, i: usize, tag: u32) -> bool {
        let Some(&HotSlot { slot, .. }) = self.hot.get(i) else {
            return false;
        };
        let id = slot.a & !SHARED_BIT;
        let members = self.sets.members(id);
        let Ok(position) = members.binary_search(&tag) else {
            return false;
        };
        if members.len() <= 3 {
            // Back to two inline holders in the cold array, keeping their reference bits.
            let mut inline = [0u32; 2];
            for (slot_tag, (p, &m)) in inline
                .iter_mut()
                .zip(members.iter().enumerate().filter(|(p, _)| *p != position))
            {
                let referenced = slot.b & position_bit(p) != 0;
                *slot_tag = if referenced { m | REF_BIT } else { m };
            }
            self.hot.delete(i);
            self.cold.insert(Slot {
                key: slot.key,
                a: inline[0],
                b: inline[1],
            });
            self.release(id);
            return true;
        }
        self.scratch.clear();
        self.scratch.extend_from_slice(members);
        self.scratch.remove(position);
        let from = u64::from(slot.a) << 32;
        match self.set_for(from, tag, false) {
            Some(to) => {
                if let Some(hot) = self.hot.get_mut(i) {
                    hot.slot.a = to | SHARED_BIT;
                    hot.slot.b = bits_after_remove(slot.b, position);
                    hot.run = Run::default();
                }
            }
            // Unreachable (a shard never holds more sets than blocks): drop the block.
            None => self.hot.delete(i),
        }
        self.release(id);
        true
    }

    /// The still valid run recorded on the block at `found` (from
    /// [`find_batch`](Self::find_batch)), when longer than the block itself.
    #[inline]
    pub(crate) fn run_at(&self, found: usize) -> Option<Run> {
        if found == ABSENT || found & HOT == 0 {
            return None;
        }
        let hot = self.hot.get(found & !HOT)?;
        let set = hot.slot.a & !SHARED_BIT;
        (hot.run.len > 1 && hot.run.departures == self.sets.departures(set)).then_some(hot.run)
    }

    /// Every (key, bare tag) pair (for tests and audits).
    #[cfg(test)]
    pub(crate) fn entries(&self) -> Vec<(u64, u32)> {
        let mut out = Vec::new();
        for slot in self.hot.iter().map(|h| &h.slot).chain(self.cold.iter()) {
            self.holders_of(slot).for_each(|t| out.push((slot.key, t)));
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
