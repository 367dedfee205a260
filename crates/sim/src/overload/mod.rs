//! The `overload` report: one policy on the `overload` scenario with and without flow control,
//! against the same workload unloaded, by priority class and by tenant (issue 11).
//!
//! Five runs, in parallel, each deterministic:
//!
//! 1. `unloaded`: the scenario's streams at [`OverloadOptions::unloaded_scale`] of their rates
//!    (well below capacity), the policy as is — the reference latencies;
//! 2. `no flow control`: the overloaded scenario, the policy as is;
//! 3. `flow control`: the same, the policy plus [`FLOW_CONTROL_OVERLAY`] (the
//!    `concurrency-detector` and the `priority-holdback-policy` usage limit);
//! 4. `flow control (no holdback)`: the same without the usage limit
//!    ([`FLOW_CONTROL_NO_HOLDBACK_OVERLAY`]), to show what holding sheddable traffic back buys;
//! 5. `flow control (utilization-detector)`: with upstream's default detector
//!    ([`FLOW_CONTROL_UTILIZATION_OVERLAY`]), to show why the report's settings use the other.
//!
//! [`Targets`] then checks the issue's goals on run 3: priority-0 TTFT p99 within 2x its
//! unloaded value while sheddable traffic is shed, and the light tenant's TTFT p99 within 1.5x
//! the heavy tenant's.
//!
//! ```no_run
//! use shepherd_sim::overload::{OverloadOptions, overload};
//! use shepherd_sim::policy::{builtin_policy, sim_registry};
//! use shepherd_sim::workload::builtin_scenario;
//!
//! let report = overload(
//!     &builtin_scenario("overload").unwrap(),
//!     &builtin_policy("adaptive").unwrap(),
//!     &sim_registry(),
//!     &OverloadOptions::default(),
//! )
//! .unwrap();
//! println!("{}", shepherd_sim::overload::table(&report.report));
//! ```

mod summary;
mod table;
mod targets;

use serde::Serialize;
use shepherd_scheduler_core::config::Registry;

pub use summary::{
    ClassSummary, OverloadRunSummary, STEADY_AFTER_S, TenantSummary, summarize_overload,
};
pub use table::table;
pub use targets::Targets;

use crate::compare::{Job, run_all};
use crate::error::SimError;
use crate::policy::{
    FLOW_CONTROL_NO_HOLDBACK_OVERLAY, FLOW_CONTROL_OVERLAY, FLOW_CONTROL_UTILIZATION_OVERLAY,
    Policy,
};
use crate::runner::{RunResult, Spread};
use crate::workload::Scenario;

/// How to run the report.
#[derive(Debug, Clone)]
pub struct OverloadOptions {
    /// Seed of every run.
    pub seed: u64,
    /// Worker threads.
    pub threads: usize,
    /// Rate factor of the unloaded reference run.
    pub unloaded_scale: f64,
    /// The flow-control config fragment (`plugins` and `flowControl`) of run 3.
    pub flow_control: String,
    /// Print progress to stderr.
    pub progress: bool,
}

impl Default for OverloadOptions {
    fn default() -> Self {
        OverloadOptions {
            seed: 42,
            threads: 2,
            unloaded_scale: 0.25,
            flow_control: FLOW_CONTROL_OVERLAY.to_string(),
            progress: false,
        }
    }
}

/// The report document (JSON schema `shepherd-sim/overload/v1`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverloadReport {
    /// Schema id.
    pub schema: &'static str,
    /// Seed of every run.
    pub seed: u64,
    /// Scenario name.
    pub scenario: String,
    /// Its description.
    pub description: String,
    /// Rate factor of the unloaded run.
    pub unloaded_scale: f64,
    /// The flow-control config fragment of the `flow control` run, verbatim.
    pub flow_control: String,
    /// The runs, in the order of the module docs.
    pub runs: Vec<OverloadRunSummary>,
    /// The issue's targets, checked on the `flow control` run.
    pub targets: Targets,
}

/// A finished report and its raw runs.
#[derive(Debug)]
pub struct Overload {
    /// The report.
    pub report: OverloadReport,
    /// The raw runs, in report order.
    pub runs: Vec<RunResult>,
}

/// Labels of the runs, in order.
pub const RUN_LABELS: [&str; 5] = [
    "unloaded",
    "no flow control",
    "flow control",
    "flow control (no holdback)",
    "flow control (utilization-detector)",
];

fn job<'a>(group: usize, scenario: &'a Scenario, policy: &'a Policy, seed: u64) -> Job<'a> {
    Job {
        group,
        scenario,
        policy,
        fresh: false,
        seed,
        replicas: 1,
        spread: Spread::Random,
    }
}

/// Runs the report for `policy` on `scenario`.
pub fn overload(
    scenario: &Scenario,
    policy: &Policy,
    registry: &Registry,
    opts: &OverloadOptions,
) -> Result<Overload, SimError> {
    let unloaded = scenario.scaled(opts.unloaded_scale);
    let with_flow = policy.with_overlay(
        &format!("{}+flow-control", policy.name),
        &opts.flow_control,
        "<flow-control overlay>",
    )?;
    let without_holdback = policy.with_overlay(
        &format!("{}+flow-control-no-holdback", policy.name),
        FLOW_CONTROL_NO_HOLDBACK_OVERLAY,
        "<flow-control-no-holdback overlay>",
    )?;
    let with_utilization = policy.with_overlay(
        &format!("{}+flow-control-utilization", policy.name),
        FLOW_CONTROL_UTILIZATION_OVERLAY,
        "<flow-control-utilization overlay>",
    )?;
    let seed = opts.seed;
    let jobs = [
        job(0, &unloaded, policy, seed),
        job(1, scenario, policy, seed),
        job(2, scenario, &with_flow, seed),
        job(3, scenario, &without_holdback, seed),
        job(4, scenario, &with_utilization, seed),
    ];
    let runs = run_all(&jobs, registry, opts.threads, opts.progress)?;
    let summaries: Vec<_> = jobs
        .iter()
        .zip(&runs)
        .map(|(j, r)| summarize_overload(RUN_LABELS[j.group], j.scenario, r))
        .collect();
    let targets = Targets::check(&summaries[0], &summaries[2]);
    Ok(Overload {
        report: OverloadReport {
            schema: "shepherd-sim/overload/v1",
            seed: opts.seed,
            scenario: scenario.name.clone(),
            description: scenario.description.clone(),
            unloaded_scale: opts.unloaded_scale,
            flow_control: opts.flow_control.clone(),
            runs: summaries,
            targets,
        },
        runs,
    })
}
