//! The ids of endpoints that left the pool, kept in bounded space.
//!
//! An insert racing the removal of its endpoint may reach the registry after the removal: it
//! must find the id retired, or it would bring the endpoint back for good. Endpoint ids are
//! process-unique and handed out in increasing order (the [`Pool`](crate::endpoint::Pool)
//! gives every added endpoint a fresh one), so the ids that left form long runs: the set
//! keeps disjoint ranges and merges neighbours, and stays as small as the number of gaps
//! between them — ids still in the pool, or never seen — however many endpoints came and
//! went. A pool emptied and refilled 16,000 times keeps one range.
//!
//! Whatever ids a caller uses, the set never holds more than [`MAX_RETIRED_RANGES`] ranges:
//! past that, the two oldest (lowest) ranges merge, retiring the ids between them too. Such
//! an id, that old and never seen by the index while later ones came and went, is taken as
//! gone: an insert for it would be dropped (an endpoint still in the index is not affected,
//! its removal retires it anyway).

use std::collections::BTreeMap;

/// Most ranges the retired ids are kept in.
pub(crate) const MAX_RETIRED_RANGES: usize = 1024;

/// A set of endpoint ids kept as disjoint, non-adjacent ranges.
#[derive(Debug, Default, Clone)]
pub(crate) struct RetiredIds {
    /// First id of each range → its last id (inclusive).
    ranges: BTreeMap<u32, u32>,
}

impl RetiredIds {
    /// Whether `id` is retired.
    pub(crate) fn contains(&self, id: u32) -> bool {
        self.ranges
            .range(..=id)
            .next_back()
            .is_some_and(|(_, &last)| id <= last)
    }

    /// Retires `id`.
    pub(crate) fn insert(&mut self, id: u32) {
        if self.contains(id) {
            return;
        }
        // The range ending just below `id`, and the one starting just above it.
        let below = self
            .ranges
            .range(..id)
            .next_back()
            .filter(|&(_, &last)| last.checked_add(1) == Some(id))
            .map(|(&first, _)| first);
        let above = id.checked_add(1).and_then(|next| self.ranges.remove(&next));
        let first = below.unwrap_or(id);
        let last = above.unwrap_or(id);
        self.ranges.insert(first, last);
        if self.ranges.len() > MAX_RETIRED_RANGES {
            self.merge_oldest();
        }
    }

    /// Merges the two lowest ranges into one.
    fn merge_oldest(&mut self) {
        let Some((first, _)) = self.ranges.pop_first() else {
            return;
        };
        if let Some((_, last)) = self.ranges.pop_first() {
            self.ranges.insert(first, last);
        }
    }

    /// Ranges held (the space the set takes).
    #[cfg(test)]
    pub(crate) fn ranges(&self) -> usize {
        self.ranges.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        /// Exact while below the cap (ids here never need more ranges), with every range
        /// disjoint from and not adjacent to the next.
        #[test]
        fn behaves_like_a_set(ids in prop::collection::vec(0u32..300, 0..400), probes in prop::collection::vec(0u32..310, 0..50)) {
            let mut retired = RetiredIds::default();
            let mut model = BTreeSet::new();
            for id in ids {
                retired.insert(id);
                model.insert(id);
            }
            for id in probes.iter().copied().chain(0..310) {
                prop_assert_eq!(retired.contains(id), model.contains(&id), "id {}", id);
            }
            let ranges: Vec<(u32, u32)> = retired.ranges.iter().map(|(&a, &b)| (a, b)).collect();
            for pair in ranges.windows(2) {
                prop_assert!(pair[0].0 <= pair[0].1 && pair[0].1 + 1 < pair[1].0);
            }
        }
    }

    proptest! {
        // Thousands of ids per case: fewer cases.
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Past the cap it never forgets an id, and never grows.
        #[test]
        fn stays_bounded_and_never_forgets(ids in prop::collection::vec(any::<u32>(), 0..3000)) {
            let mut retired = RetiredIds::default();
            for &id in &ids {
                retired.insert(id);
                prop_assert!(retired.ranges() <= MAX_RETIRED_RANGES);
            }
            for &id in &ids {
                prop_assert!(retired.contains(id));
            }
        }
    }

    #[test]
    fn ids_at_the_ends_of_the_range_are_kept() {
        let mut retired = RetiredIds::default();
        retired.insert(u32::MAX);
        retired.insert(0);
        retired.insert(u32::MAX - 1);
        assert!(retired.contains(u32::MAX) && retired.contains(u32::MAX - 1));
        assert!(retired.contains(0) && !retired.contains(1));
        assert_eq!(retired.ranges(), 2);
    }

    #[test]
    fn scattered_ids_merge_the_oldest_gaps() {
        let mut retired = RetiredIds::default();
        for id in (0..4 * MAX_RETIRED_RANGES as u32).map(|i| 2 * i) {
            retired.insert(id);
        }
        assert_eq!(retired.ranges(), MAX_RETIRED_RANGES);
        // The newest ids are exact; the oldest gaps were taken as gone.
        let newest = 2 * (4 * MAX_RETIRED_RANGES as u32 - 1);
        assert!(retired.contains(newest) && !retired.contains(newest - 1));
        assert!(retired.contains(1));
    }
}
