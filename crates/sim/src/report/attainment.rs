//! SLO attainment: of the requests whose stream has latency objectives (the scenario's
//! `objectives:`, or the stream's own `slo:`, [`SloSpec`]; [`Scenario::objectives_of`]), how
//! many met them; and goodput, how many met them per second ([`goodput`]).
//!
//! A request *meets* its objectives when it completed (was not dropped, refused by flow
//! control or timed out), its time to first token is within `ttftMs` (when set) and its time
//! per output token within `tpotMs` (when set). TTFT and TPOT are the report's own
//! ([`ttft_ms`], [`tpot_ms`]); a request with a single output token has no TPOT, so only its
//! TTFT counts. Every request of a stream with objectives counts, however it ended: a request
//! that never completed missed them.
//!
//! Here too: the scenario's objectives as the report states them ([`objectives`]).
//!
//! ```
//! use shepherd_sim::report::attainment::meets;
//! use shepherd_sim::runner::{Outcome, RequestRecord};
//! use shepherd_sim::workload::SloSpec;
//!
//! let ms = 1_000_000;
//! let done = RequestRecord {
//!     stream: 0,
//!     server: 0,
//!     arrival: 0,
//!     dispatched: Some(0),
//!     first_scheduled: Some(10 * ms),
//!     first_token: Some(200 * ms),
//!     end: Some(200 * ms + 99 * 20 * ms),
//!     prompt_tokens: 1000,
//!     output_tokens: 100,
//!     cached_tokens: 0,
//!     preemptions: 0,
//!     outcome: Outcome::Completed,
//!     prefill_server: None,
//!     transferred_tokens: 0,
//! };
//! let slo = |ttft, tpot| SloSpec { ttft_ms: ttft, tpot_ms: tpot };
//! assert!(meets(&done, &slo(Some(200.0), Some(20.0)))); // TTFT 200 ms, TPOT 20 ms
//! assert!(!meets(&done, &slo(Some(150.0), None)));
//! assert!(!meets(&done, &slo(None, Some(19.0))));
//! let lost = RequestRecord { outcome: Outcome::TimedOut, ..done };
//! assert!(!meets(&lost, &slo(Some(1e9), None)));
//! ```

use serde::Serialize;

use super::measure::{tpot_ms, ttft_ms};
use crate::runner::{Outcome, RequestRecord, RunResult};
use crate::workload::{Scenario, SloSpec};

/// How many of the requests with objectives met them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Attainment {
    /// Requests that met every objective they carried.
    pub met: u64,
    /// Requests that carried objectives (every request of the streams with `slo`).
    pub with_objectives: u64,
    /// `met / with_objectives`, a fraction in [0, 1] (0 when no request carried any).
    pub attainment: f64,
    /// Goodput: `met` per simulated second of the run (first arrival to last end), requests/s
    /// ([`goodput`]; 0 until [`Attainment::over`] sets it).
    pub goodput_rps: f64,
}

impl Attainment {
    /// Counts `met` of `with_objectives` requests.
    pub fn of(met: u64, with_objectives: u64) -> Attainment {
        let fraction = if with_objectives == 0 {
            0.0
        } else {
            met as f64 / with_objectives as f64
        };
        Attainment {
            met,
            with_objectives,
            attainment: (fraction * 1000.0).round() / 1000.0,
            goodput_rps: 0.0,
        }
    }

    /// The same counts with their goodput over a run of `makespan_s` seconds.
    pub fn over(self, makespan_s: f64) -> Attainment {
        Attainment {
            goodput_rps: goodput(self.met, makespan_s),
            ..self
        }
    }
}

/// Whether `record` met the objectives `slo`: completed, within its TTFT objective (when set)
/// and within its TPOT objective (when set and the request has a TPOT).
pub fn meets(record: &RequestRecord, slo: &SloSpec) -> bool {
    if record.outcome != Outcome::Completed {
        return false;
    }
    let ttft_ok = slo
        .ttft_ms
        .is_none_or(|limit| ttft_ms(record).is_some_and(|t| t <= limit));
    let tpot_ok = slo
        .tpot_ms
        .is_none_or(|limit| tpot_ms(record).is_none_or(|t| t <= limit));
    ttft_ok && tpot_ok
}

/// The attainment of `run` over every request with objectives (`None` when no stream of
/// `scenario` has any), and per stream in scenario order (`None` for a stream without).
pub fn attainment(
    scenario: &Scenario,
    run: &RunResult,
) -> (Option<Attainment>, Vec<Option<Attainment>>) {
    let slos: Vec<Option<SloSpec>> = (0..scenario.streams.len())
        .map(|i| scenario.objectives_of(i))
        .collect();
    let mut tally = vec![(0u64, 0u64); slos.len()];
    for r in &run.records {
        if let Some(Some(slo)) = slos.get(r.stream as usize) {
            let t = &mut tally[r.stream as usize];
            t.0 += u64::from(meets(r, slo));
            t.1 += 1;
        }
    }
    let per_stream: Vec<Option<Attainment>> = slos
        .iter()
        .zip(&tally)
        .map(|(slo, &(met, n))| slo.map(|_| Attainment::of(met, n)))
        .collect();
    let overall = scenario.has_objectives().then(|| {
        let (met, n) = tally
            .iter()
            .zip(&slos)
            .filter(|(_, slo)| slo.is_some())
            .fold((0, 0), |(m, n), (t, _)| (m + t.0, n + t.1));
        Attainment::of(met, n)
    });
    (overall, per_stream)
}

/// One stream's latency objectives, as its scenario states them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamObjectives {
    /// Stream name.
    pub stream: String,
    /// Time-to-first-token objective, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    /// Time-per-output-token objective, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<f64>,
}

/// The objectives `scenario`'s streams are judged by (their own, else the scenario's), of the
/// streams that have any, in stream order.
pub fn objectives(scenario: &Scenario) -> Vec<StreamObjectives> {
    scenario
        .streams
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            scenario.objectives_of(i).map(|o| StreamObjectives {
                stream: s.name.clone(),
                ttft_ms: o.ttft_ms,
                tpot_ms: o.tpot_ms,
            })
        })
        .collect()
}

/// Goodput: requests that met their objectives per second of `makespan_s` (0 for an empty
/// run), DistServe's per-run measure.
pub fn goodput(met: u64, makespan_s: f64) -> f64 {
    if makespan_s > 0.0 {
        ((met as f64 / makespan_s) * 1000.0).round() / 1000.0
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn record(outcome: Outcome, ttft: u64, tpot: u64, output_tokens: u32) -> RequestRecord {
        let first = 5 * MS + ttft * MS;
        RequestRecord {
            stream: 0,
            server: 0,
            arrival: 5 * MS,
            dispatched: Some(5 * MS),
            first_scheduled: Some(5 * MS),
            first_token: Some(first),
            end: Some(first + u64::from(output_tokens.saturating_sub(1)) * tpot * MS),
            prompt_tokens: 100,
            output_tokens,
            cached_tokens: 0,
            preemptions: 0,
            outcome,
            prefill_server: None,
            transferred_tokens: 0,
        }
    }

    fn slo(ttft: Option<f64>, tpot: Option<f64>) -> SloSpec {
        SloSpec {
            ttft_ms: ttft,
            tpot_ms: tpot,
        }
    }

    #[test]
    fn a_request_meets_its_objectives_only_within_every_one_set() {
        let r = record(Outcome::Completed, 300, 20, 50);
        assert!(
            meets(&r, &slo(Some(300.0), Some(20.0))),
            "limits are inclusive"
        );
        assert!(meets(&r, &slo(Some(301.0), None)));
        assert!(meets(&r, &slo(None, Some(25.0))));
        assert!(!meets(&r, &slo(Some(299.0), Some(25.0))));
        assert!(!meets(&r, &slo(Some(400.0), Some(19.0))));
    }

    #[test]
    fn requests_that_never_completed_missed() {
        for outcome in [
            Outcome::Dropped,
            Outcome::TimedOut,
            Outcome::Rejected(shepherd_scheduler_core::flow::DropReason::Shed),
        ] {
            let r = record(outcome, 1, 1, 10);
            assert!(!meets(&r, &slo(Some(1e6), Some(1e6))), "{outcome:?}");
        }
        let dropped_before_a_token = RequestRecord {
            first_token: None,
            end: Some(5 * MS),
            ..record(Outcome::Dropped, 0, 0, 10)
        };
        assert!(!meets(&dropped_before_a_token, &slo(None, Some(1e6))));
    }

    #[test]
    fn one_output_token_has_no_tpot_so_only_the_ttft_counts() {
        let r = record(Outcome::Completed, 100, 0, 1);
        assert_eq!(tpot_ms(&r), None);
        assert!(meets(&r, &slo(Some(100.0), Some(0.001))));
        assert!(meets(&r, &slo(None, Some(0.001))));
        assert!(!meets(&r, &slo(Some(99.0), Some(1e6))));
    }

    #[test]
    fn fractions_are_rounded_and_empty_is_zero() {
        assert_eq!(Attainment::of(2, 3).attainment, 0.667);
        assert_eq!(Attainment::of(0, 0).attainment, 0.0);
        assert_eq!(Attainment::of(4, 4).attainment, 1.0);
    }

    #[test]
    fn a_run_counts_per_stream_and_overall_over_streams_with_objectives() {
        let scenario = Scenario::from_yaml(
            "name: x\nservers: 1\nstreams:\n  - name: a\n    kind: shared-prefix\n    load: { closed: 1 }\n    endS: 1\n    slo: { ttftMs: 100 }\n  - name: b\n    kind: shared-prefix\n    load: { closed: 1 }\n    endS: 1\n  - name: c\n    kind: shared-prefix\n    load: { closed: 1 }\n    endS: 1\n    slo: { tpotMs: 10 }\n",
            "s.yaml",
        )
        .unwrap();
        let on = |stream, r: RequestRecord| RequestRecord { stream, ..r };
        let records = vec![
            on(0, record(Outcome::Completed, 50, 50, 10)), // a: met
            on(0, record(Outcome::Completed, 150, 5, 10)), // a: TTFT missed
            on(0, record(Outcome::Dropped, 10, 5, 10)),    // a: dropped
            on(1, record(Outcome::Completed, 5000, 5, 10)), // b: no objectives
            on(2, record(Outcome::Completed, 5000, 10, 10)), // c: met
            on(2, record(Outcome::TimedOut, 10, 1, 10)),   // c: timed out
        ];
        let run = RunResult {
            policy: "p".into(),
            records,
            load_series: Vec::new(),
            adaptive_series: Vec::new(),
            scorer_names: Vec::new(),
            events: 0,
            preemptions: 0,
            prompt_tokens: 0,
            cached_tokens: 0,
            ceiling_cached_tokens: 0,
            ceiling_prompt_tokens: 0,
            replicas: Vec::new(),
            pick_cost: crate::runner::PickCost::from_nanos(Vec::new()),
            latency_errors: None,
            server_stats: Vec::new(),
            disaggregated: 0,
            prefill_fallbacks: 0,
            wall_seconds: 0.0,
        };
        let (overall, streams) = attainment(&scenario, &run);
        assert_eq!(overall, Some(Attainment::of(2, 5)));
        assert_eq!(
            streams,
            vec![Some(Attainment::of(1, 3)), None, Some(Attainment::of(1, 2))]
        );
        assert_eq!(overall.unwrap().attainment, 0.4);
    }
}
