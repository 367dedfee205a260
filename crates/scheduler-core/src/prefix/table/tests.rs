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

/// A key, its holders, whether they are a shared set, and the run recorded on it.
type Observed = (u64, Vec<u32>, bool, Option<(u64, u32)>);

/// Everything a table says about `keys`: each one's holders (sorted, with the set id or the
/// inline tags standing for how they are stored) and the run a lookup would find on it.
fn observe(table: &BlockTable, keys: impl Iterator<Item = u64>) -> Vec<Observed> {
    keys.map(|key| {
        let holders = table.holders(key);
        let mut tags = Vec::new();
        holders.inspect(|h| h.for_each(|t| tags.push(t)));
        tags.sort_unstable();
        let shared = holders.is_some_and(|h| matches!(h, slot::Holders::Shared(..)));
        let run = table.run_at(table.locate(key)).map(|r| (r.end, r.len));
        (key, tags, shared, run)
    })
    .collect()
}

proptest! {
    /// Adding a stretch of keys at once is adding them one at a time, last first: the same
    /// holders, reference bits, sets, runs and newly added keys, whatever the stretch holds
    /// (repeated keys, blocks moving to the hot array, arrays growing on the way), with or
    /// without runs; and the hot array's filter never hides a hot block.
    #[test]
    fn a_stretch_adds_like_one_key_at_a_time(
        ops in prop::collection::vec(
            (0u8..4, prop::collection::vec(1u64..48, 1..24), 1u32..8),
            0..80,
        ),
    ) {
        let (mut one, mut many) = (BlockTable::default(), BlockTable::default());
        for (op, keys, tag) in ops {
            // Small keys collide in the low bits: exercise long probe runs. Half the stretches
            // are a prefix of one chain, so that many endpoints share its blocks.
            let keys: Vec<u64> = if keys[0] % 2 == 0 {
                (1..=keys.len() as u64).map(|k| k << 3).collect()
            } else {
                keys.iter().map(|k| k << 3).collect()
            };
            match op {
                0 | 1 => {
                    let runs = op == 0;
                    let (mut new_one, mut new_many) = (Vec::new(), Vec::new());
                    let mut following = None;
                    for &key in keys.iter().rev() {
                        let added = if runs {
                            let (added, next) = one.add_in_chain(key, tag, following);
                            following = next;
                            added
                        } else {
                            one.add(key, tag)
                        };
                        if added == Added::New {
                            new_one.push(key);
                        }
                    }
                    let mut following_many = None;
                    many.add_stretch(&keys, tag, runs, &mut following_many, |k| new_many.push(k));
                    prop_assert_eq!(new_one, new_many);
                    if runs {
                        prop_assert_eq!(following, following_many);
                    }
                }
                2 => {
                    for &key in &keys {
                        prop_assert_eq!(one.remove(key, tag), many.remove(key, tag));
                    }
                }
                _ => {
                    for &key in &keys {
                        prop_assert_eq!(one.clock(key, tag), many.clock(key, tag));
                    }
                }
            }
            prop_assert_eq!(observe(&one, 1..48u64), observe(&many, 1..48u64));
            let mut entries = (one.entries(), many.entries());
            entries.0.sort_unstable();
            entries.1.sort_unstable();
            prop_assert_eq!(entries.0, entries.1);
            prop_assert_eq!(one.live_sets(), many.live_sets());
            prop_assert!(many.filter_holds_every_hot_block());
        }
        // The reference bits: the clock passes every entry the same way in both.
        for key in 1..48u64 {
            for tag in 1..8 {
                prop_assert_eq!(one.clock(key << 3, tag), many.clock(key << 3, tag));
            }
        }
    }
}
