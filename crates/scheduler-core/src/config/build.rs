use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::{ConfigError, EndpointPickerConfig, PluginArgs, Registry};
use crate::clock::Clock;
use crate::endpoint::Pool;
use crate::plugin::PluginInstance;
use crate::profile::Profile;
use crate::scheduler::Scheduler;

/// Builds a [`Scheduler`] over `pool` from `config`, with plugins from `registry`.
///
/// Every plugin is built once even when several profiles use it, so they share its state (a
/// prefix index, say). Membership listeners are registered with the pool; completion hooks with
/// the scheduler. A profile without a picker gets a `max-score-picker` when the registry has
/// one.
pub fn build_scheduler(
    config: &EndpointPickerConfig,
    registry: &Registry,
    pool: Arc<Pool>,
    clock: Arc<dyn Clock>,
) -> Result<Scheduler, ConfigError> {
    let seed = config.scheduler.seed;
    let mut instances: BTreeMap<String, PluginInstance> = BTreeMap::new();
    for spec in &config.plugins {
        let name = spec.name().to_string();
        if instances.contains_key(&name) {
            return Err(ConfigError::DuplicatePluginName(name));
        }
        let factory =
            registry
                .get(&spec.plugin_type)
                .ok_or_else(|| ConfigError::UnknownPluginType {
                    name: name.clone(),
                    plugin_type: spec.plugin_type.clone(),
                    known: registry.types().collect::<Vec<_>>().join(", "),
                })?;
        let args = PluginArgs {
            name: &name,
            plugin_type: &spec.plugin_type,
            parameters: &spec.parameters,
            pool: &pool,
            clock: &clock,
            seed,
        };
        let instance = factory(&args).map_err(|reason| ConfigError::BadParameters {
            name: name.clone(),
            plugin_type: spec.plugin_type.clone(),
            reason,
        })?;
        instances.insert(name, instance);
    }

    if config.scheduling_profiles.is_empty() {
        return Err(ConfigError::InvalidSetting {
            field: "schedulingProfiles".into(),
            reason: "at least one profile is required".into(),
        });
    }

    let mut builder = Scheduler::builder(Arc::clone(&pool))
        .clock(Arc::clone(&clock))
        .seed(seed)
        .staleness_bound(Duration::from_millis(config.scheduler.staleness_ms))
        .max_endpoints(config.scheduler.max_endpoints);

    let mut profile_names = Vec::new();
    for spec in &config.scheduling_profiles {
        if profile_names.contains(&spec.name) {
            return Err(ConfigError::DuplicateProfileName(spec.name.clone()));
        }
        profile_names.push(spec.name.clone());
        let mut profile = Profile::builder(spec.name.as_str());
        let mut picker_name: Option<String> = None;
        for r in &spec.plugins {
            let instance =
                instances
                    .get(&r.plugin_ref)
                    .ok_or_else(|| ConfigError::DanglingReference {
                        profile: spec.name.clone(),
                        plugin_ref: r.plugin_ref.clone(),
                    })?;
            let mut used = false;
            if let Some(filter) = instance.as_filter() {
                profile = profile.filter(r.plugin_ref.as_str(), Arc::clone(filter));
                used = true;
            }
            if let Some(scorer) = instance.as_scorer() {
                let weight = r.weight.unwrap_or(1.0);
                if !weight.is_finite() || weight < 0.0 {
                    return Err(ConfigError::InvalidWeight {
                        profile: spec.name.clone(),
                        plugin: r.plugin_ref.clone(),
                        weight,
                    });
                }
                profile = profile.scorer(r.plugin_ref.as_str(), Arc::clone(scorer), weight);
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
            if !used {
                return Err(ConfigError::NotUsable {
                    profile: spec.name.clone(),
                    plugin: r.plugin_ref.clone(),
                });
            }
        }
        if picker_name.is_none()
            && let Some(factory) = registry.get("max-score-picker")
        {
            let args = PluginArgs {
                name: "max-score-picker",
                plugin_type: "max-score-picker",
                parameters: &serde_json::Value::Null,
                pool: &pool,
                clock: &clock,
                seed,
            };
            let default_picker = factory(&args).map_err(|reason| ConfigError::BadParameters {
                name: "max-score-picker".into(),
                plugin_type: "max-score-picker".into(),
                reason,
            })?;
            if let Some(picker) = default_picker.as_picker() {
                profile = profile.named_picker("max-score-picker", Arc::clone(picker));
            }
        }
        builder = builder.profile(profile.build());
    }

    for instance in instances.values() {
        if let Some(listener) = instance.as_membership_listener() {
            pool.add_listener(Arc::clone(listener));
        }
        if let Some(hook) = instance.as_completion_hook() {
            builder = builder.completion_hook(Arc::clone(hook));
        }
    }
    builder.build().map_err(|e| ConfigError::InvalidSetting {
        field: "schedulingProfiles".into(),
        reason: e.to_string(),
    })
}
