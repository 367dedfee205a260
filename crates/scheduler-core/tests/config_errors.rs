//! Configuration mistakes: each is a `ConfigError` naming the offending entry.

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{
    ConfigError, EndpointPickerConfig, Registry, build_scheduler,
};
use shepherd_scheduler_core::endpoint::{Endpoint, Pool};
use shepherd_scheduler_core::plugin::{
    Category, CycleState, Picker, PluginInstance, Score, Scorer,
};
use shepherd_scheduler_core::rng::PickRng;

/// A scorer that gives every candidate the same score.
struct ConstantScorer(f64);

impl Scorer for ConstantScorer {
    fn category(&self) -> Category {
        Category::Balance
    }

    fn score(&self, _: &mut CycleState<'_>, _: &[&Arc<Endpoint>], out: &mut [Score]) {
        out.fill(Score::new(self.0));
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ConstantParams {
    value: f64,
}

/// A picker that takes candidates in order.
struct FirstPicker;

impl Picker for FirstPicker {
    fn pick(&self, totals: &[f64], count: usize, _: &mut PickRng) -> Vec<usize> {
        (0..totals.len().min(count)).collect()
    }
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry.register("constant-scorer", |args| {
        let params: ConstantParams = args.parse()?;
        Ok(PluginInstance::scorer(Arc::new(ConstantScorer(
            params.value,
        ))))
    });
    registry.register("first-picker", |_| {
        Ok(PluginInstance::picker(Arc::new(FirstPicker)))
    });
    registry.register("does-nothing", |_| Ok(PluginInstance::default()));
    registry
}

fn build(yaml: &str, registry: &Registry) -> Result<(), ConfigError> {
    let config = EndpointPickerConfig::from_yaml(yaml)?;
    let pool = Arc::new(Pool::new());
    build_scheduler(&config, registry, pool).map(|_| ())
}

const GOOD: &str = r#"
plugins:
- type: constant-scorer
  name: half
  parameters: {value: 0.5}
- type: first-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: half
    weight: 2
  - pluginRef: first-picker
"#;

#[test]
fn a_good_config_builds() {
    build(GOOD, &registry()).unwrap();
}

#[test]
fn an_unknown_plugin_type_names_the_plugin_and_the_type() {
    let yaml = GOOD
        .replace("type: first-picker", "type: fancy-picker\n  name: chooser")
        .replace("pluginRef: first-picker", "pluginRef: chooser");
    let err = build(&yaml, &registry()).unwrap_err();
    assert!(
        matches!(&err, ConfigError::UnknownPluginType { name, plugin_type, .. }
            if name == "chooser" && plugin_type == "fancy-picker"),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains("`chooser`") && message.contains("`fancy-picker`"),
        "{message}"
    );
    assert!(
        message.contains("constant-scorer"),
        "lists the known types: {message}"
    );

    // With an empty registry, every type is unknown.
    let err = build(GOOD, &Registry::new()).unwrap_err();
    assert!(
        matches!(&err, ConfigError::UnknownPluginType { name, .. } if name == "half"),
        "{err:?}"
    );
}

#[test]
fn a_dangling_plugin_ref_names_the_profile_and_the_ref() {
    let yaml = GOOD.replace("pluginRef: half", "pluginRef: halve");
    let err = build(&yaml, &registry()).unwrap_err();
    assert_eq!(
        err,
        ConfigError::DanglingReference {
            profile: "default".into(),
            plugin_ref: "halve".into()
        }
    );
    assert!(err.to_string().contains("`halve`"));
}

#[test]
fn invalid_weights_name_the_plugin() {
    for weight in ["-1", ".nan", ".inf"] {
        let yaml = GOOD.replace("weight: 2", &format!("weight: {weight}"));
        let err = build(&yaml, &registry()).unwrap_err();
        assert!(
            matches!(&err, ConfigError::InvalidWeight { profile, plugin, .. }
                if profile == "default" && plugin == "half"),
            "{weight}: {err:?}"
        );
    }
    let yaml = GOOD.replace("weight: 2", "weight: heavy");
    assert!(matches!(
        build(&yaml, &registry()),
        Err(ConfigError::Syntax { .. })
    ));
}

#[test]
fn duplicate_names_are_rejected() {
    let yaml = GOOD.replace("type: first-picker", "type: first-picker\n  name: half");
    assert_eq!(
        build(&yaml, &registry()).unwrap_err(),
        ConfigError::DuplicatePluginName("half".into())
    );

    // A plugin without a name is named after its type, so two of a type clash too.
    let yaml = GOOD.replace(
        "- type: first-picker",
        "- type: first-picker\n- type: first-picker",
    );
    assert_eq!(
        build(&yaml, &registry()).unwrap_err(),
        ConfigError::DuplicatePluginName("first-picker".into())
    );

    let yaml = format!("{GOOD}- name: default\n  plugins: []\n");
    assert_eq!(
        build(&yaml, &registry()).unwrap_err(),
        ConfigError::DuplicateProfileName("default".into())
    );
}

#[test]
fn bad_parameters_name_the_plugin() {
    let yaml = GOOD.replace("{value: 0.5}", "{valeu: 0.5}");
    let err = build(&yaml, &registry()).unwrap_err();
    match &err {
        ConfigError::BadParameters {
            name,
            plugin_type,
            reason,
        } => {
            assert_eq!(
                (name.as_str(), plugin_type.as_str()),
                ("half", "constant-scorer")
            );
            assert!(reason.to_string().contains("valeu"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_plugin_that_is_nothing_usable_and_two_pickers_are_rejected() {
    let yaml = GOOD
        .replace(
            "- type: first-picker",
            "- type: first-picker\n- type: does-nothing",
        )
        .replace(
            "  - pluginRef: first-picker",
            "  - pluginRef: first-picker\n  - pluginRef: does-nothing",
        );
    assert_eq!(
        build(&yaml, &registry()).unwrap_err(),
        ConfigError::NotUsable {
            profile: "default".into(),
            plugin: "does-nothing".into()
        }
    );

    let yaml = GOOD
        .replace(
            "- type: first-picker",
            "- type: first-picker\n- type: first-picker\n  name: other",
        )
        .replace(
            "  - pluginRef: first-picker",
            "  - pluginRef: first-picker\n  - pluginRef: other",
        );
    assert!(matches!(
        build(&yaml, &registry()),
        Err(ConfigError::TwoPickers { ref second, .. }) if second == "other"
    ));
}

#[test]
fn bad_yaml_is_a_syntax_error_with_its_location() {
    let err = EndpointPickerConfig::from_yaml("plugins:\n- type: [unclosed\n").unwrap_err();
    let ConfigError::Syntax { line, column, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(*line, Some(2), "{err}");
    assert_eq!(*column, Some(9), "{err}");
    assert!(err.to_string().contains("line 2, column 9"), "{err}");

    // Misspelled keys inside entries are caught, with the key named.
    let err = EndpointPickerConfig::from_yaml("plugins:\n- type: x\n  nmae: y\n").unwrap_err();
    assert!(err.to_string().contains("nmae"), "{err}");
    let err = EndpointPickerConfig::from_yaml(
        "schedulingProfiles:\n- name: p\n  plugins:\n  - pluginref: x\n",
    )
    .unwrap_err();
    assert!(err.to_string().contains("pluginref"), "{err}");

    // The wrong shape altogether.
    assert!(matches!(
        EndpointPickerConfig::from_yaml("plugins: 5"),
        Err(ConfigError::Syntax { .. })
    ));
}

#[test]
fn scheduler_settings_are_checked() {
    let err = EndpointPickerConfig::from_yaml("scheduler:\n  maxEndpoints: 0\n").unwrap_err();
    assert!(
        matches!(&err, ConfigError::InvalidSetting { field, .. } if field == "scheduler.maxEndpoints"),
        "{err:?}"
    );
    // Without profiles, upstream's default profile is made (here: no plugins at all).
    let config = EndpointPickerConfig::from_yaml("plugins: []\n").unwrap();
    let scheduler = build_scheduler(&config, &registry(), Arc::new(Pool::new())).unwrap();
    assert_eq!(scheduler.profiles()[0].name(), "default");
}

#[test]
fn hostile_yaml_is_an_error_not_a_hang_or_a_crash() {
    // Nine levels of nine-fold aliases would expand to 387 million strings.
    let mut yaml = String::from("plugins:\n- type: constant-scorer\n  parameters:\n");
    yaml.push_str(
        "    a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
    for pair in names.windows(2) {
        let (prev, next) = (pair[0], pair[1]);
        let refs = vec![format!("*{prev}"); 9].join(",");
        yaml.push_str(&format!("    {next}: &{next} [{refs}]\n"));
    }
    let err = EndpointPickerConfig::from_yaml(&yaml).unwrap_err();
    assert!(
        matches!(
            err,
            ConfigError::LimitExceeded {
                limit: "alias expansion in bytes",
                ..
            }
        ),
        "{err}"
    );

    // Nesting far past any sane depth.
    let deep = format!("plugins:\n- type: x\n  parameters: {}", "[".repeat(20_000));
    assert!(matches!(
        EndpointPickerConfig::from_yaml(&deep),
        Err(ConfigError::LimitExceeded {
            limit: "nesting depth",
            ..
        })
    ));
}

#[test]
fn unknown_sections_are_errors_at_their_line_and_upstream_sections_are_read() {
    let yaml = "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nfeatureGates: [flowControl]\nmystery: 1\nschedulingProfiles:\n- name: default\n";
    let err = EndpointPickerConfig::from_yaml(yaml).unwrap_err();
    assert!(
        matches!(&err, ConfigError::Syntax { line: Some(4), column: Some(1), message } if message.contains("`mystery`")),
        "{err:?}"
    );
    // Declared by the embedder, the same section is kept for it (and warned about when
    // only a scheduler is built).
    let config = EndpointPickerConfig::from_yaml_with(yaml, &["mystery"]).unwrap();
    assert_eq!(config.feature_gates.get("flowControl"), Some(true));
    let warnings = config.warnings();
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].section, "mystery");
    assert!(EndpointPickerConfig::from_yaml_strict(&yaml.replace("mystery: 1\n", "")).is_ok());
    let err = EndpointPickerConfig::from_yaml_with(yaml, &["mystery"])
        .and_then(|_| EndpointPickerConfig::from_yaml_strict(yaml))
        .unwrap_err();
    assert!(err.to_string().contains("mystery"), "{err}");
}

#[test]
fn api_version_and_kind_are_checked() {
    for ok in [
        "apiVersion: llm-d.ai/v1alpha1\n",
        "apiVersion: inference.networking.x-k8s.io/v1alpha1\n",
        "kind: EndpointPickerConfig\n",
        "{}\n",
    ] {
        assert!(EndpointPickerConfig::from_yaml(ok).is_ok(), "{ok}");
    }
    let err = EndpointPickerConfig::from_yaml("apiVersion: inference.networking.k8s.io/v1\n")
        .unwrap_err();
    assert!(
        matches!(&err, ConfigError::UnsupportedApiVersion { found, .. } if found == "inference.networking.k8s.io/v1"),
        "{err}"
    );
    assert!(err.to_string().contains("llm-d.ai/v1alpha1"), "{err}");
    assert!(matches!(
        EndpointPickerConfig::from_yaml("kind: InferencePool\n"),
        Err(ConfigError::UnsupportedKind(_))
    ));
}

#[test]
fn weights_above_the_maximum_are_rejected() {
    use shepherd_scheduler_core::config::MAX_WEIGHT;
    let yaml = |w: f64| GOOD.replace("weight: 2", &format!("weight: {w:e}"));
    assert!(build(&yaml(MAX_WEIGHT), &registry()).is_ok());
    for w in [MAX_WEIGHT * 2.0, 1e308] {
        let err = build(&yaml(w), &registry()).unwrap_err();
        assert!(matches!(err, ConfigError::InvalidWeight { .. }), "{err}");
        assert!(err.to_string().contains("[0, 1000000]"), "{err}");
    }
}

#[test]
fn many_profiles_build_in_linear_time() {
    // The duplicate-name check is a set: 20k profiles build at once (an O(P²) check took
    // seconds at this size).
    let mut yaml = String::from("plugins:\n- type: first-picker\nschedulingProfiles:\n");
    for i in 0..20_000 {
        yaml.push_str(&format!("- name: p{i}\n"));
    }
    assert!(build(&yaml, &registry()).is_ok());
    yaml.push_str("- name: p7\n");
    assert!(matches!(
        build(&yaml, &registry()),
        Err(ConfigError::DuplicateProfileName(n)) if n == "p7"
    ));
}

#[test]
fn a_flow_control_section_is_named_as_the_flow_controllers() {
    let config =
        EndpointPickerConfig::from_yaml("flowControl: {}\nschedulingProfiles:\n- name: default\n")
            .unwrap();
    let warnings = config.warnings();
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].message.contains("flow controller"),
        "{warnings:?}"
    );
}
