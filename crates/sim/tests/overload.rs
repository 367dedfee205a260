//! Flow control in the simulator, on a reduced `overload` scenario (2 servers, a quarter of
//! the rates, so the same overload per server; 30 s).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use shepherd_scheduler_core::flow::DropReason;
use shepherd_sim::overload::{
    ClassSummary, OverloadOptions, OverloadRunSummary, overload, summarize_overload,
};
use shepherd_sim::policy::{FLOW_CONTROL_OVERLAY, builtin_policy, sim_registry};
use shepherd_sim::runner::{Outcome, RunOptions, run};
use shepherd_sim::workload::{Scenario, builtin_scenario};

fn small_overload() -> Scenario {
    let mut s = builtin_scenario("overload").unwrap().scaled(0.25);
    s.servers = 2;
    for stream in &mut s.streams {
        stream.end_s = stream.end_s.min(30.0);
    }
    s
}

fn class(s: &OverloadRunSummary, priority: i32) -> &ClassSummary {
    s.classes.iter().find(|c| c.priority == priority).unwrap()
}

#[test]
fn the_overload_scenario_has_three_classes_and_two_tenants_of_unequal_demand() {
    let s = builtin_scenario("overload").unwrap();
    let mut priorities: Vec<i32> = s.streams.iter().map(|st| st.spec.priority).collect();
    priorities.sort_unstable();
    priorities.dedup();
    assert_eq!(priorities, vec![-1, 0, 1]);
    let rate = |tenant: &str| -> f64 {
        s.streams
            .iter()
            .filter(|st| st.spec.fairness_id.as_deref() == Some(tenant))
            .map(|st| st.spec.load.and_then(|l| l.rate).unwrap())
            .sum()
    };
    assert_eq!(rate("tenant-a"), 3.0 * rate("tenant-b"));
}

#[test]
fn flow_control_loses_nothing_sheds_batch_and_keeps_band_order() {
    let scenario = small_overload();
    let registry = sim_registry();
    let base = builtin_policy("adaptive").unwrap();
    let policy = base
        .with_overlay("adaptive+fc", FLOW_CONTROL_OVERLAY, "fc")
        .unwrap();
    let r = run(&scenario, &policy, &registry, RunOptions::default()).unwrap();

    // Every request ended one way or another, and each causal.
    for rec in &r.records {
        assert_ne!(rec.outcome, Outcome::Pending, "{rec:?}");
        if rec.outcome == Outcome::Completed {
            let dispatched = rec.dispatched.unwrap();
            assert!(rec.arrival <= dispatched && dispatched <= rec.first_token.unwrap());
        }
    }
    let s = summarize_overload("flow control", &scenario, &r);
    assert_eq!(
        s.completed + s.shed + s.expired + s.timed_out + s.dropped,
        s.arrived
    );
    assert!(s.arrived > 1000, "{}", s.arrived);

    // Only sheddable requests are refused: held back by the priority-holdback policy, they
    // wait and some expire (or are shed once the pool is full).
    let batch = class(&s, -1);
    assert!(batch.shed + batch.expired > 0, "{batch:?}");
    for p in [0, 1] {
        let c = class(&s, p);
        assert_eq!(c.shed + c.expired + c.timed_out + c.dropped, 0, "{c:?}");
        assert_eq!(c.completed, c.arrived);
    }
    let shed = r
        .records
        .iter()
        .filter(|rec| rec.outcome == Outcome::Rejected(DropReason::Shed))
        .count() as u64;
    assert_eq!(shed, batch.shed);

    // Strict priority: interactive waits in the queue no longer than standard (their TTFT
    // beyond the queue is the servers' doing, not flow control's).
    let (p1, p0) = (class(&s, 1), class(&s, 0));
    assert!(
        p1.queue_wait_p99_ms <= p0.queue_wait_p99_ms,
        "{p1:?} {p0:?}"
    );
}

#[test]
fn with_flow_control_standard_traffic_beats_no_flow_control_and_tenants_are_fair() {
    let scenario = small_overload();
    let report = overload(
        &scenario,
        &builtin_policy("adaptive").unwrap(),
        &sim_registry(),
        &OverloadOptions::default(),
    )
    .unwrap()
    .report;
    let [unloaded, none, flow, no_holdback, _utilization] = &report.runs[..] else {
        panic!("five runs expected");
    };
    // Holding sheddable traffic back keeps standard traffic faster than letting it in.
    assert!(
        class(flow, 0).ttft_p99_ms < class(no_holdback, 0).ttft_p99_ms,
        "{:?} vs {:?}",
        class(flow, 0),
        class(no_holdback, 0)
    );
    // Unloaded and unprotected runs refuse nothing.
    for s in [unloaded, none] {
        assert_eq!(s.completed, s.arrived, "{}", s.label);
    }
    // Flow control protects priority 0 by an order of magnitude.
    assert!(
        class(flow, 0).ttft_p99_ms * 10.0 < class(none, 0).ttft_p99_ms,
        "{:?} vs {:?}",
        class(flow, 0),
        class(none, 0)
    );
    // Round robin across tenants: the light tenant is not worse off than the heavy one (the
    // issue's goal, over all classes). Priority 0 alone has ~100 light-tenant requests here,
    // so its p99 is one request: checked with a looser bound.
    let t = &report.targets;
    assert!(t.sheddable_shed > 0);
    assert_eq!(t.light_tenant, "tenant-b");
    assert!(t.tenant_ratio <= 1.5, "{t:?}");
    assert!(t.tenant_ratio_priority0 <= 2.0, "{t:?}");
}

#[test]
fn queued_requests_expire_at_their_ttl_or_leave_at_the_client_timeout() {
    let yaml = |timeout: f64| {
        format!(
            "
name: tight
servers: 1
requestTimeoutS: {timeout}
streams:
  - kind: shared-prefix
    fairnessId: t
    systemTokens: 100
    questionTokens: 100
    outputTokens: 20
    load: {{ rate: 200 }}
    endS: 2
"
        )
    };
    let fc = "
plugins:
  - name: one-at-a-time
    type: concurrency-detector
    parameters: { maxConcurrency: 2 }
flowControl:
  defaultRequestTTL: 500ms
  saturationDetector: { pluginRef: one-at-a-time }
";
    let policy = builtin_policy("static-default")
        .unwrap()
        .with_overlay("tight", fc, "fc")
        .unwrap();
    let registry = sim_registry();
    for (timeout, expect_expired) in [(600.0, true), (0.3, false)] {
        let scenario = Scenario::from_yaml(&yaml(timeout), "tight.yaml").unwrap();
        let r = run(&scenario, &policy, &registry, RunOptions::default()).unwrap();
        let s = summarize_overload("tight", &scenario, &r);
        assert_eq!(
            s.completed + s.shed + s.expired + s.timed_out + s.dropped,
            s.arrived
        );
        assert!(s.completed > 0);
        if expect_expired {
            assert!(s.expired > 0 && s.timed_out == 0, "{s:?}");
            // Expired exactly at the TTL.
            for rec in &r.records {
                if rec.outcome == Outcome::Rejected(DropReason::TtlExpired) {
                    assert_eq!(rec.end.unwrap() - rec.arrival, 500_000_000, "{rec:?}");
                }
            }
        } else {
            assert!(s.timed_out > 0 && s.expired == 0, "{s:?}");
        }
    }
}
