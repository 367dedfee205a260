//! Stage three of the report pipeline: one policy's figures over several seeds: the mean of each, with its 95 % interval.
//!
//! [`aggregate`] takes the per-seed [`PolicySummary`]s of one (scenario, policy) pair and
//! returns one summary whose figures are the means (counts rounded to whole numbers) and whose
//! `intervals` hold, for every figure in [`FIGURES`] and every per-stream TTFT, the exact mean
//! and 95 % half-width; rows and streams with latency objectives also get their SLO
//! attainment's (`slo_attainment`, `slo_met`, `slo_with_objectives`, `goodput_rps`), and rows of policies with
//! a `latency-scorer` their prediction errors over the seeds (`latency_error`,
//! [`super::latency_error`]). The `adaptive` summary is the first seed's. One seed is returned
//! as it is, without intervals.
//!
//! ```
//! use shepherd_sim::report::aggregate::{aggregate, figure};
//! use shepherd_sim::report::summary::PolicySummary;
//!
//! let mut a = PolicySummary::default();
//! a.ttft_p90_ms = 100.0;
//! let mut b = a.clone();
//! b.ttft_p90_ms = 110.0;
//! let both = aggregate(&[a, b]);
//! assert_eq!(both.ttft_p90_ms, 105.0);
//! let i = figure(&both, "ttft_p90_ms").unwrap();
//! assert_eq!((i.mean, i.n), (105.0, 2));
//! // s = 7.071, t(0.975, 1) = 12.706: half-width 12.706 · 7.071 / √2 = 63.53
//! assert!((i.half_width - 63.53).abs() < 0.01);
//! ```

use std::collections::BTreeMap;

use super::attainment::Attainment;
use super::latency_error::over_seeds;
use super::measure::round3;
use super::summary::{PolicySummary, StreamSummary};
use crate::stats::Interval;

/// Reads one figure of a summary.
pub type Get = fn(&PolicySummary) -> f64;
/// Writes one figure of a summary (counts are rounded).
pub type Set = fn(&mut PolicySummary, f64);

/// Every figure of a policy's row that is averaged over seeds: JSON name, reader, writer.
pub const FIGURES: &[(&str, Get, Set)] = &[
    (
        "requests",
        |s| s.requests as f64,
        |s, v| s.requests = count(v),
    ),
    (
        "completed",
        |s| s.completed as f64,
        |s, v| s.completed = count(v),
    ),
    ("dropped", |s| s.dropped as f64, |s, v| s.dropped = count(v)),
    (
        "timed_out",
        |s| s.timed_out as f64,
        |s, v| s.timed_out = count(v),
    ),
    ("ttft_p50_ms", |s| s.ttft_p50_ms, |s, v| s.ttft_p50_ms = v),
    ("ttft_p90_ms", |s| s.ttft_p90_ms, |s, v| s.ttft_p90_ms = v),
    ("ttft_p99_ms", |s| s.ttft_p99_ms, |s, v| s.ttft_p99_ms = v),
    ("tpot_p50_ms", |s| s.tpot_p50_ms, |s, v| s.tpot_p50_ms = v),
    ("tpot_p99_ms", |s| s.tpot_p99_ms, |s, v| s.tpot_p99_ms = v),
    ("e2e_p50_ms", |s| s.e2e_p50_ms, |s, v| s.e2e_p50_ms = v),
    ("e2e_p99_ms", |s| s.e2e_p99_ms, |s, v| s.e2e_p99_ms = v),
    (
        "output_tokens_per_s",
        |s| s.output_tokens_per_s,
        |s, v| s.output_tokens_per_s = v,
    ),
    (
        "cache_hit_rate",
        |s| s.cache_hit_rate,
        |s, v| s.cache_hit_rate = v,
    ),
    (
        "load_imbalance_cv",
        |s| s.load_imbalance_cv,
        |s, v| s.load_imbalance_cv = v,
    ),
    (
        "preemptions",
        |s| s.preemptions as f64,
        |s, v| s.preemptions = count(v),
    ),
    ("makespan_s", |s| s.makespan_s, |s, v| s.makespan_s = v),
    ("events", |s| s.events as f64, |s, v| s.events = count(v)),
];

/// Per-stream figures averaged over seeds: JSON name, reader, writer.
#[allow(clippy::type_complexity)]
const STREAM_FIGURES: &[(&str, fn(&StreamSummary) -> f64, fn(&mut StreamSummary, f64))] = &[
    (
        "completed",
        |s| s.completed as f64,
        |s, v| s.completed = count(v),
    ),
    ("ttft_p50_ms", |s| s.ttft_p50_ms, |s, v| s.ttft_p50_ms = v),
    ("ttft_p90_ms", |s| s.ttft_p90_ms, |s, v| s.ttft_p90_ms = v),
    ("ttft_p99_ms", |s| s.ttft_p99_ms, |s, v| s.ttft_p99_ms = v),
];

/// SLO attainment figures, of the rows and streams with objectives only: JSON name (in
/// `intervals`), reader, writer.
#[allow(clippy::type_complexity)]
const SLO_FIGURES: &[(&str, fn(&Attainment) -> f64, fn(&mut Attainment, f64))] = &[
    ("slo_attainment", |a| a.attainment, |a, v| a.attainment = v),
    ("slo_met", |a| a.met as f64, |a, v| a.met = count(v)),
    (
        "slo_with_objectives",
        |a| a.with_objectives as f64,
        |a, v| a.with_objectives = count(v),
    ),
    ("goodput_rps", |a| a.goodput_rps, |a, v| a.goodput_rps = v),
];

/// The point value of SLO figure `name` of `slo` (`None` without objectives or for another
/// name).
fn slo_point(slo: Option<&Attainment>, name: &str) -> Option<Interval> {
    let slo = slo?;
    SLO_FIGURES
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, get, _)| Interval::point(get(slo)))
}

/// Averages the SLO figures of `per_seed` (each seed's attainment, in seed order) into `out`
/// and `intervals`, when `out` has objectives.
fn aggregate_slo(
    out: &mut Option<Attainment>,
    per_seed: &[Option<Attainment>],
    intervals: &mut BTreeMap<String, Interval>,
) {
    let Some(out) = out.as_mut() else {
        return;
    };
    for (name, get, set) in SLO_FIGURES {
        let samples: Vec<f64> = per_seed.iter().flatten().map(get).collect();
        let i = Interval::of(&samples);
        set(out, round3(i.mean));
        intervals.insert((*name).to_string(), i.rounded());
    }
}

fn count(v: f64) -> u64 {
    v.round().max(0.0) as u64
}

/// The interval of figure `name` (a [`FIGURES`] name) of `summary`: from its `intervals` when
/// it has them, else the point value; `None` for an unknown name.
pub fn figure(summary: &PolicySummary, name: &str) -> Option<Interval> {
    if let Some(i) = summary.intervals.as_ref().and_then(|m| m.get(name)) {
        return Some(*i);
    }
    FIGURES
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, get, _)| Interval::point(get(summary)))
        .or_else(|| slo_point(summary.slo.as_ref(), name))
}

/// The interval of per-stream figure `name` of `stream` (point value for one seed).
pub fn stream_figure(stream: &StreamSummary, name: &str) -> Option<Interval> {
    if let Some(i) = stream.intervals.as_ref().and_then(|m| m.get(name)) {
        return Some(*i);
    }
    STREAM_FIGURES
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, get, _)| Interval::point(get(stream)))
        .or_else(|| slo_point(stream.slo.as_ref(), name))
}

/// Means and intervals of one policy's per-seed summaries (in seed order, same policy, same
/// streams); the first summary as it is when there is one (or none).
pub fn aggregate(per_seed: &[PolicySummary]) -> PolicySummary {
    let Some(first) = per_seed.first() else {
        return PolicySummary::default();
    };
    let mut out = first.clone();
    if per_seed.len() < 2 {
        return out;
    }
    let mut intervals = BTreeMap::new();
    for (name, get, set) in FIGURES {
        let samples: Vec<f64> = per_seed.iter().map(get).collect();
        let i = Interval::of(&samples);
        set(&mut out, round3(i.mean));
        intervals.insert((*name).to_string(), i.rounded());
    }
    let slos: Vec<Option<Attainment>> = per_seed.iter().map(|s| s.slo).collect();
    aggregate_slo(&mut out.slo, &slos, &mut intervals);
    out.intervals = Some(intervals);
    let tallies: Vec<_> = per_seed.iter().map(|s| s.latency_tallies).collect();
    out.latency_error = over_seeds(&tallies);
    for (k, stream) in out.streams.iter_mut().enumerate() {
        let mut intervals = BTreeMap::new();
        for (name, get, set) in STREAM_FIGURES {
            let samples: Vec<f64> = per_seed
                .iter()
                .filter_map(|s| s.streams.get(k))
                .map(get)
                .collect();
            let i = Interval::of(&samples);
            set(stream, round3(i.mean));
            intervals.insert((*name).to_string(), i.rounded());
        }
        let slos: Vec<Option<Attainment>> = per_seed
            .iter()
            .map(|s| s.streams.get(k).and_then(|st| st.slo))
            .collect();
        aggregate_slo(&mut stream.slo, &slos, &mut intervals);
        stream.intervals = Some(intervals);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_rounded_means_and_streams_get_intervals() {
        let seed = |dropped: u64, p99: f64| PolicySummary {
            dropped,
            streams: vec![StreamSummary {
                stream: "s".into(),
                ttft_p99_ms: p99,
                ..StreamSummary::default()
            }],
            ..PolicySummary::default()
        };
        let a = aggregate(&[seed(0, 10.0), seed(1, 20.0), seed(1, 30.0)]);
        assert_eq!(a.dropped, 1);
        assert!((figure(&a, "dropped").unwrap().mean - 0.667).abs() < 1e-9);
        assert_eq!(a.streams[0].ttft_p99_ms, 20.0);
        let i = stream_figure(&a.streams[0], "ttft_p99_ms").unwrap();
        // s = 10, t(0.975, 2) = 4.3027: 20 ± 4.3027 · 10 / √3 = 24.841
        assert!((i.half_width - 24.841).abs() < 1e-3, "{i:?}");
        assert!(figure(&a, "nope").is_none());
        let one = aggregate(&[seed(3, 5.0)]);
        assert_eq!(one.intervals, None);
        assert_eq!(figure(&one, "dropped"), Some(Interval::point(3.0)));
    }
}
