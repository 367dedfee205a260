//! Usage-limit policies: upstream's parameters, the ceilings they give, and the queue holding
//! lower bands back under them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::config::EndpointPickerConfig;
use shepherd_scheduler_core::flow::{
    FlowControlConfig, FlowQueue, FlowSettings, HoldbackDomain, UsageLimitPolicy,
};

fn holdback(params: serde_json::Value) -> UsageLimitPolicy {
    UsageLimitPolicy::from_plugin("priority-holdback-policy", &params).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn rank_spreads_ceilings_in_equal_steps_whatever_the_values() {
    let p = holdback(json!({"minCeiling": 0.4, "maxCeiling": 0.9}));
    let levels = [100, 7, 0, -50];
    let got: Vec<f64> = levels.iter().map(|&l| p.ceiling(&levels, l)).collect();
    for (g, want) in got.iter().zip([0.9, 0.9 - 0.5 / 3.0, 0.9 - 1.0 / 3.0, 0.4]) {
        assert!(close(*g, want), "{got:?}");
    }
    // One active level: the highest ceiling.
    assert_eq!(p.ceiling(&[0], 0), 0.9);
}

#[test]
fn value_spreads_ceilings_in_proportion_to_the_priorities() {
    let p = holdback(json!({"domain": "value", "minCeiling": 0.2}));
    assert_eq!(
        p,
        UsageLimitPolicy::PriorityHoldback {
            domain: HoldbackDomain::Value,
            min_ceiling: 0.2,
            max_ceiling: 1.0
        }
    );
    let levels = [10, 8, 0];
    assert!(close(p.ceiling(&levels, 10), 1.0));
    assert!(close(p.ceiling(&levels, 8), 0.2 + 0.8 * 0.8));
    assert!(close(p.ceiling(&levels, 0), 0.2));
}

#[test]
fn the_static_policy_has_one_threshold() {
    let p = UsageLimitPolicy::from_plugin("static-usage-limit-policy", &json!({"threshold": 0.7}))
        .unwrap();
    assert!(p.is_uniform());
    assert_eq!(p.ceiling(&[5, 0, -1], -1), 0.7);
    assert_eq!(UsageLimitPolicy::default().ceiling(&[], 3), 1.0);
}

#[test]
fn bad_parameters_name_the_field() {
    let err = |t: &str, v: serde_json::Value| {
        UsageLimitPolicy::from_plugin(t, &v)
            .unwrap_err()
            .to_string()
    };
    assert!(err("priority-holdback-policy", json!({})).contains("minCeiling: is required"));
    assert!(err("priority-holdback-policy", json!({"minCeiling": 1.0})).contains("minCeiling"));
    assert!(
        err(
            "priority-holdback-policy",
            json!({"minCeiling": 0.5, "maxCeiling": 0.0})
        )
        .contains("maxCeiling")
    );
    assert!(
        err(
            "priority-holdback-policy",
            json!({"minCeiling": 0.5, "shape": "cubic"})
        )
        .contains("shape")
    );
    assert!(
        err(
            "priority-holdback-policy",
            json!({"minCeiling": 0.5, "domain": "x"})
        )
        .contains("domain")
    );
    assert!(
        err(
            "priority-holdback-policy",
            json!({"minCeiling": 0.5, "minceiling": 1})
        )
        .contains("minceiling")
    );
    assert!(err("static-usage-limit-policy", json!({"threshold": -1})).contains("threshold"));
    assert!(err("max-score-picker", serde_json::Value::Null).contains("not a usage-limit policy"));
}

#[test]
fn the_flow_control_section_refers_to_the_policy_by_name() {
    let config = EndpointPickerConfig::from_yaml(
        r#"
plugins:
- name: my-holdback
  type: priority-holdback-policy
  parameters: {shape: linear, domain: rank, minCeiling: 0.4, maxCeiling: 0.9}
flowControl:
  usageLimitPolicyPluginRef: my-holdback
"#,
    )
    .unwrap();
    let settings = FlowControlConfig::from_picker_config(&config)
        .unwrap()
        .unwrap();
    assert_eq!(
        settings.usage_limit,
        UsageLimitPolicy::PriorityHoldback {
            domain: HoldbackDomain::Rank,
            min_ceiling: 0.4,
            max_ceiling: 0.9
        }
    );
}

#[test]
fn a_held_back_band_blocks_the_bands_below_it_but_not_those_above() {
    let settings = FlowSettings {
        usage_limit: holdback(json!({"minCeiling": 0.5})),
        ..FlowSettings::default()
    };
    let mut q = FlowQueue::new(settings);
    let t = Timestamp::ZERO;
    q.enqueue("batch", -1, "", 1, t).unwrap();
    q.enqueue("chat", 1, "", 1, t).unwrap();
    // Levels 1 and -1: ceilings 1.0 and 0.5.
    assert_eq!(q.ceiling(1), 1.0);
    assert_eq!(q.ceiling(-1), 0.5);
    // At 0.7 the chat request goes, the batch one waits (level 1 stays active: seen lately).
    assert_eq!(q.dispatch_next_under(t, 0.7), Some("chat"));
    assert_eq!(q.dispatch_next_under(t, 0.7), None);
    assert_eq!(q.active_levels(None), vec![1, -1]);
    // Below its ceiling it goes too; at saturation nothing does.
    q.enqueue("chat-2", 1, "", 1, t).unwrap();
    assert_eq!(q.dispatch_next_under(t, 1.0), None);
    assert_eq!(q.dispatch_next_under(t, 0.9), Some("chat-2"));
    assert_eq!(q.dispatch_next_under(t, 0.4), Some("batch"));
    assert_eq!(q.dispatch_next_under(t, f64::NAN), None);
}

#[test]
fn a_level_stays_active_until_idle_for_ten_minutes() {
    let mut q: FlowQueue<()> = FlowQueue::new(FlowSettings {
        usage_limit: holdback(json!({"minCeiling": 0.5})),
        ..FlowSettings::default()
    });
    q.note_level(3, Timestamp::ZERO);
    assert_eq!(q.ceiling(-1), 0.5);
    // A new level noted 10 minutes later collects the idle one.
    q.note_level(0, Timestamp::from_millis(600_000));
    assert_eq!(q.active_levels(None), vec![0]);
    assert_eq!(q.ceiling(0), 1.0);
}

#[test]
fn configured_bands_count_as_active_levels() {
    let settings = FlowSettings {
        usage_limit: holdback(json!({"minCeiling": 0.4})),
        bands: vec![
            (2, Default::default()),
            (1, Default::default()),
            (0, Default::default()),
        ],
        ..FlowSettings::default()
    };
    let q: FlowQueue<()> = FlowQueue::new(settings);
    assert_eq!(q.active_levels(Some(-3)), vec![2, 1, 0, -3]);
    // Among 2, 1, 0: 1.0, 0.7, 0.4; a request of -3 makes four levels: 1.0, 0.8, 0.6, 0.4.
    assert!(close(q.ceiling(1), 0.7));
    assert!(close(q.ceiling(0), 0.4));
    assert!(close(q.ceiling(-3), 0.4));
}

/// Upstream's `soft-reflective-ceiling-policy` (llm-d router @ ebab68792,
/// `pkg/epp/framework/plugins/flowcontrol/usagelimits/softreflectiveceiling/`): the highest
/// band is never gated below saturation 1; a lower band past its reflective ceiling
/// dispatches on one call in `round(s / (1 - s))`.
#[test]
fn the_soft_reflective_policy_spreads_a_gated_bands_dispatches_over_calls() {
    let policy =
        UsageLimitPolicy::from_plugin("soft-reflective-ceiling-policy", &json!({})).unwrap();
    assert_eq!(policy, UsageLimitPolicy::SoftReflectiveCeiling);
    assert!(!policy.is_uniform());
    let error = UsageLimitPolicy::from_plugin("soft-reflective-ceiling-policy", &json!({"x": 1}))
        .unwrap_err()
        .to_string();
    assert!(error.contains("unknown field `x`"), "{error}");

    let mut q = FlowQueue::new(FlowSettings {
        usage_limit: policy,
        ..FlowSettings::default()
    });
    let t = Timestamp::ZERO;
    q.enqueue("chat", 1, "", 1, t).unwrap();
    for i in 0..4 {
        q.enqueue(["b0", "b1", "b2", "b3"][i], -1, "", 1, t)
            .unwrap();
    }
    // At 0.75 level -1 (rank 1 of 2) has reflective ceiling 0.25: it alternates with period 3.
    // The first call (tick 1) dispatches the chat request: rank 0 is open.
    assert_eq!(q.dispatch_next_under(t, 0.75), Some("chat"));
    let calls: Vec<Option<&str>> = (0..6).map(|_| q.dispatch_next_under(t, 0.75)).collect();
    assert_eq!(calls, [None, Some("b0"), None, None, Some("b1"), None]);
    // Under its reflective ceiling the band is open on every call (no tick).
    assert_eq!(q.dispatch_next_under(t, 0.2), Some("b2"));
    // At saturation 1 every band is gated.
    assert_eq!(q.dispatch_next_under(t, 1.0), None);
    assert!(q.admits_now(1, 0.99));
    assert!(!q.admits_now(-1, 0.5));
    assert!(q.admits_now(-1, 0.4));
}
