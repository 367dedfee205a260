//! How picker replicas coordinate in the replica study: not at all (each learns only what it
//! routed), or by agreeing on an unseen prefix's home with `rendezvous-affinity-scorer`.

use shepherd_scheduler_core::config::{PluginSpec, ProfilePluginRef};

use crate::policy::Policy;

/// Instance name of the scorer [`Coordination::Rendezvous`] adds.
pub const RENDEZVOUS_SCORER: &str = "rendezvous-affinity-scorer";

/// Coordination between replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coordination {
    /// Every replica routes with its own state only.
    None,
    /// The policy plus `rendezvous-affinity-scorer` (defaults: the first 64-token block) in
    /// every profile, weighted as the profile's `prefix-cache-scorer` (1 without one): an
    /// unseen prefix's home is worth as much as a seen prefix's full match, so load scorers
    /// still outvote it on a busy home, and a replica's own full match ties with the home.
    Rendezvous,
}

impl Coordination {
    /// The name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Coordination::None => "none",
            Coordination::Rendezvous => "rendezvous",
        }
    }

    /// `policy` with this coordination (same name).
    pub fn apply(self, policy: &Policy) -> Policy {
        match self {
            Coordination::None => policy.clone(),
            Coordination::Rendezvous => with_rendezvous(policy),
        }
    }
}

impl std::str::FromStr for Coordination {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(Coordination::None),
            "rendezvous" => Ok(Coordination::Rendezvous),
            other => Err(format!("unknown coordination {other:?} (none, rendezvous)")),
        }
    }
}

fn with_rendezvous(policy: &Policy) -> Policy {
    let mut config = policy.config.clone();
    let prefix_names: Vec<String> = config
        .plugins
        .iter()
        .filter(|p| p.plugin_type == "prefix-cache-scorer" || p.plugin_type == "prefix-cache")
        .map(|p| p.name().to_string())
        .collect();
    config.plugins.push(PluginSpec {
        plugin_type: RENDEZVOUS_SCORER.to_string(),
        name: None,
        parameters: serde_json::Value::Null,
    });
    for profile in &mut config.scheduling_profiles {
        let weight = profile
            .plugins
            .iter()
            .find(|r| prefix_names.contains(&r.plugin_ref))
            .map_or(1.0, |r| r.weight.unwrap_or(1.0));
        profile.plugins.push(ProfilePluginRef {
            plugin_ref: RENDEZVOUS_SCORER.to_string(),
            weight: Some(weight),
        });
    }
    Policy {
        name: policy.name.clone(),
        config,
    }
}
