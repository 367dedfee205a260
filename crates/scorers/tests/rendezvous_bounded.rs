//! `rendezvous-affinity-scorer` with `loadFactor`: an overloaded home yields to the next
//! candidate in rendezvous order, and without overload the ranking is the unbounded one.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::sync::Arc;
use std::time::Duration;

use shepherd_scheduler_core::prelude::*;
use shepherd_scorers::builtin_registry;
use shepherd_scorers::scorers::{RendezvousAffinityScorer, RendezvousParameters};

fn scorer(load_factor: Option<f64>) -> RendezvousAffinityScorer {
    RendezvousAffinityScorer::new(RendezvousParameters {
        prefix_blocks: 1,
        block_size: 16,
        load_factor,
    })
    .unwrap()
}

fn pool(members: usize) -> Pool {
    let pool = Pool::new();
    pool.set_members((0..members).map(|i| format!("10.0.0.{i}:8000")));
    pool
}

fn request(key: u32) -> InferenceRequest {
    let tokens = (0..32).map(|i| key * 1000 + i).collect();
    InferenceRequest::new("r", "m", Prompt::Tokens(tokens))
}

/// Scores per candidate, in the pool's order.
fn scores(s: &RendezvousAffinityScorer, req: &InferenceRequest, pool: &Pool) -> Vec<f64> {
    let snapshot = pool.snapshot();
    let candidates: Vec<&Arc<Endpoint>> = snapshot.endpoints().iter().collect();
    let mut cycle = CycleState::new(req, Timestamp::ZERO, Duration::from_millis(200));
    let mut out = vec![Score::NEUTRAL; candidates.len()];
    s.score(&mut cycle, &candidates, &mut out);
    out.into_iter().map(|s| s.value).collect()
}

/// Candidate positions from the highest score down.
fn order(scores: &[f64]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    idx
}

/// Puts `loads[i]` requests in flight on the pool's i-th endpoint (until the guards drop).
fn load(pool: &Pool, loads: &[u64]) -> Vec<InFlightGuard> {
    let snapshot = pool.snapshot();
    let mut guards = Vec::new();
    for (ep, &n) in snapshot.endpoints().iter().zip(loads) {
        for _ in 0..n {
            guards.push(ep.start_request(100));
        }
    }
    guards
}

#[test]
fn an_overloaded_home_yields_to_the_next_in_rendezvous_order() {
    let p = pool(4);
    for key in 0..50 {
        let req = request(key);
        let hrw = order(&scores(&scorer(None), &req, &p));
        let mut loads = vec![0; 4];
        // Mean 1, bound 1.25 × 2 = 2.5: 4 in flight is over it.
        loads[hrw[0]] = 4;
        let _guards = load(&p, &loads);
        let bounded = scores(&scorer(Some(1.25)), &req, &p);
        let expected: Vec<usize> = hrw[1..].iter().copied().chain([hrw[0]]).collect();
        assert_eq!(order(&bounded), expected, "key {key}");
        assert_eq!(bounded[hrw[1]], 1.0);
        assert_eq!(bounded[hrw[0]], 0.0);
        // Without the parameter the home keeps its rank whatever the load.
        assert_eq!(order(&scores(&scorer(None), &req, &p)), hrw);
    }
}

#[test]
fn without_overload_the_ranking_is_unchanged() {
    let p = pool(5);
    // Mean 2, bound 2 × 3 = 6: the busiest (6) is at the bound, not over it.
    let _guards = load(&p, &[6, 2, 0, 1, 1]);
    for key in 0..50 {
        let req = request(key);
        assert_eq!(
            scores(&scorer(Some(2.0)), &req, &p),
            scores(&scorer(None), &req, &p),
            "key {key}"
        );
    }
}

#[test]
fn every_overloaded_candidate_goes_after_those_under_the_bound() {
    let p = pool(6);
    let req = request(3);
    let hrw = order(&scores(&scorer(None), &req, &p));
    let mut loads = vec![0; 6];
    // Mean 3, bound 1.5 × 4 = 6: the first and third homes are over it.
    loads[hrw[0]] = 9;
    loads[hrw[2]] = 9;
    let _guards = load(&p, &loads);
    let expected = vec![hrw[1], hrw[3], hrw[4], hrw[5], hrw[0], hrw[2]];
    assert_eq!(order(&scores(&scorer(Some(1.5)), &req, &p)), expected);
}

#[test]
fn the_bound_is_the_factor_times_the_mean_plus_one() {
    let s = scorer(Some(1.25));
    assert_eq!(s.overloaded(&[0, 0, 0, 0]), vec![false; 4]);
    // Idle pool: bound 1.25, so a second request on one endpoint is over it.
    assert_eq!(s.overloaded(&[2, 0, 0, 0]), vec![true, false, false, false]);
    assert_eq!(s.overloaded(&[1, 0, 0, 0]), vec![false; 4]);
    // Mean 10, bound 13.75.
    assert_eq!(
        s.overloaded(&[13, 14, 3, 10]),
        vec![false, true, false, false]
    );
    assert!(s.overloaded(&[]).is_empty());
    assert_eq!(scorer(None).overloaded(&[100, 0]), vec![false, false]);
}

#[test]
fn instances_with_the_same_loads_agree() {
    let (pa, pb) = (pool(8), pool(8));
    let loads = [7, 0, 3, 1, 9, 0, 2, 2];
    let _ga = load(&pa, &loads);
    let _gb = load(&pb, &loads);
    let (a, b) = (scorer(Some(1.25)), scorer(Some(1.25)));
    for key in 0..200 {
        assert_eq!(
            scores(&a, &request(key), &pa),
            scores(&b, &request(key), &pb)
        );
    }
}

#[test]
fn load_factor_is_read_from_the_config() {
    let yaml = "plugins:\n- type: rendezvous-affinity-scorer\n  parameters: {loadFactor: 1.5}\nschedulingProfiles:\n- name: default\n  plugins:\n  - pluginRef: rendezvous-affinity-scorer\n";
    let config = EndpointPickerConfig::from_yaml(yaml).unwrap();
    let p = Arc::new(pool(3));
    assert!(build_scheduler(&config, &builtin_registry(), p).is_ok());
}
