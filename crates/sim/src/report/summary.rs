//! Stage two of the report pipeline: one run's figures ([`summarize`]): latency percentiles,
//! throughput, cache hits, load imbalance, SLO attainment, what the adaptive controller did.
//!
//! JSON field names are stable (schema `shepherd-sim/report/v1`): times in milliseconds with a
//! `_ms` suffix, rates as fractions in [0, 1], throughput in output tokens per simulated second.
//!
//! ```
//! use shepherd_sim::report::summary::PolicySummary;
//!
//! let row = PolicySummary { policy: "adaptive".into(), ttft_p90_ms: 120.0, ..PolicySummary::default() };
//! assert!(!row.bound);
//! ```

use std::collections::BTreeMap;

use serde::Serialize;
use shepherd_scorers::latency::ErrorTally;

use super::attainment::{Attainment, attainment};
use super::latency_error::LatencyError;
use super::measure::{round3, sorted, tpot_ms, ttfts_ms};
use crate::runner::{Outcome, RunResult};
use crate::stats::{Interval, percentile};
use crate::workload::Scenario;

/// The report's figures for one policy on one scenario.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PolicySummary {
    /// Policy name (`<name>@fresh` for the zero-staleness bound).
    pub policy: String,
    /// Whether this row is a bound rather than a policy.
    pub bound: bool,
    /// Requests issued.
    pub requests: u64,
    /// Requests answered in full.
    pub completed: u64,
    /// Requests refused (no endpoint, or can never fit).
    pub dropped: u64,
    /// Requests abandoned after the scenario's timeout.
    pub timed_out: u64,
    /// Time to first token, ms.
    pub ttft_p50_ms: f64,
    /// Time to first token, ms.
    pub ttft_p90_ms: f64,
    /// Time to first token, ms.
    pub ttft_p99_ms: f64,
    /// Time per output token after the first, ms.
    pub tpot_p50_ms: f64,
    /// Time per output token after the first, ms.
    pub tpot_p99_ms: f64,
    /// End-to-end latency, ms.
    pub e2e_p50_ms: f64,
    /// End-to-end latency, ms.
    pub e2e_p99_ms: f64,
    /// Output tokens of completed requests per simulated second (first arrival to last end).
    pub output_tokens_per_s: f64,
    /// Prompt tokens served from the prefix cache / prompt tokens (first admissions).
    pub cache_hit_rate: f64,
    /// Mean over ticks of the coefficient of variation of per-server load (running + waiting).
    pub load_imbalance_cv: f64,
    /// Preemptions across servers.
    pub preemptions: u64,
    /// Simulated seconds from the first arrival to the last end.
    pub makespan_s: f64,
    /// Simulated events processed.
    pub events: u64,
    /// SLO attainment and goodput over every request with latency objectives (only for
    /// scenarios with objectives; [`super::attainment`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slo: Option<Attainment>,
    /// Per-stream time to first token (and SLO attainment, for streams with objectives).
    pub streams: Vec<StreamSummary>,
    /// What the adaptive controller did (only for policies with an `adaptive:` section; over
    /// several seeds, the first seed's run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adaptive: Option<AdaptiveSummary>,
    /// Over several seeds: each figure's mean and 95 % interval, by JSON field name (the fields
    /// above then hold the means, counts rounded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intervals: Option<BTreeMap<String, Interval>>,
    /// Over several seeds, for policies with a `latency-scorer`: its TTFT and TPOT prediction
    /// errors (MAPE) per load level and overall, mean and 95 % interval
    /// ([`super::latency_error`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_error: Option<LatencyError>,
    /// This run's prediction-error tallies (TTFT, TPOT), which `latency_error` aggregates over
    /// seeds; not written.
    #[serde(skip)]
    pub latency_tallies: Option<(ErrorTally, ErrorTally)>,
}

/// What the adaptive controller did during a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AdaptiveSummary {
    /// Controller ticks.
    pub ticks: u64,
    /// Ticks that ended in `burst` mode.
    pub burst_ticks: u64,
    /// Mode changes (entering and leaving `burst` count one each).
    pub mode_changes: u64,
    /// Simulated time of the first entry into `burst`, seconds from the start (null if never).
    pub first_burst_s: Option<f64>,
    /// Simulated time of the last exit from `burst`, seconds from the start (null if never).
    pub last_exit_s: Option<f64>,
    /// Highest smoothed signal seen.
    pub max_smoothed: f64,
    /// Highest Distribution share of the weight budget in force.
    pub max_distribution_share: f64,
}

/// Summarizes the adaptive series of `run` (`None` when it has none).
pub fn adaptive_summary(run: &RunResult) -> Option<AdaptiveSummary> {
    let series = &run.adaptive_series;
    if series.is_empty() {
        return None;
    }
    let mut mode_changes = 0;
    let mut first_burst = None;
    let mut last_exit = None;
    let mut previous = "steady";
    for a in series {
        if a.mode != previous {
            mode_changes += 1;
            let at = round3(a.time as f64 / 1e9);
            if a.mode == "burst" {
                first_burst.get_or_insert(at);
            } else {
                last_exit = Some(at);
            }
            previous = &a.mode;
        }
    }
    Some(AdaptiveSummary {
        ticks: series.len() as u64,
        burst_ticks: series.iter().filter(|a| a.mode == "burst").count() as u64,
        mode_changes,
        first_burst_s: first_burst,
        last_exit_s: last_exit,
        max_smoothed: round3(series.iter().map(|a| a.smoothed).fold(0.0, f64::max)),
        max_distribution_share: round3(
            series
                .iter()
                .map(|a| a.distribution_share)
                .fold(0.0, f64::max),
        ),
    })
}

/// Per-stream latency, for scenarios with phases (such as the hot-prefix spike).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StreamSummary {
    /// Stream name.
    pub stream: String,
    /// Requests completed.
    pub completed: u64,
    /// Time to first token, ms.
    pub ttft_p50_ms: f64,
    /// Time to first token, ms.
    pub ttft_p90_ms: f64,
    /// Time to first token, ms.
    pub ttft_p99_ms: f64,
    /// SLO attainment of the stream's requests (only for a stream with objectives).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slo: Option<Attainment>,
    /// Over several seeds: each figure's mean and 95 % interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intervals: Option<BTreeMap<String, Interval>>,
}

/// Summarizes one run.
pub fn summarize(scenario: &Scenario, run: &RunResult, bound: bool) -> PolicySummary {
    let done: Vec<_> = run
        .records
        .iter()
        .filter(|r| r.outcome == Outcome::Completed)
        .collect();
    let ttft = ttfts_ms(run, None);
    let tpot = sorted(done.iter().filter_map(|r| tpot_ms(r)).collect());
    let e2e = sorted(
        done.iter()
            .filter_map(|r| r.end.map(|e| (e - r.arrival) as f64 / 1e6))
            .collect(),
    );
    let first = run.records.iter().map(|r| r.arrival).min().unwrap_or(0);
    let last = run
        .records
        .iter()
        .filter_map(|r| r.end)
        .max()
        .unwrap_or(first);
    let makespan = (last - first) as f64 / 1e9;
    let output: u64 = done.iter().map(|r| u64::from(r.output_tokens)).sum();
    let count = |o: Outcome| run.records.iter().filter(|r| r.outcome == o).count() as u64;
    let mut cvs = Vec::new();
    for (_, loads) in &run.load_series {
        let n = loads.len() as f64;
        let total: f64 = loads.iter().map(|&l| f64::from(l)).sum();
        if n < 2.0 || total <= 0.0 {
            continue;
        }
        let mean = total / n;
        let var = loads
            .iter()
            .map(|&l| (f64::from(l) - mean).powi(2))
            .sum::<f64>()
            / n;
        cvs.push(var.sqrt() / mean);
    }
    let imbalance = if cvs.is_empty() {
        0.0
    } else {
        cvs.iter().sum::<f64>() / cvs.len() as f64
    };
    let (slo, stream_slos) = attainment(scenario, run);
    let slo = slo.map(|a| a.over(makespan));
    let stream_slos: Vec<Option<Attainment>> = stream_slos
        .into_iter()
        .map(|a| a.map(|a| a.over(makespan)))
        .collect();
    let streams = scenario
        .streams
        .iter()
        .zip(stream_slos)
        .enumerate()
        .map(|(i, (s, slo))| {
            let t = ttfts_ms(run, Some(i as u32));
            StreamSummary {
                stream: s.name.clone(),
                completed: t.len() as u64,
                ttft_p50_ms: round3(percentile(&t, 50.0)),
                ttft_p90_ms: round3(percentile(&t, 90.0)),
                ttft_p99_ms: round3(percentile(&t, 99.0)),
                slo,
                intervals: None,
            }
        })
        .collect();
    PolicySummary {
        policy: run.policy.clone(),
        bound,
        requests: run.records.len() as u64,
        completed: done.len() as u64,
        dropped: count(Outcome::Dropped),
        timed_out: count(Outcome::TimedOut),
        ttft_p50_ms: round3(percentile(&ttft, 50.0)),
        ttft_p90_ms: round3(percentile(&ttft, 90.0)),
        ttft_p99_ms: round3(percentile(&ttft, 99.0)),
        tpot_p50_ms: round3(percentile(&tpot, 50.0)),
        tpot_p99_ms: round3(percentile(&tpot, 99.0)),
        e2e_p50_ms: round3(percentile(&e2e, 50.0)),
        e2e_p99_ms: round3(percentile(&e2e, 99.0)),
        output_tokens_per_s: round3(if makespan > 0.0 {
            output as f64 / makespan
        } else {
            0.0
        }),
        cache_hit_rate: round3(if run.prompt_tokens > 0 {
            run.cached_tokens as f64 / run.prompt_tokens as f64
        } else {
            0.0
        }),
        load_imbalance_cv: round3(imbalance),
        preemptions: run.preemptions,
        makespan_s: round3(makespan),
        events: run.events,
        slo,
        streams,
        adaptive: adaptive_summary(run),
        intervals: None,
        latency_error: None,
        latency_tallies: run.latency_errors,
    }
}

/// Infinite-cache hit ceiling of a run's workload.
pub fn ceiling(run: &RunResult) -> f64 {
    if run.ceiling_prompt_tokens == 0 {
        0.0
    } else {
        round3(run.ceiling_cached_tokens as f64 / run.ceiling_prompt_tokens as f64)
    }
}
