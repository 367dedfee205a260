//! End-to-end properties of the simulator at reduced scale.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use shepherd_sim::compare::{CompareOptions, compare};
use shepherd_sim::engine::BatchShape;
use shepherd_sim::policy::{builtin_policy, sim_registry};
use shepherd_sim::report::summarize;
use shepherd_sim::runner::{Outcome, RunOptions, run};
use shepherd_sim::workload::Scenario;

fn scenario(yaml: &str) -> Scenario {
    Scenario::from_yaml(yaml, "test.yaml").unwrap()
}

const SMALL: &str = "
name: small
servers: 3
engine: { numGpuBlocks: 250, maxNumBatchedTokens: 512, maxNumSeqs: 16 }
streams:
  - kind: shared-prefix
    groups: 6
    promptsPerGroup: 4
    systemTokens: 600
    questionTokens: 80
    outputTokens: 40
    load: { closed: 24 }
    endS: 4
  - kind: multi-turn
    systemTokens: 200
    userTokens: 50
    outputTokens: 30
    turns: 3
    load: { rate: 3 }
    endS: 4
";

#[test]
fn kv_is_conserved_and_every_request_is_causal() {
    let s = scenario(SMALL);
    let registry = sim_registry();
    let mut preemptions = 0;
    for name in [
        "round-robin",
        "static-default",
        "adaptive",
        "sglang",
        "dynamo",
    ] {
        let policy = builtin_policy(name).unwrap();
        let opts = RunOptions {
            check_invariants: true,
            ..RunOptions::default()
        };
        let r = run(&s, &policy, &registry, opts).unwrap();
        assert!(r.records.len() > 50, "{name}: {}", r.records.len());
        preemptions += r.preemptions;
        for rec in &r.records {
            assert_eq!(rec.outcome, Outcome::Completed, "{name}: {rec:?}");
            let scheduled = rec.first_scheduled.unwrap();
            let first = rec.first_token.unwrap();
            let end = rec.end.unwrap();
            assert!(rec.arrival <= scheduled, "{name}: {rec:?}");
            assert!(scheduled <= first, "{name}: {rec:?}");
            assert!(first <= end, "{name}: {rec:?}");
        }
    }
    assert!(
        preemptions > 0,
        "the small KV cache should force preemptions"
    );
}

#[test]
fn same_seed_gives_byte_identical_json() {
    let s = vec![scenario(SMALL)];
    let policies: Vec<_> = ["random", "static-default", "adaptive"]
        .iter()
        .map(|n| builtin_policy(n).unwrap())
        .collect();
    let registry = sim_registry();
    let json = |threads| {
        let c = compare(
            &s,
            &policies,
            &registry,
            &CompareOptions {
                seed: 7,
                threads,
                ..CompareOptions::default()
            },
        )
        .unwrap();
        serde_json::to_string(&c.report).unwrap()
    };
    let a = json(1);
    assert_eq!(a, json(2));
    assert!(a.contains("\"ttft_p90_ms\""));
}

#[test]
fn a_lone_request_ttft_equals_the_cost_model() {
    let s = scenario(
        "
name: lone
servers: 2
streams:
  - kind: shared-prefix
    systemTokens: 1000
    questionTokens: 200
    outputTokens: 10
    load: { closed: 1 }
    endS: 0.001
",
    );
    let r = run(
        &s,
        &builtin_policy("static-default").unwrap(),
        &sim_registry(),
        RunOptions::default(),
    )
    .unwrap();
    assert_eq!(r.records.len(), 1);
    let rec = r.records[0];
    let expected = s.engine.cost.step_nanos(&BatchShape {
        requests: 1,
        prefill_tokens: 1200,
        prefill_pairs: 1200.0 * 600.0,
        ..Default::default()
    });
    // The frontend's time, then one step.
    let frontend = s.engine.cost.frontend_nanos(1200);
    assert!(frontend > 0);
    assert_eq!(rec.first_token.unwrap() - rec.arrival, frontend + expected);
}

#[test]
fn a_repeated_identical_prompt_hits_the_cache() {
    let s = scenario(
        "
name: repeat
servers: 1
streams:
  - kind: shared-prefix
    systemTokens: 1000
    questionTokens: 200
    outputTokens: 10
    load: { closed: 1 }
    endS: 0.5
",
    );
    let r = run(
        &s,
        &builtin_policy("round-robin").unwrap(),
        &sim_registry(),
        RunOptions::default(),
    )
    .unwrap();
    assert!(r.records.len() >= 2);
    assert_eq!(r.records[0].cached_tokens, 0);
    for rec in &r.records[1..] {
        assert_eq!(rec.cached_tokens, 1199 / 16 * 16);
    }
}

/// llm-d measured the prefix-aware default beating random routing by about 2× in throughput
/// and over 100× in TTFT p90 on a shared-prefix workload near KV capacity; at reduced scale we
/// ask for at least 1.5× and 5×.
#[test]
fn static_default_beats_random_near_kv_capacity() {
    let s = scenario(
        "
name: sanity
servers: 4
engine: { numGpuBlocks: 1500 }
streams:
  - kind: shared-prefix
    groups: 16
    promptsPerGroup: 8
    systemTokens: 3000
    questionTokens: 200
    outputTokens: 100
    load: { rate: 60 }
    endS: 10
",
    );
    let registry = sim_registry();
    let summary = |name: &str| {
        let r = run(
            &s,
            &builtin_policy(name).unwrap(),
            &registry,
            RunOptions::default(),
        )
        .unwrap();
        summarize(&s, &r, false)
    };
    let random = summary("random");
    let static_default = summary("static-default");
    assert!(
        static_default.output_tokens_per_s >= 1.5 * random.output_tokens_per_s,
        "throughput: static {} vs random {}",
        static_default.output_tokens_per_s,
        random.output_tokens_per_s
    );
    assert!(
        static_default.ttft_p90_ms * 5.0 <= random.ttft_p90_ms,
        "TTFT p90: static {} vs random {}",
        static_default.ttft_p90_ms,
        random.ttft_p90_ms
    );
}

#[test]
fn malformed_policy_config_names_file_and_line() {
    let e = shepherd_sim::policy::Policy::from_yaml(
        "x",
        "plugins:\n  - type: queue-scorer\n    wieght: 2\n",
        "mine.yaml",
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("mine.yaml:"), "{e}");
}

#[test]
fn several_seeds_give_deterministic_means_with_intervals() {
    let s = vec![scenario(SMALL)];
    let policies: Vec<_> = ["random", "static-default"]
        .iter()
        .map(|n| builtin_policy(n).unwrap())
        .collect();
    let registry = sim_registry();
    let report = |seeds, threads| {
        compare(
            &s,
            &policies,
            &registry,
            &CompareOptions {
                seed: 7,
                seeds,
                threads,
                fresh_bound: false,
                ..CompareOptions::default()
            },
        )
        .unwrap()
        .report
    };
    let three = report(3, 2);
    assert_eq!(three, report(3, 1));
    assert_eq!(three.seeds.len(), 3);
    assert_eq!(three.seeds[0], 7);
    let row = &three.scenarios[0].results[0];
    let p90 = row.intervals.as_ref().unwrap()["ttft_p90_ms"];
    assert_eq!(p90.n, 3);
    assert!(p90.half_width > 0.0, "random routing varies with the seed");
    assert_eq!(row.ttft_p90_ms, p90.mean);
    assert_eq!(three.scenarios[0].judgements.len(), 2);
    // One seed: the plain single-run rows, no intervals.
    let one = report(1, 1);
    assert!(
        one.scenarios[0]
            .results
            .iter()
            .all(|r| r.intervals.is_none())
    );
    assert_eq!(one.seeds, vec![7]);
}
