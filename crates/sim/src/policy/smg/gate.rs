//! The spill gate of SGLang Model Gateway 1.13's `cache_aware` policy
//! (`CacheAwarePolicy::over_count_pressure_gate`, `absolute_margin` and
//! `select_final_from_affinity` in `model_gateway/src/policies/cache_aware.rs`), over the
//! requests the router has in flight on each worker:
//!
//! - a worker is **over the gate** when its load is above `balance_rel_threshold` × the
//!   healthy-fleet mean *and* above the mean plus the absolute margin;
//! - the **absolute margin** at mean `m` is `min(balance_abs_threshold, max(4, ⌈2√m⌉))`: the
//!   configured value, capped at two standard deviations of a Poisson count, never under 4
//!   unless the configured value is lower;
//! - the **final candidates**: the holders of the match that are not over the gate; if every
//!   holder is, the workers of the fleet that are not (a spill), or the whole fleet when none
//!   is; a miss (no holders) takes the whole fleet.
//!
//! ```
//! # use shepherd_sim::policy::SmgSpillGate as Gate;
//! let gate = Gate { balance_abs_threshold: 64, balance_rel_threshold: 1.5 };
//! assert_eq!(gate.absolute_margin(16.0), 8.0); // ⌈2·4⌉
//! assert!(gate.over(25.0, 16.0));              // 25 > 24 and 25 > 24
//! assert!(!gate.over(24.0, 16.0));
//! ```

/// The two thresholds of the gate (upstream's `CacheAwareConfig` fields).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gate {
    /// Cap of the absolute margin, in requests (`--balance-abs-threshold`, 64).
    pub balance_abs_threshold: usize,
    /// Multiple of the fleet mean (`--balance-rel-threshold`, 1.5).
    pub balance_rel_threshold: f32,
}

/// A swing-sized margin is never under this many requests (unless the configured cap is).
pub(crate) const MIN_ABSOLUTE_MARGIN: f64 = 4.0;

impl Gate {
    /// The absolute margin at fleet mean `avg_load`.
    pub fn absolute_margin(&self, avg_load: f64) -> f64 {
        let configured = self.balance_abs_threshold as f64;
        let swing = (2.0 * avg_load.max(0.0).sqrt()).ceil();
        configured.min(swing.max(MIN_ABSOLUTE_MARGIN))
    }

    /// Whether a worker with `load` requests in flight is over the gate at fleet mean
    /// `avg_load`.
    pub fn over(&self, load: f64, avg_load: f64) -> bool {
        load > avg_load * f64::from(self.balance_rel_threshold)
            && load > avg_load + self.absolute_margin(avg_load)
    }

    /// The workers the expected-wait pick chooses among, as indices into `loads` (every
    /// worker's in-flight count), given the indices of the match's `holders` (empty for a
    /// miss).
    pub fn final_candidates(&self, loads: &[usize], holders: &[usize]) -> Vec<usize> {
        let all: Vec<usize> = (0..loads.len()).collect();
        if loads.is_empty() {
            return all;
        }
        let avg = loads.iter().sum::<usize>() as f64 / loads.len() as f64;
        let under = |&i: &usize| !self.over(loads[i] as f64, avg);
        let safe: Vec<usize> = holders.iter().copied().filter(under).collect();
        if !safe.is_empty() {
            return safe;
        }
        if holders.is_empty() {
            return all;
        }
        let spill: Vec<usize> = all.iter().copied().filter(under).collect();
        if spill.is_empty() { all } else { spill }
    }
}
