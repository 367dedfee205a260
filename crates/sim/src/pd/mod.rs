//! The prefill/decode disaggregation study (`shepherd-sim pd`): each scenario on four
//! servers, served
//!
//! 1. `aggregated`: every server `both`, policy `pd-never` (the P/D profiles, no decider:
//!    every request prefilled and decoded by one server);
//! 2. `always 1P:3D`, `always 2P:2D`: one (two) `prefill` servers and three (two) `decode`
//!    ones, policy `pd-always` (every request prefilled on a prefill server, its KV moved to
//!    its decode server);
//! 3. `decider 1P:3D`, `decider 2P:2D`: the same pools, policy `pd-decider`
//!    (`prefill-load-pd-decider`: disaggregate when the decode server caches less than
//!    `nonCachedTokens` of the prompt unless the least-loaded prefill server has more than
//!    `longQueueTokens` pending beyond the decode server's own, and a shorter prompt while
//!    the least-loaded prefill server has at most `queueTokens` pending to prefill);
//! 4. `decider 1PD:3D`, `decider 2PD:2D`: the decider on pools whose prefill servers are
//!    `prefill-decode` (both role filters keep them: they prefill for the decode servers and
//!    take aggregated requests too).
//!
//! Per run: TTFT p50/p90/p99, TPOT p50/p99, output tokens per second per GPU (all four
//! servers count, whatever their role), the share of requests disaggregated and the prefill
//! fallbacks. [`DeciderCheck`] then compares each decider row with the better of "always"
//! (on as many prefill servers; for the PD arms, the fixed split) and "never" (aggregated)
//! on TTFT p99, TPOT p99 and tokens per GPU (within 5 % of it on each), and on SLO attainment
//! under the scenario's objectives (within 2 points of it; [`ATTAINMENT_TOLERANCE`]). Over
//! several seeds, every figure is the mean over seeds. With [`PdOptions::max_goodput`] (the
//! command's default) each arm's maximum goodput is searched too: the highest arrival rate at
//! which 90 % of the requests meet both objectives ([`crate::goodput`]).
//!
//! ```no_run
//! use shepherd_sim::pd::{PdOptions, pd, table};
//! use shepherd_sim::policy::sim_registry;
//!
//! let study = pd(&shepherd_sim::pd::default_scenarios().unwrap(), &sim_registry(), &PdOptions::default()).unwrap();
//! println!("{}", table(&study.report));
//! ```

mod check;
mod table;

use serde::Serialize;
use shepherd_scheduler_core::config::Registry;

pub use check::{ATTAINMENT_TOLERANCE, AttainmentCheck, DeciderCheck, FigureCheck, TOLERANCE};
pub use table::table;

use crate::compare::{Job, run_all};
use crate::error::SimError;
use crate::goodput::{SearchOptions, search};
use crate::policy::{Policy, builtin_policy};
use crate::report::max_goodput::MaxGoodput;
use crate::report::summarize;
use crate::runner::Spread;
use crate::seeds;
use crate::workload::{PD_SCENARIOS, Scenario, builtin_scenario};

/// How to run the study.
#[derive(Debug, Clone)]
pub struct PdOptions {
    /// The first seed.
    pub seed: u64,
    /// Seeds per run (derived from `seed`; figures are their means).
    pub seeds: u32,
    /// Worker threads.
    pub threads: usize,
    /// Print progress to stderr.
    pub progress: bool,
    /// Also search each arm's maximum goodput ([`crate::goodput`]).
    pub max_goodput: bool,
}

impl Default for PdOptions {
    /// Seed 42, one seed, two threads, quiet, without the goodput search.
    fn default() -> Self {
        PdOptions {
            seed: 42,
            seeds: 1,
            threads: 2,
            progress: false,
            max_goodput: false,
        }
    }
}

/// One pool layout and policy of the study.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arm {
    /// Row label.
    pub label: &'static str,
    /// The policy (a built-in P/D policy).
    pub policy: &'static str,
    /// Prefill servers (0: every server `both`).
    pub prefill: u32,
    /// The prefill servers' role: `prefill`, or `prefill-decode` for servers that also take
    /// aggregated requests.
    pub prefill_role: &'static str,
}

/// The study's arms, in report order (see the module docs).
pub const ARMS: [Arm; 7] = [
    Arm {
        label: "aggregated",
        policy: "pd-never",
        prefill: 0,
        prefill_role: "prefill",
    },
    Arm {
        label: "always 1P:3D",
        policy: "pd-always",
        prefill: 1,
        prefill_role: "prefill",
    },
    Arm {
        label: "always 2P:2D",
        policy: "pd-always",
        prefill: 2,
        prefill_role: "prefill",
    },
    Arm {
        label: "decider 1P:3D",
        policy: "pd-decider",
        prefill: 1,
        prefill_role: "prefill",
    },
    Arm {
        label: "decider 2P:2D",
        policy: "pd-decider",
        prefill: 2,
        prefill_role: "prefill",
    },
    Arm {
        label: "decider 1PD:3D",
        policy: "pd-decider",
        prefill: 1,
        prefill_role: "prefill-decode",
    },
    Arm {
        label: "decider 2PD:2D",
        policy: "pd-decider",
        prefill: 2,
        prefill_role: "prefill-decode",
    },
];

/// The study's scenarios.
pub fn default_scenarios() -> Result<Vec<Scenario>, SimError> {
    PD_SCENARIOS
        .iter()
        .map(|(n, _)| builtin_scenario(n))
        .collect()
}

/// Server roles of `arm` on a pool of `servers`: decode servers first, then `arm.prefill`
/// prefill servers (as a scenario's role counts are assigned, see
/// [`RolesSpec`](crate::workload::RolesSpec)); every server `both` for the aggregated arm.
pub fn roles(arm: &Arm, servers: u32) -> Vec<String> {
    let decode = servers.saturating_sub(arm.prefill);
    (0..servers)
        .map(|i| match (arm.prefill, i < decode) {
            (0, _) => "both",
            (_, true) => "decode",
            (_, false) => arm.prefill_role,
        })
        .map(str::to_string)
        .collect()
}

/// One row: an arm's figures on a scenario (means over the seeds).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PdRow {
    /// The arm's label.
    pub label: String,
    /// The policy.
    pub policy: String,
    /// Server roles, by server.
    pub roles: Vec<String>,
    /// Requests issued.
    pub requests: f64,
    /// Requests completed.
    pub completed: f64,
    /// Requests disaggregated (a prefill stage on another server), share of the issued.
    pub disaggregated_share: f64,
    /// Requests whose prefill server lost the job, served aggregated.
    pub prefill_fallbacks: f64,
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
    /// Output tokens per simulated second per server.
    pub output_tokens_per_s_per_gpu: f64,
    /// Share of the requests that met both their objectives (TTFT and TPOT; 0 for a
    /// scenario without objectives).
    pub slo_attainment: f64,
    /// Requests that met both objectives per simulated second.
    pub goodput_rps: f64,
}

/// One scenario's rows and the decider checks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PdScenario {
    /// Scenario name.
    pub scenario: String,
    /// Its description.
    pub description: String,
    /// One row per arm, in [`ARMS`] order.
    pub rows: Vec<PdRow>,
    /// Each decider row against the better of "always" on its pool and "never".
    pub decider: Vec<DeciderCheck>,
    /// The objectives the scenario states (TTFT and TPOT), `None` without.
    pub objectives: Option<crate::workload::SloSpec>,
    /// With the goodput search: each arm's maximum goodput, in [`ARMS`] order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub max_goodput: Vec<MaxGoodput>,
}

/// The report (JSON schema `shepherd-sim/pd/v1`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PdReport {
    /// Schema id.
    pub schema: &'static str,
    /// Every seed run.
    pub seeds: Vec<u64>,
    /// The KV transfer model of the first scenario (bytes per token, GB/s, ms), as run.
    pub kv_transfer: (u64, f64, f64),
    /// Per scenario.
    pub scenarios: Vec<PdScenario>,
}

/// A finished study.
#[derive(Debug)]
pub struct Pd {
    /// The report.
    pub report: PdReport,
    /// Runs made.
    pub run_count: usize,
    /// Simulated events of all runs.
    pub events: u64,
}

/// Runs the study on `scenarios`.
pub fn pd(scenarios: &[Scenario], registry: &Registry, opts: &PdOptions) -> Result<Pd, SimError> {
    let policies: Vec<Policy> = ARMS
        .iter()
        .map(|a| builtin_policy(a.policy))
        .collect::<Result<_, _>>()?;
    let pooled: Vec<Vec<Scenario>> = scenarios
        .iter()
        .map(|s| {
            ARMS.iter()
                .map(|a| {
                    let label = a.label.split_whitespace().last().unwrap_or(a.label);
                    s.with_roles(label, roles(a, s.servers))
                })
                .collect()
        })
        .collect();
    let seeds = seeds::derive(opts.seed, opts.seeds.max(1));
    let mut jobs = Vec::new();
    for (si, variants) in pooled.iter().enumerate() {
        for (ai, scenario) in variants.iter().enumerate() {
            for &seed in &seeds {
                jobs.push(Job {
                    group: si * ARMS.len() + ai,
                    scenario,
                    policy: &policies[ai],
                    fresh: false,
                    seed,
                    replicas: 1,
                    spread: Spread::Random,
                });
            }
        }
    }
    let runs = run_all(&jobs, registry, opts.threads, opts.progress)?;
    let events = runs.iter().map(|r| r.events).sum();
    let mut out = Vec::new();
    for (si, scenario) in scenarios.iter().enumerate() {
        let rows: Vec<PdRow> = ARMS
            .iter()
            .enumerate()
            .map(|(ai, arm)| {
                let group = si * ARMS.len() + ai;
                let variant = &pooled[si][ai];
                let per_seed: Vec<PdRow> = jobs
                    .iter()
                    .zip(&runs)
                    .filter(|(j, _)| j.group == group)
                    .map(|(_, run)| {
                        let s = summarize(variant, run, false);
                        let issued = s.requests.max(1) as f64;
                        PdRow {
                            label: arm.label.into(),
                            policy: arm.policy.into(),
                            roles: variant.roles.clone(),
                            requests: s.requests as f64,
                            completed: s.completed as f64,
                            disaggregated_share: (run.disaggregated - run.prefill_fallbacks) as f64
                                / issued,
                            prefill_fallbacks: run.prefill_fallbacks as f64,
                            ttft_p50_ms: s.ttft_p50_ms,
                            ttft_p90_ms: s.ttft_p90_ms,
                            ttft_p99_ms: s.ttft_p99_ms,
                            tpot_p50_ms: s.tpot_p50_ms,
                            tpot_p99_ms: s.tpot_p99_ms,
                            output_tokens_per_s_per_gpu: s.output_tokens_per_s
                                / f64::from(variant.servers.max(1)),
                            slo_attainment: s.slo.map_or(0.0, |a| a.attainment),
                            goodput_rps: s.slo.map_or(0.0, |a| a.goodput_rps),
                        }
                    })
                    .collect();
                mean_row(&per_seed)
            })
            .collect();
        let decider = (0..ARMS.len())
            .filter(|&i| ARMS[i].policy == "pd-decider")
            .filter_map(|i| {
                let always = ARMS
                    .iter()
                    .position(|a| a.policy == "pd-always" && a.prefill == ARMS[i].prefill)?;
                Some(DeciderCheck::of(&rows[i], &rows[always], &rows[0]))
            })
            .collect();
        let max_goodput = if opts.max_goodput && scenario.has_objectives() {
            let pairs: Vec<(&Scenario, &Policy, &str)> = ARMS
                .iter()
                .enumerate()
                .map(|(ai, arm)| (&pooled[si][ai], &policies[ai], arm.label))
                .collect();
            search(
                &pairs,
                registry,
                &SearchOptions {
                    seed: opts.seed,
                    seeds: opts.seeds.max(1),
                    threads: opts.threads,
                    progress: opts.progress,
                    ..SearchOptions::default()
                },
            )?
        } else {
            Vec::new()
        };
        out.push(PdScenario {
            scenario: scenario.name.clone(),
            description: scenario.description.clone(),
            rows,
            decider,
            objectives: scenario.objectives,
            max_goodput,
        });
    }
    let link = scenarios.first().map(|s| s.kv_transfer).unwrap_or_default();
    Ok(Pd {
        report: PdReport {
            schema: "shepherd-sim/pd/v1",
            seeds,
            kv_transfer: (link.bytes_per_token, link.bandwidth_gbps, link.latency_ms),
            scenarios: out,
        },
        run_count: runs.len(),
        events,
    })
}

/// The mean of `rows` (one per seed), figure by figure, rounded to 3 decimals.
fn mean_row(rows: &[PdRow]) -> PdRow {
    let n = rows.len().max(1) as f64;
    let mean = |f: fn(&PdRow) -> f64| {
        let m = rows.iter().map(f).sum::<f64>() / n;
        (m * 1000.0).round() / 1000.0
    };
    let Some(first) = rows.first() else {
        return PdRow {
            label: String::new(),
            policy: String::new(),
            roles: Vec::new(),
            requests: 0.0,
            completed: 0.0,
            disaggregated_share: 0.0,
            prefill_fallbacks: 0.0,
            ttft_p50_ms: 0.0,
            ttft_p90_ms: 0.0,
            ttft_p99_ms: 0.0,
            tpot_p50_ms: 0.0,
            tpot_p99_ms: 0.0,
            output_tokens_per_s_per_gpu: 0.0,
            slo_attainment: 0.0,
            goodput_rps: 0.0,
        };
    };
    PdRow {
        label: first.label.clone(),
        policy: first.policy.clone(),
        roles: first.roles.clone(),
        requests: mean(|r| r.requests),
        completed: mean(|r| r.completed),
        disaggregated_share: mean(|r| r.disaggregated_share),
        prefill_fallbacks: mean(|r| r.prefill_fallbacks),
        ttft_p50_ms: mean(|r| r.ttft_p50_ms),
        ttft_p90_ms: mean(|r| r.ttft_p90_ms),
        ttft_p99_ms: mean(|r| r.ttft_p99_ms),
        tpot_p50_ms: mean(|r| r.tpot_p50_ms),
        tpot_p99_ms: mean(|r| r.tpot_p99_ms),
        output_tokens_per_s_per_gpu: mean(|r| r.output_tokens_per_s_per_gpu),
        slo_attainment: mean(|r| r.slo_attainment),
        goodput_rps: mean(|r| r.goodput_rps),
    }
}
