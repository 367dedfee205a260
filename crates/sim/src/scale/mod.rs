//! The scale study (`shepherd-sim scale`): the same workloads on pools of 8, 32 and 128
//! servers at the same load per server, to see whether routing quality holds as the pool
//! grows and how the wall-clock cost of each routing decision grows with it.
//!
//! Every (scenario, size, policy) triple is one run of [`crate::runner::run`] on
//! [`Scenario::at_servers`] (rates, closed-loop concurrency and distinct prefixes multiplied
//! by the pool's growth; durations unchanged unless [`ScaleOptions::time_scale`] shortens
//! every size alike). Each row keeps the routing-quality figures (TTFT p90, output tokens per
//! second per server, cache hit rate) and the run's [`PickCost`].
//!
//! The simulated figures are deterministic; the pick costs are wall-clock measurements and
//! vary with the machine and its load, so the JSON (`scale.json`) is not byte-identical from
//! one run to the next. Compare pick costs as ratios within one study.
//!
//! ```
//! use shepherd_sim::policy::{builtin_policy, sim_registry};
//! use shepherd_sim::scale::{ScaleOptions, scale};
//! use shepherd_sim::workload::Scenario;
//!
//! let tiny = Scenario::from_yaml(
//!     "name: tiny\nservers: 1\nstreams:\n  - kind: shared-prefix\n    groups: 2\n    systemTokens: 200\n    questionTokens: 20\n    outputTokens: 10\n    load: { rate: 4 }\n    endS: 2\n",
//!     "tiny.yaml",
//! )
//! .unwrap();
//! let opts = ScaleOptions { sizes: vec![1, 2], ..ScaleOptions::default() };
//! let study = scale(&[tiny], &[builtin_policy("round-robin").unwrap()], &sim_registry(), &opts).unwrap();
//! assert_eq!(study.report.rows.len(), 2);
//! assert_eq!(study.report.rows[1].servers, 2);
//! assert!(study.report.rows.iter().all(|r| r.pick.picks == r.requests));
//! ```

mod plot;
mod table;

use serde::Serialize;
use shepherd_scheduler_core::config::Registry;

pub use plot::plots;
pub use table::table;

use crate::compare::{Job, run_all};
use crate::error::SimError;
use crate::policy::Policy;
use crate::report::{ceiling, summarize};
use crate::runner::{PickCost, Spread};
use crate::workload::Scenario;

/// Scenarios of the study by default: the built-in synthetic ones (the Mooncake trace's
/// arrivals cannot be scaled at the same load per server; see [`Scenario::at_servers`]).
pub const DEFAULT_SCENARIOS: &[&str] = &["shared-prefix", "hot-prefix", "multi-turn"];

/// Policies of the study by default: two load-only baselines, Shepherd's static and adaptive
/// policies, and the two peers.
pub const DEFAULT_POLICIES: &[&str] = &[
    "round-robin",
    "least-load",
    "static-default",
    "adaptive",
    "sglang",
    "dynamo",
];

/// Pool sizes of the study by default.
pub const DEFAULT_SIZES: &[u32] = &[8, 32, 128];

/// How to run the study.
#[derive(Debug, Clone)]
pub struct ScaleOptions {
    /// Pool sizes, each a whole multiple of every scenario's own server count.
    pub sizes: Vec<u32>,
    /// Every stream's start and end times are multiplied by this, at every size alike (1: as
    /// written; 0.5: half as long).
    pub time_scale: f64,
    /// Seed of every run.
    pub seed: u64,
    /// Worker threads.
    pub threads: usize,
    /// Print progress to stderr.
    pub progress: bool,
}

impl Default for ScaleOptions {
    /// 8, 32 and 128 servers, durations as written, seed 42, one thread, quiet.
    fn default() -> Self {
        ScaleOptions {
            sizes: DEFAULT_SIZES.to_vec(),
            time_scale: 1.0,
            seed: 42,
            threads: 1,
            progress: false,
        }
    }
}

/// One (scenario, size, policy) run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScaleRow {
    /// The base scenario's name.
    pub scenario: String,
    /// Servers in the pool.
    pub servers: u32,
    /// Policy name.
    pub policy: String,
    /// Requests issued.
    pub requests: u64,
    /// Requests answered in full.
    pub completed: u64,
    /// Requests refused.
    pub dropped: u64,
    /// Requests abandoned after the scenario's timeout.
    pub timed_out: u64,
    /// Time to first token, 90th percentile, ms.
    pub ttft_p90_ms: f64,
    /// Output tokens of completed requests per simulated second, divided by the servers.
    pub output_tokens_per_s_per_server: f64,
    /// Prompt tokens served from the prefix caches / prompt tokens.
    pub cache_hit_rate: f64,
    /// Infinite-cache hit ceiling of the workload at this size.
    pub cache_hit_ceiling: f64,
    /// Wall-clock cost of the routing decisions (measured, not simulated).
    pub pick: PickCost,
    /// Simulated events.
    pub events: u64,
    /// Wall-clock seconds of the whole run (measured).
    pub wall_seconds: f64,
}

/// The study's report (`scale.json`, schema `shepherd-sim/scale/v1`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScaleReport {
    /// Schema id.
    pub schema: &'static str,
    /// Seed of every run.
    pub seed: u64,
    /// Pool sizes.
    pub sizes: Vec<u32>,
    /// Factor applied to every stream's start and end times.
    pub time_scale: f64,
    /// Base scenario names, in order.
    pub scenarios: Vec<String>,
    /// One row per (scenario, size, policy), in that order.
    pub rows: Vec<ScaleRow>,
}

impl ScaleReport {
    /// The row of `(scenario, servers, policy)`.
    pub fn row(&self, scenario: &str, servers: u32, policy: &str) -> Option<&ScaleRow> {
        self.rows
            .iter()
            .find(|r| r.scenario == scenario && r.servers == servers && r.policy == policy)
    }
}

/// A finished study.
#[derive(Debug)]
pub struct ScaleStudy {
    /// The report.
    pub report: ScaleReport,
    /// Wall-clock seconds of the whole study.
    pub wall_seconds: f64,
    /// Runs made.
    pub run_count: usize,
    /// Simulated events of all runs.
    pub events: u64,
}

/// `scenario` with every stream's start and end times multiplied by `factor`.
fn retimed(scenario: &Scenario, factor: f64) -> Scenario {
    let mut s = scenario.clone();
    if factor != 1.0 {
        for stream in &mut s.streams {
            stream.spec.start_s *= factor;
            stream.end_s *= factor;
            stream.spec.end_s = stream.spec.end_s.map(|e| e * factor);
        }
    }
    s
}

/// Runs every scenario at every size under every policy.
pub fn scale(
    scenarios: &[Scenario],
    policies: &[Policy],
    registry: &Registry,
    opts: &ScaleOptions,
) -> Result<ScaleStudy, SimError> {
    let started = std::time::Instant::now();
    if !(opts.time_scale.is_finite() && opts.time_scale > 0.0) {
        return Err(SimError::Input {
            file: "--time-scale".into(),
            line: 0,
            field: "time-scale".into(),
            reason: "must be > 0".into(),
        });
    }
    // (base scenario index, size, scaled scenario)
    let mut scaled = Vec::new();
    for (si, base) in scenarios.iter().enumerate() {
        let base = retimed(base, opts.time_scale);
        for &size in &opts.sizes {
            scaled.push((si, size, base.at_servers(size)?));
        }
    }
    let mut jobs: Vec<Job<'_>> = scaled
        .iter()
        .enumerate()
        .flat_map(|(gi, (_, _, s))| {
            policies.iter().map(move |policy| Job {
                group: gi,
                scenario: s,
                policy,
                fresh: false,
                seed: opts.seed,
                replicas: 1,
                spread: Spread::Random,
            })
        })
        .collect();
    // Largest pools first, so the longest runs do not end up last on one thread.
    jobs.sort_by_key(|j| std::cmp::Reverse(j.scenario.servers));
    let results = run_all(&jobs, registry, opts.threads, opts.progress)?;
    let mut rows = Vec::with_capacity(results.len());
    let mut events = 0;
    for (job, run) in jobs.iter().zip(&results) {
        let (si, size, s) = &scaled[job.group];
        let summary = summarize(s, run, false);
        events += run.events;
        rows.push(ScaleRow {
            scenario: scenarios[*si].name.clone(),
            servers: *size,
            policy: run.policy.clone(),
            requests: summary.requests,
            completed: summary.completed,
            dropped: summary.dropped,
            timed_out: summary.timed_out,
            ttft_p90_ms: summary.ttft_p90_ms,
            output_tokens_per_s_per_server: round3(
                summary.output_tokens_per_s / f64::from((*size).max(1)),
            ),
            cache_hit_rate: summary.cache_hit_rate,
            cache_hit_ceiling: ceiling(run),
            pick: run.pick_cost,
            events: run.events,
            wall_seconds: run.wall_seconds,
        });
    }
    let order = |r: &ScaleRow| {
        (
            scenarios.iter().position(|s| s.name == r.scenario),
            opts.sizes.iter().position(|&n| n == r.servers),
            policies.iter().position(|p| p.name == r.policy),
        )
    };
    rows.sort_by_key(order);
    Ok(ScaleStudy {
        report: ScaleReport {
            schema: "shepherd-sim/scale/v1",
            seed: opts.seed,
            sizes: opts.sizes.clone(),
            time_scale: opts.time_scale,
            scenarios: scenarios.iter().map(|s| s.name.clone()).collect(),
            rows,
        },
        wall_seconds: started.elapsed().as_secs_f64(),
        run_count: results.len(),
        events,
    })
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
