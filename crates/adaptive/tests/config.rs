//! The `adaptive:` section: parsing, defaults and validation errors.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use shepherd_adaptive::config::{AdaptiveConfig, Combine, ModeCurve, ShareBound};
use shepherd_adaptive::{AdaptiveController, AdaptiveError};
use shepherd_scheduler_core::config::EndpointPickerConfig;

mod common;

fn parse(yaml: &str) -> Result<AdaptiveConfig, AdaptiveError> {
    let picker = EndpointPickerConfig::from_yaml(yaml).expect("valid picker YAML");
    AdaptiveConfig::from_picker_config(&picker)
}

#[test]
fn absent_or_empty_section_gives_defaults() {
    assert_eq!(parse("plugins: []\n").unwrap(), AdaptiveConfig::default());
    assert_eq!(parse("adaptive:\n").unwrap(), AdaptiveConfig::default());
    assert_eq!(parse("adaptive: {}\n").unwrap(), AdaptiveConfig::default());
}

#[test]
fn defaults_are_valid_and_documented_values() {
    let c = AdaptiveConfig::default();
    c.validate().unwrap();
    assert!(c.enabled);
    assert_eq!((c.tick_ms, c.history_capacity), (200, 256));
    assert_eq!(c.signal.combine, Combine::Max);
    assert_eq!((c.smoothing.alpha, c.smoothing.snap_epsilon), (0.7, 0.01));
    assert_eq!((c.hysteresis.enter, c.hysteresis.exit), (0.4, 0.25));
    assert_eq!(c.hysteresis.min_dwell_ticks, 3);
    assert_eq!(c.steady.min_share, ShareBound::Configured);
    assert_eq!(c.burst.max_share, ShareBound::Fixed(0.9));
    assert_eq!(c.settle_bound_ticks(), 16);
}

#[test]
fn every_parameter_is_settable() {
    let c = parse(
        r#"
adaptive:
  enabled: false
  tickMs: 100
  idleLoadPerEndpoint: 2.5
  historyCapacity: 32
  signal: { combine: weightedMean, loadWeight: 0.75, kvWeight: 0.25 }
  smoothing: { alpha: 0.5, snapEpsilon: 0.02 }
  hysteresis: { enter: 0.6, exit: 0.3, minDwellTicks: 5, minDwellMs: 1000 }
  steady: { minShare: 0.4, maxShare: configured, midpoint: 0.2, steepness: 4, q: 2, nu: 0.5 }
  burst: { minShare: configured, maxShare: 1, midpoint: 0.7, steepness: 20, q: 0.5, nu: 3 }
"#,
    )
    .unwrap();
    assert!(!c.enabled);
    assert_eq!((c.tick_ms, c.history_capacity), (100, 32));
    assert_eq!(c.idle_load_per_endpoint, 2.5);
    assert_eq!(c.signal.combine, Combine::WeightedMean);
    assert_eq!((c.signal.load_weight, c.signal.kv_weight), (0.75, 0.25));
    assert_eq!((c.smoothing.alpha, c.smoothing.snap_epsilon), (0.5, 0.02));
    assert_eq!(c.hysteresis.min_dwell_ms, 1000);
    assert_eq!(
        c.steady,
        ModeCurve {
            min_share: ShareBound::Fixed(0.4),
            max_share: ShareBound::Configured,
            midpoint: 0.2,
            steepness: 4.0,
            q: 2.0,
            nu: 0.5
        }
    );
    assert_eq!(c.burst.min_share, ShareBound::Configured);
    assert_eq!(c.burst.max_share, ShareBound::Fixed(1.0));
    // m = 6 (0.5⁶ < 0.02 ≤ 0.5⁵); dwell max(5, 1000 ms / 100 ms) = 10.
    assert_eq!(c.settle_bound_ticks(), 16);
}

#[test]
fn partial_mode_section_keeps_that_modes_defaults() {
    let c =
        parse("adaptive:\n  burst:\n    maxShare: 0.95\n  steady:\n    steepness: 3\n").unwrap();
    let burst = ModeCurve {
        max_share: ShareBound::Fixed(0.95),
        ..ModeCurve::burst_default()
    };
    let steady = ModeCurve {
        steepness: 3.0,
        ..ModeCurve::steady_default()
    };
    assert_eq!((c.burst, c.steady), (burst, steady));
}

#[test]
fn round_trips_through_json() {
    let c = parse("adaptive:\n  steady:\n    maxShare: 0.8\n").unwrap();
    let value = serde_json::to_value(&c).unwrap();
    assert_eq!(value["steady"]["minShare"], "configured");
    assert_eq!(AdaptiveConfig::from_value(&value).unwrap(), c);
}

fn error_of(yaml: &str) -> String {
    parse(yaml).unwrap_err().to_string()
}

#[test]
fn errors_name_the_field() {
    let cases = [
        ("adaptive:\n  bogus: 1\n", "bogus"),
        ("adaptive:\n  smoothing:\n    beta: 1\n", "beta"),
        ("adaptive:\n  burst:\n    slope: 1\n", "slope"),
        (
            "adaptive:\n  smoothing:\n    alpha: 1.0\n",
            "smoothing.alpha",
        ),
        (
            "adaptive:\n  smoothing:\n    snapEpsilon: 0\n",
            "smoothing.snapEpsilon",
        ),
        (
            "adaptive:\n  hysteresis:\n    exit: 0.5\n",
            "hysteresis.exit",
        ),
        (
            "adaptive:\n  hysteresis:\n    enter: 1.5\n",
            "hysteresis.enter",
        ),
        ("adaptive:\n  tickMs: 0\n", "tickMs"),
        // One staleness setting: `scheduler.stalenessMs`; a second one here is an error.
        ("adaptive:\n  stalenessMs: 500\n", "stalenessMs"),
        ("adaptive:\n  historyCapacity: 0\n", "historyCapacity"),
        (
            "adaptive:\n  idleLoadPerEndpoint: -1\n",
            "idleLoadPerEndpoint",
        ),
        (
            "adaptive:\n  signal:\n    loadWeight: 2\n",
            "signal.loadWeight",
        ),
        (
            "adaptive:\n  signal:\n    loadWeight: 0\n    kvWeight: 0\n",
            "signal",
        ),
        ("adaptive:\n  signal:\n    combine: median\n", "median"),
        (
            "adaptive:\n  steady:\n    maxShare: 1.5\n",
            "steady.maxShare",
        ),
        (
            "adaptive:\n  burst:\n    minShare: 0.95\n",
            "burst.minShare",
        ),
        ("adaptive:\n  burst:\n    minShare: most\n", "configured"),
        ("adaptive:\n  burst:\n    steepness: 0\n", "burst.steepness"),
        ("adaptive:\n  steady:\n    nu: -2\n", "steady.nu"),
        ("adaptive:\n  steady:\n    q: 0\n", "steady.q"),
        ("adaptive:\n  burst:\n    midpoint: 3\n", "burst.midpoint"),
        ("adaptive:\n  tickMs: fast\n", "adaptive"),
    ];
    for (yaml, needle) in cases {
        let message = error_of(yaml);
        assert!(message.contains(needle), "{yaml:?} gave {message:?}");
    }
}

#[test]
fn controller_rejects_an_invalid_config() {
    let mut config = AdaptiveConfig::default();
    config.hysteresis.exit = 0.9;
    let err = AdaptiveController::new(common::builtin_like_profile(), config).unwrap_err();
    assert!(matches!(
        err,
        AdaptiveError::Inconsistent {
            field: "hysteresis.exit",
            ..
        }
    ));
}
