//! The 1.13 `cache_aware` rules with upstream's launch defaults.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use shepherd_scheduler_core::endpoint::EndpointId;

use super::expected_wait::{Candidate, Knobs, Selector, expected_wait_seconds};
use super::gate::Gate;
use crate::policy::feed::{LoadPoll, LoadReport};
use crate::policy::sglang::tree::Tree;

const DEFAULTS: Gate = Gate {
    balance_abs_threshold: 64,
    balance_rel_threshold: 1.5,
};

fn c(id: u32, in_flight: usize) -> Candidate {
    Candidate {
        id: EndpointId(id),
        in_flight,
    }
}

fn poll(seq: u64, at_ns: u64, reports: &[(u32, LoadReport)]) -> LoadPoll {
    LoadPoll {
        seq,
        at_ns,
        reports: reports.iter().map(|(i, r)| (EndpointId(*i), *r)).collect(),
    }
}

#[test]
fn absolute_margin_is_the_swing_capped_by_the_flag_and_floored_at_four() {
    assert_eq!(DEFAULTS.absolute_margin(0.0), 4.0);
    assert_eq!(DEFAULTS.absolute_margin(1.0), 4.0); // ⌈2⌉ → floor 4
    assert_eq!(DEFAULTS.absolute_margin(5.0), 5.0); // ⌈4.47⌉
    assert_eq!(DEFAULTS.absolute_margin(16.0), 8.0);
    assert_eq!(DEFAULTS.absolute_margin(2000.0), 64.0); // ⌈89.4⌉ capped at 64
    let low = Gate {
        balance_abs_threshold: 2,
        ..DEFAULTS
    };
    assert_eq!(low.absolute_margin(100.0), 2.0); // a configured value under 4 wins
}

#[test]
fn the_gate_needs_both_margins() {
    // Mean 2: relative bound 3, absolute bound 2 + 4 = 6.
    assert!(!DEFAULTS.over(5.0, 2.0));
    assert!(!DEFAULTS.over(6.0, 2.0));
    assert!(DEFAULTS.over(7.0, 2.0));
    // Mean 100: absolute bound 100 + 20 = 120, relative bound 150.
    assert!(!DEFAULTS.over(149.0, 100.0));
    assert!(DEFAULTS.over(151.0, 100.0));
}

#[test]
fn a_hot_holder_spills_to_the_workers_under_the_gate() {
    // Loads 20, 0, 0, 0: mean 5, bound max(7.5, 5 + 5) = 10.
    let loads = [20, 0, 0, 0];
    assert_eq!(DEFAULTS.final_candidates(&loads, &[0]), vec![1, 2, 3]);
    // A holder under the gate keeps the request among the holders.
    assert_eq!(DEFAULTS.final_candidates(&loads, &[0, 2]), vec![2]);
    // A miss takes the whole fleet, the hot worker included.
    assert_eq!(DEFAULTS.final_candidates(&loads, &[]), vec![0, 1, 2, 3]);
    // Under the gate (mean 2: bound max(3, 2 + 4) = 6), affinity holds.
    assert_eq!(DEFAULTS.final_candidates(&[5, 1, 1, 1], &[0]), vec![0]);
    // Nine against an idle fleet is over it (mean 2.25: bound 6.25).
    assert_eq!(
        DEFAULTS.final_candidates(&[9, 0, 0, 0], &[0]),
        vec![1, 2, 3]
    );
}

#[test]
fn expected_wait_formula() {
    assert!((expected_wait_seconds(800.0, 500.0, 0.5, 0.2, 200) - 2.2).abs() < 1e-12);
    // KV usage is clamped below 1.
    let full = expected_wait_seconds(0.0, 100.0, 2.0, 0.15, 0);
    assert!((full - 0.15 * 0.999 / 0.001).abs() < 1e-9);
    assert_eq!(expected_wait_seconds(0.0, 100.0, -1.0, 0.15, 0), 0.0);
}

#[test]
fn a_reporting_worker_scores_queue_running_transit_and_credit() {
    let mut s = Selector::new(Knobs::default(), 1);
    let report = LoadReport {
        waiting: 1,
        running: 2,
        waiting_uncached_tokens: 3000,
        kv_utilization: 0.5,
        generated_tokens: 0,
    };
    s.apply_poll(&poll(1, 0, &[(0, report)]));
    s.credit(EndpointId(0), 5, 1024);
    // In flight 5: reported 3, since-poll 1 → 1 unaccounted.
    let scores = s.scores(&[c(0, 5)]);
    let want = (3000.0 + 2.0 * 1024.0 + 1024.0 + 1024.0) / 2000.0 + 0.15;
    assert!((scores[0] - want).abs() < 1e-9, "{} vs {want}", scores[0]);
    // No uncached-token figure: the waiting requests at p̄ each.
    let report = LoadReport {
        waiting: 2,
        running: 0,
        waiting_uncached_tokens: 0,
        kv_utilization: 0.0,
        generated_tokens: 0,
    };
    let mut s = Selector::new(Knobs::default(), 1);
    s.apply_poll(&poll(1, 0, &[(0, report)]));
    assert!((s.scores(&[c(0, 2)])[0] - 2048.0 / 2000.0).abs() < 1e-9);
}

#[test]
fn throughput_comes_from_two_polls_and_a_poll_releases_earlier_credit() {
    let mut s = Selector::new(Knobs::default(), 1);
    let idle = LoadReport::default();
    s.apply_poll(&poll(1, 0, &[(0, idle)]));
    s.credit(EndpointId(0), 1_000, 1024);
    s.credit(EndpointId(0), 20_000_000_000, 1024);
    let later = LoadReport {
        running: 1,
        generated_tokens: 40_000,
        ..idle
    };
    s.apply_poll(&poll(2, 10_000_000_000, &[(0, later)]));
    assert_eq!(s.since_poll(EndpointId(0)), (1024, 1));
    // 4000 tok/s; running 1 · 1024 + credit 1024.
    let scores = s.scores(&[c(0, 2)]);
    assert!((scores[0] - 2048.0 / 4000.0).abs() < 1e-9);
    // The same poll twice changes nothing.
    s.apply_poll(&poll(2, 10_000_000_000, &[(0, later)]));
    assert_eq!(s.since_poll(EndpointId(0)), (1024, 1));
}

#[test]
fn a_dark_fleet_goes_by_in_flight_and_a_silent_worker_by_the_best_peer() {
    let mut s = Selector::new(Knobs::default(), 1);
    assert_eq!(s.scores(&[c(0, 3), c(1, 1)]), vec![3.0, 1.0]);
    assert_eq!(s.select(&[c(0, 3), c(1, 1)]), Some(1));
    s.apply_poll(&poll(1, 0, &[(0, LoadReport::default())]));
    // Worker 1 has no report: the best reporter (0 s) plus 2 · 1024 / 2000.
    let scores = s.scores(&[c(0, 0), c(1, 2)]);
    assert_eq!(scores[0], 0.0);
    assert!((scores[1] - 2048.0 / 2000.0).abs() < 1e-9);
}

#[test]
fn ties_within_a_microsecond_are_drawn_uniformly_and_reproducibly() {
    let pool = [c(0, 0), c(1, 0), c(2, 0), c(3, 0)];
    let mut counts = [0u32; 4];
    let mut s = Selector::new(Knobs::default(), 42);
    let mut first = Vec::new();
    for _ in 0..4000 {
        let i = s.select(&pool).unwrap();
        counts[i] += 1;
        first.push(i);
    }
    for n in counts {
        assert!((850..1150).contains(&n), "{counts:?}");
    }
    let mut again = Selector::new(Knobs::default(), 42);
    let replay: Vec<usize> = (0..4000).map(|_| again.select(&pool).unwrap()).collect();
    assert_eq!(first, replay);
    // A lower score beyond the epsilon always wins.
    let mut s = Selector::new(Knobs::default(), 42);
    let report = LoadReport::default();
    s.apply_poll(&poll(1, 0, &[(0, report), (1, report)]));
    s.credit(EndpointId(0), 1, 1);
    for _ in 0..100 {
        assert_eq!(s.select(&[c(0, 1), c(1, 0)]), Some(1));
    }
}

#[test]
fn the_tree_names_every_holder_of_the_deepest_node_and_shares_one_bound() {
    let mut t = Tree::default();
    let a = EndpointId(1);
    let b = EndpointId(2);
    t.insert(&[1, 2, 3, 4], a, 1);
    t.insert(&[1, 2, 3, 4], b, 2);
    t.insert(&[1, 2, 9], a, 3);
    let (m, mut holders) = t.prefix_match_holders(&[1, 2, 3, 4, 5], 8, |_, t| u64::from(t.0));
    holders.sort();
    assert_eq!((m, holders), (4, vec![a, b]));
    let (m, holders) = t.prefix_match_holders(&[1, 2, 9], 8, |_, t| u64::from(t.0));
    assert_eq!((m, holders), (3, vec![a]));
    assert_eq!(t.prefix_match_holders(&[7], 8, |_, t| u64::from(t.0)).0, 0);
    // a: [1,2] + [3,4] + [9] = 5, b: 4 → 9 in all; a bound of 5 evicts the oldest leaves.
    assert_eq!(t.total_size(), 9);
    t.evict_total_by_size(5);
    assert!(t.total_size() <= 5);
    // a's [3,4] (last used at 1) went first, then b's [3,4]; a keeps [1,2,9].
    assert_eq!(
        t.prefix_match_holders(&[1, 2, 9], 8, |_, t| u64::from(t.0))
            .0,
        3
    );
}
