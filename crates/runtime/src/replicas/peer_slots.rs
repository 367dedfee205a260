//! Which peer holds which slot of the exchange's tables when the peers are discovered
//! (`replicas.peers: {kubernetes: ...}`). There are `maxPeers` slots, never more:
//!
//! - a discovered address takes a free slot; with none free it is counted and not heard
//!   until one frees;
//! - an address the discovery no longer lists is *retired*: nothing is sent to it and
//!   nothing from it is heard, but its last report keeps counting until it expires, as a
//!   silent peer's does; then its slot is free again;
//! - a retired address that is listed again takes its slot back.
//!
//! With a written-out peer list every slot is taken for good.

use std::net::SocketAddr;

/// One slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Free,
    Active(SocketAddr),
    Retired(SocketAddr),
}

/// What [`PeerSlots::update`] changed, for the gate to follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// Slot `0` now hears this address (new, or back from retirement).
    Assigned(usize, SocketAddr),
    /// Slot `0` no longer hears its address.
    Retired(usize),
}

/// The slots, and the addresses heard now.
#[derive(Debug)]
pub(crate) struct PeerSlots {
    slots: Vec<Slot>,
    /// The active addresses, in slot order: what the reports are sent to.
    active: Vec<SocketAddr>,
    /// Discovered addresses that found no free slot at the last update.
    refused: usize,
}

impl PeerSlots {
    /// Every slot taken by `peers`, for good.
    pub(crate) fn fixed(peers: &[SocketAddr]) -> Self {
        PeerSlots {
            slots: peers.iter().map(|p| Slot::Active(*p)).collect(),
            active: peers.to_vec(),
            refused: 0,
        }
    }

    /// `max` free slots.
    pub(crate) fn vacant(max: usize) -> Self {
        PeerSlots {
            slots: vec![Slot::Free; max],
            active: Vec::new(),
            refused: 0,
        }
    }

    /// How many slots there are.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// The addresses heard now.
    pub(crate) fn active(&self) -> &[SocketAddr] {
        &self.active
    }

    /// Discovered addresses without a slot at the last update.
    pub(crate) fn refused(&self) -> usize {
        self.refused
    }

    /// Makes `discovered` the peers heard, as far as the slots allow; returns what changed.
    pub(crate) fn update(&mut self, discovered: &[SocketAddr]) -> Vec<Change> {
        let mut changes = Vec::new();
        for (index, slot) in self.slots.iter_mut().enumerate() {
            match *slot {
                Slot::Active(address) if !discovered.contains(&address) => {
                    *slot = Slot::Retired(address);
                    changes.push(Change::Retired(index));
                }
                Slot::Retired(address) if discovered.contains(&address) => {
                    *slot = Slot::Active(address);
                    changes.push(Change::Assigned(index, address));
                }
                _ => {}
            }
        }
        self.refused = 0;
        for address in discovered {
            let known = self
                .slots
                .iter()
                .any(|s| matches!(s, Slot::Active(a) if a == address));
            if known {
                continue;
            }
            match self.slots.iter().position(|s| *s == Slot::Free) {
                Some(index) => {
                    self.slots[index] = Slot::Active(*address);
                    changes.push(Change::Assigned(index, *address));
                }
                None => self.refused += 1,
            }
        }
        self.active = self
            .slots
            .iter()
            .filter_map(|s| match s {
                Slot::Active(address) => Some(*address),
                _ => None,
            })
            .collect();
        changes
    }

    /// Frees the retired slots for which `live` is false (their last report expired, or
    /// never came); returns them, for the table to empty.
    pub(crate) fn free_expired(&mut self, live: impl Fn(usize) -> bool) -> Vec<usize> {
        let mut freed = Vec::new();
        for (index, slot) in self.slots.iter_mut().enumerate() {
            if matches!(slot, Slot::Retired(_)) && !live(index) {
                *slot = Slot::Free;
                freed.push(index);
            }
        }
        freed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(n: u8) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, n], 9400))
    }

    #[test]
    fn bounded_slots_retire_expire_and_come_back() {
        let mut slots = PeerSlots::vacant(2);
        let changes = slots.update(&[addr(1), addr(2), addr(3)]);
        assert_eq!(
            changes,
            [Change::Assigned(0, addr(1)), Change::Assigned(1, addr(2))]
        );
        assert_eq!(
            (slots.active(), slots.refused()),
            (&[addr(1), addr(2)][..], 1)
        );
        // 1 leaves: retired, not yet free (its load has not expired), so 3 still waits.
        assert_eq!(slots.update(&[addr(2), addr(3)]), [Change::Retired(0)]);
        assert_eq!((slots.active(), slots.refused()), (&[addr(2)][..], 1));
        assert!(slots.free_expired(|_| true).is_empty());
        // Its load expires: the slot frees, and 3 takes it at the next update.
        assert_eq!(slots.free_expired(|_| false), [0]);
        assert_eq!(
            slots.update(&[addr(2), addr(3)]),
            [Change::Assigned(0, addr(3))]
        );
        assert_eq!(slots.refused(), 0);
        // 2 leaves and comes back before expiring: same slot.
        assert_eq!(slots.update(&[addr(3)]), [Change::Retired(1)]);
        assert_eq!(
            slots.update(&[addr(3), addr(2)]),
            [Change::Assigned(1, addr(2))]
        );
        assert_eq!(slots.active(), [addr(3), addr(2)]);
        // Nothing changes: nothing to do.
        assert!(slots.update(&[addr(2), addr(3)]).is_empty());
    }

    #[test]
    fn a_fixed_list_is_all_active() {
        let slots = PeerSlots::fixed(&[addr(1), addr(2)]);
        assert_eq!((slots.len(), slots.active().len()), (2, 2));
    }
}
