//! The `flowControl` section: upstream names, defaults, and errors that name the field.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use shepherd_scheduler_core::config::EndpointPickerConfig;
use shepherd_scheduler_core::flow::{
    BandLimits, ConcurrencyMode, Detector, FlowConfigError, FlowControlConfig, FlowSettings,
};

fn load(yaml: &str) -> Result<Option<FlowSettings>, FlowConfigError> {
    let config = EndpointPickerConfig::from_yaml(yaml).unwrap();
    FlowControlConfig::from_picker_config(&config)
}

fn err(yaml: &str) -> String {
    load(yaml).unwrap_err().to_string()
}

#[test]
fn an_absent_section_means_no_flow_control() {
    assert_eq!(load("plugins: []\n").unwrap(), None);
}

#[test]
fn an_empty_section_takes_the_defaults() {
    let s = load("flowControl: {}\n").unwrap().unwrap();
    assert_eq!(s, FlowSettings::default());
    assert_eq!(s.ttl, Some(Duration::from_secs(60)));
    assert_eq!(
        s.band_limits(3),
        BandLimits {
            max_requests: 5000,
            max_bytes: 1_000_000_000,
            ..BandLimits::default()
        }
    );
    assert!(matches!(s.detector, Detector::Utilization(_)));
}

#[test]
fn an_upstream_section_reads_with_its_names() {
    let s = load(
        r#"
apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: round-robin-fairness-policy
- type: fcfs-ordering-policy
- name: detector
  type: concurrency-detector
  parameters:
    maxConcurrency: 132
    concurrencyMode: requests
    headroom: 0.0
flowControl:
  maxRequests: 10k
  maxBytes: 2Gi
  defaultRequestTTL: 1m30s
  defaultPriorityBand:
    maxRequests: 200
  defaultNegativePriorityBand:
    maxRequests: 20
    maxBytes: 1M
  priorityBands:
  - priority: 10
    maxRequests: "500"
    maxBytes: 64Mi
    fairnessPolicyRef: round-robin-fairness-policy
    orderingPolicyRef: fcfs-ordering-policy
  - priority: -1
    maxRequests: 0
  saturationDetector:
    pluginRef: detector
"#,
    )
    .unwrap()
    .unwrap();
    assert_eq!(s.ttl, Some(Duration::from_secs(90)));
    assert_eq!(s.max_requests, Some(10_000));
    assert_eq!(s.max_bytes, Some(2 << 30));
    assert_eq!(
        s.band_limits(10),
        BandLimits {
            max_requests: 500,
            max_bytes: 64 << 20,
            ..BandLimits::default()
        }
    );
    // "0" means the system default, as upstream.
    assert_eq!(
        s.band_limits(-1),
        BandLimits {
            max_requests: 5000,
            max_bytes: 1_000_000_000,
            ..BandLimits::default()
        }
    );
    assert_eq!(
        s.band_limits(0),
        BandLimits {
            max_requests: 200,
            max_bytes: 1_000_000_000,
            ..BandLimits::default()
        }
    );
    assert_eq!(
        s.band_limits(-7),
        BandLimits {
            max_requests: 20,
            max_bytes: 1_000_000,
            ..BandLimits::default()
        }
    );
    match s.detector {
        Detector::Concurrency(d) => assert_eq!(d.mode(), ConcurrencyMode::Requests),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_zero_ttl_disables_expiry() {
    let s = load("flowControl:\n  defaultRequestTTL: 0s\n")
        .unwrap()
        .unwrap();
    assert_eq!(s.ttl, None);
}

#[test]
fn the_utilization_detector_plugin_is_used_by_default() {
    let s = load(
        "plugins:\n- type: utilization-detector\n  parameters:\n    queueDepthThreshold: 9\nflowControl: {}\n",
    )
    .unwrap()
    .unwrap();
    match s.detector {
        Detector::Utilization(d) => assert_ne!(d, Default::default()),
        other => panic!("{other:?}"),
    }
    // A bare type name works as a reference too.
    let s = load("flowControl:\n  saturationDetector:\n    pluginRef: concurrency-detector\n")
        .unwrap()
        .unwrap();
    assert!(matches!(s.detector, Detector::Concurrency(_)));
}

#[test]
fn errors_name_the_field() {
    let e = err("flowControl:\n  priorityBands:\n  - priority: 1\n    maxRequests: lots\n");
    assert!(e.contains("invalid quantity `lots`"), "{e}");
    let e = err("flowControl:\n  defaultRequestTTL: soon\n");
    assert!(e.contains("invalid duration `soon`"), "{e}");
    let e = err("flowControl:\n  maxRequest: 5\n");
    assert!(e.contains("unknown field `maxRequest`"), "{e}");
    let e = err("flowControl:\n  priorityBands:\n  - priority: 1\n  - priority: 1\n");
    assert!(
        e.contains("flowControl.priorityBands") && e.contains("priority 1"),
        "{e}"
    );
    let e = err(
        "flowControl:\n  priorityBands:\n  - priority: 0\n  - priority: 2\n    fairnessPolicyRef: queue-scorer\n",
    );
    assert!(
        e.contains("flowControl.priorityBands[1].fairnessPolicyRef"),
        "{e}"
    );
    let e = err("flowControl:\n  defaultPriorityBand:\n    orderingPolicyRef: queue-scorer\n");
    assert!(
        e.contains("flowControl.defaultPriorityBand.orderingPolicyRef"),
        "{e}"
    );
    assert!(
        load("flowControl:\n  enableEviction: true\n")
            .unwrap()
            .unwrap()
            .enable_eviction
    );
    let e = err("flowControl:\n  usageLimitPolicyPluginRef: static\n");
    assert!(e.contains("flowControl.usageLimitPolicyPluginRef"), "{e}");
    let e = err(
        "plugins:\n- name: d\n  type: queue-scorer\nflowControl:\n  saturationDetector:\n    pluginRef: d\n",
    );
    assert!(
        e.contains("flowControl.saturationDetector.pluginRef") && e.contains("queue-scorer"),
        "{e}"
    );
    let e = err(
        "plugins:\n- type: utilization-detector\n  parameters:\n    kvCacheUtilThreshold: 2\nflowControl: {}\n",
    );
    assert!(
        e.contains("utilization-detector.parameters.kvCacheUtilThreshold"),
        "{e}"
    );
}

#[test]
fn go_durations_and_quantities() {
    use shepherd_scheduler_core::flow::config::{parse_go_duration, parse_quantity};
    assert_eq!(
        parse_go_duration("1h2m3.5s"),
        Some(Duration::from_millis(3_723_500))
    );
    assert_eq!(parse_go_duration("250ms"), Some(Duration::from_millis(250)));
    assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
    assert_eq!(parse_go_duration("10"), None);
    assert_eq!(parse_go_duration("-1s"), None);
    assert_eq!(parse_quantity("1k"), Some(1000));
    assert_eq!(parse_quantity("1Gi"), Some(1 << 30));
    assert_eq!(parse_quantity("1.5G"), None);
    assert_eq!(parse_quantity("99999999999P"), None);
}

#[test]
fn policy_references_resolve_through_plugin_instances() {
    let s = load(
        "plugins:\n- name: rr\n  type: round-robin-fairness-policy\n- name: fifo\n  type: fcfs-ordering-policy\nflowControl:\n  priorityBands:\n  - priority: 1\n    fairnessPolicyRef: rr\n    orderingPolicyRef: fifo\n",
    );
    assert!(s.is_ok(), "{s:?}");
    // Upstream's default fairness policy, by instance name and by type name.
    use shepherd_scheduler_core::flow::Fairness;
    for yaml in [
        "plugins:\n- name: fair\n  type: global-strict-fairness-policy\nflowControl:\n  priorityBands:\n  - priority: 1\n    fairnessPolicyRef: fair\n",
        "flowControl:\n  priorityBands:\n  - priority: 1\n    fairnessPolicyRef: global-strict-fairness-policy\n",
    ] {
        let s = load(yaml).unwrap().unwrap();
        assert_eq!(s.bands[0].1.fairness, Fairness::GlobalStrict);
        assert_eq!(s.default_band.fairness, Fairness::RoundRobin);
    }
    let s = load(
        "flowControl:\n  defaultPriorityBand:\n    fairnessPolicyRef: global-strict-fairness-policy\n",
    )
    .unwrap()
    .unwrap();
    assert_eq!(s.default_band.fairness, Fairness::GlobalStrict);
    assert_eq!(s.default_negative_band.fairness, Fairness::GlobalStrict);
}

/// A flow-control type named in the wrong place says what was expected.
#[test]
fn a_flow_control_type_in_the_wrong_place_says_what_was_expected() {
    let e = err(
        "plugins:\n- type: sheddable-eviction-filter\nflowControl:\n  usageLimitPolicyPluginRef: sheddable-eviction-filter\n",
    );
    assert!(
        e.contains("flowControl.usageLimitPolicyPluginRef")
            && e.contains("sheddable-eviction-filter"),
        "{e}"
    );
    assert!(!e.contains("does not implement yet"), "{e}");
}

#[test]
fn the_no_endpoint_ttl_follows_the_default_unless_given() {
    let s = load("flowControl:\n  defaultRequestTTL: 5s\n")
        .unwrap()
        .unwrap();
    assert_eq!(s.no_endpoint_ttl, None);
    assert_eq!(s.no_endpoint_budget(), Some(Duration::from_secs(5)));

    let s = load("flowControl:\n  defaultRequestTTL: 5s\n  noEndpointRequestTTL: 10m\n")
        .unwrap()
        .unwrap();
    assert_eq!(s.no_endpoint_budget(), Some(Duration::from_secs(600)));

    let s = load("flowControl:\n  noEndpointRequestTTL: 0s\n")
        .unwrap()
        .unwrap();
    assert_eq!(s.ttl, Some(Duration::from_secs(60)));
    assert_eq!(s.no_endpoint_budget(), None);
}

/// `orderingPolicyRef` names an ordering plugin instance or type; a band without one takes
/// the default band's, as the fairness policy does.
#[test]
fn ordering_policies_resolve_by_instance_and_type() {
    use shepherd_scheduler_core::flow::OrderingPolicy;
    let s = load(
        "plugins:\n- name: deadline\n  type: edf-ordering-policy\n- type: slo-deadline-ordering-policy\nflowControl:\n  defaultPriorityBand:\n    orderingPolicyRef: deadline\n  priorityBands:\n  - priority: 1\n    orderingPolicyRef: slo-deadline-ordering-policy\n  - priority: 2\n    orderingPolicyRef: fcfs-ordering-policy\n",
    )
    .unwrap()
    .unwrap();
    assert_eq!(s.default_band.ordering, OrderingPolicy::Edf);
    assert_eq!(s.default_negative_band.ordering, OrderingPolicy::Edf);
    assert_eq!(s.band_limits(1).ordering, OrderingPolicy::SloDeadline);
    assert_eq!(s.band_limits(2).ordering, OrderingPolicy::Fcfs);
    assert_eq!(
        load("flowControl: {}\n")
            .unwrap()
            .unwrap()
            .default_band
            .ordering,
        OrderingPolicy::Fcfs
    );
    let e = err(
        "plugins:\n- name: rr\n  type: round-robin-fairness-policy\nflowControl:\n  priorityBands:\n  - priority: 1\n    orderingPolicyRef: rr\n",
    );
    assert!(
        e.contains("flowControl.priorityBands[0].orderingPolicyRef")
            && e.contains("is not an ordering policy"),
        "{e}"
    );
}
