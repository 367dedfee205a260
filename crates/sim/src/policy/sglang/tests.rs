#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The cache-aware policy's decisions on hand-built states, against upstream's rules.

use shepherd_scheduler_core::endpoint::EndpointId;

use super::decide::{Route, Thresholds, decide, is_imbalanced, least_loaded};
use super::tree::Tree;

const LAUNCH: Thresholds = Thresholds {
    cache_threshold: 0.3,
    balance_abs_threshold: 64,
    balance_rel_threshold: 1.5,
};
const LIBRARY: Thresholds = Thresholds {
    cache_threshold: 0.5,
    balance_abs_threshold: 32,
    balance_rel_threshold: 1.1,
};

fn text(s: &str) -> Vec<u32> {
    s.chars().map(u32::from).collect()
}

fn by_order(_: u64, t: EndpointId) -> u64 {
    u64::from(t.0)
}

#[test]
fn imbalance_needs_both_the_absolute_and_the_relative_gap() {
    // Launch defaults: gap > 64 and max > 1.5 × min.
    assert!(!is_imbalanced(&[0, 64], &LAUNCH)); // gap 64 is not > 64
    assert!(is_imbalanced(&[0, 65], &LAUNCH));
    assert!(is_imbalanced(&[100, 165, 120], &LAUNCH)); // 165 > 150
    assert!(!is_imbalanced(&[200, 265], &LAUNCH)); // gap 65, but 265 < 300
    // Library defaults: gap > 32 and max > 1.1 × min.
    assert!(is_imbalanced(&[10, 43], &LIBRARY));
    assert!(!is_imbalanced(&[300, 329], &LIBRARY)); // gap 29
}

#[test]
fn imbalance_at_library_defaults_counts_both_tests() {
    // 340 − 300 = 40 > 32 and 340 > 330: imbalanced.
    assert!(is_imbalanced(&[300, 340], &LIBRARY));
    // 330 − 300 = 30: not.
    assert!(!is_imbalanced(&[300, 330], &LIBRARY));
}

#[test]
fn imbalanced_pools_go_to_the_first_least_loaded_worker_without_matching() {
    let route = decide(&[70, 3, 3], &LAUNCH, 100, || {
        panic!("no tree lookup when imbalanced")
    });
    assert_eq!(route, Route::Balance(1));
    assert_eq!(least_loaded(&[5, 2, 2, 9]), 1);
}

#[test]
fn the_match_rate_must_exceed_the_threshold() {
    // 30 of 100 characters = 0.3, not above 0.3: the least-loaded worker.
    assert_eq!(
        decide(&[4, 2, 3], &LAUNCH, 100, || (30, Some(0))),
        Route::CacheMiss(1)
    );
    // 31 of 100: the worker holding the match, however loaded.
    assert_eq!(
        decide(&[4, 2, 3], &LAUNCH, 100, || (31, Some(0))),
        Route::CacheHit(0)
    );
    // The library default threshold is 0.5.
    assert_eq!(
        decide(&[4, 2, 3], &LIBRARY, 100, || (50, Some(0))),
        Route::CacheMiss(1)
    );
    // An empty prompt matches nothing.
    assert_eq!(
        decide(&[4, 2, 3], &LAUNCH, 0, || (0, Some(0))),
        Route::CacheMiss(1)
    );
}

#[test]
fn prefix_match_counts_characters_into_a_split_edge() {
    let (a, b) = (EndpointId(1), EndpointId(2));
    let mut tree = Tree::default();
    tree.insert(&text("abcdef"), a, 1);
    tree.insert(&text("abcxyz"), b, 2);
    assert_eq!(tree.tenant_size(a), 6); // "abc" + "def"
    assert_eq!(tree.tenant_size(b), 6); // "abc" + "xyz"
    // Five characters match, the last one inside A's "def" edge.
    assert_eq!(
        tree.prefix_match(&text("abcdeg"), 3, by_order),
        (5, Some(a))
    );
    assert_eq!(tree.prefix_match(&text("abcxq"), 3, by_order), (4, Some(b)));
    // Both hold "abc": the node's order decides.
    assert_eq!(tree.prefix_match(&text("abcq"), 3, by_order), (3, Some(a)));
    let reversed = |_: u64, t: EndpointId| u64::MAX - u64::from(t.0);
    assert_eq!(tree.prefix_match(&text("abcq"), 3, reversed), (3, Some(b)));
    assert_eq!(tree.prefix_match(&text("zzz"), 3, by_order).0, 0);
}

#[test]
fn inserting_the_same_prompt_again_adds_nothing() {
    let a = EndpointId(1);
    let mut tree = Tree::default();
    tree.insert(&text("hello world"), a, 1);
    tree.insert(&text("hello world"), a, 2);
    tree.insert(&text("hello"), a, 3);
    assert_eq!(tree.tenant_size(a), 11);
}

#[test]
fn eviction_removes_least_recently_used_leaves_until_the_worker_fits() {
    let (a, b) = (EndpointId(1), EndpointId(2));
    let mut tree = Tree::default();
    tree.insert(&text("abcdef"), a, 1); // "ab" + "cdef" after the next split
    tree.insert(&text("abxy"), a, 2); // "ab" + "xy"
    tree.insert(&text("abcdef"), b, 3);
    assert_eq!(tree.tenant_size(a), 8);
    tree.evict_tenant_by_size(6);
    // A's oldest leaf ("cdef", used at 1) goes; then 4 ≤ 6, so "xy" stays.
    assert_eq!(tree.tenant_size(a), 4);
    assert_eq!(tree.tenant_size(b), 6); // B was within the limit
    assert_eq!(tree.prefix_match(&text("abxy"), 5, by_order), (4, Some(a)));
    // "abcdef" is still B's.
    assert_eq!(
        tree.prefix_match(&text("abcdef"), 5, by_order),
        (6, Some(b))
    );
    // Evicting B down to nothing removes the nodes no one holds any more.
    tree.evict_tenant_by_size(0);
    assert_eq!(tree.tenant_size(a), 0);
    assert_eq!(tree.tenant_size(b), 0);
    assert_eq!(tree.prefix_match(&text("abcdef"), 6, by_order).0, 0);
    // The freed nodes are reused.
    tree.insert(&text("abq"), b, 7);
    assert_eq!(tree.prefix_match(&text("abq"), 8, by_order), (3, Some(b)));
}

#[test]
fn a_match_refreshes_the_holder_so_eviction_spares_it() {
    let a = EndpointId(1);
    let mut tree = Tree::default();
    tree.insert(&text("aaaa"), a, 1);
    tree.insert(&text("bbbb"), a, 2);
    // Reading "aaaa" at 3 makes "bbbb" the least recently used.
    assert_eq!(tree.prefix_match(&text("aaaa"), 3, by_order), (4, Some(a)));
    tree.evict_tenant_by_size(4);
    assert_eq!(tree.prefix_match(&text("aaaa"), 4, by_order).0, 4);
    assert_eq!(tree.prefix_match(&text("bbbb"), 4, by_order).0, 0);
}
