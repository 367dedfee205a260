//! The decider's target: on each judged figure, within 5 % of the better of "always
//! disaggregate" (on the decider's pool) and "never" (the aggregated pool); on SLO attainment,
//! within 2 points of the better ([`AttainmentCheck`]).
//!
//! ```
//! use shepherd_sim::pd::FigureCheck;
//!
//! // Lower is better: the better of 100 and 120 is 100; 104 is within 5 %.
//! let c = FigureCheck::lower_better("ttft_p99_ms", 104.0, 100.0, 120.0);
//! assert!(c.met);
//! assert_eq!(c.best_of, "always");
//! // Higher is better: 90 against a best of 100 is 10 % short.
//! let c = FigureCheck::higher_better("tokens", 90.0, 80.0, 100.0);
//! assert!(!c.met);
//! assert!((c.gap_percent - 10.0).abs() < 1e-9);
//!
//! use shepherd_sim::pd::AttainmentCheck;
//! let a = AttainmentCheck::of(0.93, 0.88, 0.91);
//! assert!(a.within && a.above_both);
//! assert_eq!(a.lead_points, 2.0);
//! assert!(!AttainmentCheck::of(0.88, 0.91, 0.5).within);
//! ```

use serde::Serialize;

use super::PdRow;

/// How far the decider may trail the better arm, as a fraction.
pub const TOLERANCE: f64 = 0.05;

/// How far the decider's SLO attainment may trail the better arm's, as a fraction (2 points).
pub const ATTAINMENT_TOLERANCE: f64 = 0.02;

/// The decider's SLO attainment against the better of "always" and "never".
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttainmentCheck {
    /// The decider's attainment (fraction).
    pub decider: f64,
    /// "always"'s on the decider's pool.
    pub always: f64,
    /// "never"'s (aggregated).
    pub never: f64,
    /// Decider minus the better arm, in points (positive: better).
    pub lead_points: f64,
    /// Within [`ATTAINMENT_TOLERANCE`] of the better arm.
    pub within: bool,
    /// Strictly above both arms.
    pub above_both: bool,
}

impl AttainmentCheck {
    /// Compares the three attainments.
    pub fn of(decider: f64, always: f64, never: f64) -> Self {
        let best = always.max(never);
        AttainmentCheck {
            decider,
            always,
            never,
            lead_points: ((decider - best) * 1000.0).round() / 10.0,
            within: decider >= best - ATTAINMENT_TOLERANCE - 1e-9,
            above_both: decider > best,
        }
    }
}

/// One figure of the check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FigureCheck {
    /// The figure's JSON name.
    pub figure: &'static str,
    /// The decider's value.
    pub decider: f64,
    /// The better arm's value.
    pub best: f64,
    /// Which arm is better: `always` or `never`.
    pub best_of: &'static str,
    /// How much worse the decider is than the better arm, % (negative: better).
    pub gap_percent: f64,
    /// Within [`TOLERANCE`] of the better arm.
    pub met: bool,
}

impl FigureCheck {
    /// A figure where lower is better.
    pub fn lower_better(figure: &'static str, decider: f64, always: f64, never: f64) -> Self {
        let (best, best_of) = if always <= never {
            (always, "always")
        } else {
            (never, "never")
        };
        let gap = if best > 0.0 {
            (decider / best - 1.0) * 100.0
        } else {
            0.0
        };
        FigureCheck {
            figure,
            decider,
            best,
            best_of,
            gap_percent: (gap * 10.0).round() / 10.0,
            met: decider <= best * (1.0 + TOLERANCE),
        }
    }

    /// A figure where higher is better.
    pub fn higher_better(figure: &'static str, decider: f64, always: f64, never: f64) -> Self {
        let (best, best_of) = if always >= never {
            (always, "always")
        } else {
            (never, "never")
        };
        let gap = if best > 0.0 {
            (1.0 - decider / best) * 100.0
        } else {
            0.0
        };
        FigureCheck {
            figure,
            decider,
            best,
            best_of,
            gap_percent: (gap * 10.0).round() / 10.0,
            met: decider >= best * (1.0 - TOLERANCE),
        }
    }
}

/// A decider row against "always" on its pool and "never".
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeciderCheck {
    /// The decider row's label.
    pub label: String,
    /// TTFT p99, TPOT p99, output tokens per second per GPU.
    pub figures: Vec<FigureCheck>,
    /// Every figure met.
    pub met: bool,
    /// SLO attainment against the better arm.
    pub attainment: AttainmentCheck,
}

impl DeciderCheck {
    /// Checks `decider` against `always` and `never`.
    pub fn of(decider: &PdRow, always: &PdRow, never: &PdRow) -> Self {
        let figures = vec![
            FigureCheck::lower_better(
                "ttft_p99_ms",
                decider.ttft_p99_ms,
                always.ttft_p99_ms,
                never.ttft_p99_ms,
            ),
            FigureCheck::lower_better(
                "tpot_p99_ms",
                decider.tpot_p99_ms,
                always.tpot_p99_ms,
                never.tpot_p99_ms,
            ),
            FigureCheck::higher_better(
                "output_tokens_per_s_per_gpu",
                decider.output_tokens_per_s_per_gpu,
                always.output_tokens_per_s_per_gpu,
                never.output_tokens_per_s_per_gpu,
            ),
        ];
        DeciderCheck {
            label: decider.label.clone(),
            met: figures.iter().all(|f| f.met),
            figures,
            attainment: AttainmentCheck::of(
                decider.slo_attainment,
                always.slo_attainment,
                never.slo_attainment,
            ),
        }
    }
}
