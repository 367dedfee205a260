//! The scenarios that ship with the simulator (YAML files embedded at build time), and the
//! traces they replay (embedded compressed, decompressed when the scenario is loaded).

use super::spec::Scenario;
use crate::error::SimError;

/// `(name, YAML)` of the built-in scenarios of the default comparison, in report order.
pub const BUILTIN_SCENARIOS: &[(&str, &str)] = &[
    (
        "shared-prefix",
        include_str!("../../scenarios/shared-prefix.yaml"),
    ),
    (
        "hot-prefix",
        include_str!("../../scenarios/hot-prefix.yaml"),
    ),
    (
        "multi-turn",
        include_str!("../../scenarios/multi-turn.yaml"),
    ),
    ("mooncake", include_str!("../../scenarios/mooncake.yaml")),
    (
        "slo-classes",
        include_str!("../../scenarios/slo-classes.yaml"),
    ),
];

/// `(path as the built-in scenarios write it, gzip bytes)` of the traces embedded in the
/// binary. The Mooncake conversation trace is the FAST '25 release's
/// `conversation_trace.jsonl` (Apache-2.0), unchanged; `crates/sim/traces/NOTICE` has the
/// attribution.
pub const BUILTIN_TRACES: &[(&str, &[u8])] = &[(
    "../traces/mooncake_conversation.jsonl.gz",
    include_bytes!("../../traces/mooncake_conversation.jsonl.gz"),
)];

/// The `overload` scenario (`name`, YAML): priority classes and tenants over capacity, for
/// the flow-control report (`shepherd-sim overload`); not part of the default comparison,
/// whose table has no per-class columns.
pub const OVERLOAD_SCENARIO: (&str, &str) =
    ("overload", include_str!("../../scenarios/overload.yaml"));

/// `(name, YAML)` of the prefill/decode disaggregation study's scenarios (`shepherd-sim pd`),
/// in report order; not part of the default comparison (their servers get roles per run).
pub const PD_SCENARIOS: &[(&str, &str)] = &[
    (
        "pd-long-prompt",
        include_str!("../../scenarios/pd-long-prompt.yaml"),
    ),
    (
        "pd-decode-heavy",
        include_str!("../../scenarios/pd-decode-heavy.yaml"),
    ),
    ("pd-mixed", include_str!("../../scenarios/pd-mixed.yaml")),
    (
        "pd-long-beside-chat",
        include_str!("../../scenarios/pd-long-beside-chat.yaml"),
    ),
];

/// The built-in scenario called `name` (one of [`BUILTIN_SCENARIOS`], `overload` or
/// [`PD_SCENARIOS`]).
pub fn builtin_scenario(name: &str) -> Result<Scenario, SimError> {
    let (_, yaml) = BUILTIN_SCENARIOS
        .iter()
        .chain(std::iter::once(&OVERLOAD_SCENARIO))
        .chain(PD_SCENARIOS)
        .find(|(n, _)| *n == name)
        .ok_or_else(|| SimError::Unknown {
            kind: "scenario",
            name: name.to_string(),
            known: BUILTIN_SCENARIOS
                .iter()
                .chain(std::iter::once(&OVERLOAD_SCENARIO))
                .chain(PD_SCENARIOS)
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    Scenario::from_yaml_with(yaml, &format!("<built-in {name}>"), BUILTIN_TRACES)
}

/// Whether a command-line argument names a file rather than a built-in: an existing path, or
/// one ending in `.yaml` / `.yml`.
pub(crate) fn names_a_file(arg: &str) -> bool {
    arg.ends_with(".yaml") || arg.ends_with(".yml") || std::path::Path::new(arg).exists()
}

/// The scenario `arg` names: a scenario file when `arg` is an existing path or ends in
/// `.yaml` / `.yml`, else the built-in scenario of that name.
pub fn scenario_by_name_or_path(arg: &str) -> Result<Scenario, SimError> {
    if names_a_file(arg) {
        Scenario::from_file(std::path::Path::new(arg))
    } else {
        builtin_scenario(arg)
    }
}

/// Every built-in scenario.
pub fn builtin_scenarios() -> Result<Vec<Scenario>, SimError> {
    BUILTIN_SCENARIOS
        .iter()
        .map(|(n, _)| builtin_scenario(n))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_builtin_scenario_loads() {
        let all = super::builtin_scenarios().unwrap();
        assert_eq!(all.len(), super::BUILTIN_SCENARIOS.len());
        assert!(super::builtin_scenario("nope").is_err());
        assert_eq!(
            super::builtin_scenario("overload").unwrap().streams.len(),
            6
        );
        let mooncake = super::builtin_scenario("mooncake").unwrap();
        let trace = &mooncake.streams[0].trace;
        assert_eq!(trace.len(), 12_031);
        assert!(trace.iter().all(|r| r.hash_ids.first() == Some(&0)));
        let classes = super::builtin_scenario("slo-classes").unwrap();
        assert!(classes.has_objectives());
    }

    #[test]
    fn every_scenario_file_states_ttft_and_tpot_objectives_for_every_stream() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let mut files = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "yaml") {
                continue;
            }
            files += 1;
            let s = crate::workload::Scenario::from_file(&path).unwrap();
            let o = s
                .objectives
                .unwrap_or_else(|| panic!("{}: no objectives", path.display()));
            assert!(
                o.ttft_ms.is_some() && o.tpot_ms.is_some(),
                "{}",
                path.display()
            );
            for i in 0..s.streams.len() {
                let e = s.objectives_of(i).unwrap();
                assert!(
                    e.ttft_ms.is_some() && e.tpot_ms.is_some(),
                    "{} stream {i}",
                    path.display()
                );
            }
        }
        assert!(files >= 12, "{files}");
    }
}
