//! Helpers shared by the integration tests: tiny scorers (only their category matters) and
//! sample builders.
#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;

use shepherd_adaptive::sample::EndpointSample;
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{Category, CycleState, Score, Scorer};
use shepherd_scheduler_core::profile::Profile;

/// A scorer of a given category that scores everything neutral.
pub struct CategoryScorer(pub Category);

impl Scorer for CategoryScorer {
    fn category(&self) -> Category {
        self.0
    }
    fn score(&self, _: &mut CycleState<'_>, _: &[&Arc<Endpoint>], out: &mut [Score]) {
        out.fill(Score::NEUTRAL);
    }
}

/// The built-in profile's shape: prefix 3 (Affinity), queue 2 and kv 2 (Distribution).
pub fn builtin_like_profile() -> Arc<Profile> {
    Arc::new(
        Profile::builder("default")
            .scorer("prefix", Arc::new(CategoryScorer(Category::Affinity)), 3.0)
            .scorer(
                "queue",
                Arc::new(CategoryScorer(Category::Distribution)),
                2.0,
            )
            .scorer("kv", Arc::new(CategoryScorer(Category::Distribution)), 2.0)
            .build(),
    )
}

/// Fresh samples with the given running counts and a common KV utilization.
pub fn samples(loads: &[u32], kv: f64) -> Vec<EndpointSample> {
    loads
        .iter()
        .enumerate()
        .map(|(i, &l)| EndpointSample::new(format!("10.0.0.{i}:8000"), l, 0, 0, kv, false))
        .collect()
}

/// Sum of the weights of `category`.
pub fn category_sum(categories: &[Category], weights: &[f64], category: Category) -> f64 {
    categories
        .iter()
        .zip(weights)
        .filter(|(c, _)| **c == category)
        .map(|(_, w)| *w)
        .sum()
}

/// The built-in profile's layout: prefix 3 (Affinity), queue 2 and kv 2 (Distribution).
pub fn builtin_layout() -> shepherd_adaptive::layout::ScorerLayout {
    shepherd_adaptive::layout::ScorerLayout::new(
        vec![
            Category::Affinity,
            Category::Distribution,
            Category::Distribution,
        ],
        vec![3.0, 2.0, 2.0],
    )
}

/// A reading of four fresh, busy endpoints whose load nCV (and so signal) is `signal`.
pub fn reading(signal: f64) -> shepherd_adaptive::detector::Reading {
    shepherd_adaptive::detector::Reading {
        endpoints: 4,
        fresh: 4,
        total_load: 40.0,
        requests: 20.0,
        idle: false,
        ncv_load: signal,
        ncv_kv: 0.0,
        signal: Some(signal),
    }
}
