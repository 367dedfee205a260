//! What routing decisions cost in wall-clock time: the runner times every call of the
//! policy's `Scheduler::schedule` with a monotonic clock and folds the samples into a
//! [`PickCost`] per run.
//!
//! Only the scheduler call is timed: the simulator's own work around it (materializing the
//! prompt, publishing each server's cached blocks for the peers that read KV events, handing
//! the request to an engine) is not. Percentiles are nearest-rank, as in the report.
//!
//! Wall-clock figures depend on the machine and on what else runs on it, so they are never
//! part of a deterministic report: compare them as ratios within one set of runs.
//!
//! ```
//! use shepherd_sim::runner::PickCost;
//!
//! // Four picks of 1, 2, 3 and 10 µs.
//! let cost = PickCost::from_nanos(vec![3_000, 1_000, 10_000, 2_000]);
//! assert_eq!(cost.picks, 4);
//! assert_eq!(cost.total_us, 16.0);
//! assert_eq!(cost.mean_us, 4.0);
//! assert_eq!(cost.p50_us, 2.0);
//! assert_eq!(cost.p99_us, 10.0);
//! ```

use serde::Serialize;

use crate::stats::percentile;

/// Wall-clock cost of one run's routing decisions, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct PickCost {
    /// Decisions timed (every `schedule` call, including those that found no endpoint).
    pub picks: u64,
    /// Sum over the decisions.
    pub total_us: f64,
    /// Mean per decision.
    pub mean_us: f64,
    /// Median (nearest rank).
    pub p50_us: f64,
    /// 99th percentile (nearest rank).
    pub p99_us: f64,
    /// Slowest decision.
    pub max_us: f64,
}

impl PickCost {
    /// Folds per-decision durations in nanoseconds (all zeros when there are none).
    pub fn from_nanos(mut samples: Vec<u64>) -> PickCost {
        if samples.is_empty() {
            return PickCost::default();
        }
        samples.sort_unstable();
        let total_ns: u64 = samples.iter().fold(0u64, |a, &s| a.saturating_add(s));
        let us: Vec<f64> = samples.iter().map(|&ns| ns as f64 / 1e3).collect();
        let picks = samples.len() as u64;
        PickCost {
            picks,
            total_us: total_ns as f64 / 1e3,
            mean_us: total_ns as f64 / 1e3 / picks as f64,
            p50_us: percentile(&us, 50.0),
            p99_us: percentile(&us, 99.0),
            max_us: us.last().copied().unwrap_or(0.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::PickCost;

    #[test]
    fn statistics_of_hand_made_samples() {
        // 1..=100 µs, shuffled: mean 50.5, p50 50, p99 99, total 5050.
        let mut samples: Vec<u64> = (1..=100).map(|us| us * 1_000).collect();
        samples.reverse();
        samples.swap(3, 70);
        let c = PickCost::from_nanos(samples);
        assert_eq!(c.picks, 100);
        assert_eq!(c.total_us, 5050.0);
        assert_eq!(c.mean_us, 50.5);
        assert_eq!(c.p50_us, 50.0);
        assert_eq!(c.p99_us, 99.0);
        assert_eq!(c.max_us, 100.0);
    }

    #[test]
    fn one_sample_and_none() {
        let c = PickCost::from_nanos(vec![1_500]);
        assert_eq!(
            (c.picks, c.mean_us, c.p50_us, c.p99_us, c.max_us),
            (1, 1.5, 1.5, 1.5, 1.5)
        );
        assert_eq!(PickCost::from_nanos(Vec::new()), PickCost::default());
    }
}
