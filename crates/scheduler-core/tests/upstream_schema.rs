//! The upstream parts of the schema: plugin kinds honoured outside the registry, not-yet
//! types, cross-section references, profile handlers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use shepherd_scheduler_core::config::{
    Area, ConfigError, EndpointPickerConfig, Registry, build_scheduler,
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
    // But a profile cannot use them.
    let err = build("plugins:\n- type: openai-parser\nschedulingProfiles:\n- name: p\n  plugins:\n  - pluginRef: openai-parser\n").unwrap_err();
    assert!(
        matches!(
            err,
            ConfigError::DanglingReference { .. } | ConfigError::NotUsable { .. }
        ),
        "{err}"
    );
}

#[test]
fn not_yet_types_name_their_area_and_unknown_types_say_unknown() {
    let err = build("plugins:\n- type: burst-prefix-cache-producer\n").unwrap_err();
    assert!(
        matches!(
            &err,
            ConfigError::NotImplemented {
                area: Area::PrecisePrefixCache,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("precise prefix cache"), "{err}");
    let err = build("plugins:\n- type: vllmgrpc-parser\n").unwrap_err();
    assert!(
        matches!(
            &err,
            ConfigError::NotImplemented {
                area: Area::Parsers,
                ..
            }
        ),
        "{err}"
    );
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
    let err = EndpointPickerConfig::from_yaml(
        "plugins:\n- type: single-profile-handler\n  parameters: {x: 1}\n",
    )
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
