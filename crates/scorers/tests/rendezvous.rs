//! `rendezvous-affinity-scorer`: the same home in every instance, only the removed endpoint's
//! keys move when an endpoint leaves, an even spread of keys, and a small cost per candidate.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::sync::Arc;
use std::time::Duration;

use shepherd_scheduler_core::prelude::*;
use shepherd_scorers::builtin_registry;
use shepherd_scorers::scorers::{RendezvousAffinityScorer, RendezvousParameters};

fn scorer() -> RendezvousAffinityScorer {
    RendezvousAffinityScorer::new(RendezvousParameters {
        prefix_blocks: 1,
        block_size: 16,
        load_factor: None,
    })
    .unwrap()
}

fn pool(members: usize) -> Pool {
    let pool = Pool::new();
    pool.set_members((0..members).map(|i| format!("10.0.{}.{}:8000", i / 250, i % 250)));
    pool
}

/// A 32-token prompt whose first block is unique to `key`.
fn request(key: u32) -> InferenceRequest {
    let tokens = (0..32).map(|i| key * 1000 + i).collect();
    InferenceRequest::new("r", "m", Prompt::Tokens(tokens))
}

fn scores(s: &RendezvousAffinityScorer, req: &InferenceRequest, pool: &Pool) -> Vec<(String, f64)> {
    let snapshot = pool.snapshot();
    let candidates: Vec<&Arc<Endpoint>> = snapshot.endpoints().iter().collect();
    let mut cycle = CycleState::new(req, Timestamp::ZERO, Duration::from_millis(200));
    let mut out = vec![Score::NEUTRAL; candidates.len()];
    s.score(&mut cycle, &candidates, &mut out);
    candidates
        .iter()
        .zip(out)
        .map(|(ep, s)| (ep.address().to_string(), s.value))
        .collect()
}

fn home(s: &RendezvousAffinityScorer, req: &InferenceRequest, pool: &Pool) -> String {
    let all = scores(s, req, pool);
    let best = all.iter().find(|(_, v)| *v == 1.0).unwrap();
    best.0.clone()
}

#[test]
fn every_instance_gives_the_same_scores() {
    let (a, b) = (scorer(), scorer());
    let (pa, pb) = (pool(8), pool(8));
    for key in 0..200 {
        assert_eq!(
            scores(&a, &request(key), &pa),
            scores(&b, &request(key), &pb)
        );
    }
}

#[test]
fn weights_are_fixed_values_not_process_random() {
    // A change here would move every home after an upgrade: the hash is part of the contract.
    assert_eq!(
        RendezvousAffinityScorer::weight(1, "10.0.0.1:8000"),
        RendezvousAffinityScorer::weight(1, "10.0.0.1:8000")
    );
    assert_ne!(
        RendezvousAffinityScorer::weight(1, "10.0.0.1:8000"),
        RendezvousAffinityScorer::weight(2, "10.0.0.1:8000")
    );
    assert_eq!(
        RendezvousAffinityScorer::weight(0, ""),
        xxh3_empty_input_vector()
    );
}

/// XXH3-64 of the empty input with seed 0 (the published test vector).
fn xxh3_empty_input_vector() -> u64 {
    0x2D06_8005_38D3_94C2
}

#[test]
fn scores_are_ranks_from_one_down_to_zero() {
    let s = scorer();
    let p = pool(5);
    let mut values: Vec<f64> = scores(&s, &request(7), &p).iter().map(|x| x.1).collect();
    values.sort_by(f64::total_cmp);
    assert_eq!(values, vec![0.0, 0.25, 0.5, 0.75, 1.0]);
    let lone = pool(1);
    assert_eq!(scores(&s, &request(7), &lone)[0].1, 1.0);
}

#[test]
fn only_the_removed_endpoints_keys_move() {
    let s = scorer();
    let before = pool(8);
    let after = pool(8);
    let gone = "10.0.0.3:8000";
    after.set_members(
        (0..8)
            .map(|i| format!("10.0.0.{i}:8000"))
            .filter(|a| a != gone),
    );
    let mut moved = 0;
    for key in 0..2000 {
        let (h0, h1) = (
            home(&s, &request(key), &before),
            home(&s, &request(key), &after),
        );
        if h0 == gone {
            moved += 1;
            assert_ne!(h1, gone);
        } else {
            assert_eq!(h0, h1, "key {key} moved though its home stayed");
        }
    }
    assert!(
        (150..350).contains(&moved),
        "{moved} of 2000 keys were homed on one of 8"
    );
}

#[test]
fn keys_spread_evenly() {
    let s = scorer();
    let p = pool(16);
    let addresses: Vec<String> = scores(&s, &request(0), &p)
        .into_iter()
        .map(|x| x.0)
        .collect();
    let mut counts = vec![0u32; 16];
    let n = 16_000;
    for key in 0..n {
        let h = home(&s, &request(key), &p);
        counts[addresses.iter().position(|a| *a == h).unwrap()] += 1;
    }
    let mean = f64::from(n) / 16.0;
    for c in counts {
        // Binomial sd ≈ 31 around 1000: ±15 % is about 5 sd.
        assert!(
            (f64::from(c) - mean).abs() < 0.15 * mean,
            "{c} keys vs {mean}"
        );
    }
}

#[test]
fn no_complete_block_scores_everyone_neutral() {
    let s = scorer();
    let p = pool(4);
    let passthrough = InferenceRequest::new("r", "", Prompt::Text(String::new()));
    let short = InferenceRequest::new("r", "m", Prompt::Tokens((0..15).collect()));
    for req in [passthrough, short] {
        assert!(
            scores(&s, &req, &p)
                .iter()
                .all(|x| x.1 == Score::NEUTRAL.value)
        );
    }
}

#[test]
fn the_key_covers_the_first_blocks_the_model_and_the_adapter() {
    let s = scorer();
    let mut later_differs = request(1);
    if let Prompt::Tokens(t) = &mut later_differs.prompt {
        t[20] = 999_999;
    }
    assert_eq!(s.key(&request(1)), s.key(&later_differs));
    let mut other_model = request(1);
    other_model.model = "other".into();
    assert_ne!(s.key(&request(1)), s.key(&other_model));
    let mut adapter = request(1);
    adapter.lora = Some("sql".into());
    assert_ne!(s.key(&request(1)), s.key(&adapter));
    let two = RendezvousAffinityScorer::new(RendezvousParameters {
        prefix_blocks: 2,
        block_size: 16,
        load_factor: None,
    })
    .unwrap();
    assert_ne!(two.key(&request(1)), two.key(&later_differs));
}

#[test]
fn parameters_are_checked() {
    let registry = builtin_registry();
    for bad in [
        "{prefixBlocks: 0}",
        "{blockSize: 0}",
        "{prefixBlock: 2}",
        "{loadFactor: 0.5}",
        "{loadFactor: -1}",
    ] {
        let yaml = format!("plugins:\n- type: rendezvous-affinity-scorer\n  parameters: {bad}\n");
        let config = EndpointPickerConfig::from_yaml(&yaml).unwrap();
        assert!(
            build_scheduler(&config, &registry, Arc::new(pool(2))).is_err(),
            "{bad} was accepted"
        );
    }
}
