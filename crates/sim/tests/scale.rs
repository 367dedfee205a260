//! The scale study: scaled scenarios keep the load per server, pick costs are measured on
//! every decision without changing any simulated figure, and the `scale` subcommand runs end
//! to end on a tiny configuration.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::process::Command;

use shepherd_sim::policy::{builtin_policy, sim_registry};
use shepherd_sim::runner::{RunOptions, run};
use shepherd_sim::scale::{DEFAULT_POLICIES, DEFAULT_SCENARIOS, ScaleOptions, scale, table};
use shepherd_sim::workload::{Load, Scenario, builtin_scenario};

/// Per stream: (rate per server, concurrency per server, groups per server).
fn per_server(s: &Scenario) -> Vec<(f64, f64, f64)> {
    let n = f64::from(s.servers);
    s.streams
        .iter()
        .map(|st| {
            let (rate, closed) = match st.load {
                Some(Load::Rate(r)) => (r, 0.0),
                Some(Load::Closed(c)) => (0.0, f64::from(c.get())),
                None => (0.0, 0.0),
            };
            (rate / n, closed / n, f64::from(st.spec.groups.get()) / n)
        })
        .collect()
}

#[test]
fn scaled_builtin_scenarios_keep_the_load_per_server() {
    for name in DEFAULT_SCENARIOS {
        let base = builtin_scenario(name).unwrap();
        assert_eq!(base.servers, 8, "{name}");
        let expected = per_server(&base);
        for size in [8, 32, 128] {
            let s = base.at_servers(size).unwrap();
            assert_eq!(s.servers, size);
            assert_eq!(per_server(&s), expected, "{name} at {size}");
            for (a, b) in base.streams.iter().zip(&s.streams) {
                // Per request and per session, nothing changes.
                assert_eq!(
                    (a.end_s, a.spec.start_s, a.spec.system_tokens),
                    (b.end_s, b.spec.start_s, b.spec.system_tokens)
                );
                assert_eq!(a.spec.prompts_per_group, b.spec.prompts_per_group);
                assert_eq!(a.spec.turns, b.spec.turns);
                assert_eq!(a.spec.output_tokens, b.spec.output_tokens);
            }
        }
    }
    let err = builtin_scenario("mooncake")
        .unwrap()
        .at_servers(32)
        .unwrap_err()
        .to_string();
    assert!(err.contains("trace"), "{err}");
}

fn tiny() -> Scenario {
    Scenario::from_yaml(
        "
name: tiny
servers: 1
streams:
  - kind: shared-prefix
    groups: 2
    promptsPerGroup: 2
    systemTokens: 300
    questionTokens: 40
    outputTokens: 20
    load: { rate: 6 }
    endS: 2
  - kind: multi-turn
    groups: 1
    userTokens: 50
    outputTokens: 10
    turns: 2
    load: { closed: 1 }
    endS: 2
",
        "tiny.yaml",
    )
    .unwrap()
}

#[test]
fn every_decision_is_timed_and_timing_changes_no_simulated_figure() {
    let scenario = tiny().at_servers(2).unwrap();
    let policy = builtin_policy("static-default").unwrap();
    let a = run(&scenario, &policy, &sim_registry(), RunOptions::default()).unwrap();
    let b = run(&scenario, &policy, &sim_registry(), RunOptions::default()).unwrap();
    assert_eq!(a.records, b.records);
    assert_eq!(a.pick_cost.picks, a.records.len() as u64);
    let c = a.pick_cost;
    assert!(c.total_us > 0.0 && c.p50_us <= c.p99_us && c.p99_us <= c.max_us);
    assert!((c.mean_us * c.picks as f64 - c.total_us).abs() < 1e-6 * c.total_us.max(1.0));
}

#[test]
fn the_study_runs_every_scenario_size_and_policy() {
    let policies: Vec<_> = ["round-robin", "static-default"]
        .iter()
        .map(|p| builtin_policy(p).unwrap())
        .collect();
    let opts = ScaleOptions {
        sizes: vec![1, 2, 4],
        time_scale: 0.5,
        threads: 2,
        ..ScaleOptions::default()
    };
    let study = scale(&[tiny()], &policies, &sim_registry(), &opts).unwrap();
    let report = &study.report;
    assert_eq!(study.run_count, 6);
    assert_eq!(report.rows.len(), 6);
    // Rows in (scenario, size, policy) order, whatever order the runs finished in.
    let order: Vec<(u32, &str)> = report
        .rows
        .iter()
        .map(|r| (r.servers, r.policy.as_str()))
        .collect();
    assert_eq!(
        order,
        [
            (1, "round-robin"),
            (1, "static-default"),
            (2, "round-robin"),
            (2, "static-default"),
            (4, "round-robin"),
            (4, "static-default")
        ]
    );
    for r in &report.rows {
        assert_eq!(r.scenario, "tiny");
        assert_eq!(r.pick.picks, r.requests);
        assert_eq!(r.completed + r.dropped + r.timed_out, r.requests);
    }
    // Four times the pool at the same load: about four times the requests.
    let requests = |n| report.row("tiny", n, "round-robin").unwrap().requests as f64;
    assert!((2.0..8.0).contains(&(requests(4) / requests(1))));
    let text = table(report);
    assert!(text.contains("## tiny at 1, 2 and 4 servers"), "{text}");
    assert!(text.contains("| static-default | 4 |"), "{text}");
    // A size that is not a multiple of the scenario's is refused before anything runs.
    let opts = ScaleOptions {
        sizes: vec![8],
        ..ScaleOptions::default()
    };
    let base = builtin_scenario("multi-turn")
        .unwrap()
        .at_servers(16)
        .unwrap();
    assert!(scale(&[base], &policies, &sim_registry(), &opts).is_err());
}

#[test]
fn the_default_policies_are_builtins() {
    for p in DEFAULT_POLICIES {
        builtin_policy(p).unwrap();
    }
}

#[test]
fn the_scale_subcommand_writes_its_report_and_plots() {
    let dir = std::env::temp_dir().join(format!("shepherd-sim-scale-{}", std::process::id()));
    let scenario = dir.join("tiny.yaml");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        &scenario,
        "name: tiny\nservers: 1\nstreams:\n  - kind: shared-prefix\n    groups: 2\n    systemTokens: 200\n    questionTokens: 20\n    outputTokens: 10\n    load: { rate: 4 }\n    endS: 2\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_shepherd-sim"))
        .args(["scale", "--scenario"])
        .arg(&scenario)
        .args([
            "--servers",
            "1",
            "--servers",
            "2",
            "--policy",
            "round-robin",
            "--policy",
            "least-load",
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
    assert!(stdout.contains("| least-load | 2 |"), "{stdout}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/scale.json")).unwrap())
            .unwrap();
    assert_eq!(json["schema"], "shepherd-sim/scale/v1");
    assert_eq!(json["rows"].as_array().unwrap().len(), 4);
    assert!(json["rows"][0]["pick"]["p99_us"].is_number());
    for plot in ["scale-tiny-pick-cost.svg", "scale-tiny-ttft-p90.svg"] {
        let svg = std::fs::read_to_string(dir.join("out").join(plot)).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("least-load"),
            "{plot}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
