//! Properties of the built-in scorers: every score in [0, 1] whatever the metrics, stale
//! metrics give neutral scores, and the min-max scorers rank by load.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use shepherd_scheduler_core::endpoint::LoraState;
use shepherd_scheduler_core::prelude::*;
use shepherd_scorers::scorers::{
    ActiveRequestScorer, KvCacheUtilizationScorer, LoraAffinityScorer, QueueScorer,
    RunningRequestsScorer, SessionAffinityParameters, SessionAffinityScorer,
};

use common::{STALENESS, endpoint, endpoint_scraped_at, fresh, request, score, score_at};

const NOW: Timestamp = Timestamp::from_millis(1_000);

fn config() -> Config {
    Config {
        cases: 256,
        rng_seed: RngSeed::Fixed(0x5C0_4E5),
        failure_persistence: None,
        ..Config::default()
    }
}

/// KV utilization including garbage: NaN, infinities, negative, above 1.
fn kv() -> impl Strategy<Value = f64> {
    prop_oneof![
        0.0..=1.0f64,
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        -1e300..1e300f64,
        any::<f64>(),
    ]
}

fn adapter() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "b", "c"]).prop_map(str::to_string)
}

fn lora() -> impl Strategy<Value = LoraState> {
    (
        prop::collection::vec(adapter(), 0..3),
        prop::collection::vec(adapter(), 0..3),
        any::<u32>(),
    )
        .prop_map(|(running, waiting, max_loras)| LoraState {
            running,
            waiting,
            max_loras,
        })
}

/// Metrics scraped at some time up to `NOW` (fresh or stale), or never.
fn metrics() -> impl Strategy<Value = (EndpointMetrics, Option<Timestamp>)> {
    (
        any::<u32>(),
        any::<u32>(),
        kv(),
        lora(),
        prop::option::of(0u64..=1_000),
    )
        .prop_map(|(waiting, running, kv_utilization, lora, scraped)| {
            let m = EndpointMetrics {
                waiting,
                running,
                kv_utilization,
                lora,
                ..Default::default()
            };
            (m, scraped.map(Timestamp::from_millis))
        })
}

fn all_scorers() -> Vec<(&'static str, Box<dyn Scorer>)> {
    vec![
        ("kv", Box::new(KvCacheUtilizationScorer)),
        ("queue", Box::new(QueueScorer)),
        ("running", Box::new(RunningRequestsScorer)),
        ("active", Box::new(ActiveRequestScorer::default())),
        ("lora", Box::new(LoraAffinityScorer)),
        (
            "session",
            Box::new(SessionAffinityScorer::new(SessionAffinityParameters::default(), 1).unwrap()),
        ),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_score_is_within_unit_interval(
        all in prop::collection::vec((metrics(), 0usize..5), 1..12),
        lora in prop::option::of(adapter()),
    ) {
        let endpoints: Vec<Arc<Endpoint>> = all
            .iter()
            .enumerate()
            .map(|(i, ((m, at), _))| endpoint_scraped_at(i as u32, m.clone(), *at))
            .collect();
        let _guards: Vec<InFlightGuard> = endpoints
            .iter()
            .zip(&all)
            .flat_map(|(ep, (_, n))| (0..*n).map(|_| ep.start_request(10)))
            .collect();
        let mut req = request("r");
        req.lora = lora;
        req.session_key = Some("s".into());
        for (name, scorer) in all_scorers() {
            let scores = score_at(scorer.as_ref(), &req, &endpoints, NOW);
            prop_assert_eq!(scores.len(), endpoints.len());
            for s in scores {
                prop_assert!((0.0..=1.0).contains(&s.value), "{name}: {s:?}");
            }
        }
    }

    #[test]
    fn stale_metrics_give_neutral_scores(
        all in prop::collection::vec((metrics(), any::<bool>()), 1..12),
    ) {
        // Each endpoint is either fresh (scraped at NOW) or stale (never, or before the bound).
        let endpoints: Vec<Arc<Endpoint>> = all
            .iter()
            .enumerate()
            .map(|(i, ((m, at), is_fresh))| {
                let at = if *is_fresh {
                    Some(NOW)
                } else {
                    at.filter(|t| NOW.saturating_since(*t) > STALENESS)
                };
                endpoint_scraped_at(i as u32, m.clone(), at)
            })
            .collect();
        let mut req = request("r");
        req.lora = Some("a".into());
        let scorers: [&dyn Scorer; 4] =
            [&KvCacheUtilizationScorer, &QueueScorer, &RunningRequestsScorer, &LoraAffinityScorer];
        for scorer in scorers {
            let scores = score_at(scorer, &req, &endpoints, NOW);
            for (s, (_, is_fresh)) in scores.iter().zip(&all) {
                prop_assert_eq!(s.neutral, !*is_fresh);
                if !*is_fresh {
                    prop_assert_eq!(*s, Score::NEUTRAL);
                }
            }
        }
    }

    #[test]
    fn queue_scorer_ranks_by_waiting(waiting in prop::collection::vec(0u32..100, 1..10)) {
        let endpoints: Vec<Arc<Endpoint>> = waiting
            .iter()
            .enumerate()
            .map(|(i, &w)| endpoint(i as u32, fresh(w, 0, 0.0)))
            .collect();
        let scores = score(&QueueScorer, &request("r"), &endpoints);
        let (min, max) = (waiting.iter().min().unwrap(), waiting.iter().max().unwrap());
        for (s, w) in scores.iter().zip(&waiting) {
            if w == min {
                prop_assert_eq!(s.value, 1.0);
            } else if w == max {
                prop_assert_eq!(s.value, 0.0);
            }
        }
        // Fewer waiting never scores lower.
        for (a, sa) in waiting.iter().zip(&scores) {
            for (b, sb) in waiting.iter().zip(&scores) {
                if a < b {
                    prop_assert!(sa.value >= sb.value);
                }
            }
        }
    }
}

#[test]
fn kv_scorer_is_one_minus_utilization_and_clamps_garbage() {
    let endpoints: Vec<Arc<Endpoint>> = [0.25, -3.0, 7.0, f64::NAN]
        .iter()
        .enumerate()
        .map(|(i, &kv)| endpoint(i as u32, fresh(0, 0, kv)))
        .collect();
    let values: Vec<f64> = score(&KvCacheUtilizationScorer, &request("r"), &endpoints)
        .iter()
        .map(|s| s.value)
        .collect();
    assert_eq!(values, vec![0.75, 1.0, 0.0, 0.0]);
}

#[test]
fn running_scorer_min_max_and_all_equal() {
    let endpoints: Vec<Arc<Endpoint>> = [2, 6, 4]
        .iter()
        .enumerate()
        .map(|(i, &r)| endpoint(i as u32, fresh(0, r, 0.0)))
        .collect();
    let values: Vec<f64> = score(&RunningRequestsScorer, &request("r"), &endpoints)
        .iter()
        .map(|s| s.value)
        .collect();
    assert_eq!(values, vec![1.0, 0.0, 0.5]);

    let equal: Vec<Arc<Endpoint>> = (0..3).map(|i| endpoint(i, fresh(0, 5, 0.0))).collect();
    assert!(
        score(&RunningRequestsScorer, &request("r"), &equal)
            .iter()
            .all(|s| s.value == 1.0 && !s.neutral)
    );
}

#[test]
fn active_request_scorer_reads_live_in_flight_counts() {
    // Metrics never scraped: the in-flight count is the scheduler's own, so still judged.
    let endpoints: Vec<Arc<Endpoint>> = (0..3)
        .map(|i| endpoint(i, EndpointMetrics::default()))
        .collect();
    let _g0 = [endpoints[0].start_request(1), endpoints[0].start_request(1)];
    let _g2 = endpoints[2].start_request(1);
    let scores = score(&ActiveRequestScorer::default(), &request("r"), &endpoints);
    assert_eq!(
        scores,
        vec![Score::new(0.0), Score::new(1.0), Score::new(0.5)]
    );
}

#[test]
fn stale_candidates_do_not_shift_the_normalization_of_fresh_ones() {
    let endpoints = vec![
        endpoint(0, fresh(3, 0, 0.0)),
        endpoint_scraped_at(1, fresh(1_000, 0, 0.0), None),
        endpoint(2, fresh(5, 0, 0.0)),
    ];
    let scores = score(&QueueScorer, &request("r"), &endpoints);
    assert_eq!(
        scores,
        vec![Score::new(1.0), Score::NEUTRAL, Score::new(0.0)]
    );
}
