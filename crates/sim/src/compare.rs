//! Running every (scenario, policy) pair, in parallel, and assembling the report.
//!
//! Each run is independent and deterministic, so the report does not depend on how the runs
//! were spread over threads.

use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use shepherd_scheduler_core::config::Registry;

use crate::error::SimError;
use crate::policy::Policy;
use crate::report::{Report, ScenarioReport, ceiling, summarize};
use crate::runner::{RunOptions, RunResult, run};
use crate::workload::Scenario;

/// What to compare.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// Seed of every run.
    pub seed: u64,
    /// Worker threads.
    pub threads: usize,
    /// Also re-run the best policy of each scenario with zero metric staleness.
    pub fresh_bound: bool,
    /// Print progress to stderr.
    pub progress: bool,
}

/// A finished comparison: the report and the raw runs (for plots).
#[derive(Debug)]
pub struct Comparison {
    /// The report.
    pub report: Report,
    /// Raw runs, per scenario, in the report's row order.
    pub runs: Vec<Vec<RunResult>>,
    /// Wall-clock seconds and simulated events of all runs.
    pub wall_seconds: f64,
    /// Simulated events of all runs.
    pub events: u64,
}

/// Runs `jobs` (scenario index, scenario, policy, zero-staleness) on `opts.threads` threads;
/// results in job order.
pub(crate) fn run_all(
    jobs: &[(usize, &Scenario, &Policy, bool)],
    registry: &Registry,
    opts: &CompareOptions,
) -> Result<Vec<RunResult>, SimError> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<RunResult, SimError>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    let done = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..opts.threads.max(1).min(jobs.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(_, scenario, policy, fresh)) = jobs.get(i) else {
                        break;
                    };
                    let run_opts = RunOptions {
                        seed: opts.seed,
                        fresh_metrics: fresh,
                        check_invariants: false,
                    };
                    let mut result = run(scenario, policy, registry, run_opts);
                    if let Ok(r) = &mut result
                        && fresh
                    {
                        r.policy = format!("{}@fresh", r.policy);
                    }
                    if opts.progress {
                        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                        match &result {
                            Ok(r) => eprintln!(
                                "[{n:>3}/{}] {:<14} {:<22} {:>6.1} s wall, {:>9} events ({:.0}k events/s)",
                                jobs.len(),
                                scenario.name,
                                r.policy,
                                r.wall_seconds,
                                r.events,
                                r.events as f64 / r.wall_seconds.max(1e-9) / 1e3
                            ),
                            Err(e) => eprintln!("[{n:>3}/{}] {} {}: {e}", jobs.len(), scenario.name, policy.name),
                        }
                    }
                    results.lock()[i] = Some(result);
                }
            });
        }
    });
    results
        .into_inner()
        .into_iter()
        .map(|r| {
            r.unwrap_or_else(|| {
                Err(SimError::Unknown {
                    kind: "run",
                    name: "missing".into(),
                    known: String::new(),
                })
            })
        })
        .collect()
}

/// Runs every scenario under every policy (plus the zero-staleness bound) and builds the report.
pub fn compare(
    scenarios: &[Scenario],
    policies: &[Policy],
    registry: &Registry,
    opts: &CompareOptions,
) -> Result<Comparison, SimError> {
    let started = std::time::Instant::now();
    let jobs: Vec<_> = scenarios
        .iter()
        .enumerate()
        .flat_map(|(si, s)| policies.iter().map(move |p| (si, s, p, false)))
        .collect();
    let mut runs_flat = run_all(&jobs, registry, opts)?;
    let mut runs: Vec<Vec<RunResult>> = scenarios.iter().map(|_| Vec::new()).collect();
    for (job, r) in jobs.iter().zip(runs_flat.drain(..)) {
        runs[job.0].push(r);
    }
    if opts.fresh_bound {
        // The best policy per scenario: lowest TTFT p90 among those that dropped nothing more
        // than the fewest.
        let mut bound_jobs = Vec::new();
        for (si, s) in scenarios.iter().enumerate() {
            let summaries: Vec<_> = runs[si].iter().map(|r| summarize(s, r, false)).collect();
            let fewest = summaries
                .iter()
                .map(|x| x.dropped + x.timed_out)
                .min()
                .unwrap_or(0);
            if let Some(best) = summaries
                .iter()
                .enumerate()
                .filter(|(_, x)| x.dropped + x.timed_out == fewest)
                .min_by(|a, b| a.1.ttft_p90_ms.total_cmp(&b.1.ttft_p90_ms))
                .map(|(i, _)| i)
            {
                bound_jobs.push((si, s, &policies[best], true));
            }
        }
        let bound_runs = run_all(&bound_jobs, registry, opts)?;
        for (job, r) in bound_jobs.iter().zip(bound_runs) {
            runs[job.0].push(r);
        }
    }
    let mut events = 0;
    let scenario_reports = scenarios
        .iter()
        .zip(&runs)
        .map(|(s, rs)| {
            events += rs.iter().map(|r| r.events).sum::<u64>();
            ScenarioReport {
                scenario: s.name.clone(),
                description: s.description.clone(),
                servers: s.servers,
                hardware: s.hardware.clone(),
                cache_hit_ceiling: rs.first().map_or(0.0, ceiling),
                results: rs
                    .iter()
                    .map(|r| summarize(s, r, r.policy.ends_with("@fresh")))
                    .collect(),
            }
        })
        .collect();
    Ok(Comparison {
        report: Report {
            schema: "shepherd-sim/report/v1",
            seed: opts.seed,
            scenarios: scenario_reports,
        },
        runs,
        wall_seconds: started.elapsed().as_secs_f64(),
        events,
    })
}
