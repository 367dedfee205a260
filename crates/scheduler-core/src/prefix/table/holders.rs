//! Adding and removing a block's holders: inline in the cold array for one or two, an interned
//! set in the hot array for three or more, with the reference bits following their holders.

use super::runs::Run;
use super::slot::{REF_BIT, SHARED_BIT, bits_after_insert, bits_after_remove, position_bit};
use super::{At, BlockTable, HotSlot, MAX_LEN, Slot};

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

/// The last change of holder set, remembered because the blocks of one chain usually make the
/// same change one after the other: (holders before, tag added or removed, set id after).
#[derive(Debug, Clone, Copy)]
pub(super) struct Transition {
    from: u64,
    tag: u32,
    to: u32,
}

impl BlockTable {
    /// The set the remembered transition gives for this very change (holders `from`, `tag`
    /// added or removed), counting one more use of it.
    #[inline]
    fn remembered(&mut self, from: u64, tag: u32, adding: bool) -> Option<u32> {
        let t = if adding { self.added } else { self.removed }?;
        if t.from != from || t.tag != tag {
            return None;
        }
        self.sets.reuse(t.to);
        Some(t.to)
    }

    /// The id of the set in `scratch` (sorted), reusing the remembered transition when it
    /// describes this very change.
    fn set_for(&mut self, from: u64, tag: u32, adding: bool) -> Option<u32> {
        if let Some(to) = self.remembered(from, tag, adding) {
            return Some(to);
        }
        self.new_set(from, tag, adding)
    }

    /// The id of the set in `scratch` (sorted), remembered as the transition for this change.
    fn new_set(&mut self, from: u64, tag: u32, adding: bool) -> Option<u32> {
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
        self.release_n(id, 1);
    }

    /// Releases `n` uses of set `id`, forgetting remembered transitions if that freed it.
    pub(super) fn release_n(&mut self, id: u32, n: u32) {
        if self.sets.release_n(id, n) {
            self.added = None;
            self.removed = None;
        }
    }

    /// The last change an add made to a shared block's holders, when it added `tag`: the
    /// block's `a` word before and the set id after.
    #[inline]
    pub(super) fn last_join(&self, tag: u32) -> Option<(u32, u32)> {
        let t = self.added?;
        let before = (t.from >> 32) as u32;
        (t.tag == tag && t.from as u32 == 0 && before & SHARED_BIT != 0).then_some((before, t.to))
    }

    /// Records that endpoint `tag` holds `key` (setting its reference bit if it already did):
    /// one key at a time, as [`add_stretch`](Self::add_stretch) does for many (for tests).
    #[cfg(test)]
    pub(crate) fn add(&mut self, key: u64, tag: u32) -> Added {
        self.add_locating(key, tag).0
    }

    /// Records that endpoint `tag` holds `key` (setting its reference bit if it already did);
    /// also returns the block's index in the hot array when it is there.
    pub(super) fn add_locating(&mut self, key: u64, tag: u32) -> (Added, Option<usize>) {
        if let Some(i) = self.hot.find(key) {
            return (self.add_to_set(i, tag), Some(i));
        }
        self.add_cold(key, tag)
    }

    /// [`add_locating`](Self::add_locating) for a block not in the hot array; returns its hot
    /// index if it moved there.
    pub(super) fn add_cold(&mut self, key: u64, tag: u32) -> (Added, Option<usize>) {
        match self.cold.probe(key) {
            Ok(i) => self.add_to_cold(i, tag),
            Err(vacancy) => self.add_new(key, tag, vacancy),
        }
    }

    /// Records a block nobody holds yet for endpoint `tag`, in the cold array at `vacancy`
    /// (from a [`probe`](super::Slots::probe) for `key` just before).
    pub(super) fn add_new(&mut self, key: u64, tag: u32, vacancy: usize) -> (Added, Option<usize>) {
        if self.len() >= MAX_LEN {
            return (Added::Full, None);
        }
        self.cold.insert_at(Slot { key, a: tag, b: 0 }, vacancy);
        (Added::New, None)
    }

    /// [`add_locating`](Self::add_locating) for the block in cold slot `i`; returns its hot
    /// index if it moved there.
    pub(super) fn add_to_cold(&mut self, i: usize, tag: u32) -> (Added, Option<usize>) {
        let Some(mut slot) = self.cold.get(i) else {
            return (Added::Full, None);
        };
        let key = slot.key;
        let (a, b) = (slot.a & !REF_BIT, slot.b & !REF_BIT);
        if a == tag || b == tag {
            if a == tag {
                slot.a |= REF_BIT;
            } else {
                slot.b |= REF_BIT;
            }
            self.cold.set(i, slot);
            return (Added::Touched, None);
        }
        if b == 0 {
            slot.b = tag;
            self.cold.set(i, slot);
            return (Added::New, None);
        }
        // A third holder: the block moves to the hot array with an interned set.
        let mut members = [
            (a, slot.a & REF_BIT != 0),
            (b, slot.b & REF_BIT != 0),
            (tag, false),
        ];
        members.sort_unstable_by_key(|m| m.0);
        let from = (u64::from(a.min(b)) << 32) | u64::from(a.max(b));
        let to = match self.remembered(from, tag, true) {
            Some(to) => to,
            None => {
                self.scratch.clear();
                self.scratch.extend(members.iter().map(|m| m.0));
                let Some(to) = self.new_set(from, tag, true) else {
                    return (Added::Full, None);
                };
                to
            }
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

    pub(super) fn add_to_set(&mut self, i: usize, tag: u32) -> Added {
        let Some(mut hot) = self.hot.get(i) else {
            return Added::Full;
        };
        let slot = hot.slot;
        let id = slot.a & !SHARED_BIT;
        let members = self.sets.members(id);
        let position = match members.binary_search(&tag) {
            Ok(p) => {
                hot.slot.b |= position_bit(p);
                self.hot.set(i, hot);
                return Added::Touched;
            }
            Err(p) => p,
        };
        let from = u64::from(slot.a) << 32;
        // The blocks of a shared prefix make the same change one after the other: the set
        // after it is only built for the first.
        let to = match self.remembered(from, tag, true) {
            Some(to) => to,
            None => {
                self.scratch.clear();
                self.scratch.extend_from_slice(self.sets.members(id));
                self.scratch.insert(position, tag);
                let Some(to) = self.new_set(from, tag, true) else {
                    return Added::Full;
                };
                to
            }
        };
        self.release(id);
        hot.slot.a = to | SHARED_BIT;
        hot.slot.b = bits_after_insert(slot.b, position);
        // A run describes the block's set when it was recorded: that set is gone.
        hot.run = Run::default();
        self.hot.set(i, hot);
        Added::New
    }

    /// Forgets that endpoint `tag` holds `key`; returns whether it did.
    pub(crate) fn remove(&mut self, key: u64, tag: u32) -> bool {
        match self.find(key) {
            Some(at) => self.remove_at(at, tag),
            None => false,
        }
    }

    pub(super) fn remove_at(&mut self, at: At, tag: u32) -> bool {
        let i = match at {
            At::Hot(i) => return self.remove_from_set(i, tag),
            At::Cold(i) => i,
        };
        let Some(mut slot) = self.cold.get(i) else {
            return false;
        };
        if slot.a & !REF_BIT == tag {
            slot.a = slot.b;
            slot.b = 0;
        } else if slot.b & !REF_BIT == tag {
            slot.b = 0;
        } else {
            return false;
        }
        if slot.a == 0 {
            self.cold.delete(i);
        } else {
            self.cold.set(i, slot);
        }
        true
    }

    fn remove_from_set(&mut self, i: usize, tag: u32) -> bool {
        let Some(mut hot) = self.hot.get(i) else {
            return false;
        };
        let slot = hot.slot;
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
                hot.slot.a = to | SHARED_BIT;
                hot.slot.b = bits_after_remove(slot.b, position);
                hot.run = Run::default();
                self.hot.set(i, hot);
            }
            // Unreachable (a shard never holds more sets than blocks): drop the block.
            None => self.hot.delete(i),
        }
        self.release(id);
        true
    }
}
