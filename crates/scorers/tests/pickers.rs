//! Properties of the built-in pickers: they return distinct candidates, the best first, at
//! most `count`; ties are uniform; weighted-random frequencies follow the weights.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use shepherd_scheduler_core::plugin::Picker;
use shepherd_scheduler_core::rng::PickRng;
use shepherd_scorers::pickers::{
    MaxScorePicker, PickerParameters, RandomPicker, WeightedRandomPicker,
};

fn config() -> Config {
    Config {
        cases: 512,
        rng_seed: RngSeed::Fixed(0x91C4),
        failure_persistence: None,
        ..Config::default()
    }
}

fn pickers(max: Option<usize>) -> Vec<(&'static str, Box<dyn Picker>)> {
    let p = PickerParameters {
        max_num_of_endpoints: max,
    };
    vec![
        ("max-score", Box::new(MaxScorePicker::new(p))),
        ("random", Box::new(RandomPicker::new(p))),
        ("weighted-random", Box::new(WeightedRandomPicker::new(p))),
    ]
}

fn total() -> impl Strategy<Value = f64> {
    prop_oneof![
        0.0..10.0f64,
        Just(0.0),
        Just(1.0),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(-1.0),
        any::<f64>(),
    ]
}

/// Chi-square statistic of `counts` against a uniform expectation.
fn chi_square_uniform(counts: &[u64]) -> f64 {
    let n: u64 = counts.iter().sum();
    let expected = n as f64 / counts.len() as f64;
    counts
        .iter()
        .map(|&c| (c as f64 - expected).powi(2) / expected)
        .sum()
}

/// Chi-square critical value for 3 degrees of freedom at p = 0.001.
const CHI2_3DF_P001: f64 = 16.27;

proptest! {
    #![proptest_config(config())]

    #[test]
    fn pickers_return_distinct_candidates_at_most_count(
        totals in prop::collection::vec(total(), 0..40),
        count in 0usize..8,
        max in prop::option::of(1usize..5),
        seed in any::<u64>(),
    ) {
        for (name, picker) in pickers(max) {
            let picked = picker.pick(&totals, count, &mut PickRng::seed_from(seed));
            let limit = count.min(max.unwrap_or(usize::MAX)).min(totals.len());
            prop_assert_eq!(picked.len(), limit, "{}", name);
            let mut seen = vec![false; totals.len()];
            for &i in &picked {
                prop_assert!(i < totals.len(), "{name}: index {i} out of range");
                prop_assert!(!seen[i], "{name}: index {i} twice");
                seen[i] = true;
            }
        }
    }

    #[test]
    fn max_score_orders_by_descending_total(
        totals in prop::collection::vec(0.0..4.0f64, 1..40),
        count in 1usize..8,
        seed in any::<u64>(),
    ) {
        let picked = MaxScorePicker::default().pick(&totals, count, &mut PickRng::seed_from(seed));
        let best = totals.iter().cloned().fold(f64::MIN, f64::max);
        prop_assert_eq!(totals[picked[0]], best, "the primary has the highest total");
        for pair in picked.windows(2) {
            prop_assert!(totals[pair[0]] >= totals[pair[1]]);
        }
        // Nothing left out beats anything picked.
        let worst_picked = picked.iter().map(|&i| totals[i]).fold(f64::MAX, f64::min);
        for (i, &t) in totals.iter().enumerate() {
            if !picked.contains(&i) {
                prop_assert!(t <= worst_picked);
            }
        }
    }

    #[test]
    fn weighted_random_never_prefers_zero_over_positive(
        totals in prop::collection::vec(prop_oneof![Just(0.0), 0.1..5.0f64], 1..20),
        seed in any::<u64>(),
    ) {
        let picked = WeightedRandomPicker::default().pick(&totals, totals.len(), &mut PickRng::seed_from(seed));
        let positives = totals.iter().filter(|&&t| t > 0.0).count();
        for (rank, &i) in picked.iter().enumerate() {
            prop_assert_eq!(totals[i] > 0.0, rank < positives);
        }
    }
}

#[test]
fn max_score_ties_are_uniform() {
    // Four tied leaders among lower candidates.
    let totals = [0.1, 0.9, 0.5, 0.9, 0.9, 0.2, 0.9];
    let leaders = [1, 3, 4, 6];
    let mut rng = PickRng::seed_from(2024);
    let mut counts = [0u64; 4];
    for _ in 0..40_000 {
        let picked = MaxScorePicker::default().pick(&totals, 1, &mut rng);
        let slot = leaders.iter().position(|&l| l == picked[0]).unwrap();
        counts[slot] += 1;
    }
    let chi2 = chi_square_uniform(&counts);
    assert!(chi2 < CHI2_3DF_P001, "counts {counts:?}, chi² {chi2}");
}

#[test]
fn max_score_fallbacks_among_ties_are_uniform_too() {
    // The second place among 4 ties is also uniform over the 3 remaining.
    let totals = [1.0; 4];
    let mut rng = PickRng::seed_from(77);
    let mut pairs = [[0u64; 4]; 4];
    for _ in 0..48_000 {
        let picked = MaxScorePicker::default().pick(&totals, 2, &mut rng);
        pairs[picked[0]][picked[1]] += 1;
    }
    let cells: Vec<u64> = (0..4)
        .flat_map(|a| (0..4).filter(move |&b| b != a).map(move |b| (a, b)))
        .map(|(a, b)| pairs[a][b])
        .collect();
    // 12 ordered pairs, 11 degrees of freedom: p = 0.001 critical value 31.26.
    let chi2 = chi_square_uniform(&cells);
    assert!(chi2 < 31.26, "pairs {pairs:?}, chi² {chi2}");
}

#[test]
fn random_picker_is_uniform() {
    let totals = [0.0, 5.0, 1.0, 2.0];
    let mut rng = PickRng::seed_from(9);
    let mut counts = [0u64; 4];
    for _ in 0..40_000 {
        counts[RandomPicker::default().pick(&totals, 1, &mut rng)[0]] += 1;
    }
    let chi2 = chi_square_uniform(&counts);
    assert!(chi2 < CHI2_3DF_P001, "counts {counts:?}, chi² {chi2}");
}

#[test]
fn weighted_random_frequencies_follow_weights() {
    let totals = [1.0, 2.0, 3.0, 4.0];
    let sum: f64 = totals.iter().sum();
    let mut rng = PickRng::seed_from(31337);
    let mut counts = [0u64; 4];
    let picks = 40_000u64;
    for _ in 0..picks {
        counts[WeightedRandomPicker::default().pick(&totals, 1, &mut rng)[0]] += 1;
    }
    let chi2: f64 = counts
        .iter()
        .zip(totals)
        .map(|(&c, w)| {
            let expected = picks as f64 * w / sum;
            (c as f64 - expected).powi(2) / expected
        })
        .sum();
    assert!(chi2 < CHI2_3DF_P001, "counts {counts:?}, chi² {chi2}");
}

#[test]
fn weighted_random_all_zero_is_uniform() {
    let totals = [0.0; 4];
    let mut rng = PickRng::seed_from(5);
    let mut counts = [0u64; 4];
    for _ in 0..40_000 {
        counts[WeightedRandomPicker::default().pick(&totals, 1, &mut rng)[0]] += 1;
    }
    let chi2 = chi_square_uniform(&counts);
    assert!(chi2 < CHI2_3DF_P001, "counts {counts:?}, chi² {chi2}");
}

#[test]
fn max_num_of_endpoints_caps_the_answer() {
    let capped = MaxScorePicker::new(PickerParameters {
        max_num_of_endpoints: Some(1),
    });
    assert_eq!(
        capped.pick(&[0.1, 0.2, 0.3], 3, &mut PickRng::seed_from(0)),
        vec![2]
    );
}

#[test]
fn same_seed_same_picks() {
    let totals = [1.0, 1.0, 0.5, 1.0, 0.2];
    for (name, picker) in pickers(None) {
        let a = picker.pick(&totals, 3, &mut PickRng::seed_from(11));
        let b = picker.pick(&totals, 3, &mut PickRng::seed_from(11));
        assert_eq!(a, b, "{name}");
    }
}
