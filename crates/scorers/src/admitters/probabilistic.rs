//! `probabilistic-admitter` (upstream's name): sheds sheddable requests (priority < 0) with a
//! probability that grows steeply with the pool's saturation, and always admits the others.
//!
//! The pool's saturation is upstream's roofline average over the candidates:
//! `mean(max(waiting / queueDepthThreshold, kv / kvCacheUtilThreshold))`, an endpoint never
//! scraped counting as 1 (fully saturated). A sheddable request is refused with probability
//! `min(saturation^power × k, 1)`; with no candidates it is admitted. A refusal is
//! `ScheduleError::Rejected` (HTTP 429, as upstream's `ResourceExhausted`).
//!
//! | parameter | default | meaning |
//! |---|---|---|
//! | `queueDepthThreshold` | 5 | waiting requests at which an endpoint counts as saturated (> 0) |
//! | `kvCacheUtilThreshold` | 0.8 | KV-cache use at which an endpoint counts as saturated (> 0) |
//! | `power` | 5 | steepness of the curve (> 0) |
//! | `k` | 300 | where it reaches 1: at saturation `(1/k)^(1/power)` (> 0) |
//!
//! The draw is a hash of the request id and the scheduler's seed (deterministic for a seed;
//! upstream draws from a global generator).
//!
//! ```
//! use shepherd_scorers::admitters::probabilistic::shed_probability;
//!
//! // Upstream's curve with its defaults: ~2.3 % at saturation 0.15, all past ~0.34.
//! assert!((shed_probability(0.15, 5.0, 300.0) - 0.0228).abs() < 1e-3);
//! assert_eq!(shed_probability(0.35, 5.0, 300.0), 1.0);
//! ```

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{Admitter, CycleState, PluginInstance};

/// Registry type name.
pub const TYPE_NAME: &str = "probabilistic-admitter";

/// The `probabilistic-admitter` parameters (see the module docs).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ProbabilisticAdmitterParameters {
    /// Waiting requests at which an endpoint counts as saturated.
    pub queue_depth_threshold: i64,
    /// KV-cache use at which an endpoint counts as saturated.
    pub kv_cache_util_threshold: f64,
    /// Steepness of the shedding curve.
    pub power: f64,
    /// Scale of the shedding curve.
    pub k: f64,
}

impl Default for ProbabilisticAdmitterParameters {
    fn default() -> Self {
        ProbabilisticAdmitterParameters {
            queue_depth_threshold: 5,
            kv_cache_util_threshold: 0.8,
            power: 5.0,
            k: 300.0,
        }
    }
}

/// Upstream's shedding probability at `saturation`.
pub fn shed_probability(saturation: f64, power: f64, k: f64) -> f64 {
    (saturation.powf(power) * k).min(1.0)
}

/// The admitter (see the module docs).
#[derive(Debug)]
pub struct ProbabilisticAdmitter {
    queue_depth_threshold: f64,
    kv_cache_util_threshold: f64,
    power: f64,
    k: f64,
    hasher: ahash::RandomState,
}

impl ProbabilisticAdmitter {
    /// The pool's saturation over `candidates` (upstream's roofline average).
    pub fn saturation(&self, candidates: &[&Arc<Endpoint>]) -> f64 {
        if candidates.is_empty() {
            return 0.0;
        }
        let total: f64 = candidates
            .iter()
            .map(|e| {
                let m = e.load_metrics();
                if m.scraped_at.is_none() {
                    return 1.0;
                }
                let queue = f64::from(m.waiting) / self.queue_depth_threshold;
                let kv = m.kv_utilization_clamped() / self.kv_cache_util_threshold;
                queue.max(kv)
            })
            .sum();
        total / candidates.len() as f64
    }
}

impl Admitter for ProbabilisticAdmitter {
    fn admit(
        &self,
        cycle: &mut CycleState<'_>,
        candidates: &[&Arc<Endpoint>],
    ) -> Result<(), String> {
        if cycle.request.priority >= 0 || candidates.is_empty() {
            return Ok(());
        }
        let saturation = self.saturation(candidates);
        let probability = shed_probability(saturation, self.power, self.k);
        let draw =
            (self.hasher.hash_one(cycle.request.id.as_str()) >> 11) as f64 / (1u64 << 53) as f64;
        if draw < probability {
            Err(format!(
                "probabilistic-admitter: rejected, saturation={saturation:.3} prob={probability:.2}"
            ))
        } else {
            Ok(())
        }
    }
}

/// Builds a `probabilistic-admitter`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let p: ProbabilisticAdmitterParameters = args.parse()?;
    if p.queue_depth_threshold <= 0 {
        return Err(PluginError::invalid("queueDepthThreshold", "must be > 0"));
    }
    for (name, value) in [
        ("kvCacheUtilThreshold", p.kv_cache_util_threshold),
        ("power", p.power),
        ("k", p.k),
    ] {
        if value.is_nan() || value <= 0.0 {
            return Err(PluginError::invalid(name, "must be > 0"));
        }
    }
    Ok(PluginInstance::admitter(Arc::new(ProbabilisticAdmitter {
        queue_depth_threshold: p.queue_depth_threshold as f64,
        kv_cache_util_threshold: p.kv_cache_util_threshold,
        power: p.power,
        k: p.k,
        hasher: ahash::RandomState::with_seeds(args.seed, 0x5AED, 0xAD17, 0x7E55),
    })))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn upstreams_shedding_curve() {
        // The README's table with the defaults (power 5, k 300).
        for (saturation, expected) in [(0.15, 0.0228), (0.20, 0.096), (0.30, 0.729)] {
            let p = shed_probability(saturation, 5.0, 300.0);
            assert!((p - expected).abs() < 1e-3, "{saturation}: {p}");
        }
        // The dead zone: about 0.1 % at 0.08 (the README's table says under 0.01 %; its
        // formula gives 0.098 %).
        assert!(shed_probability(0.08, 5.0, 300.0) < 1e-3);
        assert!(shed_probability(0.34, 5.0, 300.0) > 0.99);
        assert_eq!(shed_probability(1.0, 5.0, 300.0), 1.0);
        // 100 % at (1/k)^(1/power): k = 1000 → ~0.25.
        assert_eq!(shed_probability(0.252, 5.0, 1000.0), 1.0);
        assert!(shed_probability(0.248, 5.0, 1000.0) < 1.0);
    }
}
