//! Summaries of runs: the figures of the report, the printed table and the JSON document.
//!
//! JSON field names are stable (schema `shepherd-sim/report/v1`): times in milliseconds with a
//! `_ms` suffix, rates as fractions in [0, 1], throughput in output tokens per simulated second.
//! Wall-clock timings are printed, never written to the JSON, so the same seed gives
//! byte-identical JSON.
//!
//! Over several seeds (`--seeds N`, [`crate::aggregate`]) each row's figures are means over the
//! seeds and the row gains `intervals`: per figure, `mean`, `half_width` of the 95 % Student's
//! t interval, and `n`; each scenario's `judgements` ([`crate::best`]) say which policies are
//! best, or within 5 % of the best, on TTFT p90 and output tokens/s by those intervals; rows of
//! policies with a `latency-scorer` gain `latency_error`, the model's prediction error over the
//! seeds ([`crate::latency_error`]).
//!
//! A scenario whose streams have latency objectives (`slo:`) also has `objectives`, and each of
//! its rows and streams with objectives `slo`, the SLO attainment ([`crate::attainment`]); the
//! table then gains an "SLO met" column (and one per stream when several have objectives).
//! Nothing of this appears for a scenario without objectives.

use std::collections::BTreeMap;

use serde::Serialize;
use shepherd_scorers::latency::ErrorTally;

use crate::aggregate::figure;
use crate::attainment::{Attainment, SloColumns, StreamObjectives, attainment, objectives_text};
use crate::best::Judgement;
use crate::latency_error::LatencyError;
use crate::runner::{Outcome, RequestRecord, RunResult};
use crate::stats::Interval;
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
    /// SLO attainment over every request with latency objectives (only for scenarios whose
    /// streams have `slo`; [`crate::attainment`]).
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
    /// ([`crate::latency_error`]).
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

/// One scenario's results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScenarioReport {
    /// Scenario name.
    pub scenario: String,
    /// Its description.
    pub description: String,
    /// Servers.
    pub servers: u32,
    /// Hardware preset.
    pub hardware: String,
    /// Cache hit rate an infinite cache would reach on this workload (token weighted).
    pub cache_hit_ceiling: f64,
    /// The latency objectives of the streams that have them (not written when none has).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub objectives: Vec<StreamObjectives>,
    /// One row per policy, then the bounds.
    pub results: Vec<PolicySummary>,
    /// Best and within-5 % policies on TTFT p90 and output tokens/s, by the interval rule.
    pub judgements: Vec<Judgement>,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Schema id.
    pub schema: &'static str,
    /// The base seed (`--seed`).
    pub seed: u64,
    /// Every seed run, derived from `seed` (the first is `seed` itself).
    pub seeds: Vec<u64>,
    /// Scenarios in order.
    pub scenarios: Vec<ScenarioReport>,
}

/// Nearest-rank percentile of sorted `v` (0 when empty).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

fn round3(x: f64) -> f64 {
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

/// `value` with `decimals` decimals after multiplying by `scale`, as `mean ± half-width` when
/// the interval comes from several seeds.
pub(crate) fn cell(i: Interval, scale: f64, decimals: usize, unit: &str) -> String {
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

/// The report as a text table (and, per scenario, which policies are best by the interval
/// rule).
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    if report.seeds.len() > 1 {
        out.push_str(&format!(
            "\n{} seeds derived from --seed {} ({}); figures are mean ± half-width of the 95 % Student's t interval.\n",
            report.seeds.len(),
            report.seed,
            report
                .seeds
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for s in &report.scenarios {
        out.push_str(&format!(
            "\n## {} — {} ({} × {}; infinite-cache hit ceiling {:.1}%)\n\n",
            s.scenario,
            s.description,
            s.servers,
            s.hardware,
            s.cache_hit_ceiling * 100.0
        ));
        let slo = SloColumns::of(s);
        if !s.objectives.is_empty() {
            out.push_str(&format!("SLO: {}.\n\n", objectives_text(&s.objectives)));
        }
        out.push_str(&format!("| policy | TTFT p50 | p90 | p99 (ms) | TPOT p50 | p99 (ms) | E2E p50 | p99 (s) | out tok/s | cache hit | imbalance CV | preempt | dropped/timed out |{}\n", slo.header()));
        out.push_str(&format!(
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|{}\n",
            "---:|".repeat(slo.width())
        ));
        for r in &s.results {
            let f = |name: &str, scale: f64, decimals: usize, unit: &str| {
                cell(
                    figure(r, name).unwrap_or(Interval::point(0.0)),
                    scale,
                    decimals,
                    unit,
                )
            };
            // Drops and timeouts: the ± only when some seed lost a request.
            let lost = |name: &str| {
                let i = figure(r, name).unwrap_or(Interval::point(0.0));
                if i.half_width > 0.0 {
                    cell(i, 1.0, 1, "")
                } else {
                    format!("{:.0}", i.mean)
                }
            };
            out.push_str(&format!(
                "| {}{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}/{} |{}\n",
                r.policy,
                if r.bound { " (bound)" } else { "" },
                f("ttft_p50_ms", 1.0, 0, ""),
                f("ttft_p90_ms", 1.0, 0, ""),
                f("ttft_p99_ms", 1.0, 0, ""),
                f("tpot_p50_ms", 1.0, 1, ""),
                f("tpot_p99_ms", 1.0, 1, ""),
                f("e2e_p50_ms", 1e-3, 1, ""),
                f("e2e_p99_ms", 1e-3, 1, ""),
                f("output_tokens_per_s", 1.0, 0, ""),
                f("cache_hit_rate", 100.0, 1, "%"),
                f("load_imbalance_cv", 1.0, 2, ""),
                f("preemptions", 1.0, 0, ""),
                lost("dropped"),
                lost("timed_out"),
                slo.cells(r),
            ));
        }
        if !s.judgements.is_empty() {
            out.push('\n');
        }
        for j in &s.judgements {
            let within = if j.within_5pct.is_empty() {
                String::new()
            } else {
                format!("; within 5 %: {}", j.within_5pct.join(", "))
            };
            out.push_str(&format!(
                "{}: best mean {} ({}); judged best: {}{within}\n",
                j.figure,
                j.best_mean_policy,
                cell(j.best_mean, 1.0, 0, ""),
                j.best.join(", "),
            ));
        }
        out.push_str(&crate::latency_error::table(&s.results));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&v, 100.0), 100.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
    }
}
