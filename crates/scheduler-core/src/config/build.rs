use std::collections::BTreeMap;
use std::sync::Arc;

use ahash::AHashSet;

use super::{
    ConfigError, EndpointPickerConfig, PluginArgs, PluginError, ProfilePluginRef, ProfileSpec,
    Registry, Status, framework_plugin, upstream_type,
};
use crate::disagg::{Disaggregation, StageOrder};
use crate::endpoint::Pool;
use crate::plugin::PluginInstance;
use crate::profile::Profile;
use crate::scheduler::Scheduler;
use crate::shared::SharedState;

/// The largest scorer weight a config may give. Weights are relative, so nothing is lost by
/// the bound, and sums of weights stay far from overflowing.
pub const MAX_WEIGHT: f64 = 1e6;

/// Builds a [`Scheduler`] over `pool` from `config`, with plugins from `registry`, fresh
/// resources and fresh metrics. See [`build_scheduler_in`].
pub fn build_scheduler(
    config: &EndpointPickerConfig,
    registry: &Registry,
    pool: Arc<Pool>,
) -> Result<Scheduler, ConfigError> {
    build_scheduler_in(config, registry, &SharedState::new(pool))
}

/// Builds a [`Scheduler`] over `shared` from `config`, with plugins from `registry`.
///
/// A plugin whose type the registry lacks is, in this order: skipped when Shepherd honours it
/// outside the scheduler ([`framework_plugin`]: the profile handler, the OpenAI parser,
/// data-layer and flow-control plugins); refused with [`ConfigError::NotImplemented`],
/// naming the area, when it is an upstream type Shepherd does not implement yet; refused
/// with [`ConfigError::UnknownPluginType`] otherwise.
///
/// A config without `schedulingProfiles` gets the profile upstream's loader makes: one named
/// `default` with every admitter, filter, scorer and picker declared, in declaration order, scorers at
/// weight 1. With profiles, a declared admitter that no profile lists still runs for every
/// request (it joins each profile but a disaggregation's prefill and encode profiles), as upstream runs
/// every admitter it declares. Profile entries naming a parser, a profile handler or another
/// plugin honoured outside the scheduler are skipped, as upstream skips them
/// ([`EndpointPickerConfig::ignored_profile_entries`]).
///
/// Every plugin is built once even when several profiles use it, so they share its state (a
/// prefix index, say); plugins that keep state in `shared.resources` find it again when the
/// same config is built twice (a reload). Membership listeners are registered with the pool
/// and kept alive by the scheduler; completion hooks and metrics sources are registered with
/// the scheduler. A profile without a picker gets a `max-score-picker` when the registry has
/// one.
pub fn build_scheduler_in(
    config: &EndpointPickerConfig,
    registry: &Registry,
    shared: &SharedState,
) -> Result<Scheduler, ConfigError> {
    let seed = config.scheduler.seed;
    let build_plugin = |name: &str, plugin_type: &str, parameters: &serde_json::Value| {
        let factory = registry
            .get(plugin_type)
            .ok_or_else(|| missing_type(registry, name, plugin_type))?;
        shared.metrics.note_plugin_type(name, plugin_type);
        let args = PluginArgs::new(name, plugin_type, parameters, shared, seed);
        factory(&args).map_err(|reason| ConfigError::BadParameters {
            name: name.to_string(),
            plugin_type: plugin_type.to_string(),
            reason,
        })
    };

    let mut instances: BTreeMap<String, PluginInstance> = BTreeMap::new();
    let mut types: BTreeMap<&str, &str> = BTreeMap::new();
    let mut names = AHashSet::with_capacity(config.plugins.len());
    for spec in &config.plugins {
        let name = spec.name().to_string();
        if !names.insert(name.clone()) {
            return Err(ConfigError::DuplicatePluginName(name));
        }
        if !registry.contains(&spec.plugin_type) && framework_plugin(&spec.plugin_type).is_some() {
            continue; // honoured outside the scheduler
        }
        let instance = build_plugin(&name, &spec.plugin_type, &spec.parameters)?;
        types.insert(spec.name(), spec.plugin_type.as_str());
        instances.insert(name, instance);
    }

    let default_profiles;
    let profiles: &[ProfileSpec] = if config.scheduling_profiles.is_empty() {
        default_profiles = [default_profile(config, &instances)];
        &default_profiles
    } else {
        &config.scheduling_profiles
    };

    // Upstream runs every declared admitter once per request, listed in a profile or not:
    // those no profile lists join every profile but a disaggregation's prefill and encode
    // profiles.
    let listed: AHashSet<&str> = profiles
        .iter()
        .flat_map(|p| p.plugins.iter().map(|r| r.plugin_ref.as_str()))
        .collect();
    let unlisted_admitters: Vec<(&str, _)> = config
        .plugins
        .iter()
        .filter(|spec| !listed.contains(spec.name()))
        .filter_map(|spec| {
            let admitter = instances.get(spec.name())?.as_admitter()?;
            Some((spec.name(), Arc::clone(admitter)))
        })
        .collect();
    // The later stages of a disaggregation: the request was admitted before its decode stage.
    let later_stages: AHashSet<&str> = instances
        .values()
        .filter_map(PluginInstance::as_profile_handler)
        .flat_map(|h| {
            let prefill = h
                .prefill_decider
                .as_ref()
                .map(|_| h.prefill_profile.as_str());
            let encode = h.encode_decider.as_ref().map(|_| h.encode_profile.as_str());
            // `prefill-first`: the prefill stage admits the request when its profile exists.
            let decode = (h.stage_order == StageOrder::PrefillFirst
                && profiles.iter().any(|p| p.name == h.prefill_profile))
            .then_some(h.decode_profile.as_str());
            [prefill, encode, decode].into_iter().flatten()
        })
        .collect();

    // Screeners run first in every profile, in declaration order.
    let screeners: Vec<(&str, Arc<dyn crate::plugin::Filter>)> = config
        .plugins
        .iter()
        .filter_map(|spec| {
            let screener = instances.get(spec.name())?.as_screener()?;
            Some((spec.name(), Arc::clone(screener)))
        })
        .collect();

    let mut builder = Scheduler::builder_in(shared)
        .settings(&config.scheduler)
        .parsers(config.parser_set()?)
        .reporters(config.reporters()?)
        .response_headers(
            config
                .plugins
                .iter()
                .filter_map(|spec| instances.get(spec.name()))
                .flat_map(|i| i.response_headers().iter().cloned())
                .collect(),
        );
    let mut profile_names = AHashSet::with_capacity(profiles.len());
    for spec in profiles {
        if !profile_names.insert(spec.name.as_str()) {
            return Err(ConfigError::DuplicateProfileName(spec.name.clone()));
        }
        let mut profile = Profile::builder(spec.name.as_str());
        if !later_stages.contains(spec.name.as_str()) {
            for (name, admitter) in &unlisted_admitters {
                profile = profile.admitter(*name, Arc::clone(admitter));
            }
        }
        for (name, screener) in &screeners {
            profile = profile.filter(*name, Arc::clone(screener));
        }
        // Request-level producers (`p2p-source-producer`): every profile, listed or not.
        for declared in &config.plugins {
            if let Some(hook) = instances
                .get(declared.name())
                .and_then(PluginInstance::as_every_profile_hook)
            {
                profile = profile.pick_hook(Arc::clone(hook));
            }
        }
        let mut picker_name: Option<String> = None;
        for r in &spec.plugins {
            let Some(instance) = instances.get(&r.plugin_ref) else {
                if config.outside_profiles(&r.plugin_ref).is_some() {
                    continue; // a parser or profile handler listed here: ignored, as upstream
                }
                return Err(ConfigError::DanglingReference {
                    profile: spec.name.clone(),
                    plugin_ref: r.plugin_ref.clone(),
                });
            };
            // A screener listed in a profile already runs there (first).
            let mut used = instance.as_screener().is_some();
            if let Some(admitter) = instance.as_admitter() {
                profile = profile.admitter(r.plugin_ref.as_str(), Arc::clone(admitter));
                used = true;
            }
            if let Some(filter) = instance.as_filter() {
                profile = profile.filter(r.plugin_ref.as_str(), Arc::clone(filter));
                used = true;
            }
            if let Some(scorer) = instance.as_scorer() {
                let weight = r.weight.unwrap_or(1.0);
                if !(0.0..=MAX_WEIGHT).contains(&weight) {
                    return Err(ConfigError::InvalidWeight {
                        profile: spec.name.clone(),
                        plugin: r.plugin_ref.clone(),
                        weight,
                    });
                }
                let plugin_type = types.get(r.plugin_ref.as_str()).copied();
                profile = profile.typed_scorer(
                    r.plugin_ref.as_str(),
                    plugin_type.unwrap_or(r.plugin_ref.as_str()),
                    Arc::clone(scorer),
                    weight,
                );
                used = true;
            }
            if let Some(picker) = instance.as_picker() {
                if let Some(first) = &picker_name {
                    return Err(ConfigError::TwoPickers {
                        profile: spec.name.clone(),
                        first: first.clone(),
                        second: r.plugin_ref.clone(),
                    });
                }
                picker_name = Some(r.plugin_ref.clone());
                profile = profile.named_picker(r.plugin_ref.as_str(), Arc::clone(picker));
                used = true;
            }
            if let Some(hook) = instance.as_pick_hook() {
                profile = profile.pick_hook(Arc::clone(hook));
                used = true;
            }
            // Already in every profile (above).
            used |= instance.as_every_profile_hook().is_some();
            if !used {
                return Err(ConfigError::NotUsable {
                    profile: spec.name.clone(),
                    plugin: r.plugin_ref.clone(),
                });
            }
        }
        if picker_name.is_none() && registry.contains("max-score-picker") {
            let default_picker = build_plugin(
                "max-score-picker",
                "max-score-picker",
                &serde_json::Value::Null,
            )?;
            if let Some(picker) = default_picker.as_picker() {
                profile = profile.named_picker("max-score-picker", Arc::clone(picker));
            }
        }
        builder = builder.profile(profile.build());
    }

    for spec in &config.plugins {
        let Some(handler) = instances
            .get(spec.name())
            .and_then(PluginInstance::as_profile_handler)
        else {
            continue;
        };
        let decider = |field: &str, name: &Option<String>| match name {
            Some(name) => instances
                .get(name)
                .and_then(PluginInstance::as_decider)
                .cloned()
                .map(Some)
                .ok_or_else(|| ConfigError::BadParameters {
                    name: spec.name().to_string(),
                    plugin_type: spec.plugin_type.clone(),
                    reason: PluginError::invalid(
                        field,
                        format!("`{name}` is not a decider plugin declared in `plugins`"),
                    ),
                }),
            None => Ok(None),
        };
        let prefill_decider = decider("deciders.prefill", &handler.prefill_decider)?;
        let encode_decider = decider("deciders.encode", &handler.encode_decider)?;
        builder = builder.disaggregation(
            Disaggregation::new(
                handler.decode_profile.as_str(),
                handler.prefill_profile.as_str(),
                prefill_decider,
            )
            .with_encode(handler.encode_profile.as_str(), encode_decider)
            .with_stage_order(handler.stage_order),
        );
    }

    for instance in instances.values() {
        if let Some(selector) = instance.as_profile_selector() {
            builder = builder.profile_selector(selector.clone());
        }
        if let Some(listener) = instance.as_membership_listener() {
            builder = builder.membership_listener(Arc::clone(listener));
        }
        if let Some(hook) = instance.as_completion_hook() {
            builder = builder.completion_hook(Arc::clone(hook));
        }
        if let Some(source) = instance.as_metrics_source() {
            builder = builder.metrics_source(Arc::clone(source));
        }
    }
    builder.build().map_err(|e| ConfigError::InvalidSetting {
        field: "schedulingProfiles".into(),
        reason: e.to_string(),
    })
}

/// The profile upstream makes for a config without one: `default`, with every admitter,
/// filter, scorer and picker declared, in declaration order, at the default weight.
fn default_profile(
    config: &EndpointPickerConfig,
    instances: &BTreeMap<String, PluginInstance>,
) -> ProfileSpec {
    let plugins = config
        .plugins
        .iter()
        .filter(|spec| {
            instances.get(spec.name()).is_some_and(|i| {
                i.as_admitter().is_some()
                    || i.as_filter().is_some()
                    || i.as_scorer().is_some()
                    || i.as_picker().is_some()
            })
        })
        .map(|spec| ProfilePluginRef {
            plugin_ref: spec.name().to_string(),
            weight: None,
        })
        .collect();
    ProfileSpec {
        name: DEFAULT_PROFILE.into(),
        plugins,
    }
}

/// The name of the profile made for a config without `schedulingProfiles` (upstream's).
pub const DEFAULT_PROFILE: &str = "default";

/// Why `plugin_type` cannot be built: an upstream type not implemented yet, or unknown.
fn missing_type(registry: &Registry, name: &str, plugin_type: &str) -> ConfigError {
    match upstream_type(plugin_type).map(|t| (t.status, t.note)) {
        Some((Status::NotYet(area), note)) => ConfigError::NotImplemented {
            name: name.to_string(),
            plugin_type: plugin_type.to_string(),
            area,
            note: note.to_string(),
        },
        _ => ConfigError::UnknownPluginType {
            name: name.to_string(),
            plugin_type: plugin_type.to_string(),
            known: registry.types().collect::<Vec<_>>().join(", "),
        },
    }
}
