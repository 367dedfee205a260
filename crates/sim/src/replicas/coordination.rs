//! How picker replicas coordinate in the replica study: not at all (each learns only what it
//! routed), by agreeing on an unseen prefix's home with `rendezvous-affinity-scorer`, with or
//! without its bounded-load rule (`loadFactor`), by exchanging their in-flight counts
//! (`load-sync`; with a precise policy the index is already shared through the engines' events),
//! or their in-flight counts and approximate-index inserts (`deltas`, alone or with rendezvous),
//! or the same through Redis streams (`redis`: the deltas plus the medium's delivery time).

use shepherd_scheduler_core::config::{PluginSpec, ProfilePluginRef};

use crate::policy::Policy;
use crate::runner::SIMULATION_SECTION;

/// Instance name of the scorer [`Coordination::Rendezvous`] adds.
pub const RENDEZVOUS_SCORER: &str = "rendezvous-affinity-scorer";

/// Period of `load-sync` when the command line gives none, ms.
const DEFAULT_LOAD_SYNC_MS: u32 = 10;

/// What a Redis stream adds to an exchange on loopback, µs: the time from a replica's `XADD`
/// to another's blocking `XREAD` returning it, rounded up from the 112 µs median that
/// `cargo bench -p shepherd-benches --bench replica_redis` printed (redis-server 7.0 on the
/// 2-core machine; p99 4.2 ms).
pub const REDIS_DELIVERY_US: u32 = 150;

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
    /// The replicas exchange their in-flight counts every this many milliseconds
    /// (`simulation.replicaLoadSyncMs`): load-aware scorers see every replica's requests. On
    /// the command line `load-sync` (every 10 ms) or `load-sync:MS`; `load-sync:0` exchanges
    /// before every pick, a bound.
    LoadSync(u32),
    /// As [`Coordination::LoadSync`], and each pick's approximate-index insert (the request's
    /// block keys on the picked server) reaches the other replicas one period later
    /// (`simulation.replicaIndexSync`): the index deltas of an approximate policy. On the
    /// command line `deltas` (every 10 ms) or `deltas:MS`.
    Deltas(u32),
    /// [`Coordination::Rendezvous`] and [`Coordination::Deltas`] together: agreed homes for
    /// prefixes no replica has seen yet, shared inserts for those one has. On the command line
    /// `rendezvous+deltas` (every 10 ms) or `rendezvous+deltas:MS`.
    RendezvousDeltas(u32),
    /// [`Coordination::Deltas`] through Redis (`replicas.backend: redis`): the same exchange
    /// every this many milliseconds, each one arriving [`REDIS_DELIVERY_US`] later
    /// (`simulation.replicaMediumDelayUs`). On the command line `redis` (every 10 ms) or
    /// `redis:MS`.
    Redis(u32),
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
            Coordination::LoadSync(ms) => format!("load-sync:{ms}"),
            Coordination::Deltas(ms) => format!("deltas:{ms}"),
            Coordination::RendezvousDeltas(ms) => format!("rendezvous+deltas:{ms}"),
            Coordination::Redis(ms) => format!("redis:{ms}"),
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
            Coordination::RendezvousDeltas(ms) => {
                Coordination::Deltas(ms).apply(&Coordination::Rendezvous.apply(policy))
            }
            Coordination::Redis(ms) => {
                let mut with = Coordination::Deltas(ms).apply(policy);
                if let Some(map) = with
                    .config
                    .other
                    .get_mut(SIMULATION_SECTION)
                    .and_then(|s| s.as_object_mut())
                {
                    map.insert(
                        "replicaMediumDelayUs".into(),
                        serde_json::json!(REDIS_DELIVERY_US),
                    );
                }
                with
            }
            Coordination::LoadSync(ms) | Coordination::Deltas(ms) => {
                let mut config = policy.config.clone();
                let section = config
                    .other
                    .entry(SIMULATION_SECTION.to_string())
                    .or_insert_with(|| serde_json::json!({}));
                if let Some(map) = section.as_object_mut() {
                    map.insert("replicaLoadSyncMs".into(), serde_json::json!(ms));
                    if matches!(self, Coordination::Deltas(_)) {
                        map.insert("replicaIndexSync".into(), serde_json::json!(true));
                    }
                }
                Policy {
                    name: policy.name.clone(),
                    config,
                }
            }
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
            None if s == "load-sync" => Ok(Coordination::LoadSync(DEFAULT_LOAD_SYNC_MS)),
            Some(("load-sync", ms)) => ms
                .parse::<u32>()
                .ok()
                .map(Coordination::LoadSync)
                .ok_or_else(|| format!("bad load-sync period {ms:?} (whole milliseconds)")),
            None if s == "deltas" => Ok(Coordination::Deltas(DEFAULT_LOAD_SYNC_MS)),
            None if s == "rendezvous+deltas" => {
                Ok(Coordination::RendezvousDeltas(DEFAULT_LOAD_SYNC_MS))
            }
            Some(("rendezvous+deltas", ms)) => ms
                .parse::<u32>()
                .ok()
                .map(Coordination::RendezvousDeltas)
                .ok_or_else(|| format!("bad deltas period {ms:?} (whole milliseconds)")),
            None if s == "redis" => Ok(Coordination::Redis(DEFAULT_LOAD_SYNC_MS)),
            Some(("redis", ms)) => ms
                .parse::<u32>()
                .ok()
                .map(Coordination::Redis)
                .ok_or_else(|| format!("bad redis period {ms:?} (whole milliseconds)")),
            Some(("deltas", ms)) => ms
                .parse::<u32>()
                .ok()
                .map(Coordination::Deltas)
                .ok_or_else(|| format!("bad deltas period {ms:?} (whole milliseconds)")),
            _ => Err(format!(
                "unknown coordination {s:?} (none, rendezvous, rendezvous-bounded[:F], load-sync[:MS], deltas[:MS], rendezvous+deltas[:MS], redis[:MS])"
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
            Coordination::LoadSync(10),
            Coordination::LoadSync(50),
            Coordination::LoadSync(0),
            Coordination::Deltas(10),
            Coordination::Deltas(0),
            Coordination::RendezvousDeltas(10),
            Coordination::Redis(10),
        ] {
            assert_eq!(c.name().parse::<Coordination>(), Ok(c));
        }
        assert_eq!(
            "rendezvous-bounded".parse::<Coordination>(),
            Ok(Coordination::RendezvousBounded(125))
        );
        assert_eq!(
            "deltas".parse::<Coordination>(),
            Ok(Coordination::Deltas(10))
        );
        assert_eq!(
            "rendezvous+deltas".parse::<Coordination>(),
            Ok(Coordination::RendezvousDeltas(10))
        );
        for bad in [
            "deltas:x",
            "rendezvous+deltas:-1",
            "rendezvous-bounded:0.5",
            "rendezvous-bounded:x",
            "rendezvous:1.5",
            "hrw",
        ] {
            assert!(bad.parse::<Coordination>().is_err(), "{bad}");
        }
    }
}
