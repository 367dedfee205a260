//! The maximum goodput of a policy on a scenario (DistServe's measure): the highest arrival
//! rate at which at least [`TARGET`] of the requests meet their objectives (TTFT and TPOT),
//! found by [`crate::goodput::search`] over the scenario's load scaled up and down. A stage
//! of the pipeline beside the aggregates: each probe's attainment is the mean over the seeds.
//!
//! ```
//! use shepherd_sim::report::max_goodput::{MaxGoodput, Probe, TARGET};
//!
//! let probes = vec![
//!     Probe { factor: 1.0, arrival_rps: 10.0, attainment: 0.97 },
//!     Probe { factor: 2.0, arrival_rps: 20.0, attainment: 0.62 },
//!     Probe { factor: 1.5, arrival_rps: 15.0, attainment: 0.91 },
//! ];
//! let m = MaxGoodput::from_probes("adaptive", probes);
//! assert_eq!(m.factor, 1.5); // the highest load that met the target
//! assert_eq!(m.rate_rps, 15.0);
//! assert!(m.attainment >= TARGET);
//! assert_eq!(m.next_failing_factor, Some(2.0));
//! ```

use serde::Serialize;

/// The share of requests that must meet their objectives.
pub const TARGET: f64 = 0.9;

/// One load tried: the factor on the scenario's load, the arrival rate it gave and the share of
/// requests that met their objectives (means over the seeds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Probe {
    /// Load factor (1: the scenario as written).
    pub factor: f64,
    /// Requests issued per second of arrivals (first to last arrival), mean over seeds.
    pub arrival_rps: f64,
    /// SLO attainment, mean over seeds.
    pub attainment: f64,
}

/// One policy's maximum goodput on one scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MaxGoodput {
    /// Policy (or arm) name.
    pub policy: String,
    /// The highest load factor tried that met [`TARGET`] (0 when none did).
    pub factor: f64,
    /// Its arrival rate, requests/s: the maximum goodput (0 when no load tried met the target).
    pub rate_rps: f64,
    /// Its attainment.
    pub attainment: f64,
    /// The lowest factor tried above it that missed the target (`None`: none missed, the
    /// search stopped at its highest factor).
    pub next_failing_factor: Option<f64>,
    /// Every load tried, in the order tried.
    pub probes: Vec<Probe>,
}

impl MaxGoodput {
    /// The result of a search's `probes`.
    pub fn from_probes(policy: &str, probes: Vec<Probe>) -> MaxGoodput {
        let best = probes
            .iter()
            .filter(|p| p.attainment >= TARGET)
            .max_by(|a, b| a.factor.total_cmp(&b.factor))
            .copied();
        let floor = best.map_or(0.0, |b| b.factor);
        let next_failing_factor = probes
            .iter()
            .filter(|p| p.attainment < TARGET && p.factor > floor)
            .map(|p| p.factor)
            .min_by(f64::total_cmp);
        MaxGoodput {
            policy: policy.to_string(),
            factor: floor,
            rate_rps: best.map_or(0.0, |b| b.arrival_rps),
            attainment: best.map_or(0.0, |b| b.attainment),
            next_failing_factor,
            probes,
        }
    }
}
