//! The llm-d router's default ("sticky until saturated", the optimized-baseline guide's config
//! loaded unchanged) as a simulator policy.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeSet;

use shepherd_sim::policy::{builtin_policy, sim_registry};
use shepherd_sim::runner::{Outcome, RunOptions, run};
use shepherd_sim::workload::Scenario;

#[test]
fn the_guide_config_loads_unchanged_and_sticks_each_prefix_to_one_server() {
    let text = include_str!("../policies/llm-d-optimized-baseline.yaml");
    assert!(text.contains("apiVersion: llm-d.ai/v1alpha1"));
    let policy = builtin_policy("llm-d-optimized-baseline").unwrap();
    let scenario = Scenario::from_yaml(
        "name: two-prefixes\nservers: 4\nobjectives: { ttftMs: 1000, tpotMs: 50 }\nstreams:\n  - name: a\n    kind: shared-prefix\n    groups: 1\n    promptsPerGroup: 1000\n    systemTokens: 4000\n    questionTokens: 100\n    outputTokens: 20\n    load: { rate: 2 }\n    endS: 10\n  - name: b\n    kind: shared-prefix\n    groups: 1\n    promptsPerGroup: 1000\n    systemTokens: 4000\n    questionTokens: 100\n    outputTokens: 20\n    load: { rate: 2 }\n    endS: 10\n",
        "two.yaml",
    )
    .unwrap();
    let r = run(&scenario, &policy, &sim_registry(), RunOptions::default()).unwrap();
    assert!(r.records.iter().all(|x| x.outcome == Outcome::Completed));
    for stream in 0..2 {
        // After the first request of a prefix has been placed, the filter keeps every later
        // one on the server that holds it (the load is far from the TTFT penalty).
        let servers: BTreeSet<u32> = r
            .records
            .iter()
            .filter(|x| x.stream == stream)
            .skip(1)
            .map(|x| x.server)
            .collect();
        assert_eq!(servers.len(), 1, "stream {stream}: {servers:?}");
    }
}
