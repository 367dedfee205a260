//! "Best" and "within 5 % of the best", judged on confidence intervals rather than on one
//! seed's point values.
//!
//! The rule, for a figure where lower is better (TTFT): let B be the policy with the best
//! *mean* and [lo, hi] each policy's 95 % interval ([`crate::stats::Interval`]). A policy P is
//! - **best** when its interval overlaps B's: `P.lo ≤ B.hi`;
//! - else **within 5 %** when its interval overlaps B's stretched by 5 %: `P.lo ≤ 1.05 · B.hi`;
//! - else **behind**.
//!
//! Where higher is better (output tokens/s) the mirror image: best when `P.hi ≥ B.lo`, within
//! 5 % when `P.hi ≥ 0.95 · B.lo`. So a verdict says the seeds cannot tell P from the best (or
//! from 5 % off it); overlapping 95 % intervals is a lenient test. With one seed every
//! half-width is 0 and the rule is the plain comparison of values (P best only when equal to
//! B).
//!
//! ```
//! use shepherd_sim::report::judge::{Direction, Verdict, judge};
//! use shepherd_sim::stats::Interval;
//!
//! let best = Interval { mean: 100.0, half_width: 4.0, n: 5 };
//! let close = Interval { mean: 106.0, half_width: 3.0, n: 5 }; // [103, 109] overlaps [96, 104]
//! let near = Interval { mean: 112.0, half_width: 3.0, n: 5 }; // 109 ≤ 1.05 · 104 = 109.2
//! let far = Interval { mean: 120.0, half_width: 3.0, n: 5 };
//! assert_eq!(judge(&close, &best, Direction::Lower), Verdict::Best);
//! assert_eq!(judge(&near, &best, Direction::Lower), Verdict::Within5);
//! assert_eq!(judge(&far, &best, Direction::Lower), Verdict::Behind);
//! ```

use serde::Serialize;

use crate::stats::Interval;

/// The tolerance of "within 5 %".
pub const TOLERANCE: f64 = 0.05;

/// One line stating the rule, for reports.
pub const RULE: &str = "best = 95 % interval overlaps the best mean's interval; within 5 % = \
overlaps that interval widened by 5 % (lower is better: P.lo ≤ 1.05·B.hi; higher: P.hi ≥ 0.95·B.lo)";

/// Which way a figure improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Lower is better (latency).
    Lower,
    /// Higher is better (throughput).
    Higher,
}

/// How a policy stands against the best on one figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Indistinguishable from the best.
    Best,
    /// Not shown to be more than 5 % behind the best.
    Within5,
    /// More than 5 % behind the best, beyond the intervals.
    Behind,
}

impl Verdict {
    /// `best`, `within 5 %`, `behind`.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Best => "best",
            Verdict::Within5 => "within 5 %",
            Verdict::Behind => "behind",
        }
    }
}

/// Judges `candidate` against `best` (the interval of the best mean).
pub fn judge(candidate: &Interval, best: &Interval, direction: Direction) -> Verdict {
    let (overlaps, within) = match direction {
        Direction::Lower => (
            candidate.low() <= best.high(),
            candidate.low() <= (1.0 + TOLERANCE) * best.high(),
        ),
        Direction::Higher => (
            candidate.high() >= best.low(),
            candidate.high() >= (1.0 - TOLERANCE) * best.low(),
        ),
    };
    if overlaps {
        Verdict::Best
    } else if within {
        Verdict::Within5
    } else {
        Verdict::Behind
    }
}

/// Index of the best mean among `figures` (the first on ties; `None` when empty).
pub fn best_mean(figures: &[Interval], direction: Direction) -> Option<usize> {
    let better = |a: &Interval, b: &Interval| match direction {
        Direction::Lower => a.mean < b.mean,
        Direction::Higher => a.mean > b.mean,
    };
    let mut best: Option<usize> = None;
    for (i, f) in figures.iter().enumerate() {
        if best.is_none_or(|b| better(f, &figures[b])) {
            best = Some(i);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn i(mean: f64, half_width: f64) -> Interval {
        Interval {
            mean,
            half_width,
            n: 5,
        }
    }

    #[test]
    fn higher_is_better_mirrors_lower() {
        let best = i(1000.0, 20.0); // [980, 1020]
        assert_eq!(
            judge(&i(970.0, 15.0), &best, Direction::Higher),
            Verdict::Best
        );
        // 0.95 · 980 = 931
        assert_eq!(
            judge(&i(925.0, 10.0), &best, Direction::Higher),
            Verdict::Within5
        );
        assert_eq!(
            judge(&i(900.0, 10.0), &best, Direction::Higher),
            Verdict::Behind
        );
        assert_eq!(
            best_mean(&[i(1.0, 0.0), i(3.0, 0.0), i(3.0, 0.0)], Direction::Higher),
            Some(1)
        );
        assert_eq!(
            best_mean(&[i(2.0, 0.0), i(1.0, 0.0)], Direction::Lower),
            Some(1)
        );
        assert_eq!(best_mean(&[], Direction::Lower), None);
    }

    #[test]
    fn one_seed_is_the_plain_comparison() {
        let best = Interval::point(92.0);
        assert_eq!(
            judge(&Interval::point(92.0), &best, Direction::Lower),
            Verdict::Best
        );
        assert_eq!(
            judge(&Interval::point(94.0), &best, Direction::Lower),
            Verdict::Within5
        );
        assert_eq!(
            judge(&Interval::point(96.7), &best, Direction::Lower),
            Verdict::Behind
        );
    }
}
