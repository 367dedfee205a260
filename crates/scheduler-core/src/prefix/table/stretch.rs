//! Adding a stretch of keys at once: their slots are located together first, so that the
//! cache misses of a stretch overlap instead of stalling it once per block, and each key is
//! then added where it was found: in place for a block someone holds, in the empty slot the
//! search ended at for a block nobody holds, and, for the blocks of a shared prefix that all
//! join the same new holder set, with the set's arithmetic done once for all of them.

use super::BlockTable;
use super::holders::Added;
use super::runs::{Following, Run};
use super::slot::{SHARED_BIT, bits_after_insert};
use crate::prefix::slots::Near;

/// Most keys one [`BlockTable::add_stretch`] takes.
pub(crate) const MAX_STRETCH: usize = 64;

/// Slots of the hot array a located key is looked for in before a plain probe (two lines).
const HOT_NEAR: usize = 4;
/// Slots of the cold array a located key is looked for in before a plain probe.
const COLD_NEAR: usize = 8;

/// Where a key of a stretch was when the stretch was located (indices fit: a shard holds
/// fewer than 2^30 blocks, and its arrays at most 4/3 as many slots, rounded up to a power of
/// two).
#[derive(Debug, Clone, Copy)]
enum Spot {
    /// In the hot array, at this index.
    Hot(u32),
    /// In the cold array, at this index.
    Cold(u32),
    /// Nowhere; its cold probe run ended at this empty slot (`u32::MAX`: unknown).
    Vacant(u32),
}

impl BlockTable {
    /// Records that endpoint `tag` holds every one of `keys` (at most [`MAX_STRETCH`]; more
    /// are ignored), the last key first, and calls `new` with each key it did not hold
    /// before, in that order: the same as adding them one at a time, last first. With `runs`,
    /// `keys` are consecutive blocks of one chain inserted backwards, and the runs of blocks
    /// sharing a holder set are recorded on them (see [`Run`]), `following` carrying over
    /// from the stretch after this one to the stretch before.
    pub(crate) fn add_stretch(
        &mut self,
        keys: &[u64],
        tag: u32,
        runs: bool,
        following: &mut Option<Following>,
        mut new: impl FnMut(u64),
    ) {
        let keys = &keys[..keys.len().min(MAX_STRETCH)];
        let mut spots = [Spot::Vacant(u32::MAX); MAX_STRETCH];
        let spots = &mut spots[..keys.len()];
        self.locate_stretch(keys, spots);
        let moves = self.cold.moves();
        let mut left = keys.len();
        while let Some(j) = left.checked_sub(1) {
            let key = keys[j];
            let (added, hot) = self.add_at(key, tag, spots[j], moves);
            if runs {
                *following = self.record_run(hot, key, *following);
            }
            left = j;
            if added == Added::New {
                new(key);
                if hot.is_some() {
                    left -= self.join_like(&keys[..j], &spots[..j], tag, runs, following, &mut new);
                }
            }
        }
    }

    /// Where each of `keys` is. A block nobody holds must be looked for in both arrays; the
    /// hot array's filter settles most of those without reading a slot, so each key is
    /// looked for in one array: the hot one when it may be there (shared blocks), else the
    /// cold one. Both arrays' lines for the keys are loaded in one go before they are
    /// searched; the few keys the hot array turns out not to hold are looked for in the cold
    /// one after.
    fn locate_stretch(&self, keys: &[u64], spots: &mut [Spot]) {
        // Positions in `keys`, of the keys to look for in each array.
        let mut hot = [0u8; MAX_STRETCH];
        let mut cold = [0u8; MAX_STRETCH];
        let (mut hots, mut colds) = (0, 0);
        for (j, &key) in keys.iter().enumerate() {
            // No branch on the filter's answer: its words may still be on their way, and the
            // next keys' words should be loading meanwhile, not waiting on a mispredict.
            let maybe = usize::from(self.hot.may_hold(key));
            hot[hots] = j as u8;
            cold[colds] = j as u8;
            hots += maybe;
            colds += 1 - maybe;
        }
        let key_at = |j: &u8| keys[usize::from(*j)];
        std::hint::black_box(
            self.hot
                .touch_spans(hot[..hots].iter().map(key_at), HOT_NEAR)
                ^ self
                    .cold
                    .touch_spans(cold[..colds].iter().map(key_at), COLD_NEAR),
        );
        let first_miss = colds;
        for &j in &hot[..hots] {
            let key = keys[usize::from(j)];
            let found = match self.hot.find_near::<HOT_NEAR>(key) {
                Near::Found(i) => Some(i),
                Near::Vacant(_) => None,
                Near::Far => self.hot.find(key),
            };
            match found {
                Some(i) => spots[usize::from(j)] = Spot::Hot(i as u32),
                None => {
                    cold[colds] = j;
                    colds += 1;
                }
            }
        }
        // The keys the filter let through but the hot array does not hold: their cold lines
        // load while the others are searched.
        std::hint::black_box(
            self.cold
                .touch_spans(cold[first_miss..colds].iter().map(key_at), COLD_NEAR),
        );
        for &j in &cold[..colds] {
            let key = keys[usize::from(j)];
            let spot = match self.cold.find_near::<COLD_NEAR>(key) {
                Near::Found(i) => Spot::Cold(i as u32),
                Near::Vacant(v) => Spot::Vacant(v as u32),
                Near::Far => match self.cold.probe(key) {
                    Ok(i) => Spot::Cold(i as u32),
                    Err(v) => Spot::Vacant(v as u32),
                },
            };
            spots[usize::from(j)] = spot;
        }
    }

    /// [`add_locating`](Self::add_locating) for `key`, located at `spot` when the cold array
    /// had made `moves` moves, since when only keys of the same stretch were added (for the
    /// same endpoint `tag`).
    #[inline]
    fn add_at(&mut self, key: u64, tag: u32, spot: Spot, moves: u32) -> (Added, Option<usize>) {
        match spot {
            Spot::Hot(i) if self.hot.get(i as usize).is_some_and(|h| h.slot.key == key) => {
                return (self.add_to_set(i as usize, tag), Some(i as usize));
            }
            Spot::Cold(i) if self.cold.get(i as usize).is_some_and(|s| s.key == key) => {
                return self.add_to_cold(i as usize, tag);
            }
            Spot::Vacant(v) => {
                let v = v as usize;
                // Nobody held it then. Since, only a repeat of the key earlier in this stretch
                // may have added it, for `tag` alone, so in the cold array. Unless the cold
                // array moved keys or something was stored there, its probe run still ends at
                // the vacancy; else one probe run there finds it or where it goes.
                if self.cold.moves() == moves && self.cold.get(v).is_some_and(|s| s.key == 0) {
                    return self.add_new(key, tag, v);
                }
                return self.add_cold(key, tag);
            }
            _ => {}
        }
        // Moved since (an array grew, or a deletion shifted a probe run): find it again.
        self.add_locating(key, tag)
    }

    /// After a shared block joined a new set for endpoint `tag`, makes the same change to the
    /// blocks just before it in `keys` that had the set it left (those of a shared prefix,
    /// usually), the last first, as far as they go: the new set, the reference bits and the
    /// runs are worked out once for all of them, and the sets' use counts moved in one step.
    /// Returns how many blocks (from the end of `keys`) it added.
    fn join_like(
        &mut self,
        keys: &[u64],
        spots: &[Spot],
        tag: u32,
        runs: bool,
        following: &mut Option<Following>,
        new: &mut impl FnMut(u64),
    ) -> usize {
        let Some((before, to)) = self.last_join(tag) else {
            return 0;
        };
        let Ok(position) = self.sets.members(to).binary_search(&tag) else {
            return 0;
        };
        let after = to | SHARED_BIT;
        let departures = self.sets.departures(to);
        let mut joined = 0;
        for (&key, &spot) in keys.iter().zip(spots).rev() {
            let Spot::Hot(i) = spot else {
                break;
            };
            let Some(mut hot) = self.hot.get(i as usize) else {
                break;
            };
            if hot.slot.key != key || hot.slot.a != before {
                break;
            }
            hot.slot.a = after;
            hot.slot.b = bits_after_insert(hot.slot.b, position);
            hot.run = if runs {
                let (run, next) = Run::chained(key, to, departures, *following);
                *following = Some(next);
                run
            } else {
                Run::default()
            };
            self.hot.set(i as usize, hot);
            new(key);
            joined += 1;
        }
        if joined > 0 {
            self.sets.reuse_n(to, joined);
            self.release_n(before & !SHARED_BIT, joined);
        }
        joined as usize
    }
}
