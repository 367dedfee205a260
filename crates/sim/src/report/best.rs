//! Which policies are best, or within 5 % of the best, on a scenario's headline figures
//! (TTFT p90, output tokens/s and, where the scenario has objectives, goodput), by the
//! interval rule of [`super::judge`].
//!
//! Bounds (`@fresh` and `@oracle` rows) are not candidates.
//!
//! ```
//! use shepherd_sim::report::best::judgements;
//! use shepherd_sim::report::summary::PolicySummary;
//!
//! let row = |policy: &str, p90: f64, tps: f64| PolicySummary {
//!     policy: policy.into(),
//!     ttft_p90_ms: p90,
//!     output_tokens_per_s: tps,
//!     ..PolicySummary::default()
//! };
//! let j = judgements(&[row("a", 100.0, 500.0), row("b", 104.0, 400.0)]);
//! assert_eq!(j[0].figure, "ttft_p90_ms");
//! assert_eq!(j[0].best_mean_policy, "a");
//! assert_eq!(j[0].within_5pct, vec!["b".to_string()]);
//! assert_eq!(j[1].best, vec!["a".to_string()]);
//! assert!(j[1].within_5pct.is_empty());
//! ```

use serde::Serialize;

use super::aggregate::figure;
use super::judge::{Direction, Verdict, best_mean, judge};
use super::summary::PolicySummary;
use crate::stats::Interval;

/// The figures judged, with the direction in which each improves.
pub const JUDGED: &[(&str, Direction)] = &[
    ("ttft_p90_ms", Direction::Lower),
    ("output_tokens_per_s", Direction::Higher),
    ("goodput_rps", Direction::Higher),
];

/// One figure's judgement over a scenario's policies.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judgement {
    /// The figure (a JSON field name of the policy rows).
    pub figure: String,
    /// Which way it improves.
    pub direction: Direction,
    /// The policy with the best mean.
    pub best_mean_policy: String,
    /// Its mean and interval.
    pub best_mean: Interval,
    /// Policies judged best (the best mean's own included), in row order.
    pub best: Vec<String>,
    /// Policies judged within 5 % but not best, in row order.
    pub within_5pct: Vec<String>,
}

impl Judgement {
    /// The verdict on `policy` (`None` if it is not a candidate).
    pub fn verdict(&self, policy: &str) -> Option<Verdict> {
        if self.best.iter().any(|p| p == policy) {
            Some(Verdict::Best)
        } else if self.within_5pct.iter().any(|p| p == policy) {
            Some(Verdict::Within5)
        } else if self.best_mean_policy.is_empty() {
            None
        } else {
            Some(Verdict::Behind)
        }
    }
}

/// The judgements of [`JUDGED`] over `rows` (bounds skipped; goodput only when some row has
/// objectives); empty without candidates.
pub fn judgements(rows: &[PolicySummary]) -> Vec<Judgement> {
    let candidates: Vec<&PolicySummary> = rows.iter().filter(|r| !r.bound).collect();
    let mut out = Vec::new();
    for &(name, direction) in JUDGED {
        // Goodput is judged only where the scenario has objectives.
        if candidates.iter().all(|r| figure(r, name).is_none()) {
            continue;
        }
        let figures: Vec<Interval> = candidates
            .iter()
            .map(|r| figure(r, name).unwrap_or(Interval::point(0.0)))
            .collect();
        let Some(b) = best_mean(&figures, direction) else {
            continue;
        };
        let mut j = Judgement {
            figure: name.to_string(),
            direction,
            best_mean_policy: candidates[b].policy.clone(),
            best_mean: figures[b],
            best: Vec::new(),
            within_5pct: Vec::new(),
        };
        for (r, f) in candidates.iter().zip(&figures) {
            match judge(f, &figures[b], direction) {
                Verdict::Best => j.best.push(r.policy.clone()),
                Verdict::Within5 => j.within_5pct.push(r.policy.clone()),
                Verdict::Behind => {}
            }
        }
        out.push(j);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A row whose TTFT p90 and tokens/s are the given (mean, half-width) over 5 seeds.
    fn row(policy: &str, p90: (f64, f64), tps: (f64, f64)) -> PolicySummary {
        let i = |(mean, half_width)| Interval {
            mean,
            half_width,
            n: 5,
        };
        let intervals = BTreeMap::from([
            ("ttft_p90_ms".to_string(), i(p90)),
            ("output_tokens_per_s".to_string(), i(tps)),
        ]);
        PolicySummary {
            policy: policy.into(),
            ttft_p90_ms: p90.0,
            output_tokens_per_s: tps.0,
            intervals: Some(intervals),
            ..PolicySummary::default()
        }
    }

    #[test]
    fn judgements_follow_the_interval_rule() {
        let mut bound = row("a@fresh", (10.0, 1.0), (9000.0, 1.0));
        bound.bound = true;
        let rows = [
            row("a", (100.0, 5.0), (5000.0, 50.0)),  // p90 [95, 105]
            row("b", (108.0, 4.0), (4700.0, 200.0)), // [104, 112]: overlaps a
            row("c", (112.0, 2.0), (4600.0, 50.0)),  // [110, 114]: 110 ≤ 1.05·105 = 110.25
            row("d", (113.0, 2.0), (5100.0, 10.0)),  // [111, 115]: behind
            bound,                                   // a bound is never a candidate
        ];
        let j = judgements(&rows);
        assert_eq!(j.len(), 2);
        let p90 = &j[0];
        assert_eq!(p90.best_mean_policy, "a");
        assert_eq!(p90.best, ["a", "b"]);
        assert_eq!(p90.within_5pct, ["c"]);
        assert_eq!(p90.verdict("d"), Some(Verdict::Behind));
        assert_eq!(p90.verdict("c"), Some(Verdict::Within5));
        // Tokens/s: d's mean is best, [5090, 5110]; a reaches 5050 (no overlap) but
        // 0.95 · 5090 = 4835.5 ≤ 5050; b's [4500, 4900] is within 5 %; c's 4650 is behind.
        let tps = &j[1];
        assert_eq!(tps.best_mean_policy, "d");
        assert_eq!(tps.best, ["d"]);
        assert_eq!(tps.within_5pct, ["a", "b"]);
        assert_eq!(tps.verdict("c"), Some(Verdict::Behind));
        // The same rows on one seed (no intervals): b is 8 % behind on p90.
        let points: Vec<_> = rows
            .iter()
            .map(|r| PolicySummary {
                intervals: None,
                ..r.clone()
            })
            .collect();
        let j = judgements(&points);
        assert_eq!(j[0].best, ["a"]);
        assert!(j[0].within_5pct.is_empty());
    }
}
