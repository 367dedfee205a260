//! A renderer's helper: one figure as a table cell, `mean ± half-width` over several seeds.
//!
//! ```
//! use shepherd_sim::report::cell::cell;
//! use shepherd_sim::stats::Interval;
//!
//! assert_eq!(cell(Interval::point(0.8512), 100.0, 1, "%"), "85.1%");
//! let i = Interval { mean: 120.0, half_width: 4.25, n: 5 };
//! assert_eq!(cell(i, 1.0, 0, ""), "120 ± 4");
//! ```

use crate::stats::Interval;

/// `value` with `decimals` decimals after multiplying by `scale`, as `mean ± half-width` when
/// the interval comes from several seeds.
pub fn cell(i: Interval, scale: f64, decimals: usize, unit: &str) -> String {
    if i.n > 1 {
        format!(
            "{:.decimals$} ± {:.decimals$}{unit}",
            i.mean * scale,
            i.half_width * scale
        )
    } else {
        format!("{:.decimals$}{unit}", i.mean * scale)
    }
}
