//! Per-priority-class and per-tenant figures of one run: what flow control is judged on.

use serde::Serialize;
use shepherd_scheduler_core::flow::DropReason;

use crate::runner::{Outcome, RequestRecord, RunResult};
use crate::stats::percentile;
use crate::workload::Scenario;

/// One priority class (every stream of that priority, all tenants).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassSummary {
    /// The class's priority (negative: sheddable).
    pub priority: i32,
    /// Requests that arrived.
    pub arrived: u64,
    /// Requests answered in full.
    pub completed: u64,
    /// Refused with 429: shed (sheddable while saturated) or queue full.
    pub shed: u64,
    /// Refused with 503: waited their whole time-to-live in the flow-control queue.
    pub expired: u64,
    /// Abandoned after the scenario's request timeout, in a server or still queued.
    pub timed_out: u64,
    /// Refused by the scheduler (no endpoint, or the prompt can never fit).
    pub dropped: u64,
    /// Time to first token of completed requests (from arrival at the gateway), ms.
    pub ttft_p50_ms: f64,
    /// Time to first token, ms.
    pub ttft_p99_ms: f64,
    /// Time to first token of the requests that arrived from `steady_from_s` on (after the
    /// onset of the overload), ms.
    pub ttft_p99_steady_ms: f64,
    /// End-to-end latency of completed requests, ms.
    pub e2e_p99_ms: f64,
    /// Wait in the flow-control queue (arrival to dispatch) of dispatched requests, ms.
    pub queue_wait_p99_ms: f64,
}

/// One tenant (fairness id), all its classes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TenantSummary {
    /// The fairness id (`""`: none).
    pub tenant: String,
    /// Requests that arrived.
    pub arrived: u64,
    /// Share of all arrivals.
    pub arrived_share: f64,
    /// Requests answered in full.
    pub completed: u64,
    /// Share of all completed requests.
    pub completed_share: f64,
    /// Time to first token of its completed requests, all classes, ms.
    pub ttft_p99_ms: f64,
    /// Time to first token of its completed priority-0 requests, ms.
    pub ttft_p99_priority0_ms: f64,
}

/// The figures of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverloadRunSummary {
    /// What the run is (`unloaded`, `no flow control`, ...).
    pub label: String,
    /// Scenario name.
    pub scenario: String,
    /// Policy name.
    pub policy: String,
    /// Requests that arrived.
    pub arrived: u64,
    /// Requests answered in full.
    pub completed: u64,
    /// 429s.
    pub shed: u64,
    /// 503s.
    pub expired: u64,
    /// Timed out.
    pub timed_out: u64,
    /// Refused by the scheduler.
    pub dropped: u64,
    /// Output tokens of completed requests per simulated second (first arrival to last end).
    pub output_tokens_per_s: f64,
    /// Start of the steady-state window of `ttft_p99_steady_ms`, seconds: 10 s after the
    /// last stream started.
    pub steady_from_s: f64,
    /// Highest class first.
    pub classes: Vec<ClassSummary>,
    /// In order of first appearance in the scenario.
    pub tenants: Vec<TenantSummary>,
}

/// Seconds after the last stream started from which arrivals count as steady state.
pub const STEADY_AFTER_S: f64 = 10.0;

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn p(mut v: Vec<f64>, q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    round3(percentile(&v, q))
}

fn ttft_ms(r: &RequestRecord) -> Option<f64> {
    (r.outcome == Outcome::Completed)
        .then_some(r.first_token?)
        .map(|t| (t - r.arrival) as f64 / 1e6)
}

fn counts(records: &[&RequestRecord]) -> [u64; 5] {
    let mut c = [0; 5];
    for r in records {
        let i = match r.outcome {
            Outcome::Completed => 0,
            Outcome::Rejected(reason) if reason.http_status() == 429 => 1,
            Outcome::Rejected(DropReason::TtlExpired) => 2,
            Outcome::TimedOut | Outcome::Pending => 3,
            Outcome::Dropped | Outcome::Rejected(_) => 4,
        };
        c[i] += 1;
    }
    c
}

/// Summarizes `run` of `scenario` by priority class and by tenant.
pub fn summarize_overload(label: &str, scenario: &Scenario, run: &RunResult) -> OverloadRunSummary {
    let priority = |r: &RequestRecord| {
        scenario
            .streams
            .get(r.stream as usize)
            .map_or(0, |s| s.spec.priority)
    };
    let tenant = |r: &RequestRecord| {
        scenario
            .streams
            .get(r.stream as usize)
            .and_then(|s| s.spec.fairness_id.clone())
            .unwrap_or_default()
    };
    let steady_from_s = scenario
        .streams
        .iter()
        .map(|s| s.spec.start_s)
        .fold(0.0, f64::max)
        + STEADY_AFTER_S;
    let steady_from = (steady_from_s * 1e9) as u64;
    let mut priorities: Vec<i32> = scenario.streams.iter().map(|s| s.spec.priority).collect();
    priorities.sort_unstable_by(|a, b| b.cmp(a));
    priorities.dedup();
    let classes = priorities
        .iter()
        .map(|&prio| {
            let rs: Vec<_> = run.records.iter().filter(|r| priority(r) == prio).collect();
            let [completed, shed, expired, timed_out, dropped] = counts(&rs);
            ClassSummary {
                priority: prio,
                arrived: rs.len() as u64,
                completed,
                shed,
                expired,
                timed_out,
                dropped,
                ttft_p50_ms: p(rs.iter().filter_map(|r| ttft_ms(r)).collect(), 50.0),
                ttft_p99_ms: p(rs.iter().filter_map(|r| ttft_ms(r)).collect(), 99.0),
                ttft_p99_steady_ms: p(
                    rs.iter()
                        .filter(|r| r.arrival >= steady_from)
                        .filter_map(|r| ttft_ms(r))
                        .collect(),
                    99.0,
                ),
                e2e_p99_ms: p(
                    rs.iter()
                        .filter(|r| r.outcome == Outcome::Completed)
                        .filter_map(|r| r.end.map(|e| (e - r.arrival) as f64 / 1e6))
                        .collect(),
                    99.0,
                ),
                queue_wait_p99_ms: p(
                    rs.iter()
                        .filter_map(|r| r.dispatched.map(|d| (d - r.arrival) as f64 / 1e6))
                        .collect(),
                    99.0,
                ),
            }
        })
        .collect();
    let mut tenant_names: Vec<String> = Vec::new();
    for s in &scenario.streams {
        let t = s.spec.fairness_id.clone().unwrap_or_default();
        if !tenant_names.contains(&t) {
            tenant_names.push(t);
        }
    }
    let all: Vec<_> = run.records.iter().collect();
    let [completed, shed, expired, timed_out, dropped] = counts(&all);
    let share = |n: u64, of: u64| if of == 0 { 0.0 } else { n as f64 / of as f64 };
    let tenants = tenant_names
        .into_iter()
        .map(|name| {
            let rs: Vec<_> = run.records.iter().filter(|r| tenant(r) == name).collect();
            let done = counts(&rs)[0];
            TenantSummary {
                arrived: rs.len() as u64,
                arrived_share: round3(share(rs.len() as u64, run.records.len() as u64)),
                completed: done,
                completed_share: round3(share(done, completed)),
                ttft_p99_ms: p(rs.iter().filter_map(|r| ttft_ms(r)).collect(), 99.0),
                ttft_p99_priority0_ms: p(
                    rs.iter()
                        .filter(|r| priority(r) == 0)
                        .filter_map(|r| ttft_ms(r))
                        .collect(),
                    99.0,
                ),
                tenant: name,
            }
        })
        .collect();
    let first = run.records.iter().map(|r| r.arrival).min().unwrap_or(0);
    let last = run
        .records
        .iter()
        .filter(|r| r.outcome == Outcome::Completed)
        .filter_map(|r| r.end)
        .max()
        .unwrap_or(first);
    let output: u64 = run
        .records
        .iter()
        .filter(|r| r.outcome == Outcome::Completed)
        .map(|r| u64::from(r.output_tokens))
        .sum();
    let span = (last - first) as f64 / 1e9;
    OverloadRunSummary {
        label: label.to_string(),
        scenario: scenario.name.clone(),
        policy: run.policy.clone(),
        arrived: run.records.len() as u64,
        completed,
        shed,
        expired,
        timed_out,
        dropped,
        output_tokens_per_s: round3(if span > 0.0 {
            output as f64 / span
        } else {
            0.0
        }),
        steady_from_s,
        classes,
        tenants,
    }
}
