//! The Dynamo row learns the engines' caches from their KV-cache events, delivered with the
//! simulation's event delay; `dynamo@oracle` reads the caches at every pick.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use shepherd_sim::policy::{Policy, builtin_policy, sim_registry};
use shepherd_sim::report::summarize;
use shepherd_sim::runner::{Outcome, RunOptions, run};
use shepherd_sim::workload::Scenario;

fn scenario() -> Scenario {
    Scenario::from_yaml(
        "name: groups\nservers: 4\nobjectives: { ttftMs: 1000, tpotMs: 50 }\nstreams:\n  - kind: shared-prefix\n    groups: 8\n    promptsPerGroup: 1000\n    systemTokens: 3000\n    questionTokens: 100\n    outputTokens: 20\n    load: { rate: 8 }\n    endS: 15\n",
        "groups.yaml",
    )
    .unwrap()
}

fn hit_rate(policy: &Policy) -> f64 {
    let s = scenario();
    let r = run(&s, policy, &sim_registry(), RunOptions::default()).unwrap();
    assert!(r.records.iter().all(|x| x.outcome == Outcome::Completed));
    summarize(&s, &r, false).cache_hit_rate
}

#[test]
fn dynamo_reads_kv_events_and_their_delay_matters() {
    let events = builtin_policy("dynamo").unwrap();
    let oracle = builtin_policy("dynamo@oracle").unwrap();
    let text = include_str!("../policies/dynamo.yaml");
    // The same policy with events that take 5 s to reach the router.
    let late = Policy::from_yaml(
        "dynamo-late",
        &format!("{text}simulation: {{ kvEventDelayMs: 5000 }}\n"),
        "late.yaml",
    )
    .unwrap();
    let (e, o, l) = (hit_rate(&events), hit_rate(&oracle), hit_rate(&late));
    // With 1 ms of delay the events tell nearly what the caches hold: groups stay on the
    // servers that cache them.
    assert!(e > 0.8, "events {e}, oracle {o}");
    assert!(o > 0.8, "oracle {o}");
    // Five seconds late, the router does not yet know where each group's first requests
    // went, and sends the group's next requests elsewhere.
    assert!(l < e, "late {l} vs events {e}");
}
