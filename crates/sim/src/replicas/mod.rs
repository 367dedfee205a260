//! The replica study (`shepherd-sim replicas`): what running R picker replicas side by side,
//! with no coordination between them or with rendezvous homes ([`Coordination`]), costs in
//! prefix-cache hit rate and TTFT.
//!
//! Every replica has its own scheduler, prefix index and in-flight counts
//! ([`RunOptions::replicas`](crate::runner::RunOptions::replicas)); a load balancer spreads
//! the requests over them ([`Spread`]). Every (scenario, policy, spread, R) is one run of
//! [`crate::runner::run`] with the same seed; each row keeps the cache hit rate, TTFT p90,
//! output tokens per second and load imbalance, with the hit rate and TTFT p90 relative to the
//! same policy and spread at R = 1 *without coordination* (which is the plain run, whatever the
//! spread), so a coordinated row says both what coordination costs at R = 1 and what it
//! recovers at R > 1.
//!
//! ```
//! use shepherd_sim::policy::{builtin_policy, sim_registry};
//! use shepherd_sim::replicas::{Coordination, ReplicaOptions, replicas};
//! use shepherd_sim::runner::Spread;
//! use shepherd_sim::workload::Scenario;
//!
//! let tiny = Scenario::from_yaml(
//!     "name: tiny\nservers: 2\nstreams:\n  - kind: shared-prefix\n    groups: 2\n    systemTokens: 200\n    questionTokens: 20\n    outputTokens: 10\n    load: { rate: 8 }\n    endS: 2\n",
//!     "tiny.yaml",
//! )
//! .unwrap();
//! let opts = ReplicaOptions {
//!     counts: vec![1, 2],
//!     spreads: vec![Spread::Random],
//!     coordinations: vec![Coordination::None],
//!     ..ReplicaOptions::default()
//! };
//! let study = replicas(&[tiny], &[builtin_policy("adaptive").unwrap()], &sim_registry(), &opts).unwrap();
//! assert_eq!(study.report.rows.len(), 2);
//! assert_eq!(study.report.rows[0].hit_rate_vs_r1, 1.0);
//! assert!(study.report.rows[1].replica_picks.iter().all(|&n| n > 0));
//! ```

mod coordination;
mod plot;
mod table;

use serde::Serialize;
use shepherd_scheduler_core::config::Registry;

pub use coordination::{Coordination, REDIS_DELIVERY_US, RENDEZVOUS_SCORER};
pub use plot::plots;
pub use table::table;

use crate::compare::{Job, run_all};
use crate::error::SimError;
use crate::policy::Policy;
use crate::report::{ceiling, summarize};
use crate::runner::{RunResult, Spread};
use crate::workload::Scenario;

/// Scenarios of the study by default: the two synthetic ones where affinity matters, and the
/// Mooncake trace.
pub const DEFAULT_SCENARIOS: &[&str] = &["shared-prefix", "multi-turn", "mooncake"];

/// Policies of the study by default: Shepherd's static and adaptive policies.
pub const DEFAULT_POLICIES: &[&str] = &["static-default", "adaptive"];

/// Replica counts of the study by default.
pub const DEFAULT_COUNTS: &[u32] = &[1, 2, 4, 8];

/// Spread modes of the study by default.
pub const DEFAULT_SPREADS: &[Spread] = &[Spread::Random, Spread::Connection];

/// Coordinations of the study by default.
pub const DEFAULT_COORDINATIONS: &[Coordination] = &[Coordination::None, Coordination::Rendezvous];

/// How to run the study.
#[derive(Debug, Clone)]
pub struct ReplicaOptions {
    /// Replica counts (1 is needed for the relative figures).
    pub counts: Vec<u32>,
    /// Spread modes.
    pub spreads: Vec<Spread>,
    /// Coordinations (`none` is needed for the relative figures).
    pub coordinations: Vec<Coordination>,
    /// Seed of every run.
    pub seed: u64,
    /// Worker threads.
    pub threads: usize,
    /// Print progress to stderr.
    pub progress: bool,
}

impl Default for ReplicaOptions {
    /// R = 1, 2, 4, 8; random and connection spread; no coordination and rendezvous; seed 42; one thread; quiet.
    fn default() -> Self {
        ReplicaOptions {
            counts: DEFAULT_COUNTS.to_vec(),
            spreads: DEFAULT_SPREADS.to_vec(),
            coordinations: DEFAULT_COORDINATIONS.to_vec(),
            seed: 42,
            threads: 1,
            progress: false,
        }
    }
}

/// One (scenario, policy, spread, R) run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplicaRow {
    /// Scenario name.
    pub scenario: String,
    /// Policy name.
    pub policy: String,
    /// Coordination between replicas (`none`, `rendezvous`, `rendezvous-bounded:F`).
    pub coordination: String,
    /// Spread mode.
    pub spread: String,
    /// Picker replicas.
    pub replicas: u32,
    /// Requests issued.
    pub requests: u64,
    /// Requests refused or abandoned after the scenario's timeout.
    pub dropped_or_timed_out: u64,
    /// Prompt tokens served from the prefix caches / prompt tokens.
    pub cache_hit_rate: f64,
    /// Time to first token, 90th percentile, ms.
    pub ttft_p90_ms: f64,
    /// Output tokens of completed requests per simulated second.
    pub output_tokens_per_s: f64,
    /// Mean over ticks of the CV of per-server load (running + waiting).
    pub load_imbalance_cv: f64,
    /// CV of the requests each server was sent over the run.
    pub server_requests_cv: f64,
    /// Hit rate / the same policy and spread's hit rate at R = 1 without coordination (0 when
    /// unknown).
    pub hit_rate_vs_r1: f64,
    /// TTFT p90 / the same policy and spread's at R = 1 without coordination (0 when unknown).
    pub ttft_p90_vs_r1: f64,
    /// Requests each replica picked a server for.
    pub replica_picks: Vec<u64>,
}

/// The study's report (`replicas.json`, schema `shepherd-sim/replicas/v2`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplicaReport {
    /// Schema id.
    pub schema: &'static str,
    /// Seed of every run.
    pub seed: u64,
    /// Replica counts.
    pub counts: Vec<u32>,
    /// Spread modes.
    pub spreads: Vec<String>,
    /// Coordinations.
    pub coordinations: Vec<String>,
    /// Scenario names, in order.
    pub scenarios: Vec<String>,
    /// Infinite-cache hit ceiling per scenario, in the same order.
    pub ceilings: Vec<f64>,
    /// One row per (scenario, policy, spread, R), in that order.
    pub rows: Vec<ReplicaRow>,
}

impl ReplicaReport {
    /// The row of `(scenario, policy, coordination, spread, replicas)`.
    pub fn row(
        &self,
        scenario: &str,
        policy: &str,
        coordination: &str,
        spread: &str,
        replicas: u32,
    ) -> Option<&ReplicaRow> {
        self.rows.iter().find(|r| {
            r.scenario == scenario
                && r.policy == policy
                && r.coordination == coordination
                && r.spread == spread
                && r.replicas == replicas
        })
    }
}

/// A finished study.
#[derive(Debug)]
pub struct ReplicaStudy {
    /// The report.
    pub report: ReplicaReport,
    /// Wall-clock seconds of the whole study.
    pub wall_seconds: f64,
    /// Runs made.
    pub run_count: usize,
    /// Simulated events of all runs.
    pub events: u64,
}

/// Runs every scenario under every policy, coordination, spread and replica count. R = 1 runs
/// once per (scenario, policy, coordination) and stands for every spread (one replica sees
/// every request).
pub fn replicas(
    scenarios: &[Scenario],
    policies: &[Policy],
    registry: &Registry,
    opts: &ReplicaOptions,
) -> Result<ReplicaStudy, SimError> {
    let started = std::time::Instant::now();
    // (spread index, replicas) of every distinct run per (scenario, policy).
    let mut variants = Vec::new();
    if opts.counts.contains(&1) {
        variants.push((None, 1));
    }
    for (si, _) in opts.spreads.iter().enumerate() {
        for &n in opts.counts.iter().filter(|&&n| n > 1) {
            variants.push((Some(si), n));
        }
    }
    let coordinated: Vec<(Policy, Coordination)> = policies
        .iter()
        .flat_map(|p| opts.coordinations.iter().map(move |&c| (c.apply(p), c)))
        .collect();
    let mut jobs = Vec::new();
    let mut keys = Vec::new();
    for (sc, scenario) in scenarios.iter().enumerate() {
        for (policy, coordination) in &coordinated {
            for &(spread, n) in &variants {
                keys.push((sc, *coordination, spread, n));
                jobs.push(Job {
                    group: sc,
                    scenario,
                    policy,
                    fresh: false,
                    seed: opts.seed,
                    replicas: n,
                    spread: spread.map_or(Spread::Random, |s| opts.spreads[s]),
                });
            }
        }
    }
    let results = run_all(&jobs, registry, opts.threads, opts.progress)?;
    let mut rows = Vec::new();
    let mut events = 0;
    for ((job, run), &(sc, coordination, spread, n)) in jobs.iter().zip(&results).zip(&keys) {
        events += run.events;
        let spreads: Vec<Spread> = match spread {
            Some(s) => vec![opts.spreads[s]],
            None => opts.spreads.clone(),
        };
        for s in spreads {
            rows.push(row(&scenarios[sc], job.policy, coordination, s, n, run));
        }
    }
    for i in 0..rows.len() {
        let base_of = |coordination: &str| {
            rows.iter().find(|b| {
                b.replicas == 1
                    && b.scenario == rows[i].scenario
                    && b.policy == rows[i].policy
                    && b.spread == rows[i].spread
                    && b.coordination == coordination
            })
        };
        let base = base_of(&Coordination::None.name())
            .or_else(|| base_of(&rows[i].coordination))
            .map(|b| (b.cache_hit_rate, b.ttft_p90_ms));
        if let Some((hit, ttft)) = base {
            rows[i].hit_rate_vs_r1 = ratio(rows[i].cache_hit_rate, hit);
            rows[i].ttft_p90_vs_r1 = ratio(rows[i].ttft_p90_ms, ttft);
        }
    }
    let order = |r: &ReplicaRow| {
        (
            scenarios.iter().position(|s| s.name == r.scenario),
            policies.iter().position(|p| p.name == r.policy),
            opts.coordinations
                .iter()
                .position(|c| c.name() == r.coordination),
            opts.spreads.iter().position(|s| s.name() == r.spread),
            r.replicas,
        )
    };
    rows.sort_by_key(order);
    let ceilings = scenarios
        .iter()
        .enumerate()
        .map(|(sc, _)| {
            jobs.iter()
                .zip(&results)
                .find(|(j, _)| j.group == sc)
                .map_or(0.0, |(_, r)| ceiling(r))
        })
        .collect();
    Ok(ReplicaStudy {
        report: ReplicaReport {
            schema: "shepherd-sim/replicas/v2",
            seed: opts.seed,
            counts: opts.counts.clone(),
            spreads: opts.spreads.iter().map(|s| s.name().to_string()).collect(),
            coordinations: opts
                .coordinations
                .iter()
                .map(|c| c.name().to_string())
                .collect(),
            scenarios: scenarios.iter().map(|s| s.name.clone()).collect(),
            ceilings,
            rows,
        },
        wall_seconds: started.elapsed().as_secs_f64(),
        run_count: results.len(),
        events,
    })
}

fn row(
    scenario: &Scenario,
    policy: &Policy,
    coordination: Coordination,
    spread: Spread,
    n: u32,
    run: &RunResult,
) -> ReplicaRow {
    let summary = summarize(scenario, run, false);
    ReplicaRow {
        scenario: scenario.name.clone(),
        policy: policy.name.clone(),
        coordination: coordination.name(),
        spread: spread.name().to_string(),
        replicas: n,
        requests: summary.requests,
        dropped_or_timed_out: summary.dropped + summary.timed_out,
        cache_hit_rate: summary.cache_hit_rate,
        ttft_p90_ms: summary.ttft_p90_ms,
        output_tokens_per_s: summary.output_tokens_per_s,
        load_imbalance_cv: summary.load_imbalance_cv,
        server_requests_cv: server_requests_cv(scenario.servers, run),
        hit_rate_vs_r1: 0.0,
        ttft_p90_vs_r1: 0.0,
        replica_picks: run.replicas.iter().map(|r| r.picks).collect(),
    }
}

/// The coefficient of variation of the requests sent to each of `servers` servers.
pub fn server_requests_cv(servers: u32, run: &RunResult) -> f64 {
    let mut counts = vec![0u64; servers as usize];
    for r in &run.records {
        if let Some(c) = counts.get_mut(r.server as usize) {
            *c += 1;
        }
    }
    let n = counts.len() as f64;
    let mean = counts.iter().sum::<u64>() as f64 / n.max(1.0);
    if mean <= 0.0 {
        return 0.0;
    }
    let var = counts
        .iter()
        .map(|&c| (c as f64 - mean).powi(2))
        .sum::<f64>()
        / n;
    round3(var.sqrt() / mean)
}

fn ratio(x: f64, base: f64) -> f64 {
    if base > 0.0 { round3(x / base) } else { 0.0 }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
