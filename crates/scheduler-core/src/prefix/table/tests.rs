//! The table against a plain model, and its reference bits.

use super::clock::ClockHand;
use super::holders::Added;
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
