//! Stage one of the report pipeline: what one request measured (its time to first token, its
//! time per output token) and the sorted samples of a run.
//!
//! ```
//! use shepherd_sim::report::measure::{tpot_ms, ttft_ms};
//! use shepherd_sim::runner::{Outcome, RequestRecord};
//!
//! let ms = 1_000_000;
//! let r = RequestRecord {
//!     stream: 0,
//!     server: 0,
//!     arrival: 0,
//!     dispatched: Some(0),
//!     first_scheduled: Some(0),
//!     first_token: Some(150 * ms),
//!     end: Some(150 * ms + 9 * 20 * ms),
//!     prompt_tokens: 100,
//!     output_tokens: 10,
//!     cached_tokens: 0,
//!     preemptions: 0,
//!     outcome: Outcome::Completed,
//!     prefill_server: None,
//!     transferred_tokens: 0,
//! };
//! assert_eq!(ttft_ms(&r), Some(150.0));
//! assert_eq!(tpot_ms(&r), Some(20.0));
//! ```

use crate::runner::{Outcome, RequestRecord, RunResult};

/// `v` sorted ascending (total order).
pub(crate) fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

/// `x` rounded to 3 decimals.
pub(crate) fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// A request's time to first token, ms from its arrival (`None` before its first token).
pub fn ttft_ms(r: &RequestRecord) -> Option<f64> {
    r.first_token.map(|t| (t - r.arrival) as f64 / 1e6)
}

/// A request's time per output token after the first, ms: (end − first token) / (output
/// tokens − 1); `None` without both times or with a single output token (no TPOT).
pub fn tpot_ms(r: &RequestRecord) -> Option<f64> {
    if r.output_tokens <= 1 {
        return None;
    }
    let (ft, end) = (r.first_token?, r.end?);
    Some((end - ft) as f64 / 1e6 / f64::from(r.output_tokens - 1))
}

/// Time-to-first-token samples (ms) of the completed requests of `run`, optionally of one
/// stream.
pub fn ttfts_ms(run: &RunResult, stream: Option<u32>) -> Vec<f64> {
    sorted(
        run.records
            .iter()
            .filter(|r| r.outcome == Outcome::Completed && stream.is_none_or(|s| r.stream == s))
            .filter_map(ttft_ms)
            .collect(),
    )
}
