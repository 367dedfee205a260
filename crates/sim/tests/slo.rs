//! Latency objectives per stream: the headers the scheduler sees, and SLO attainment in the
//! reports (and nothing of it for scenarios without objectives).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::sync::Arc;

use parking_lot::Mutex;
use shepherd_scheduler_core::plugin::PluginInstance;
use shepherd_scheduler_core::prelude::*;
use shepherd_sim::compare::{CompareOptions, compare};
use shepherd_sim::policy::{Policy, builtin_policy, sim_registry};
use shepherd_sim::report::table;
use shepherd_sim::runner::{RunOptions, run};
use shepherd_sim::workload::{SLO_TPOT_HEADER, SLO_TTFT_HEADER, Scenario};

const CLASSES: &str = "
name: classes
servers: 2
streams:
  - name: interactive
    kind: shared-prefix
    groups: 2
    promptsPerGroup: 4
    systemTokens: 300
    questionTokens: 40
    outputTokens: 20
    load: { closed: 3 }
    endS: 1
    slo: { ttftMs: 250, tpotMs: 12.5 }
  - name: batch
    kind: shared-prefix
    systemTokens: 800
    questionTokens: 100
    outputTokens: 30
    load: { closed: 2 }
    endS: 1
    slo: { ttftMs: 2000 }
  - name: plain
    kind: multi-turn
    userTokens: 50
    outputTokens: 10
    turns: 2
    load: { closed: 1 }
    endS: 1
";

/// Per request scored: its id and its TTFT and TPOT objective headers.
type Seen = Arc<Mutex<Vec<(String, Option<String>, Option<String>)>>>;

/// Records the two objective headers of every request it scores (neutral scores).
struct HeaderRecorder(Seen);

impl Scorer for HeaderRecorder {
    fn category(&self) -> Category {
        Category::Balance
    }

    fn score(&self, cycle: &mut CycleState<'_>, _: &[&Arc<Endpoint>], _: &mut [Score]) {
        let r = cycle.request;
        self.0.lock().push((
            r.id.clone(),
            r.header(SLO_TTFT_HEADER).map(str::to_string),
            r.header(SLO_TPOT_HEADER).map(str::to_string),
        ));
    }
}

#[test]
fn requests_of_a_stream_with_objectives_carry_them_as_headers() {
    let seen: Seen = Arc::default();
    let mut registry = sim_registry();
    let sink = Arc::clone(&seen);
    registry.register("header-recorder", move |_| {
        Ok(PluginInstance::scorer(Arc::new(HeaderRecorder(
            Arc::clone(&sink),
        ))))
    });
    let policy = Policy::from_yaml(
        "recorder",
        "plugins:\n  - type: header-recorder\n  - type: queue-scorer\n  - type: max-score-picker\nschedulingProfiles:\n  - name: default\n    plugins:\n      - pluginRef: header-recorder\n        weight: 1\n      - pluginRef: queue-scorer\n        weight: 1\n      - pluginRef: max-score-picker\n",
        "recorder.yaml",
    )
    .unwrap();
    let scenario = Scenario::from_yaml(CLASSES, "classes.yaml").unwrap();
    let result = run(&scenario, &policy, &registry, RunOptions::default()).unwrap();
    let seen = seen.lock();
    assert_eq!(seen.len(), result.records.len());
    let mut per_stream = [0; 3];
    for (id, ttft, tpot) in seen.iter() {
        // Request ids are issue order, as the records are.
        let stream = result.records[id.parse::<usize>().unwrap()].stream;
        per_stream[stream as usize] += 1;
        let expected = match stream {
            0 => (Some("250"), Some("12.5")),
            1 => (Some("2000"), None),
            _ => (None, None),
        };
        assert_eq!((ttft.as_deref(), tpot.as_deref()), expected, "request {id}");
    }
    assert!(per_stream.iter().all(|&n| n > 0), "{per_stream:?}");
}

fn report(yaml: &str, seeds: u32) -> shepherd_sim::report::Report {
    let policies = vec![builtin_policy("static-default").unwrap()];
    compare(
        &[Scenario::from_yaml(yaml, "s.yaml").unwrap()],
        &policies,
        &sim_registry(),
        &CompareOptions {
            seed: 3,
            seeds,
            fresh_bound: false,
            ..CompareOptions::default()
        },
    )
    .unwrap()
    .report
}

#[test]
fn reports_count_attainment_overall_and_per_stream_with_objectives() {
    let one = report(CLASSES, 1);
    let s = &one.scenarios[0];
    assert_eq!(s.objectives.len(), 2);
    let row = &s.results[0];
    let slo = row.slo.unwrap();
    let (i, b) = (row.streams[0].slo.unwrap(), row.streams[1].slo.unwrap());
    assert_eq!(row.streams[2].slo, None);
    assert_eq!(slo.with_objectives, i.with_objectives + b.with_objectives);
    assert_eq!(slo.met, i.met + b.met);
    assert!(slo.with_objectives > 0 && slo.with_objectives < row.requests);
    let json = serde_json::to_string(&one).unwrap();
    assert!(json.contains("\"slo\":{\"met\":"), "{json}");
    assert!(json.contains(
        "\"objectives\":[{\"stream\":\"interactive\",\"ttft_ms\":250.0,\"tpot_ms\":12.5}"
    ));
    let text = table(&one);
    assert!(text.contains("SLO: interactive TTFT ≤ 250 ms, TPOT ≤ 12.5 ms; batch TTFT ≤ 2000 ms."));
    assert!(
        text.contains("| SLO met | goodput (req/s) | interactive SLO | batch SLO |"),
        "{text}"
    );
    assert!(slo.goodput_rps > 0.0 && i.goodput_rps + b.goodput_rps - slo.goodput_rps < 0.01);
    assert!(
        text.contains(&format!("({}/{}) |", slo.met, slo.with_objectives)),
        "{text}"
    );

    let three = report(CLASSES, 3);
    let row = &three.scenarios[0].results[0];
    let intervals = row.intervals.as_ref().unwrap();
    assert_eq!(intervals["slo_attainment"].n, 3);
    assert_eq!(
        row.slo.unwrap().attainment,
        intervals["slo_attainment"].mean
    );
    let stream = &row.streams[0];
    assert!(stream.intervals.as_ref().unwrap().contains_key("slo_met"));
    assert!(
        !row.streams[2]
            .intervals
            .as_ref()
            .unwrap()
            .contains_key("slo_met")
    );
    assert!(table(&three).contains(" ± "));
}

#[test]
fn scenarios_without_objectives_report_nothing_of_them() {
    let plain = CLASSES.replace("    slo: { ttftMs: 250, tpotMs: 12.5 }\n", "");
    let plain = plain.replace("    slo: { ttftMs: 2000 }\n", "");
    for seeds in [1, 2] {
        let r = report(&plain, seeds);
        let json = serde_json::to_string(&r).unwrap();
        assert!(
            !json.contains("slo") && !json.contains("objectives"),
            "{json}"
        );
        assert!(!table(&r).contains("SLO"));
    }
}

#[test]
fn the_seeds_report_has_the_latency_model_errors() {
    let policies = vec![
        builtin_policy("static-default").unwrap(),
        builtin_policy("predicted-latency").unwrap(),
    ];
    let scenario = Scenario::from_yaml(
        "
name: learn
servers: 2
streams:
  - kind: shared-prefix
    groups: 4
    promptsPerGroup: 8
    systemTokens: 500
    questionTokens: 60
    outputTokens: 30
    load: { closed: 8 }
    endS: 3
",
        "learn.yaml",
    )
    .unwrap();
    let report = |seeds| {
        compare(
            std::slice::from_ref(&scenario),
            &policies,
            &sim_registry(),
            &CompareOptions {
                seed: 5,
                seeds,
                fresh_bound: false,
                ..CompareOptions::default()
            },
        )
        .unwrap()
        .report
    };
    let two = report(2);
    let rows = &two.scenarios[0].results;
    assert!(rows[0].latency_error.is_none());
    let e = rows[1].latency_error.as_ref().unwrap();
    assert_eq!(e.levels, ["<8", "<32", "<128", "128+"]);
    assert_eq!(e.ttft.overall.unwrap().n, 2);
    assert!(e.ttft.overall.unwrap().mean > 0.0);
    let text = table(&two);
    assert!(text.contains("Latency-model prediction error"), "{text}");
    assert!(text.contains("| predicted-latency | "), "{text}");
    assert!(!text.contains("| static-default | –"), "{text}");
    // One seed: the plain report, without the errors.
    let one = report(1);
    assert!(one.scenarios[0].results[1].latency_error.is_none());
    assert!(!table(&one).contains("Latency-model"));
}
