//! `--max-goodput`: per (scenario, policy), the highest arrival rate at which at least 90 % of
//! the requests meet both their objectives (DistServe's maximum goodput,
//! [`crate::report::max_goodput`]).
//!
//! The scenario's load is scaled ([`Scenario::load_scaled`]: open-loop rates, closed-loop
//! concurrency, trace timestamps) and each load is run on every seed; a load *meets* when the
//! mean attainment over the seeds is at least [`TARGET`]. The search starts at the scenario as
//! written (factor 1), doubles while the load meets (up to [`SearchOptions::max_factor`]) or
//! halves while it misses (down to [`SearchOptions::min_factor`]), then bisects the bracket
//! geometrically until the factors that meet and miss are within
//! [`SearchOptions::precision`] of each other. Every pair advances in lock-step rounds, each
//! round's runs spread over the threads.
//!
//! ```no_run
//! use shepherd_sim::goodput::{SearchOptions, search};
//! use shepherd_sim::policy::{builtin_policy, sim_registry};
//! use shepherd_sim::workload::builtin_scenario;
//!
//! let scenario = builtin_scenario("multi-turn").unwrap();
//! let policy = builtin_policy("adaptive").unwrap();
//! let found = search(&[(&scenario, &policy, "adaptive")], &sim_registry(), &SearchOptions::default()).unwrap();
//! println!("{} req/s at {}x", found[0].rate_rps, found[0].factor);
//! ```

use shepherd_scheduler_core::config::Registry;

use crate::compare::{Job, run_all};
use crate::error::SimError;
use crate::policy::Policy;
use crate::report::max_goodput::{MaxGoodput, Probe, TARGET};
use crate::report::summarize;
use crate::runner::{RunResult, Spread};
use crate::seeds::derive;
use crate::workload::Scenario;

/// How to search.
#[derive(Debug, Clone)]
pub struct SearchOptions {
    /// The first seed.
    pub seed: u64,
    /// Seeds per load.
    pub seeds: u32,
    /// Worker threads.
    pub threads: usize,
    /// Print progress to stderr.
    pub progress: bool,
    /// The highest load factor tried.
    pub max_factor: f64,
    /// The lowest load factor tried.
    pub min_factor: f64,
    /// The search stops when the lowest missing factor is within this ratio of the highest
    /// meeting one (1.1: 10 %).
    pub precision: f64,
}

impl Default for SearchOptions {
    /// Seed 42, one seed, one thread, factors 1/16 to 16, 10 % precision, quiet.
    fn default() -> Self {
        SearchOptions {
            seed: 42,
            seeds: 1,
            threads: 1,
            progress: false,
            max_factor: 16.0,
            min_factor: 1.0 / 16.0,
            precision: 1.1,
        }
    }
}

/// The next factor to try given the highest meeting (`lo`) and lowest missing (`hi`) factors
/// so far; `None` when the search is over.
pub fn next_factor(lo: Option<f64>, hi: Option<f64>, opts: &SearchOptions) -> Option<f64> {
    match (lo, hi) {
        (None, None) => Some(1.0),
        (Some(lo), None) => (lo < opts.max_factor).then(|| (lo * 2.0).min(opts.max_factor)),
        (None, Some(hi)) => (hi > opts.min_factor).then(|| (hi / 2.0).max(opts.min_factor)),
        (Some(lo), Some(hi)) => (hi / lo > opts.precision).then(|| (lo * hi).sqrt()),
    }
}

/// Requests issued per second between the first and the last arrival of `run`.
pub fn arrival_rate(run: &RunResult) -> f64 {
    let first = run.records.iter().map(|r| r.arrival).min();
    let last = run.records.iter().map(|r| r.arrival).max();
    match (first, last) {
        (Some(f), Some(l)) if l > f => run.records.len() as f64 / ((l - f) as f64 / 1e9),
        _ => 0.0,
    }
}

/// Searches the maximum goodput of every `(scenario, policy, label)`; results in order, named
/// by the labels. Scenarios without objectives are refused.
pub fn search(
    pairs: &[(&Scenario, &Policy, &str)],
    registry: &Registry,
    opts: &SearchOptions,
) -> Result<Vec<MaxGoodput>, SimError> {
    for (scenario, _, _) in pairs {
        if !scenario.has_objectives() {
            return Err(SimError::Input {
                file: scenario.name.clone(),
                line: 0,
                field: "objectives".into(),
                reason: "--max-goodput needs the scenario's objectives (TTFT and TPOT)".into(),
            });
        }
    }
    let seeds = derive(opts.seed, opts.seeds);
    let mut bounds: Vec<(Option<f64>, Option<f64>)> = vec![(None, None); pairs.len()];
    let mut probes: Vec<Vec<Probe>> = vec![Vec::new(); pairs.len()];
    loop {
        let next: Vec<(usize, f64)> = bounds
            .iter()
            .enumerate()
            .filter_map(|(i, &(lo, hi))| next_factor(lo, hi, opts).map(|f| (i, f)))
            .collect();
        if next.is_empty() {
            break;
        }
        let scaled: Vec<Scenario> = next
            .iter()
            .map(|&(i, f)| pairs[i].0.load_scaled(f))
            .collect();
        let jobs: Vec<Job<'_>> = next
            .iter()
            .zip(&scaled)
            .enumerate()
            .flat_map(|(k, (&(i, _), scenario))| {
                seeds.iter().map(move |&seed| Job {
                    group: k,
                    scenario,
                    policy: pairs[i].1,
                    fresh: false,
                    seed,
                    replicas: 1,
                    spread: Spread::Random,
                })
            })
            .collect();
        let runs = run_all(&jobs, registry, opts.threads, opts.progress)?;
        for (k, &(i, factor)) in next.iter().enumerate() {
            let mine: Vec<&RunResult> = jobs
                .iter()
                .zip(&runs)
                .filter(|(j, _)| j.group == k)
                .map(|(_, r)| r)
                .collect();
            let n = mine.len().max(1) as f64;
            let attainment = mine
                .iter()
                .map(|r| {
                    summarize(&scaled[k], r, false)
                        .slo
                        .map_or(0.0, |a| a.attainment)
                })
                .sum::<f64>()
                / n;
            let arrival_rps = mine.iter().map(|r| arrival_rate(r)).sum::<f64>() / n;
            let probe = Probe {
                factor,
                arrival_rps: (arrival_rps * 1000.0).round() / 1000.0,
                attainment: (attainment * 1000.0).round() / 1000.0,
            };
            probes[i].push(probe);
            let (lo, hi) = &mut bounds[i];
            if probe.attainment >= TARGET {
                *lo = Some(lo.map_or(factor, |l: f64| l.max(factor)));
            } else {
                *hi = Some(hi.map_or(factor, |h: f64| h.min(factor)));
            }
        }
    }
    Ok(pairs
        .iter()
        .zip(probes)
        .map(|((_, _, label), p)| MaxGoodput::from_probes(label, p))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_doubles_halves_then_bisects_to_the_precision() {
        let opts = SearchOptions::default();
        assert_eq!(next_factor(None, None, &opts), Some(1.0));
        assert_eq!(next_factor(Some(1.0), None, &opts), Some(2.0));
        assert_eq!(next_factor(Some(16.0), None, &opts), None);
        assert_eq!(next_factor(None, Some(1.0), &opts), Some(0.5));
        assert_eq!(next_factor(None, Some(1.0 / 16.0), &opts), None);
        assert_eq!(next_factor(Some(1.0), Some(4.0), &opts), Some(2.0));
        assert_eq!(next_factor(Some(1.0), Some(1.05), &opts), None);
        // From a 2x bracket, three bisections reach 2^(1/8) = 1.09 < 1.1.
        let (mut lo, mut hi) = (1.0_f64, 2.0_f64);
        let mut steps = 0;
        while let Some(f) = next_factor(Some(lo), Some(hi), &opts) {
            // Pretend the true limit is 1.3.
            if f <= 1.3 {
                lo = f
            } else {
                hi = f
            }
            steps += 1;
        }
        assert_eq!(steps, 3);
        assert!(lo <= 1.3 && hi > 1.3 && hi / lo <= 1.1);
    }
}
