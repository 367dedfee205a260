//! How picker replicas coordinate in the replica study: not at all (each learns only what it
//! routed), or by agreeing on an unseen prefix's home with `rendezvous-affinity-scorer`, with or
//! without its bounded-load rule (`loadFactor`).

use shepherd_scheduler_core::config::{PluginSpec, ProfilePluginRef};

use crate::policy::Policy;

/// Instance name of the scorer [`Coordination::Rendezvous`] adds.
pub const RENDEZVOUS_SCORER: &str = "rendezvous-affinity-scorer";

/// `loadFactor` of `rendezvous-bounded` when the command line gives none.
const DEFAULT_LOAD_FACTOR_PERCENT: u32 = 125;

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
    /// As [`Coordination::Rendezvous`], with the scorer's bounded-load rule: `loadFactor` =
    /// this many hundredths (at least 100), so a home with more than `loadFactor × (mean + 1)`
    /// of the replica's own requests in flight yields to the next candidate in rendezvous
    /// order. On the command line `rendezvous-bounded` (factor 1.25) or
    /// `rendezvous-bounded:F` (e.g. `rendezvous-bounded:1.5`).
    RendezvousBounded(u32),
}

impl Coordination {
    /// The name in reports and on the command line.
    pub fn name(self) -> String {
        match self {
            Coordination::None => "none".to_string(),
            Coordination::Rendezvous => "rendezvous".to_string(),
            Coordination::RendezvousBounded(percent) => {
                format!("rendezvous-bounded:{}", f64::from(percent) / 100.0)
            }
        }
    }

    /// `policy` with this coordination (same name).
    pub fn apply(self, policy: &Policy) -> Policy {
        match self {
            Coordination::None => policy.clone(),
            Coordination::Rendezvous => with_rendezvous(policy, serde_json::Value::Null),
            Coordination::RendezvousBounded(percent) => with_rendezvous(
                policy,
                serde_json::json!({ "loadFactor": f64::from(percent) / 100.0 }),
            ),
        }
    }
}

impl std::str::FromStr for Coordination {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once(':') {
            None if s == "none" => Ok(Coordination::None),
            None if s == "rendezvous" => Ok(Coordination::Rendezvous),
            None if s == "rendezvous-bounded" => {
                Ok(Coordination::RendezvousBounded(DEFAULT_LOAD_FACTOR_PERCENT))
            }
            Some(("rendezvous-bounded", factor)) => parse_factor(factor)
                .map(Coordination::RendezvousBounded)
                .ok_or_else(|| format!("bad load factor {factor:?} (a number from 1 to 100)")),
            _ => Err(format!(
                "unknown coordination {s:?} (none, rendezvous, rendezvous-bounded[:F])"
            )),
        }
    }
}

/// `factor` in hundredths, if it is a number in [1, 100].
fn parse_factor(factor: &str) -> Option<u32> {
    let f: f64 = factor.parse().ok()?;
    (1.0..=100.0)
        .contains(&f)
        .then(|| (f * 100.0).round() as u32)
}

fn with_rendezvous(policy: &Policy, parameters: serde_json::Value) -> Policy {
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
        parameters,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for c in [
            Coordination::None,
            Coordination::Rendezvous,
            Coordination::RendezvousBounded(125),
            Coordination::RendezvousBounded(200),
        ] {
            assert_eq!(c.name().parse::<Coordination>(), Ok(c));
        }
        assert_eq!(
            "rendezvous-bounded".parse::<Coordination>(),
            Ok(Coordination::RendezvousBounded(125))
        );
        for bad in [
            "rendezvous-bounded:0.5",
            "rendezvous-bounded:x",
            "rendezvous:1.5",
            "hrw",
        ] {
            assert!(bad.parse::<Coordination>().is_err(), "{bad}");
        }
    }
}
