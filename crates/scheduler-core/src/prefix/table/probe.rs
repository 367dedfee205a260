//! Finding keys: one at a time, or in batches whose home slots are loaded together so that
//! their cache misses overlap.

use super::slot::{Holders, REF_BIT, SHARED_BIT};
use super::{At, BlockTable, Slot};

/// Marks a [`BlockTable::find_batch`] result in the hot array.
pub(super) const HOT: usize = 1 << (usize::BITS - 1);
/// A [`BlockTable::find_batch`] result for an absent key.
pub(crate) const ABSENT: usize = usize::MAX;

impl BlockTable {
    /// Where `key` is. The cold array first: the keys found one at a time (eviction, KV-event
    /// removals) are mostly request tails, and most blocks are cold.
    #[inline]
    pub(super) fn find(&self, key: u64) -> Option<At> {
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
    pub(super) fn holders_of(&self, slot: &Slot) -> Holders<'_> {
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
            self.hot.get(found & !HOT)?.slot
        } else {
            self.cold.get(found)?
        };
        Some(self.holders_of(&slot))
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
            At::Hot(i) => self.hot.get(i)?.slot,
            At::Cold(i) => self.cold.get(i)?,
        };
        Some(self.holders_of(&slot))
    }
}
