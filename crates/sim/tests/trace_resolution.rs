//! `timestampResolutionMs`: a trace recorded in coarse bins is replayed with each request at a
//! seeded point of its bin, in order, instead of every request of a bin at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use shepherd_sim::workload::{Issue, Scenario, Traffic};

/// Three bins of 3 s, four requests each, written at the bins' starts.
fn trace() -> Vec<u8> {
    let mut text = String::new();
    for bin in 0..3 {
        for i in 0..4 {
            text.push_str(&format!(
                "{{\"timestamp\": {}, \"input_length\": 512, \"output_length\": {}, \"hash_ids\": [{}]}}\n",
                bin * 3000,
                10 + bin * 4 + i,
                bin * 4 + i
            ));
        }
    }
    text.into_bytes()
}

/// The trace written to a file of this call's own (tests run in parallel: a file shared
/// between them could be read while another rewrites it), and a scenario replaying it.
fn yaml(resolution: &str) -> String {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!(
        "shepherd-trace-{}-{call}.jsonl",
        std::process::id()
    ));
    std::fs::write(&path, trace()).unwrap();
    format!(
        "name: t\nservers: 1\nstreams:\n  - kind: trace\n    name: trace\n    path: {:?}\n{resolution}",
        path.display().to_string()
    )
}

fn scenario(resolution: &str) -> Scenario {
    Scenario::from_yaml(&yaml(resolution), "t.yaml").unwrap()
}

/// Arrival times (ms) and output lengths, in the order the trace is replayed.
fn arrivals(scenario: &Scenario, seed: u64) -> Vec<(f64, u32)> {
    let mut traffic = Traffic::new(scenario, seed);
    let mut next = traffic.initial().pop();
    let mut out = Vec::new();
    while let Some((t, issue)) = next {
        assert!(matches!(issue, Issue::Arrival { .. }));
        let (request, following) = traffic.issue(issue, t);
        out.push((t * 1000.0, request.unwrap().output.len));
        next = following;
    }
    out
}

#[test]
fn as_written_without_a_resolution() {
    let times: Vec<f64> = arrivals(&scenario(""), 7).iter().map(|a| a.0).collect();
    assert_eq!(times.len(), 12);
    for (i, t) in times.iter().enumerate() {
        assert_eq!(*t, (i / 4) as f64 * 3000.0);
    }
}

#[test]
fn spread_within_each_bin_in_order_and_seeded() {
    let spread = scenario("    timestampResolutionMs: 3000\n");
    let replay = arrivals(&spread, 7);
    assert_eq!(replay.len(), 12);
    assert!(
        replay.windows(2).all(|w| w[0].0 <= w[1].0),
        "in order: {replay:?}"
    );
    for &(t, output) in &replay {
        // Output lengths 10 + bin * 4 + i name each record's bin.
        let bin = f64::from((output - 10) / 4);
        assert!(
            t >= bin * 3000.0 && t < (bin + 1.0) * 3000.0,
            "{t} in bin {bin}"
        );
    }
    let distinct: std::collections::BTreeSet<u64> = replay.iter().map(|a| a.0.to_bits()).collect();
    assert_eq!(distinct.len(), 12, "no two arrive at once");
    assert_eq!(
        arrivals(&spread, 7),
        replay,
        "the same seed, the same replay"
    );
    assert_ne!(arrivals(&spread, 8), replay, "another seed, other points");
}

#[test]
fn refused_where_it_means_nothing() {
    let negative = yaml("    timestampResolutionMs: -1\n");
    let error = Scenario::from_yaml(&negative, "t.yaml").unwrap_err();
    assert!(
        error.to_string().contains("timestampResolutionMs"),
        "{error}"
    );
    let open_loop = "name: t\nservers: 1\nstreams:\n  - kind: shared-prefix\n    name: s\n    load: { rate: 1 }\n    endS: 10\n    timestampResolutionMs: 100\n";
    let error = Scenario::from_yaml(open_loop, "t.yaml").unwrap_err();
    assert!(
        error.to_string().contains("only for trace streams"),
        "{error}"
    );
}
