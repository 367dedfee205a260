//! Several picker replicas in one run: one replica is the plain run, every request is picked
//! by exactly one replica and its end reaches that replica, and the study and its subcommand.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::process::Command;

use shepherd_sim::policy::{FLOW_CONTROL_OVERLAY, builtin_policy, sim_registry};
use shepherd_sim::replicas::{Coordination, RENDEZVOUS_SCORER, ReplicaOptions, replicas};
use shepherd_sim::runner::{Outcome, RunOptions, RunResult, Spread, run};
use shepherd_sim::workload::Scenario;

const SPREADS: [Spread; 3] = [Spread::Random, Spread::RoundRobin, Spread::Connection];

fn small() -> Scenario {
    Scenario::from_yaml(
        "
name: small
servers: 3
engine: { numGpuBlocks: 400, maxNumBatchedTokens: 512, maxNumSeqs: 16 }
streams:
  - kind: shared-prefix
    groups: 4
    promptsPerGroup: 4
    systemTokens: 500
    questionTokens: 60
    outputTokens: 20
    load: { rate: 20 }
    endS: 2
  - kind: multi-turn
    systemTokens: 200
    userTokens: 40
    outputTokens: 20
    turns: 3
    load: { rate: 4 }
    endS: 2
",
        "small.yaml",
    )
    .unwrap()
}

fn with(replicas: u32, spread: Spread) -> RunOptions {
    RunOptions {
        replicas,
        spread,
        ..RunOptions::default()
    }
}

fn routed(r: &RunResult) -> u64 {
    r.records.iter().filter(|x| x.server != u32::MAX).count() as u64
}

#[test]
fn one_replica_is_the_plain_run_whatever_the_spread() {
    let s = small();
    for name in ["static-default", "adaptive"] {
        let policy = builtin_policy(name).unwrap();
        let plain = run(&s, &policy, &sim_registry(), RunOptions::default()).unwrap();
        assert_eq!(plain.replicas.len(), 1);
        assert_eq!(plain.replicas[0].picks, routed(&plain));
        for spread in SPREADS {
            let one = run(&s, &policy, &sim_registry(), with(1, spread)).unwrap();
            assert_eq!(one.records, plain.records, "{name} {spread}");
            assert_eq!(one.cached_tokens, plain.cached_tokens);
            assert_eq!(one.events, plain.events);
            assert_eq!(one.adaptive_series.len(), plain.adaptive_series.len());
        }
    }
}

#[test]
fn every_request_is_picked_by_one_replica_and_its_end_reaches_that_replica() {
    let s = small();
    for name in ["static-default", "adaptive", "sglang", "dynamo"] {
        let policy = builtin_policy(name).unwrap();
        for spread in SPREADS {
            let r = run(&s, &policy, &sim_registry(), with(4, spread)).unwrap();
            assert_eq!(r.replicas.len(), 4);
            assert!(r.records.len() > 30, "{name} {spread}: {}", r.records.len());
            assert!(r.records.iter().all(|x| x.outcome == Outcome::Completed));
            let picks: u64 = r.replicas.iter().map(|c| c.picks).sum();
            assert_eq!(picks, routed(&r), "{name} {spread}");
            for (i, c) in r.replicas.iter().enumerate() {
                assert!(c.picks > 0, "{name} {spread}: replica {i} idle");
                assert_eq!(c.completions, c.picks, "{name} {spread}: replica {i}");
                assert_eq!(c.in_flight_at_end, 0, "{name} {spread}: replica {i}");
            }
        }
    }
}

#[test]
fn round_robin_deals_requests_in_turn_and_runs_are_deterministic() {
    let s = small();
    let policy = builtin_policy("static-default").unwrap();
    let r = run(&s, &policy, &sim_registry(), with(3, Spread::RoundRobin)).unwrap();
    let picks: Vec<u64> = r.replicas.iter().map(|c| c.picks).collect();
    let (lo, hi) = (picks.iter().min().unwrap(), picks.iter().max().unwrap());
    assert!(hi - lo <= 1, "{picks:?}");
    for spread in SPREADS {
        let a = run(&s, &policy, &sim_registry(), with(3, spread)).unwrap();
        let b = run(&s, &policy, &sim_registry(), with(3, spread)).unwrap();
        assert_eq!(a.records, b.records, "{spread}");
        assert_eq!(a.replicas, b.replicas, "{spread}");
    }
}

#[test]
fn flow_control_with_several_replicas_is_refused() {
    let policy = builtin_policy("adaptive")
        .unwrap()
        .with_overlay("adaptive+fc", FLOW_CONTROL_OVERLAY, "<flow-control>")
        .unwrap();
    let err = run(&small(), &policy, &sim_registry(), with(2, Spread::Random))
        .unwrap_err()
        .to_string();
    assert!(err.contains("flow control"), "{err}");
    assert!(run(&small(), &policy, &sim_registry(), with(1, Spread::Random)).is_ok());
}

#[test]
fn the_study_relates_every_row_to_one_replica() {
    let opts = ReplicaOptions {
        counts: vec![1, 2, 4],
        coordinations: vec![Coordination::None],
        ..ReplicaOptions::default()
    };
    let policies = [builtin_policy("static-default").unwrap()];
    let study = replicas(&[small()], &policies, &sim_registry(), &opts).unwrap();
    let report = &study.report;
    // R = 1 once, then R = 2 and 4 per spread.
    assert_eq!(study.run_count, 1 + 2 * 2);
    assert_eq!(report.rows.len(), 2 * 3);
    for spread in ["random", "connection"] {
        let one = report
            .row("small", "static-default", "none", spread, 1)
            .unwrap();
        assert_eq!((one.hit_rate_vs_r1, one.ttft_p90_vs_r1), (1.0, 1.0));
        assert_eq!(one.replica_picks.len(), 1);
        let four = report
            .row("small", "static-default", "none", spread, 4)
            .unwrap();
        assert_eq!(four.replica_picks.len(), 4);
        assert!(four.hit_rate_vs_r1 > 0.0 && four.ttft_p90_vs_r1 > 0.0);
    }
}

#[test]
fn the_replicas_subcommand_writes_its_report_and_plots() {
    let dir = std::env::temp_dir().join(format!("shepherd-sim-replicas-{}", std::process::id()));
    let scenario = dir.join("tiny.yaml");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        &scenario,
        "name: tiny\nservers: 2\nstreams:\n  - kind: shared-prefix\n    groups: 2\n    systemTokens: 200\n    questionTokens: 20\n    outputTokens: 10\n    load: { rate: 8 }\n    endS: 2\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_shepherd-sim"))
        .args(["replicas", "--scenario"])
        .arg(&scenario)
        .args([
            "--policy",
            "adaptive",
            "--replicas",
            "1",
            "--replicas",
            "2",
            "--spread",
            "round-robin",
            "--coordination",
            "none",
            "--coordination",
            "rendezvous",
            "--threads",
            "1",
            "--quiet",
            "--out",
        ])
        .arg(dir.join("out"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("| adaptive | rendezvous | round-robin | 2 |"),
        "{stdout}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/replicas.json")).unwrap())
            .unwrap();
    assert_eq!(json["schema"], "shepherd-sim/replicas/v2");
    assert_eq!(json["rows"].as_array().unwrap().len(), 4);
    for plot in ["replicas-tiny-hit-rate.svg", "replicas-tiny-ttft-p90.svg"] {
        let svg = std::fs::read_to_string(dir.join("out").join(plot)).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("adaptive"),
            "{plot}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn rendezvous_rows_are_relative_to_the_uncoordinated_single_replica() {
    let opts = ReplicaOptions {
        counts: vec![1, 4],
        spreads: vec![Spread::Random],
        ..ReplicaOptions::default()
    };
    let policies = [builtin_policy("static-default").unwrap()];
    let study = replicas(&[small()], &policies, &sim_registry(), &opts).unwrap();
    let report = &study.report;
    assert_eq!(study.run_count, 2 * 2);
    let base = report
        .row("small", "static-default", "none", "random", 1)
        .unwrap();
    let one = report
        .row("small", "static-default", "rendezvous", "random", 1)
        .unwrap();
    assert_eq!(
        one.hit_rate_vs_r1,
        (one.cache_hit_rate / base.cache_hit_rate * 1000.0).round() / 1000.0
    );
    let four = report
        .row("small", "static-default", "rendezvous", "random", 4)
        .unwrap();
    assert_eq!(four.replica_picks.len(), 4);
    assert!(four.hit_rate_vs_r1 > 0.0);
}

#[test]
fn rendezvous_adds_the_scorer_with_the_prefix_weight() {
    let base = builtin_policy("static-default").unwrap();
    let with = Coordination::Rendezvous.apply(&base);
    assert_eq!(with.name, base.name);
    assert_eq!(with.config.plugins.len(), base.config.plugins.len() + 1);
    let profile = &with.config.scheduling_profiles[0];
    let added = profile
        .plugins
        .iter()
        .find(|r| r.plugin_ref == RENDEZVOUS_SCORER)
        .unwrap();
    assert_eq!(added.weight, Some(3.0));
    assert_eq!(Coordination::None.apply(&base), base);
}

#[test]
fn precise_replicas_share_the_engines_events_and_load_sync_changes_only_load() {
    let s = small();
    let precise = builtin_policy("precise").unwrap();
    let one = run(&s, &precise, &sim_registry(), RunOptions::default()).unwrap();
    let four = run(&s, &precise, &sim_registry(), with(4, Spread::Random)).unwrap();
    // Every replica hears every server's events: the hit rate does not fall apart with R.
    let hit = |r: &RunResult| r.cached_tokens as f64 / r.prompt_tokens.max(1) as f64;
    assert!(
        hit(&four) >= 0.9 * hit(&one),
        "{} vs {}",
        hit(&four),
        hit(&one)
    );
    for sync in [Coordination::LoadSync(0), Coordination::LoadSync(5)] {
        let policy = sync.apply(&precise);
        let r = run(&s, &policy, &sim_registry(), with(4, Spread::Random)).unwrap();
        assert!(r.records.iter().all(|x| x.outcome == Outcome::Completed));
        assert_eq!(r.replicas.iter().map(|c| c.picks).sum::<u64>(), routed(&r));
        // A replica's own in-flight count is unchanged by what its peers report.
        assert!(r.replicas.iter().all(|c| c.in_flight_at_end == 0));
    }
    let mut bad = precise.clone();
    bad.config.other.insert(
        "simulation".into(),
        serde_json::json!({"replicaLoadSyncMs": -1}),
    );
    assert!(run(&s, &bad, &sim_registry(), with(2, Spread::Random)).is_err());
    bad.config.other.insert(
        "simulation".into(),
        serde_json::json!({"replicaLoadSyncMillis": 5}),
    );
    assert!(run(&s, &bad, &sim_registry(), with(2, Spread::Random)).is_err());
}

#[test]
fn index_deltas_give_every_replica_the_others_picks() {
    let s = small();
    let approximate = builtin_policy("static-default").unwrap();
    let hit = |r: &RunResult| r.cached_tokens as f64 / r.prompt_tokens.max(1) as f64;
    let one = run(&s, &approximate, &sim_registry(), RunOptions::default()).unwrap();
    let alone = run(&s, &approximate, &sim_registry(), with(4, Spread::Random)).unwrap();
    let policy = Coordination::Deltas(5).apply(&approximate);
    let shared = run(&s, &policy, &sim_registry(), with(4, Spread::Random)).unwrap();
    assert!(
        shared
            .records
            .iter()
            .all(|x| x.outcome == Outcome::Completed)
    );
    assert_eq!(
        shared.replicas.iter().map(|c| c.picks).sum::<u64>(),
        routed(&shared)
    );
    // Four replicas sharing their inserts keep (about) one replica's hit rate; alone they
    // lose part of it.
    assert!(
        hit(&shared) >= 0.95 * hit(&one),
        "{} vs {}",
        hit(&shared),
        hit(&one)
    );
    assert!(
        hit(&shared) > hit(&alone),
        "{} vs {}",
        hit(&shared),
        hit(&alone)
    );
    // With one replica the deltas have nobody to reach: the plain run.
    let single = run(&s, &policy, &sim_registry(), RunOptions::default()).unwrap();
    assert_eq!(single.cached_tokens, one.cached_tokens);
    let mut bad = approximate.clone();
    bad.config.other.insert(
        "simulation".into(),
        serde_json::json!({"replicaLoadSyncMs": 5, "replicaIndexSync": "yes"}),
    );
    assert!(run(&s, &bad, &sim_registry(), with(2, Spread::Random)).is_err());
}
