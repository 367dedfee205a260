//! The adaptive loop at the edges of the number range: weights anywhere in the finite
//! non-negative floats (up to `f64::MAX`), metrics anywhere in their types' ranges (NaN and
//! infinities included). Nothing may panic, and every published weight must be finite.

mod common;

use std::sync::Arc;

use proptest::prelude::*;
use shepherd_adaptive::detector::detect;
use shepherd_adaptive::sample::EndpointSample;
use shepherd_adaptive::{AdaptiveConfig, AdaptiveController, ScorerLayout, Tuner};
use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::plugin::Category;
use shepherd_scheduler_core::profile::Profile;

use common::{CategoryScorer, category_sum, samples};

/// One endpoint carrying all the load: drives the loop into burst mode.
fn hot_pool() -> Vec<EndpointSample> {
    let mut pool = samples(&[60, 1, 1, 1], 0.9);
    pool[0].kv_utilization = 1.0;
    pool
}

fn assert_usable(weights: &[f64]) {
    for w in weights {
        assert!(w.is_finite() && *w >= 0.0, "weight {w} in {weights:?}");
    }
    let total: f64 = weights.iter().sum();
    assert!(total.is_finite(), "weights {weights:?} sum to {total}");
}

#[test]
fn weights_whose_sum_overflows_do_not_panic_the_tuner() {
    // Two Distribution scorers at 1e308: their sum is +inf, the configured share was NaN and
    // the share computation's clamp panicked.
    let layout = ScorerLayout::new(
        vec![
            Category::Affinity,
            Category::Distribution,
            Category::Distribution,
        ],
        vec![3.0, 1e308, 1e308],
    );
    let share = layout
        .configured_share()
        .expect("both categories have weight");
    assert!((share - 1.0).abs() < 1e-12, "configured share {share}");
    let tuner = Tuner::new(AdaptiveConfig::default(), layout).unwrap();
    let mut state = tuner.initial_state();
    assert_usable(&state.weights);
    for t in 0..40 {
        let out = tuner.step(&state, &hot_pool(), Timestamp::from_millis(200 * t));
        assert_usable(&out.weights);
        assert!((0.0..=1.0).contains(&out.state.distribution_share));
        state = out.state;
    }
}

#[test]
fn huge_weights_keep_their_ratios_when_the_share_moves() {
    let layout = ScorerLayout::new(
        vec![
            Category::Affinity,
            Category::Distribution,
            Category::Distribution,
            Category::Balance,
        ],
        vec![f64::MAX, f64::MAX, f64::MAX / 2.0, f64::MAX],
    );
    let cats = layout.categories().to_vec();
    let configured = layout.configured().to_vec();
    assert_usable(&configured);
    for share in [0.0, 0.1, 0.5, 0.9, 1.0] {
        let w = layout.weights_for_share(share);
        assert_usable(&w);
        let d = category_sum(&cats, &w, Category::Distribution);
        let a = category_sum(&cats, &w, Category::Affinity);
        assert!((d / (a + d) - share).abs() < 1e-12, "share {share}: {w:?}");
        if share > 0.0 {
            assert!(
                (w[1] / w[2] - 2.0).abs() < 1e-12,
                "ratio inside Distribution: {w:?}"
            );
        }
        assert_eq!(w[3], configured[3], "Balance keeps its (scaled) weight");
    }
}

#[test]
fn the_controller_publishes_finite_weights_for_huge_configured_weights() {
    let profile = Arc::new(
        Profile::builder("huge")
            .scorer("prefix", Arc::new(CategoryScorer(Category::Affinity)), 1.0)
            .scorer(
                "queue",
                Arc::new(CategoryScorer(Category::Distribution)),
                1e308,
            )
            .scorer(
                "kv",
                Arc::new(CategoryScorer(Category::Distribution)),
                1e308,
            )
            .build(),
    );
    let controller =
        AdaptiveController::new(Arc::clone(&profile), AdaptiveConfig::default()).unwrap();
    for t in 0..40 {
        let record = controller.tick_with_samples(&hot_pool(), Timestamp::from_millis(200 * t));
        assert_usable(&record.weights);
        // What the request path sees is exactly what the tick decided: nothing was zeroed.
        let live = profile.weights().load();
        assert_eq!(live.as_slice(), record.weights.as_slice());
        assert!(
            live.get(1) > 0.0 && live.get(2) > 0.0,
            "{:?}",
            live.as_slice()
        );
    }
}

/// Any finite non-negative float, spread over the whole exponent range.
fn any_weight() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(f64::MAX),
        Just(f64::MIN_POSITIVE),
        Just(5e-324),
        Just(1e308),
        0.0f64..1e3,
        any::<u64>().prop_map(|bits| f64::from_bits(bits & (u64::MAX >> 1))),
    ]
    .prop_map(|w| if w.is_finite() { w } else { f64::MAX })
}

/// Any float at all, NaN and infinities included.
fn any_float() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(f64::MAX),
        Just(-0.0),
        0.0f64..=1.0,
        any::<u64>().prop_map(f64::from_bits),
    ]
}

/// A sample built the normal way from any metric values, or with its computed fields then
/// overwritten by any float (the fields are public).
fn any_sample() -> impl Strategy<Value = EndpointSample> {
    (
        any::<u32>(),
        any::<u32>(),
        any::<u64>(),
        any_float(),
        any::<bool>(),
        proptest::option::of(any_float()),
    )
        .prop_map(|(running, waiting, in_flight, kv, stale, raw_load)| {
            let mut sample = EndpointSample::new("e", running, waiting, in_flight, kv, stale);
            if let Some(load) = raw_load {
                sample.load = load;
                sample.kv_utilization = kv;
            }
            sample
        })
}

fn any_layout() -> impl Strategy<Value = ScorerLayout> {
    let category = prop_oneof![
        Just(Category::Affinity),
        Just(Category::Distribution),
        Just(Category::Balance)
    ];
    prop::collection::vec((category, any_weight()), 1..8).prop_map(|scorers| {
        let (categories, weights) = scorers.into_iter().unzip();
        ScorerLayout::new(categories, weights)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, rng_seed: proptest::test_runner::RngSeed::Fixed(0xF1A7), ..ProptestConfig::default() })]

    #[test]
    fn any_weights_and_metrics_give_finite_weights(
        layout in any_layout(),
        smoothed in any_float(),
        ticks in prop::collection::vec(prop::collection::vec(any_sample(), 0..6), 1..20),
    ) {
        let tuner = Tuner::new(AdaptiveConfig::default(), layout.clone()).unwrap();
        let mut state = tuner.initial_state();
        state.smoothed = smoothed;
        for w in &state.weights {
            prop_assert!(w.is_finite() && *w >= 0.0);
        }
        for (t, samples) in ticks.iter().enumerate() {
            let reading = detect(samples, tuner.config());
            prop_assert!((0.0..=1.0).contains(&reading.ncv_load), "{reading:?}");
            prop_assert!((0.0..=1.0).contains(&reading.ncv_kv), "{reading:?}");
            prop_assert!(reading.total_load.is_finite() && reading.requests.is_finite());
            let out = tuner.step(&state, samples, Timestamp::from_millis(200 * t as u64));
            prop_assert_eq!(out.weights.len(), layout.configured().len());
            let total: f64 = out.weights.iter().sum();
            prop_assert!(total.is_finite(), "{:?}", out.weights);
            for w in &out.weights {
                prop_assert!(w.is_finite() && *w >= 0.0, "weight {} in {:?}", w, out.weights);
            }
            let share = out.state.distribution_share;
            prop_assert!((0.0..=1.0).contains(&share), "share {share}");
            prop_assert!((0.0..=1.0).contains(&out.state.smoothed), "smoothed {}", out.state.smoothed);
            if layout.can_trade() {
                let cats = layout.categories();
                let d = category_sum(cats, &out.weights, Category::Distribution);
                let a = category_sum(cats, &out.weights, Category::Affinity);
                prop_assert!((d / (a + d) - share).abs() <= 1e-9, "d {d} a {a} share {share}");
            }
            state = out.state;
        }
    }
}
