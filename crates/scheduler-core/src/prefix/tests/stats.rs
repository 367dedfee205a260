//! The counters a runtime exports.

use super::*;
use crate::endpoint::{EndpointId, MembershipListener};

#[test]
fn stats_follow_inserts_evictions_and_removals() {
    let index = tiny_index(4);
    assert_eq!(index.stats(), PrefixIndexStats::default());
    insert(&index, 1, &[0, 1, 2]);
    insert(&index, 2, &[0, 1, 2]);
    // The same chain again: an insert that adds no entry.
    insert(&index, 1, &[0, 1, 2]);
    let stats = index.stats();
    assert_eq!((stats.inserts, stats.inserted_blocks), (3, 6));
    assert_eq!((stats.entries, stats.endpoints, stats.evictions), (6, 2, 0));
    // Three more blocks for #1: two of its entries go (capacity 4).
    insert(&index, 1, &[1, 1, 1]);
    let stats = index.stats();
    assert_eq!((stats.inserts, stats.inserted_blocks), (4, 9));
    assert_eq!((stats.entries, stats.evictions), (7, 2));
    assert_eq!(stats.entries as usize, index.entries());
    // KV removals lower the gauge without counting as evictions.
    index.remove_blocks(EndpointId(2), &keys_of(&index, &[0, 1, 2])[2..]);
    assert_eq!((index.stats().entries, index.stats().evictions), (6, 2));
    // Lookups change nothing.
    let before = index.stats();
    for _ in 0..10 {
        lookup(&index, &[0, 1, 2]);
    }
    assert_eq!(index.stats(), before);
    index.on_removed(&[EndpointId(1), EndpointId(7)]);
    let stats = index.stats();
    assert_eq!((stats.entries, stats.endpoints), (2, 1));
    assert_eq!(stats.removed_endpoints, 1);
    // A late insert for a removed endpoint is not an insert.
    insert(&index, 1, &[2, 2]);
    assert_eq!(index.stats().inserts, 4);
}
