//! 95 % confidence intervals of a mean over seeds (Student's t), and nearest-rank
//! percentiles ([`percentile`]).
//!
//! A figure measured on `n` seeds (independent runs of the same scenario and policy) is
//! reported as its sample mean ± `t(0.975, n − 1) · s / √n`, `s` the sample standard deviation
//! (divisor `n − 1`). One seed has no spread to measure: its half-width is 0, so every
//! judgement made on intervals falls back to the point values.
//!
//! ```
//! use shepherd_sim::stats::Interval;
//!
//! let i = Interval::of(&[10.0, 12.0, 14.0]);
//! assert_eq!(i.mean, 12.0);
//! // s = 2, t(0.975, 2) = 4.303: 12 ± 4.303 · 2 / √3
//! assert!((i.half_width - 4.968).abs() < 1e-3);
//! assert_eq!(Interval::of(&[7.0]).half_width, 0.0);
//! ```

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// Confidence level of every interval.
pub const CONFIDENCE: f64 = 0.95;

/// A sample mean and its 95 % confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    /// Sample mean.
    pub mean: f64,
    /// Half-width of the 95 % interval (0 for one sample).
    pub half_width: f64,
    /// Samples (seeds).
    pub n: u32,
}

impl Interval {
    /// The mean and 95 % Student's t interval of `samples` (mean 0, half-width 0 when empty).
    pub fn of(samples: &[f64]) -> Interval {
        let n = samples.len();
        if n == 0 {
            return Interval::point(0.0);
        }
        let mean = samples.iter().sum::<f64>() / n as f64;
        if n == 1 {
            return Interval::point(mean);
        }
        let var = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let half_width = t_quantile(n as f64 - 1.0) * (var / n as f64).sqrt();
        Interval {
            mean,
            half_width,
            n: n as u32,
        }
    }

    /// One exact value (half-width 0).
    pub fn point(value: f64) -> Interval {
        Interval {
            mean: value,
            half_width: 0.0,
            n: 1,
        }
    }

    /// Lower end.
    pub fn low(&self) -> f64 {
        self.mean - self.half_width
    }

    /// Upper end.
    pub fn high(&self) -> f64 {
        self.mean + self.half_width
    }

    /// Rounded to 3 decimals (as the report writes every figure).
    pub fn rounded(self) -> Interval {
        let r = |x: f64| (x * 1000.0).round() / 1000.0;
        Interval {
            mean: r(self.mean),
            half_width: r(self.half_width),
            n: self.n,
        }
    }
}

/// The two-sided 95 % quantile of Student's t with `df` degrees of freedom,
/// `t(0.975, df)` (the normal 1.96 if statrs refuses `df`, which it does only for df ≤ 0 or NaN).
pub fn t_quantile(df: f64) -> f64 {
    StudentsT::new(0.0, 1.0, df)
        .map(|t| t.inverse_cdf(1.0 - (1.0 - CONFIDENCE) / 2.0))
        .unwrap_or(1.959_963_984_540_054)
}

/// Nearest-rank percentile of sorted `v` (0 when empty).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_the_tables() {
        // t(0.975, df) from standard tables.
        for (df, t) in [
            (1.0, 12.706),
            (2.0, 4.303),
            (4.0, 2.776),
            (9.0, 2.262),
            (29.0, 2.045),
            (1000.0, 1.962),
        ] {
            assert!(
                (t_quantile(df) - t).abs() < 1e-3,
                "df {df}: {}",
                t_quantile(df)
            );
        }
    }

    #[test]
    fn five_seeds_give_the_textbook_interval() {
        // mean 3, s = √2.5 = 1.5811, t(0.975, 4) = 2.7764: 3 ± 1.9632
        let i = Interval::of(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(i.n, 5);
        assert!((i.mean - 3.0).abs() < 1e-12);
        assert!((i.half_width - 1.9632).abs() < 1e-4, "{i:?}");
        assert!((i.low() - 1.0368).abs() < 1e-4 && (i.high() - 4.9632).abs() < 1e-4);
        let same = Interval::of(&[2.5; 4]);
        assert_eq!((same.mean, same.half_width), (2.5, 0.0));
        assert_eq!(Interval::of(&[]), Interval::point(0.0));
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&v, 100.0), 100.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
    }
}
