//! Hostile inputs: capacities near the integer maxima, and endpoints that come and go.

use proptest::prelude::*;

use super::*;
use crate::endpoint::{EndpointId, MembershipListener};

proptest! {
    /// Whatever capacity a caller passes (or the configuration defaults to), the endpoint's
    /// capacity stays within [`MAX_CAPACITY_PER_ENDPOINT`].
    #[test]
    fn capacities_are_capped_whatever_the_caller_passes(
        default_capacity in 1usize..=usize::MAX,
        on_insert in prop::option::of(any::<usize>()),
        set in prop::option::of(any::<usize>()),
    ) {
        let index = tiny_index(default_capacity);
        let id = EndpointId(1);
        index.insert_blocks(id, &keys_of(&index, &[0, 1, 2]), on_insert);
        let capacity = index.capacity_of(id).unwrap_or(0);
        prop_assert!(capacity <= MAX_CAPACITY_PER_ENDPOINT);
        prop_assert_eq!(capacity, on_insert.unwrap_or(default_capacity).min(MAX_CAPACITY_PER_ENDPOINT));
        if let Some(set) = set {
            index.set_capacity(id, set);
            prop_assert_eq!(index.capacity_of(id), Some(set.min(MAX_CAPACITY_PER_ENDPOINT)));
        }
    }
}

#[test]
fn a_huge_capacity_passed_on_insert_is_capped() {
    let index = tiny_index(4);
    let id = EndpointId(3);
    index.insert_blocks(id, &keys_of(&index, &[0, 1]), Some(usize::MAX));
    assert_eq!(index.capacity_of(id), Some(MAX_CAPACITY_PER_ENDPOINT));
    index.set_capacity(id, usize::MAX - 1);
    assert_eq!(index.capacity_of(id), Some(MAX_CAPACITY_PER_ENDPOINT));
}

/// A capacity near `usize::MAX` set while an insert's eviction is in flight (its batch off
/// the queue, the endpoint unlocked): `capacity + evicting` must neither overflow (a panic
/// with the overflow checks of debug test builds) nor wrap (without them: a tiny bound that
/// evicts everything). Through the public API the cap already prevents such a capacity; the
/// unchecked setter checks the arithmetic itself.
#[test]
fn a_huge_capacity_set_during_an_eviction_neither_overflows_nor_evicts() {
    let id = EndpointId(5);
    for seed in 0..200 {
        for unchecked in [false, true] {
            let index = tiny_index(100);
            let keys = keys_of(&index, &[0, 1, 2, 0, 1, 2, 0, 1]);
            let index = &index;
            let insert = Box::new(|| index.insert_blocks(id, &keys, Some(4)));
            let huge = Box::new(move || {
                if unchecked {
                    index.set_capacity_unchecked(id, usize::MAX - 1);
                } else {
                    index.set_capacity(id, usize::MAX - 1);
                }
            });
            crate::prefix::locking::schedule::run(seed, vec![insert, huge]);
            // The insert evicted down to its capacity of 4 (whoever set a capacity first), and
            // the huge capacity evicted nothing more.
            assert_eq!(
                index.endpoint_entries(id),
                4,
                "seed {seed}, unchecked {unchecked}"
            );
            assert_eq!(index.audit().len(), 4, "seed {seed}");
        }
    }
}

/// A flapping health check: the pool emptied and refilled over and over, each endpoint with a
/// fresh id, as the pool hands them out.
#[test]
fn flapping_endpoints_keep_the_retired_bookkeeping_bounded() {
    let index = tiny_index(8);
    let mut next = 0u32;
    for _ in 0..4096 {
        let ids: Vec<EndpointId> = (next..next + 4).map(EndpointId).collect();
        next += 4;
        for id in &ids {
            insert(&index, id.0, &[0, 1, 2]);
        }
        index.on_removed(&ids);
    }
    assert!(
        index.retired_footprint() <= 2,
        "{} retired entries",
        index.retired_footprint()
    );
    assert_eq!(index.entries(), 0);
    assert!(index.endpoints().is_empty());
    // Every id that left is still refused.
    for id in (0..next).step_by(61) {
        insert(&index, id, &[0, 1]);
        assert_eq!(index.endpoint_entries(EndpointId(id)), 0, "{id}");
    }
    assert!(index.audit().is_empty());
}

/// Endpoints that stay interleave with the ones that go: the bookkeeping grows with the
/// endpoints that stay, not with the removals.
#[test]
fn retired_ids_between_live_ones_stay_bounded_by_the_live_ones() {
    let index = tiny_index(8);
    for id in (0..2048u32).map(EndpointId) {
        insert(&index, id.0, &[0, 1]);
        // One endpoint in 256 stays for good.
        if id.0 % 256 != 0 {
            index.remove_endpoint(id);
        }
    }
    assert_eq!(index.endpoints().len(), 8);
    assert!(
        index.retired_footprint() <= 9,
        "{}",
        index.retired_footprint()
    );
}
