//! Running every (scenario, policy, seed) triple, in parallel, and assembling the report.
//!
//! Each run is independent and deterministic, so the report does not depend on how the runs
//! were spread over threads. With several seeds ([`crate::seeds::derive`]) every row is the
//! mean over the seeds with its 95 % intervals ([`crate::report::aggregate`](mod@crate::report::aggregate)); plots and timelines are
//! drawn from the first seed's runs.

use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use shepherd_scheduler_core::config::Registry;

use crate::error::SimError;
use crate::goodput::{SearchOptions, search};
use crate::policy::Policy;
use crate::report::attainment::objectives;
use crate::report::max_goodput::MaxGoodput;
use crate::report::{
    PolicySummary, Report, ScenarioReport, aggregate, ceiling, judgements, summarize,
};
use crate::runner::{RunOptions, RunResult, Spread, run};
use crate::seeds::derive;
use crate::workload::Scenario;

/// What to compare.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// Base seed: the first run's seed, from which the others are derived.
    pub seed: u64,
    /// Seeds per (scenario, policy) pair (at least 1).
    pub seeds: u32,
    /// Worker threads.
    pub threads: usize,
    /// Also re-run the best policy of each scenario with zero metric staleness.
    pub fresh_bound: bool,
    /// Print progress to stderr.
    pub progress: bool,
    /// Also search each policy's maximum goodput on each scenario ([`crate::goodput`]).
    pub max_goodput: bool,
}

impl Default for CompareOptions {
    /// Seed 42, one seed, one thread, with the bound, no goodput search, quiet.
    fn default() -> Self {
        CompareOptions {
            seed: 42,
            seeds: 1,
            threads: 1,
            fresh_bound: true,
            progress: false,
            max_goodput: false,
        }
    }
}

/// A finished comparison: the report and the raw runs (for plots).
#[derive(Debug)]
pub struct Comparison {
    /// The report.
    pub report: Report,
    /// Raw runs of the first seed, per scenario, in the report's row order.
    pub runs: Vec<Vec<RunResult>>,
    /// Wall-clock seconds of the whole comparison.
    pub wall_seconds: f64,
    /// Simulated events of all runs (every seed).
    pub events: u64,
    /// Runs made (every seed).
    pub run_count: usize,
}

/// One simulation to run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Job<'a> {
    /// Index of the group the result belongs to (scenario, or run label).
    pub(crate) group: usize,
    pub(crate) scenario: &'a Scenario,
    pub(crate) policy: &'a Policy,
    /// Zero metric staleness (the bound).
    pub(crate) fresh: bool,
    pub(crate) seed: u64,
    /// Picker replicas (1: the plain run) and how requests are spread over them.
    pub(crate) replicas: u32,
    pub(crate) spread: Spread,
}

/// Runs `jobs` on `threads` threads; results in job order.
pub(crate) fn run_all(
    jobs: &[Job<'_>],
    registry: &Registry,
    threads: usize,
    progress: bool,
) -> Result<Vec<RunResult>, SimError> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<RunResult, SimError>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    let done = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1).min(jobs.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else {
                        break;
                    };
                    let run_opts = RunOptions {
                        seed: job.seed,
                        fresh_metrics: job.fresh,
                        replicas: job.replicas,
                        spread: job.spread,
                        ..RunOptions::default()
                    };
                    let mut result = run(job.scenario, job.policy, registry, run_opts);
                    if let Ok(r) = &mut result
                        && job.fresh
                    {
                        r.policy = format!("{}@fresh", r.policy);
                    }
                    if progress {
                        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                        match &result {
                            Ok(r) => eprintln!(
                                "[{n:>3}/{}] {:<14} {:<22} seed {:<20} {:>6.1} s wall, {:>9} events ({:.0}k events/s), pick {:.1} µs mean, {:.1} µs p99{}",
                                jobs.len(),
                                job.scenario.name,
                                if job.replicas > 1 {
                                    format!("{} ×{} {}", r.policy, job.replicas, job.spread)
                                } else {
                                    r.policy.clone()
                                },
                                job.seed,
                                r.wall_seconds,
                                r.events,
                                r.events as f64 / r.wall_seconds.max(1e-9) / 1e3,
                                r.pick_cost.mean_us,
                                r.pick_cost.p99_us,
                                r.latency_errors
                                    .as_ref()
                                    .map(latency_error_summary)
                                    .unwrap_or_default()
                            ),
                            Err(e) => eprintln!(
                                "[{n:>3}/{}] {} {}: {e}",
                                jobs.len(),
                                job.scenario.name,
                                job.policy.name
                            ),
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

/// Per (scenario, policy) pair: the first seed's run and the summary over all seeds.
struct Rows {
    first_runs: Vec<Vec<RunResult>>,
    summaries: Vec<Vec<PolicySummary>>,
    events: u64,
    runs: usize,
}

/// Runs `policies` (with `fresh` metrics or not) on `scenarios[si]` for each `(si, policy)` of
/// `pairs`, on every seed, and folds the seeds into one row per pair.
fn run_rows(
    scenarios: &[Scenario],
    pairs: &[(usize, &Policy)],
    fresh: bool,
    seeds: &[u64],
    registry: &Registry,
    opts: &CompareOptions,
) -> Result<Rows, SimError> {
    let jobs: Vec<Job<'_>> = pairs
        .iter()
        .enumerate()
        .flat_map(|(pi, &(si, policy))| {
            seeds.iter().map(move |&seed| Job {
                group: pi,
                scenario: &scenarios[si],
                policy,
                fresh,
                seed,
                replicas: 1,
                spread: Spread::Random,
            })
        })
        .collect();
    let results = run_all(&jobs, registry, opts.threads, opts.progress)?;
    let mut rows = Rows {
        first_runs: scenarios.iter().map(|_| Vec::new()).collect(),
        summaries: scenarios.iter().map(|_| Vec::new()).collect(),
        events: results.iter().map(|r| r.events).sum(),
        runs: results.len(),
    };
    let mut per_pair: Vec<Vec<RunResult>> = pairs.iter().map(|_| Vec::new()).collect();
    for (job, r) in jobs.iter().zip(results) {
        per_pair[job.group].push(r);
    }
    for (&(si, _), runs) in pairs.iter().zip(per_pair) {
        let per_seed: Vec<PolicySummary> = runs
            .iter()
            .map(|r| summarize(&scenarios[si], r, fresh || is_bound(&r.policy)))
            .collect();
        rows.summaries[si].push(aggregate(&per_seed));
        if let Some(first) = runs.into_iter().next() {
            rows.first_runs[si].push(first);
        }
    }
    Ok(rows)
}

/// Whether a policy row is a bound rather than a policy: the `@oracle` policies (a precise
/// index equal to the engines' caches at every pick).
pub fn is_bound(policy: &str) -> bool {
    policy.ends_with("@oracle")
}

/// The best policy of a scenario for the bound: fewest mean drops and timeouts, then lowest
/// mean TTFT p90.
fn best_for_bound(rows: &[PolicySummary]) -> Option<usize> {
    let lost = |x: &PolicySummary| {
        x.intervals
            .as_ref()
            .map_or((x.dropped + x.timed_out) as f64, |m| {
                m.get("dropped").map_or(0.0, |i| i.mean)
                    + m.get("timed_out").map_or(0.0, |i| i.mean)
            })
    };
    let fewest = rows
        .iter()
        .filter(|x| !x.bound)
        .map(lost)
        .fold(f64::INFINITY, f64::min);
    rows.iter()
        .enumerate()
        .filter(|(_, x)| !x.bound && lost(x) <= fewest)
        .min_by(|a, b| a.1.ttft_p90_ms.total_cmp(&b.1.ttft_p90_ms))
        .map(|(i, _)| i)
}

/// Runs every scenario under every policy on every seed (plus the zero-staleness bound) and
/// builds the report.
pub fn compare(
    scenarios: &[Scenario],
    policies: &[Policy],
    registry: &Registry,
    opts: &CompareOptions,
) -> Result<Comparison, SimError> {
    let started = std::time::Instant::now();
    let seeds = derive(opts.seed, opts.seeds);
    let pairs: Vec<(usize, &Policy)> = (0..scenarios.len())
        .flat_map(|si| policies.iter().map(move |p| (si, p)))
        .collect();
    let mut rows = run_rows(scenarios, &pairs, false, &seeds, registry, opts)?;
    if opts.fresh_bound {
        let bound_pairs: Vec<(usize, &Policy)> = rows
            .summaries
            .iter()
            .enumerate()
            .filter_map(|(si, s)| best_for_bound(s).map(|b| (si, &policies[b])))
            .collect();
        let bounds = run_rows(scenarios, &bound_pairs, true, &seeds, registry, opts)?;
        for (si, (runs, summaries)) in bounds
            .first_runs
            .into_iter()
            .zip(bounds.summaries)
            .enumerate()
        {
            rows.first_runs[si].extend(runs);
            rows.summaries[si].extend(summaries);
        }
        rows.events += bounds.events;
        rows.runs += bounds.runs;
    }
    let mut max_goodput: Vec<Vec<MaxGoodput>> = scenarios.iter().map(|_| Vec::new()).collect();
    if opts.max_goodput {
        let pairs: Vec<(&Scenario, &Policy, &str)> = scenarios
            .iter()
            .filter(|s| s.has_objectives())
            .flat_map(|s| {
                policies
                    .iter()
                    .filter(|p| !is_bound(&p.name))
                    .map(move |p| (s, p, p.name.as_str()))
            })
            .collect();
        let found = search(
            &pairs,
            registry,
            &SearchOptions {
                seed: opts.seed,
                seeds: opts.seeds,
                threads: opts.threads,
                progress: opts.progress,
                ..SearchOptions::default()
            },
        )?;
        for ((s, _, _), m) in pairs.iter().zip(found) {
            if let Some(si) = scenarios.iter().position(|x| std::ptr::eq(x, *s)) {
                max_goodput[si].push(m);
            }
        }
    }
    let scenario_reports = scenarios
        .iter()
        .zip(&rows.first_runs)
        .zip(rows.summaries)
        .zip(max_goodput)
        .map(|(((s, runs), results), max_goodput)| ScenarioReport {
            scenario: s.name.clone(),
            description: s.description.clone(),
            servers: s.servers,
            hardware: s.hardware.clone(),
            cache_hit_ceiling: runs.first().map_or(0.0, ceiling),
            objectives: objectives(s),
            judgements: judgements(&results),
            results,
            max_goodput,
        })
        .collect();
    Ok(Comparison {
        report: Report {
            schema: "shepherd-sim/report/v1",
            seed: opts.seed,
            seeds,
            scenarios: scenario_reports,
        },
        runs: rows.first_runs,
        wall_seconds: started.elapsed().as_secs_f64(),
        events: rows.events,
        run_count: rows.runs,
    })
}

/// `, latency MAPE TTFT a/b/c/d TPOT …` over the load levels, for a progress line.
fn latency_error_summary(
    (ttft, tpot): &(
        shepherd_scorers::latency::ErrorTally,
        shepherd_scorers::latency::ErrorTally,
    ),
) -> String {
    let levels = |t: &shepherd_scorers::latency::ErrorTally| {
        (0..t.count.len())
            .map(|i| match t.mape(i) {
                Some(m) => format!("{:.0}%({})", m * 100.0, t.count[i]),
                None => "-".to_owned(),
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    format!(
        ", latency MAPE by running <8/<32/<128/more: TTFT {} TPOT {}",
        levels(ttft),
        levels(tpot)
    )
}
