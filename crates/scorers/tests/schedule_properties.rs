//! End-to-end properties: whatever the metrics, every built-in policy picks distinct pool
//! members, the primary first, with totals within the weights' bounds.

mod common;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use shepherd_scheduler_core::prelude::*;
use shepherd_scorers::builtin_registry;

const ALL_SCORERS: &str = "
plugins:
- type: lora-affinity-filter
- type: prefix-cache-scorer
- type: kv-cache-utilization-scorer
- type: queue-scorer
- type: running-requests-size-scorer
- type: active-request-scorer
- type: lora-affinity-scorer
- type: session-affinity-scorer
- type: PICKER
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: lora-affinity-filter
  - pluginRef: prefix-cache-scorer
    weight: 3
  - pluginRef: kv-cache-utilization-scorer
    weight: 2
  - pluginRef: queue-scorer
    weight: 2
  - pluginRef: running-requests-size-scorer
    weight: 1
  - pluginRef: active-request-scorer
    weight: 1
  - pluginRef: lora-affinity-scorer
    weight: 1
  - pluginRef: session-affinity-scorer
    weight: 1
  - pluginRef: PICKER
";

const WEIGHT_SUM: f64 = 11.0;

/// Metrics, and when they were scraped (never, for `None`).
fn metrics() -> impl Strategy<Value = (EndpointMetrics, Option<u64>)> {
    (
        any::<u32>(),
        any::<u32>(),
        prop_oneof![0.0..=1.0f64, any::<f64>()],
        prop::option::of(0u64..400),
    )
        .prop_map(|(waiting, running, kv_utilization, scraped)| {
            let m = EndpointMetrics {
                waiting,
                running,
                kv_utilization,
                ..Default::default()
            };
            (m, scraped)
        })
}

proptest! {
    #![proptest_config(Config {
        cases: 64,
        rng_seed: RngSeed::Fixed(0xE2E),
        failure_persistence: None,
        ..Config::default()
    })]

    #[test]
    fn every_policy_picks_distinct_members_within_bounds(
        all in prop::collection::vec(metrics(), 1..10),
        picker in prop::sample::select(vec!["max-score-picker", "random-picker", "weighted-random-picker"]),
        lora in prop::option::of(Just("sql".to_string())),
        requests in 1usize..6,
    ) {
        let config = EndpointPickerConfig::from_yaml(&ALL_SCORERS.replace("PICKER", picker)).unwrap();
        let t = shepherd_test_util::TestPool::loopback(all.len() as u16);
        let members = t.endpoints.clone();
        for (ep, (m, scraped)) in members.iter().zip(&all) {
            if let Some(at) = scraped {
                t.clock.set(Timestamp::from_millis(*at));
                ep.set_metrics(m.clone());
            }
        }
        t.clock.set(Timestamp::from_millis(300));
        let scheduler = build_scheduler(&config, &builtin_registry(), t.pool).unwrap();
        let mut held = Vec::new();
        for i in 0..requests {
            let mut req = common::request(&format!("r{i}"));
            req.lora = lora.clone();
            req.session_key = Some("s".into());
            let decision = scheduler.schedule(&req).unwrap();
            prop_assert!(!decision.endpoints().is_empty() && decision.endpoints().len() <= 3);
            prop_assert_eq!(decision.endpoints()[0].id(), decision.primary().id());
            for (k, ep) in decision.endpoints().iter().enumerate() {
                prop_assert!(members.iter().any(|m| m.id() == ep.id()));
                prop_assert!(decision.endpoints()[..k].iter().all(|e| e.id() != ep.id()));
            }
            for row in &decision.breakdown.rows() {
                prop_assert!((0.0..=WEIGHT_SUM).contains(&row.total), "{row:?}");
                prop_assert!(row.scores.iter().all(|s| (0.0..=1.0).contains(&s.value)));
            }
            held.push(decision);
        }
    }
}
