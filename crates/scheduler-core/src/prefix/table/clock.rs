//! The eviction clock's step over one (block, endpoint) entry: a referenced entry gets a second
//! chance (its bit is cleared), an unreferenced one is removed.

use super::slot::{REF_BIT, SHARED_BIT, position_bit};
use super::{At, BlockTable};

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

impl BlockTable {
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
                if hot.slot.b & bit != 0 {
                    let mut hot = hot;
                    hot.slot.b &= !bit;
                    self.hot.set(i, hot);
                    return ClockHand::SecondChance;
                }
            }
            At::Cold(i) => {
                let Some(mut slot) = self.cold.get(i) else {
                    return ClockHand::Absent;
                };
                let t = if slot.a & !REF_BIT == tag {
                    &mut slot.a
                } else if slot.b & !REF_BIT == tag {
                    &mut slot.b
                } else {
                    return ClockHand::Absent;
                };
                if *t & REF_BIT != 0 {
                    *t &= !REF_BIT;
                    self.cold.set(i, slot);
                    return ClockHand::SecondChance;
                }
            }
        }
        self.remove_at(at, tag);
        ClockHand::Evicted
    }
}
