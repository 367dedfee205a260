//! Focused checks of the detector, the curve, the layout and the dwell rule.

mod common;

use shepherd_adaptive::config::{AdaptiveConfig, Combine, ShareBound};
use shepherd_adaptive::detector::{combine, detect, ncv};
use shepherd_adaptive::richards::RichardsCurve;
use shepherd_adaptive::{Mode, ScorerLayout, Tuner};
use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::plugin::Category::{Affinity, Balance, Distribution};

use common::{builtin_layout as builtin, reading, samples};

#[test]
fn ncv_matches_hand_computation() {
    // mean 4, population sd 2 → CV 0.5; N = 4 → nCV = 0.5 / √3.
    let v = [2.0, 2.0, 6.0, 6.0];
    assert!((ncv(&v) - 0.5 / 3f64.sqrt()).abs() < 1e-12);
    assert_eq!(ncv(&[]), 0.0);
    assert_eq!(ncv(&[0.0, 0.0, 0.0]), 0.0);
}

#[test]
fn combinations_weight_the_two_imbalances() {
    let mut c = AdaptiveConfig::default();
    assert_eq!(combine(0.6, 0.2, &c), 0.6);
    c.signal.load_weight = 0.5;
    assert_eq!(combine(0.6, 0.2, &c), 0.3);
    c.signal.combine = Combine::WeightedMean;
    c.signal.load_weight = 1.0;
    c.signal.kv_weight = 1.0;
    assert!((combine(0.6, 0.2, &c) - 0.4).abs() < 1e-12);
}

#[test]
fn kv_imbalance_alone_raises_the_signal_under_max() {
    let mut s = samples(&[5, 5, 5, 5], 0.2);
    s[0].kv_utilization = 1.0;
    let r = detect(&s, &AdaptiveConfig::default());
    assert_eq!(r.ncv_load, 0.0);
    assert!(r.ncv_kv > 0.5);
    assert_eq!(r.signal, Some(r.ncv_kv));
}

#[test]
fn richards_asymmetry_moves_the_curve_but_keeps_the_ends() {
    let plain = RichardsCurve::new(0.5, 10.0, 1.0, 1.0);
    let skewed = RichardsCurve::new(0.5, 10.0, 1.0, 0.2);
    assert_eq!((skewed.unit(0.0), skewed.unit(1.0)), (0.0, 1.0));
    assert!(skewed.unit(0.5) < plain.unit(0.5));
}

#[test]
fn layouts_without_both_categories_never_change() {
    for layout in [
        ScorerLayout::new(vec![Affinity, Balance], vec![3.0, 1.0]),
        ScorerLayout::new(vec![Distribution, Distribution], vec![1.0, 2.0]),
        ScorerLayout::new(vec![Affinity, Distribution], vec![3.0, 0.0]),
    ] {
        let tuner = Tuner::new(AdaptiveConfig::default(), layout.clone()).unwrap();
        let mut state = tuner.initial_state();
        for t in 0..20 {
            let out = tuner.advance(&state, reading(1.0), Vec::new(), Timestamp::from_millis(t));
            assert_eq!(out.weights, layout.configured().to_vec());
            assert!(
                out.record.reason.contains("nothing") || out.record.reason.contains("no Affinity")
            );
            state = out.state;
        }
        assert_eq!(state.mode, Mode::Steady);
    }
}

#[test]
fn a_range_whose_min_resolves_above_its_max_collapses_to_min() {
    let mut config = AdaptiveConfig::default();
    config.steady.max_share = ShareBound::Fixed(0.5); // below the configured 4/7
    let tuner = Tuner::new(config, builtin()).unwrap();
    let curve = tuner.curve(Mode::Steady);
    assert_eq!(curve.min, 4.0 / 7.0);
    assert_eq!(curve.max, curve.min);
    assert_eq!(tuner.share(Mode::Steady, 0.3), 4.0 / 7.0);
}

#[test]
fn minimum_dwell_in_ticks_delays_leaving_burst() {
    let mut config = AdaptiveConfig::default();
    config.smoothing.alpha = 0.0;
    config.hysteresis.min_dwell_ticks = 5;
    let tuner = Tuner::new(config, builtin()).unwrap();
    let mut state = tuner.initial_state();
    // The initial mode has no dwell: burst is entered on the first hot tick.
    state = tuner
        .advance(&state, reading(0.9), Vec::new(), Timestamp::ZERO)
        .state;
    assert_eq!(state.mode, Mode::Burst);
    let mut modes = Vec::new();
    for t in 1..8 {
        let out = tuner.advance(&state, reading(0.0), Vec::new(), Timestamp::from_millis(t));
        if out.state.mode == Mode::Burst {
            assert!(
                out.record.reason.contains("would switch to steady"),
                "{}",
                out.record.reason
            );
        }
        modes.push(out.state.mode);
        state = out.state;
    }
    use Mode::{Burst as B, Steady as S};
    assert_eq!(modes, vec![B, B, B, B, S, S, S]);
}

#[test]
fn minimum_dwell_in_time_delays_leaving_burst() {
    let mut config = AdaptiveConfig::default();
    config.smoothing.alpha = 0.0;
    config.hysteresis.min_dwell_ticks = 0;
    config.hysteresis.min_dwell_ms = 1_000;
    let tuner = Tuner::new(config, builtin()).unwrap();
    let mut state = tuner.initial_state();
    state = tuner
        .advance(&state, reading(0.9), Vec::new(), Timestamp::ZERO)
        .state;
    state = tuner
        .advance(
            &state,
            reading(0.0),
            Vec::new(),
            Timestamp::from_millis(999),
        )
        .state;
    assert_eq!(state.mode, Mode::Burst);
    state = tuner
        .advance(
            &state,
            reading(0.0),
            Vec::new(),
            Timestamp::from_millis(1_000),
        )
        .state;
    assert_eq!(state.mode, Mode::Steady);
}

#[test]
fn burst_gives_distribution_more_than_steady_at_the_same_signal() {
    let tuner = Tuner::new(AdaptiveConfig::default(), builtin()).unwrap();
    for i in 0..=100 {
        let r = f64::from(i) / 100.0;
        assert!(
            tuner.share(Mode::Burst, r) >= tuner.share(Mode::Steady, r),
            "r = {r}"
        );
    }
    assert_eq!(tuner.share(Mode::Steady, 0.0), 4.0 / 7.0);
    assert_eq!(tuner.share(Mode::Burst, 1.0), 0.9);
}

#[test]
fn chance_correction_silences_a_handful_of_requests_but_not_a_hot_node() {
    use shepherd_adaptive::sample::EndpointSample;
    let pool = |loads: &[u32]| -> Vec<EndpointSample> {
        loads
            .iter()
            .enumerate()
            .map(|(i, &l)| EndpointSample::new(format!("10.0.0.{i}:8000"), l, 0, 0, 0.1, false))
            .collect()
    };
    let on = AdaptiveConfig::default();
    let mut off = AdaptiveConfig::default();
    off.signal.chance_correction = false;
    // Eight requests scattered 2/0/1/1/2/0/1/1: chance-level unevenness.
    let few = pool(&[2, 0, 1, 1, 2, 0, 1, 1]);
    assert!(detect(&few, &off).ncv_load > 0.2);
    assert_eq!(detect(&few, &on).ncv_load, 0.0);
    // 120 requests on one of eight endpoints: as hot as it gets, with or without.
    let hot = pool(&[120, 1, 1, 1, 1, 1, 1, 1]);
    assert!(detect(&hot, &on).ncv_load > 0.9);
    assert!((detect(&hot, &on).ncv_load - detect(&hot, &off).ncv_load).abs() < 0.01);
}

#[test]
fn kv_imbalance_counts_only_under_memory_pressure() {
    use shepherd_adaptive::sample::EndpointSample;
    let pool = |hot_kv: f64| -> Vec<EndpointSample> {
        (0..4)
            .map(|i| {
                let kv = if i == 0 { hot_kv } else { hot_kv / 10.0 };
                EndpointSample::new(format!("10.0.0.{i}:8000"), 5, 0, 0, kv, false)
            })
            .collect()
    };
    let c = AdaptiveConfig::default();
    let low = detect(&pool(0.05), &c).ncv_kv;
    let high = detect(&pool(0.8), &c).ncv_kv;
    assert!(low < 0.1 * high + 1e-12, "low {low} high {high}");
    assert!((high - ncv(&[0.8, 0.08, 0.08, 0.08])).abs() < 1e-12);
    let mut bad = AdaptiveConfig::default();
    bad.signal.kv_pressure = 0.0;
    assert!(
        bad.validate()
            .unwrap_err()
            .to_string()
            .contains("signal.kvPressure")
    );
}
