//! Tests of the scenario files' reading (`spec.rs`).

use super::*;

#[test]
fn malformed_scenarios_name_file_line_and_field() {
    let e = Scenario::from_yaml(
        "name: x\nservers: 2\nstreams:\n  - kind: shared-prefix\n    grops: 3\n",
        "s.yaml",
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("s.yaml:5:") && e.contains("grops"), "{e}");
    let e = Scenario::from_yaml("name: x\nservers: 0\nstreams: []\n", "s.yaml")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("s.yaml:2:") && e.contains("servers"), "{e}");
    let e = Scenario::from_yaml(
        "name: x\nservers: 2\nstreams:\n  - kind: shared-prefix\n    endS: 5\n",
        "s.yaml",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("s.yaml:4") && e.contains("streams[0].load"),
        "{e}"
    );
    let e = Scenario::from_yaml(
        "name: x\nservers: 2\nhardware: tpu\nstreams: []\n",
        "s.yaml",
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("s.yaml:3:") && e.contains("hardware"), "{e}");
}

#[test]
fn scenario_objectives_state_both_and_streams_override_them_one_by_one() {
    let stream = "streams:\n  - kind: shared-prefix\n    load: { rate: 1 }\n    endS: 5\n";
    let e = Scenario::from_yaml(
        &format!("name: x\nservers: 1\nobjectives: {{ ttftMs: 100 }}\n{stream}"),
        "s.yaml",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("s.yaml:3:") && e.contains("objectives.tpotMs"),
        "{e}"
    );
    let e = Scenario::from_yaml(
        &format!("name: x\nservers: 1\nobjectives: {{ ttftMs: 100, tpotMs: -1 }}\n{stream}"),
        "s.yaml",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("objectives.tpotMs"), "{e}");
    let s = Scenario::from_yaml(
        &format!("name: x\nservers: 1\nobjectives: {{ ttftMs: 100, tpotMs: 20 }}\n{stream}  - kind: shared-prefix\n    load: {{ closed: 3 }}\n    endS: 5\n    slo: {{ ttftMs: 900 }}\n"),
        "s.yaml",
    )
    .unwrap();
    let both = |ttft, tpot| {
        Some(SloSpec {
            ttft_ms: Some(ttft),
            tpot_ms: Some(tpot),
        })
    };
    assert_eq!(s.objectives_of(0), both(100.0, 20.0));
    assert_eq!(s.objectives_of(1), both(900.0, 20.0));
    assert_eq!(s.objectives_of(2), None);
    assert!(s.has_objectives());
    // Load scaling: rates and closed loops both scale.
    let double = s.load_scaled(2.0);
    assert_eq!(double.streams[0].load, Some(Load::Rate(2.0)));
    assert_eq!(double.streams[1].load, NonZeroU32::new(6).map(Load::Closed));
    let tiny = s.load_scaled(0.01);
    assert_eq!(tiny.streams[1].load, Some(Load::Closed(NonZeroU32::MIN)));
}
