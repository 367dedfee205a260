//! Interned sets of three or more holders, shared by every block that has exactly that set.
//!
//! The blocks of one shared prefix are usually held by the same endpoints (they were inserted
//! together), so a shard keeps one copy of each distinct holder set and its blocks store the
//! set's id. A lookup then sees that a block has the same holders as the block before it by
//! comparing ids, without reading the set at all, and memory per shared block is the slot alone.

use hashbrown::HashTable;

/// Largest number of distinct live sets per shard (ids must fit beside the shared-slot flag).
pub(crate) const MAX_SETS: usize = 1 << 30;

#[derive(Debug, Default)]
struct HolderSet {
    /// Bare tags, sorted, at least three (empty while the id is free).
    members: Box<[u32]>,
    /// Slots referring to this set.
    uses: u32,
    /// Times a block left this set (kept across reuse of the id, so it never repeats soon).
    departures: u32,
}

/// One shard's interned holder sets, reference counted by the slots that use them.
#[derive(Debug, Default)]
pub(crate) struct HolderSets {
    sets: Vec<HolderSet>,
    free: Vec<u32>,
    by_members: HashTable<u32>,
}

fn hash_members(members: &[u32]) -> u64 {
    let mut h = members.len() as u64;
    for &m in members {
        h = (h.rotate_left(23) ^ u64::from(m)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    h ^ (h >> 29)
}

impl HolderSets {
    /// The sorted members of set `id`.
    #[inline]
    pub(crate) fn members(&self, id: u32) -> &[u32] {
        self.sets.get(id as usize).map_or(&[][..], |s| &s.members)
    }

    /// The id of the set with exactly `members` (sorted, distinct), counting one more use;
    /// `None` when the shard already holds [`MAX_SETS`] distinct sets.
    pub(crate) fn acquire(&mut self, members: &[u32]) -> Option<u32> {
        let hash = hash_members(members);
        let sets = &self.sets;
        if let Some(&id) = self
            .by_members
            .find(hash, |&id| &*sets[id as usize].members == members)
        {
            self.sets[id as usize].uses += 1;
            return Some(id);
        }
        let mut set = HolderSet {
            members: members.into(),
            uses: 1,
            departures: 0,
        };
        let id = match self.free.pop() {
            Some(id) => {
                set.departures = self.sets[id as usize].departures;
                self.sets[id as usize] = set;
                id
            }
            None if self.sets.len() < MAX_SETS => {
                self.sets.push(set);
                (self.sets.len() - 1) as u32
            }
            None => return None,
        };
        let sets = &self.sets;
        self.by_members
            .insert_unique(hash, id, |&id| hash_members(&sets[id as usize].members));
        Some(id)
    }

    /// How many times a block left set `id`: unchanged since a moment means every block that
    /// had the set then still has it (up to wrap-around after 2^32 departures).
    #[inline]
    pub(crate) fn departures(&self, id: u32) -> u32 {
        self.sets.get(id as usize).map_or(0, |s| s.departures)
    }

    /// Counts one more use of the live set `id`.
    #[inline]
    pub(crate) fn reuse(&mut self, id: u32) {
        self.reuse_n(id, 1);
    }

    /// Counts `n` more uses of the live set `id`.
    #[inline]
    pub(crate) fn reuse_n(&mut self, id: u32, n: u32) {
        if let Some(set) = self.sets.get_mut(id as usize) {
            set.uses = set.uses.saturating_add(n);
        }
    }

    /// Counts one use fewer of set `id`; returns whether that freed it (its id may then be
    /// handed out again for another set).
    #[cfg(test)]
    pub(crate) fn release(&mut self, id: u32) -> bool {
        self.release_n(id, 1)
    }

    /// Counts `n` uses fewer of set `id` (`n` blocks left it); returns whether that freed it
    /// (its id may then be handed out again for another set).
    pub(crate) fn release_n(&mut self, id: u32, n: u32) -> bool {
        let Some(set) = self.sets.get_mut(id as usize).filter(|_| n > 0) else {
            return false;
        };
        set.uses = set.uses.saturating_sub(n);
        set.departures = set.departures.wrapping_add(n);
        if set.uses > 0 {
            return false;
        }
        let members = std::mem::take(&mut set.members);
        let hash = hash_members(&members);
        if let Ok(entry) = self.by_members.find_entry(hash, |&other| other == id) {
            entry.remove();
        }
        self.free.push(id);
        true
    }

    /// Distinct live sets.
    #[cfg(test)]
    pub(crate) fn live(&self) -> usize {
        self.sets.len() - self.free.len()
    }

    /// Heap bytes owned.
    pub(crate) fn heap_bytes(&self) -> usize {
        let members: usize = self.sets.iter().map(|s| s.members.len() * 4).sum();
        self.sets.capacity() * std::mem::size_of::<HolderSet>()
            + members
            + self.free.capacity() * 4
            + self.by_members.capacity() * (std::mem::size_of::<u32>() + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_sets_share_one_id_until_released() {
        let mut sets = HolderSets::default();
        let a = sets.acquire(&[1, 2, 3]);
        let b = sets.acquire(&[1, 2, 3]);
        let c = sets.acquire(&[1, 2, 4]);
        assert_eq!(a, b);
        assert_ne!(a, c);
        let a = a.unwrap_or(u32::MAX);
        assert_eq!(sets.members(a), &[1, 2, 3]);
        assert!(!sets.release(a));
        assert!(sets.release(a));
        assert_eq!(sets.live(), 1);
        // The freed id is reused for a new set, and the old members are no longer found.
        assert_eq!(sets.acquire(&[5, 6, 7]), Some(a));
        assert_eq!(sets.members(a), &[5, 6, 7]);
        assert_ne!(sets.acquire(&[1, 2, 3]), Some(a));
    }
}
