//! Min-max normalization for "fewer is better" load signals.

use std::sync::Arc;

use shepherd_scheduler_core::endpoint::{Endpoint, LoadMetrics};
use shepherd_scheduler_core::plugin::{CycleState, Score};

/// [`fewer_is_better`] over one scraped count (`count` picks it from the metrics); candidates
/// with stale metrics are neutral and left out of the normalization.
pub(crate) fn fewer_scraped(
    cycle: &CycleState<'_>,
    candidates: &[&Arc<Endpoint>],
    out: &mut [Score],
    count: fn(&LoadMetrics) -> u32,
) {
    fewer_is_better(out, |i| {
        let metrics = candidates[i].load_metrics();
        (!metrics.is_stale(cycle.now, cycle.staleness_bound)).then(|| u64::from(count(&metrics)))
    });
}

/// Scores candidates by a load where fewer is better, min-max normalized over the candidates
/// whose load is known: the least loaded scores 1, the most loaded 0, and when every known load
/// is equal they all score 1. A candidate whose load is unknown (`None`) gets
/// [`Score::NEUTRAL`] and does not take part in the normalization.
///
/// `load(i)` is called exactly once per candidate.
pub(crate) fn fewer_is_better(out: &mut [Score], mut load: impl FnMut(usize) -> Option<u64>) {
    let mut min = u64::MAX;
    let mut max = 0u64;
    // First pass: park the raw load in the slot, remember the range.
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = match load(i) {
            Some(x) => {
                min = min.min(x);
                max = max.max(x);
                Score {
                    value: x as f64,
                    neutral: false,
                }
            }
            None => Score::NEUTRAL,
        };
    }
    let span = max.saturating_sub(min) as f64;
    for slot in out.iter_mut().filter(|s| !s.neutral) {
        *slot = if span > 0.0 {
            Score::new((max as f64 - slot.value) / span)
        } else {
            Score::new(1.0)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(loads: &[Option<u64>]) -> Vec<Score> {
        let mut out = vec![Score::NEUTRAL; loads.len()];
        fewer_is_better(&mut out, |i| loads[i]);
        out
    }

    #[test]
    fn least_loaded_scores_one_most_loaded_zero() {
        let s = run(&[Some(4), Some(0), Some(2)]);
        assert_eq!(s[0], Score::new(0.0));
        assert_eq!(s[1], Score::new(1.0));
        assert_eq!(s[2], Score::new(0.5));
    }

    #[test]
    fn all_equal_scores_one() {
        assert!(
            run(&[Some(7), Some(7)])
                .iter()
                .all(|s| *s == Score::new(1.0))
        );
    }

    #[test]
    fn unknown_loads_are_neutral_and_ignored() {
        let s = run(&[None, Some(10), Some(20)]);
        assert_eq!(s[0], Score::NEUTRAL);
        assert_eq!(s[1], Score::new(1.0));
        assert_eq!(s[2], Score::new(0.0));
    }

    #[test]
    fn extreme_loads_stay_in_range() {
        let s = run(&[Some(u64::MAX), Some(0), Some(u64::MAX / 2)]);
        assert!(s.iter().all(|s| (0.0..=1.0).contains(&s.value)));
        assert_eq!(s[1], Score::new(1.0));
    }
}
