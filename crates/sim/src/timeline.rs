//! The adaptive controller's timeline as CSV: one row per tick, for docs and spreadsheets.
//!
//! Columns: `time_s`, `ncv_load`, `ncv_kv` (the detector's two imbalances), `signal` (raw;
//! empty when every endpoint was stale), `smoothed`, `mode`,
//! `distribution_share`, then one `w_<scorer>` column per scorer of the default profile, then
//! `reason` (the controller's explanation, only on ticks that changed the mode).

use std::fmt::Write as _;

use crate::runner::RunResult;

/// The CSV timeline of `run`'s adaptive ticks; `None` for a run without adaptive weights.
pub fn csv(run: &RunResult) -> Option<String> {
    if run.adaptive_series.is_empty() {
        return None;
    }
    let mut out = String::from("time_s,ncv_load,ncv_kv,signal,smoothed,mode,distribution_share");
    for name in &run.scorer_names {
        let _ = write!(out, ",w_{name}");
    }
    out.push_str(",reason\n");
    for a in &run.adaptive_series {
        let _ = write!(
            out,
            "{:.3},{:.4},{:.4},",
            a.time as f64 / 1e9,
            a.ncv_load,
            a.ncv_kv
        );
        if let Some(s) = a.signal {
            let _ = write!(out, "{s:.4}");
        }
        let _ = write!(
            out,
            ",{:.4},{},{:.4}",
            a.smoothed, a.mode, a.distribution_share
        );
        for k in 0..run.scorer_names.len() {
            let _ = write!(out, ",{:.4}", a.weights.get(k).copied().unwrap_or(0.0));
        }
        out.push(',');
        if let Some(reason) = &a.reason {
            let _ = write!(out, "\"{}\"", reason.replace('"', "'"));
        }
        out.push('\n');
    }
    Some(out)
}
