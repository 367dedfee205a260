//! Invariants of the detector and the configurator, checked on generated inputs.

mod common;

use proptest::prelude::*;
use shepherd_adaptive::config::{AdaptiveConfig, Combine};
use shepherd_adaptive::detector::detect;
use shepherd_adaptive::mode::{AdaptiveState, ModeEntry};
use shepherd_adaptive::sample::EndpointSample;
use shepherd_adaptive::{Mode, ScorerLayout, Tuner};
use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::plugin::Category;

use common::{builtin_layout, category_sum, reading as reading_with_signal};

fn any_sample() -> impl Strategy<Value = EndpointSample> {
    let kv = prop_oneof![
        0.0f64..=1.0,
        Just(f64::NAN),
        Just(-3.0),
        Just(7.5),
        Just(f64::INFINITY)
    ];
    (
        0u32..100_000,
        0u32..100_000,
        0u64..1_000_000,
        kv,
        any::<bool>(),
    )
        .prop_map(|(running, waiting, in_flight, kv, stale)| {
            EndpointSample::new("10.0.0.1:8000", running, waiting, in_flight, kv, stale)
        })
}

fn any_config() -> impl Strategy<Value = AdaptiveConfig> {
    (
        prop_oneof![Just(Combine::Max), Just(Combine::WeightedMean)],
        0.0f64..=1.0,
        0.01f64..=1.0,
        0.0f64..=0.99,
        0.001f64..=0.2,
        (0.05f64..0.95, 0.05f64..0.95),
        0u64..6,
        0.0f64..5.0,
    )
        .prop_map(
            |(combine, load_weight, kv_weight, alpha, eps, (a, b), dwell, idle)| {
                let mut c = AdaptiveConfig::default();
                c.signal.combine = combine;
                c.signal.load_weight = load_weight;
                c.signal.kv_weight = kv_weight;
                c.smoothing.alpha = alpha;
                c.smoothing.snap_epsilon = eps;
                let (lo, hi) = if a < b { (a, b) } else { (b, a + 0.01) };
                c.hysteresis.exit = lo;
                c.hysteresis.enter = hi.min(0.99);
                c.hysteresis.min_dwell_ticks = dwell;
                c.idle_load_per_endpoint = idle;
                c
            },
        )
}

fn any_layout() -> impl Strategy<Value = ScorerLayout> {
    let category = prop_oneof![
        Just(Category::Affinity),
        Just(Category::Distribution),
        Just(Category::Balance)
    ];
    prop::collection::vec((category, 0.0f64..100.0), 1..8).prop_map(|scorers| {
        let (categories, weights) = scorers.into_iter().unzip();
        ScorerLayout::new(categories, weights)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, rng_seed: proptest::test_runner::RngSeed::Fixed(0x5EED), ..ProptestConfig::default() })]

    #[test]
    fn signal_and_ncvs_stay_in_unit_interval(
        samples in prop::collection::vec(any_sample(), 0..40),
        config in any_config(),
    ) {
        let reading = detect(&samples, &config);
        prop_assert!((0.0..=1.0).contains(&reading.ncv_load));
        prop_assert!((0.0..=1.0).contains(&reading.ncv_kv));
        match reading.signal {
            Some(s) => prop_assert!((0.0..=1.0).contains(&s), "signal {s}"),
            None => prop_assert!(!samples.is_empty() && samples.iter().all(|s| s.stale)),
        }
    }

    #[test]
    fn weights_are_finite_non_negative_and_sum_to_category_budgets(
        layout in any_layout(),
        config in any_config(),
        ticks in prop::collection::vec(prop::collection::vec(any_sample(), 0..10), 1..30),
    ) {
        let tuner = Tuner::new(config, layout.clone()).unwrap();
        let mut state = tuner.initial_state();
        let budget = layout.budget();
        let tolerance = 1e-9 * budget.max(1.0);
        for (t, samples) in ticks.iter().enumerate() {
            let out = tuner.step(&state, samples, Timestamp::from_millis(200 * t as u64));
            prop_assert_eq!(out.weights.len(), layout.configured().len());
            for w in &out.weights {
                prop_assert!(w.is_finite() && *w >= 0.0, "weight {w}");
            }
            let cats = layout.categories();
            let share = out.state.distribution_share;
            prop_assert!((0.0..=1.0).contains(&share));
            let balance = category_sum(cats, &out.weights, Category::Balance);
            prop_assert!((balance - layout.configured_total(Category::Balance)).abs() <= tolerance);
            if layout.can_trade() {
                let d = category_sum(cats, &out.weights, Category::Distribution);
                let a = category_sum(cats, &out.weights, Category::Affinity);
                prop_assert!((d - share * budget).abs() <= tolerance, "distribution {d} vs {}", share * budget);
                prop_assert!((a - (1.0 - share) * budget).abs() <= tolerance);
            } else {
                prop_assert_eq!(&out.weights, &layout.configured().to_vec());
            }
            state = out.state;
        }
    }

    #[test]
    fn share_is_monotonic_in_smoothed_signal_within_a_mode(
        config in any_config(),
        steepness in 0.5f64..50.0,
        midpoint in 0.0f64..=1.0,
        q in 0.01f64..100.0,
        nu in 0.05f64..20.0,
        mut rs in prop::collection::vec(-0.1f64..1.1, 2..40),
    ) {
        let mut config = config;
        config.burst.steepness = steepness;
        config.burst.midpoint = midpoint;
        config.burst.q = q;
        config.burst.nu = nu;
        let tuner = Tuner::new(config, builtin_layout()).unwrap();
        rs.sort_by(f64::total_cmp);
        for mode in [Mode::Steady, Mode::Burst] {
            let shares: Vec<f64> = rs.iter().map(|&r| tuner.share(mode, r)).collect();
            for pair in shares.windows(2) {
                prop_assert!(pair[0] <= pair[1], "{mode}: {} then {}", pair[0], pair[1]);
            }
        }
    }

    #[test]
    fn signal_inside_dead_band_never_changes_mode(
        config in any_config(),
        start_in_burst in any::<bool>(),
        start in 0.0f64..1.0,
        fractions in prop::collection::vec(0.0f64..1.0, 1..100),
    ) {
        let tuner = Tuner::new(config, builtin_layout()).unwrap();
        let h = tuner.config().hysteresis;
        let inside = |f: f64| {
            let s = h.exit + f * (h.enter - h.exit);
            s.clamp(h.exit + 1e-9, h.enter - 1e-9)
        };
        let mut state = tuner.initial_state();
        if start_in_burst {
            state.mode = Mode::Burst;
            state.mode_entered = Some(ModeEntry { tick: 0, at_nanos: 0 });
            state.smoothed = inside(start);
        }
        let mode = state.mode;
        for (t, f) in fractions.iter().enumerate() {
            let out = tuner.advance(&state, reading_with_signal(inside(*f)), Vec::new(), Timestamp::from_millis(t as u64));
            prop_assert_eq!(out.state.mode, mode);
            state = out.state;
        }
    }

    #[test]
    fn step_from_balanced_to_hot_settles_within_bound(
        config in any_config(),
        n in 2usize..12,
        base in 2u32..50,
        jitter in prop::collection::vec(0u32..3, 12),
        hot_extra in 0u32..500,
        dwell_ms in 0u64..2000,
    ) {
        let mut config = config;
        config.hysteresis.min_dwell_ms = dwell_ms;
        config.idle_load_per_endpoint = 1.0;
        let bound = config.settle_bound_ticks();
        let tuner = Tuner::new(config, builtin_layout()).unwrap();
        let balanced: Vec<EndpointSample> = (0..n)
            .map(|i| EndpointSample::new(format!("e{i}"), base + jitter[i], 0, 0, 0.5, false))
            .collect();
        let mut hot = balanced.clone();
        hot[0] = EndpointSample::new("e0", base + hot_extra, 20, 0, 0.95, false);

        let tick_ns = tuner.config().tick_interval().as_nanos() as u64;
        let mut state = tuner.initial_state();
        let mut t = 0u64;
        for _ in 0..bound {
            state = tuner.step(&state, &balanced, Timestamp::from_nanos(t * tick_ns)).state;
            t += 1;
        }
        let mut outputs = Vec::new();
        for _ in 0..bound + 20 {
            let out = tuner.step(&state, &hot, Timestamp::from_nanos(t * tick_ns));
            outputs.push((out.state.mode, out.weights.clone()));
            state = out.state;
            t += 1;
        }
        let settled = &outputs[(bound - 1) as usize];
        for (i, later) in outputs.iter().enumerate().skip(bound as usize) {
            prop_assert_eq!(later, settled, "changed at hot tick {} (bound {})", i, bound);
        }
    }

    #[test]
    fn identical_inputs_give_identical_outputs(
        layout in any_layout(),
        config in any_config(),
        ticks in prop::collection::vec(prop::collection::vec(any_sample(), 0..8), 1..25),
    ) {
        let tuner = Tuner::new(config, layout).unwrap();
        let run = || {
            let mut state = tuner.initial_state();
            let mut records = Vec::new();
            for (t, samples) in ticks.iter().enumerate() {
                let out = tuner.step(&state, samples, Timestamp::from_millis(50 * t as u64));
                records.push(serde_json::to_string(&out.record).unwrap());
                state = out.state;
            }
            (records, serde_json::to_string(&state).unwrap())
        };
        prop_assert_eq!(run(), run());
    }
}

#[test]
fn a_burst_state_reached_through_the_band_is_kept() {
    // Enter burst with a hot signal, then let the signal sit just above exit: burst holds.
    let tuner = Tuner::new(AdaptiveConfig::default(), builtin_layout()).unwrap();
    let mut state: AdaptiveState = tuner.initial_state();
    for t in 0..20 {
        state = tuner
            .advance(
                &state,
                reading_with_signal(0.9),
                Vec::new(),
                Timestamp::from_millis(t),
            )
            .state;
    }
    assert_eq!(state.mode, Mode::Burst);
    for t in 20..120 {
        let s = if t % 2 == 0 { 0.26 } else { 0.39 };
        state = tuner
            .advance(
                &state,
                reading_with_signal(s),
                Vec::new(),
                Timestamp::from_millis(t),
            )
            .state;
        assert_eq!(state.mode, Mode::Burst);
    }
}
