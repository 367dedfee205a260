//! SLO attainment, goodput and the maximum-goodput search on small scenarios.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use shepherd_sim::goodput::{SearchOptions, search};
use shepherd_sim::policy::{builtin_policy, sim_registry};
use shepherd_sim::report::max_goodput::TARGET;
use shepherd_sim::report::{judgements, summarize};
use shepherd_sim::runner::{RunOptions, run};
use shepherd_sim::workload::Scenario;

/// Two servers, short chat at `rate` requests/s for 20 s, judged by TTFT ≤ 300 ms and
/// TPOT ≤ 12 ms.
fn chat(rate: f64) -> Scenario {
    Scenario::from_yaml(
        &format!(
            "name: chat\nservers: 2\nobjectives: {{ ttftMs: 300, tpotMs: 12 }}\nstreams:\n  - kind: shared-prefix\n    groups: 1\n    promptsPerGroup: 100000\n    questionTokens: 2000\n    outputTokens: 200\n    load: {{ rate: {rate} }}\n    endS: 20\n"
        ),
        "chat.yaml",
    )
    .unwrap()
}

#[test]
fn goodput_is_requests_meeting_both_objectives_per_second() {
    let s = chat(4.0);
    let policy = builtin_policy("adaptive").unwrap();
    let r = run(&s, &policy, &sim_registry(), RunOptions::default()).unwrap();
    let row = summarize(&s, &r, false);
    let slo = row.slo.unwrap();
    assert_eq!(slo.with_objectives, row.requests);
    assert!(slo.attainment > 0.95, "{slo:?}");
    let expected = slo.met as f64 / row.makespan_s;
    assert!(
        (slo.goodput_rps - expected).abs() < 0.01,
        "{slo:?} {}",
        row.makespan_s
    );
    // Goodput is judged beside TTFT p90 and tokens/s.
    let j = judgements(std::slice::from_ref(&row));
    assert_eq!(
        j.iter().map(|j| j.figure.as_str()).collect::<Vec<_>>(),
        ["ttft_p90_ms", "output_tokens_per_s", "goodput_rps"]
    );
}

#[test]
fn the_search_finds_the_load_where_attainment_crosses_ninety_percent() {
    let s = chat(4.0);
    let policy = builtin_policy("least-load").unwrap();
    let opts = SearchOptions {
        threads: 2,
        ..SearchOptions::default()
    };
    let found = search(&[(&s, &policy, "least-load")], &sim_registry(), &opts).unwrap();
    let m = &found[0];
    assert_eq!(m.policy, "least-load");
    // The pool serves 4 req/s easily and is overwhelmed somewhere above it.
    assert!(m.factor > 1.0, "{m:?}");
    let fail = m.next_failing_factor.expect("a failing load was found");
    assert!(fail / m.factor <= opts.precision + 1e-9, "{m:?}");
    assert!(m.attainment >= TARGET);
    // The rate reported is the measured arrival rate at that load: about 4 × factor.
    assert!((m.rate_rps / (4.0 * m.factor) - 1.0).abs() < 0.2, "{m:?}");
    // Every probe at or below the maximum met the target; the failing one did not.
    for p in &m.probes {
        if p.factor <= m.factor {
            assert!(p.attainment >= TARGET, "{p:?}");
        }
        if p.factor >= fail {
            assert!(p.attainment < TARGET, "{p:?}");
        }
    }
    // Deterministic.
    let again = search(&[(&s, &policy, "least-load")], &sim_registry(), &opts).unwrap();
    assert_eq!(found, again);
}

#[test]
fn a_scenario_without_objectives_is_refused() {
    let s = Scenario::from_yaml(
        "name: x\nservers: 1\nstreams:\n  - kind: shared-prefix\n    load: { rate: 1 }\n    endS: 2\n",
        "x.yaml",
    )
    .unwrap();
    let policy = builtin_policy("adaptive").unwrap();
    let e = search(
        &[(&s, &policy, "adaptive")],
        &sim_registry(),
        &SearchOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("objectives"), "{e}");
}
