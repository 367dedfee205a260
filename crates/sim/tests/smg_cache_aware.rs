//! The `sglang@1.13` row: SGLang Model Gateway 1.13's `cache_aware` policy, run end to end.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeSet;

use shepherd_scheduler_core::endpoint::EndpointId;
use shepherd_sim::policy::{EngineFeed, LoadReport, builtin_policy, sim_registry};
use shepherd_sim::report::summarize;
use shepherd_sim::runner::{Outcome, RunOptions, run};
use shepherd_sim::workload::Scenario;

fn groups(rate: u32, groups: u32, output: u32) -> Scenario {
    Scenario::from_yaml(
        &format!(
            "name: groups\nservers: 4\nobjectives: {{ ttftMs: 1000, tpotMs: 50 }}\nstreams:\n  - kind: shared-prefix\n    groups: {groups}\n    promptsPerGroup: 1000\n    systemTokens: 3000\n    questionTokens: 100\n    outputTokens: {output}\n    load: {{ rate: {rate} }}\n    endS: 15\n"
        ),
        "groups.yaml",
    )
    .unwrap()
}

#[test]
fn groups_keep_their_server_under_light_load() {
    let s = groups(8, 8, 20);
    let policy = builtin_policy("sglang@1.13").unwrap();
    let r = run(&s, &policy, &sim_registry(), RunOptions::default()).unwrap();
    assert!(r.records.iter().all(|x| x.outcome == Outcome::Completed));
    let hit = summarize(&s, &r, false).cache_hit_rate;
    assert!(hit > 0.8, "hit rate {hit}");
}

#[test]
fn a_hot_prefix_spills_past_the_gate_and_replicates() {
    // One prefix at 40 req/s with long outputs: its holder's in-flight count climbs past 1.5x
    // the fleet mean and the absolute margin, and requests spill to the others (0.3.2 would
    // wait for a gap of 64 requests).
    let s = groups(40, 1, 200);
    let policy = builtin_policy("sglang@1.13").unwrap();
    let r = run(&s, &policy, &sim_registry(), RunOptions::default()).unwrap();
    let servers: BTreeSet<u32> = r.records.iter().map(|x| x.server).collect();
    assert_eq!(servers.len(), 4, "{servers:?}");
    let old = builtin_policy("sglang").unwrap();
    let r_old = run(&s, &old, &sim_registry(), RunOptions::default()).unwrap();
    let per_server = |r: &shepherd_sim::runner::RunResult| {
        let mut n = [0usize; 4];
        for x in &r.records {
            n[x.server as usize] += 1;
        }
        *n.iter().max().unwrap()
    };
    assert!(
        per_server(&r) < per_server(&r_old),
        "1.13 busiest {} vs 0.3.2 busiest {}",
        per_server(&r),
        per_server(&r_old)
    );
}

#[test]
fn the_feed_polls_loads_on_its_interval() {
    let feed = EngineFeed::default();
    assert!(!feed.load_poll_due(0)); // nobody polls
    feed.poll_loads_every(10_000_000_000);
    assert!(feed.load_poll_due(0));
    let report = LoadReport {
        running: 3,
        ..LoadReport::default()
    };
    feed.publish_load_poll(0, [(EndpointId(1), report)]);
    assert!(!feed.load_poll_due(9_999_999_999));
    assert!(feed.load_poll_due(10_000_000_000));
    // A late poll fills its slot; the next is due at the slot after.
    feed.publish_load_poll(25_000_000_000, [(EndpointId(1), report)]);
    assert!(!feed.load_poll_due(29_999_999_999));
    assert!(feed.load_poll_due(30_000_000_000));
    let last = feed.last_load_poll().unwrap();
    assert_eq!((last.seq, last.at_ns), (2, 25_000_000_000));
    assert_eq!(last.reports, vec![(EndpointId(1), report)]);
}
