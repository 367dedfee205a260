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

#[test]
fn dynamo_cuts_prompts_in_the_engines_block_size() {
    // Engines with 32-token blocks: the row takes their size, as Dynamo takes the size the
    // workers register with, so the events still tell where each group is cached.
    let s = Scenario::from_yaml(
        "name: groups32\nservers: 4\nengine: { blockSize: 32 }\nobjectives: { ttftMs: 1000, tpotMs: 50 }\nstreams:\n  - kind: shared-prefix\n    groups: 8\n    promptsPerGroup: 1000\n    systemTokens: 3000\n    questionTokens: 100\n    outputTokens: 20\n    load: { rate: 8 }\n    endS: 15\n",
        "groups32.yaml",
    )
    .unwrap();
    assert_eq!(s.engine.block_size, 32);
    let r = run(
        &s,
        &builtin_policy("dynamo").unwrap(),
        &sim_registry(),
        RunOptions::default(),
    )
    .unwrap();
    let hit = summarize(&s, &r, false).cache_hit_rate;
    assert!(hit > 0.8, "hit rate {hit}");
    // Pinned to 16 (a policy that writes its size), the indexer skips every 32-token event
    // and the router routes blind to the caches.
    let text = include_str!("../policies/dynamo.yaml")
        .replace("  - type: precise-prefix-cache-producer\n", "  - type: precise-prefix-cache-producer\n    parameters: { tokenProcessorConfig: { blockSize: 16 } }\n")
        .replace("      routerTemperature: 0.0\n", "      routerTemperature: 0.0\n      blockSize: 16\n");
    let pinned = Policy::from_yaml("dynamo-16", &text, "dynamo-16.yaml").unwrap();
    let r = run(&s, &pinned, &sim_registry(), RunOptions::default()).unwrap();
    let blind = summarize(&s, &r, false).cache_hit_rate;
    assert!(blind < hit, "pinned {blind} vs following {hit}");
}
