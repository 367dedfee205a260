//! The upstream parts of the schema: plugin kinds honoured outside the registry, not-yet
//! types, cross-section references, profile handlers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use shepherd_scheduler_core::config::{
    ConfigError, EndpointPickerConfig, Registry, build_scheduler,
};
use shepherd_scheduler_core::endpoint::Pool;
use shepherd_scheduler_core::plugin::PluginInstance;
use shepherd_scheduler_core::{
    endpoint::Endpoint,
    plugin::{Category, CycleState, Score, Scorer},
};

struct Constant;
impl Scorer for Constant {
    fn category(&self) -> Category {
        Category::Balance
    }
    fn score(&self, _: &mut CycleState<'_>, _: &[&Arc<Endpoint>], out: &mut [Score]) {
        out.fill(Score::new(1.0));
    }
}

fn registry() -> Registry {
    let mut r = Registry::new();
    r.register("queue-scorer", |_| {
        Ok(PluginInstance::scorer(Arc::new(Constant)))
    });
    r
}

fn build(yaml: &str) -> Result<(), ConfigError> {
    let config = EndpointPickerConfig::from_yaml(yaml)?;
    build_scheduler(&config, &registry(), Arc::new(Pool::new())).map(|_| ())
}

#[test]
fn framework_plugins_are_accepted_and_not_built() {
    build("plugins:\n- type: queue-scorer\n- type: single-profile-handler\n- type: openai-parser\n- type: metrics-data-source\n- type: utilization-detector\nrequestHandler:\n  parsers:\n  - pluginRef: openai-parser\n").unwrap();
    // A profile listing one loads without it, as upstream's loader skips it, with a warning.
    let yaml = "plugins:\n- type: openai-parser\n- type: queue-scorer\n- type: single-profile-handler\nschedulingProfiles:\n- name: p\n  plugins:\n  - pluginRef: openai-parser\n  - pluginRef: single-profile-handler\n  - pluginRef: queue-scorer\n";
    build(yaml).unwrap();
    let config = EndpointPickerConfig::from_yaml(yaml).unwrap();
    let scheduler = build_scheduler(&config, &registry(), Arc::new(Pool::new())).unwrap();
    assert_eq!(scheduler.profiles()[0].scorers().len(), 1);
    let warnings: Vec<String> = config.warnings().iter().map(|w| w.to_string()).collect();
    assert_eq!(
        warnings
            .iter()
            .filter(|w| w.contains("not a scheduling plugin"))
            .count(),
        2,
        "{warnings:?}"
    );
    // A name declared nowhere is still an error.
    let err = build("plugins:\n- type: queue-scorer\nschedulingProfiles:\n- name: p\n  plugins:\n  - pluginRef: nothing\n").unwrap_err();
    assert!(
        matches!(err, ConfigError::DanglingReference { .. }),
        "{err}"
    );
}

#[test]
fn every_upstream_type_is_implemented_and_unknown_types_say_unknown() {
    use shepherd_scheduler_core::config::{Status, UPSTREAM_TYPES};
    let not_yet: Vec<&str> = UPSTREAM_TYPES
        .iter()
        .filter(|t| matches!(t.status, Status::NotYet(_)))
        .map(|t| t.name)
        .collect();
    assert!(not_yet.is_empty(), "{not_yet:?}");
    let err = build("plugins:\n- type: made-up-scorer\n").unwrap_err();
    assert!(
        matches!(&err, ConfigError::UnknownPluginType { .. }),
        "{err}"
    );
}

#[test]
fn profile_handler_rules_are_upstreams() {
    let two_profiles = "plugins:\n- type: queue-scorer\n- type: single-profile-handler\nschedulingProfiles:\n- name: a\n- name: b\n";
    let err = EndpointPickerConfig::from_yaml(two_profiles).unwrap_err();
    assert_eq!(err.line(), Some(6), "{err}");
    // Without a handler, several profiles load (Shepherd uses the first).
    build(&two_profiles.replace("- type: single-profile-handler\n", "")).unwrap();
    let err = EndpointPickerConfig::from_yaml(
        "plugins:\n- type: single-profile-handler\n- type: single-profile-handler\n  name: again\n",
    )
    .unwrap_err();
    assert_eq!(err.line(), Some(3), "{err}");
    // Parameters given to single-profile-handler are ignored, as upstream, with a warning.
    let config = EndpointPickerConfig::from_yaml(
        "plugins:\n- type: single-profile-handler\n  parameters: {x: 1}\n",
    )
    .unwrap();
    assert!(
        config
            .warnings()
            .iter()
            .any(|w| w.message.contains("takes no parameters")),
        "{:?}",
        config.warnings()
    );
    // A parser's are still refused.
    let err =
        EndpointPickerConfig::from_yaml("plugins:\n- type: openai-parser\n  parameters: {x: 1}\n")
            .unwrap_err();
    assert_eq!(err.line(), Some(3), "{err}");
}

#[test]
fn references_name_declared_plugins_of_the_right_kind() {
    for (yaml, line) in [
        ("plugins: []\nparser: {pluginRef: openai-parser}\n", 2),
        (
            "plugins:\n- type: queue-scorer\nrequestHandler:\n  parsers:\n  - pluginRef: queue-scorer\n",
            5,
        ),
        (
            "plugins: []\ndataLayer:\n  sources:\n  - pluginRef: metrics-data-source\n",
            4,
        ),
        (
            "plugins: []\ndataLayer:\n  discovery: {pluginRef: file-discovery}\n",
            3,
        ),
        ("plugins: []\nsaturationDetector: {pluginRef: nope}\n", 2),
        ("plugins: []\ndataLayer:\n  sauces: []\n", 3),
    ] {
        let err = EndpointPickerConfig::from_yaml(yaml).unwrap_err();
        assert_eq!(err.line(), Some(line), "{yaml}: {err}");
    }
    // The default detector needs no declaration, as upstream.
    EndpointPickerConfig::from_yaml("saturationDetector: {pluginRef: utilization-detector}\n")
        .unwrap();
}

#[test]
fn producers_upstream_runs_as_extractors_may_be_named_there() {
    let yaml = "plugins:\n- type: endpoint-notification-source\n- type: precise-prefix-cache-producer\n- type: queue-scorer\ndataLayer:\n  sources:\n  - pluginRef: endpoint-notification-source\n    extractors:\n    - pluginRef: precise-prefix-cache-producer\n";
    EndpointPickerConfig::from_yaml(yaml).unwrap();
    // A scorer there is still the wrong kind.
    let err = EndpointPickerConfig::from_yaml(&yaml.replace(
        "    - pluginRef: precise-prefix-cache-producer",
        "    - pluginRef: queue-scorer",
    ))
    .unwrap_err();
    assert_eq!(err.line(), Some(9), "{err}");
}
