//! Routing policies: each one a Shepherd config (YAML) run through the same core scheduler.
//!
//! The built-in policies use the built-in plugins, plus sim-local ones registered into the same
//! registry: a `round-robin-picker`, and the peers reimplemented from their upstream sources at
//! named versions with their launch defaults (`sglang-cache-aware-scorer` and
//! `smg-cache-aware-scorer`, `dynamo-kv-cost-scorer`; `docs/peers.md` says what is modelled
//! from where). The peers hear from the simulated engines through an [`EngineFeed`] (first
//! tokens, cached blocks, polled loads). A config
//! with an `adaptive` section runs with the adaptive weights controller ticking on the pool.
//!
//! ```
//! use shepherd_sim::policy::{Policy, builtin_policies};
//!
//! let all = builtin_policies().unwrap();
//! assert!(all.iter().any(|p| p.name == "static-default"));
//! ```

mod dynamo;
mod feed;
mod overlay;
mod peer_index;
mod round_robin;
mod sglang;
mod smg;

use std::path::Path;
use std::sync::Arc;

use shepherd_adaptive::{ControllerDriver, TickDriver};
use shepherd_scheduler_core::config::{EndpointPickerConfig, Registry};
use shepherd_scheduler_core::plugin::PluginInstance;
use shepherd_scheduler_core::scheduler::Scheduler;

pub use dynamo::block_size::follow_engine_block_size;
pub use feed::{EngineFeed, FEED_NAME, FirstTokenListener, LoadPoll, LoadReport};
pub use overlay::{
    FLOW_CONTROL_NO_HOLDBACK_OVERLAY, FLOW_CONTROL_OVERLAY, FLOW_CONTROL_UTILIZATION_OVERLAY,
};
pub use round_robin::RoundRobinPicker;
pub use smg::expected_wait::expected_wait_seconds as smg_expected_wait_seconds;
pub use smg::gate::Gate as SmgSpillGate;

use crate::error::SimError;

/// `(name, YAML)` of every built-in policy, in report order.
pub const BUILTIN_POLICIES: &[(&str, &str)] = &[
    (
        "round-robin",
        include_str!("../../policies/round-robin.yaml"),
    ),
    ("random", include_str!("../../policies/random.yaml")),
    ("least-load", include_str!("../../policies/least-load.yaml")),
    (
        "prefix-only",
        include_str!("../../policies/prefix-only.yaml"),
    ),
    (
        "static-default",
        include_str!("../../policies/static-default.yaml"),
    ),
    (
        "static-default-plus",
        include_str!("../../policies/static-default-plus.yaml"),
    ),
    ("adaptive", shepherd_adaptive::preset::ADAPTIVE_CONFIG_YAML),
    (
        "predicted-latency",
        include_str!("../../policies/predicted-latency.yaml"),
    ),
    ("sglang", include_str!("../../policies/sglang.yaml")),
    (
        "sglang@1.13",
        include_str!("../../policies/sglang-1.13.yaml"),
    ),
    (
        "sglang-library-defaults",
        include_str!("../../policies/sglang-library-defaults.yaml"),
    ),
    ("dynamo", include_str!("../../policies/dynamo.yaml")),
    (
        "dynamo@oracle",
        include_str!("../../policies/dynamo-oracle.yaml"),
    ),
    (
        "llm-d-optimized-baseline",
        include_str!("../../policies/llm-d-optimized-baseline.yaml"),
    ),
    ("precise", include_str!("../../policies/precise.yaml")),
    (
        "precise@oracle",
        concat!(
            include_str!("../../policies/precise.yaml"),
            "simulation: {kvEventDelayMs: 0}\n"
        ),
    ),
];

/// `(name, YAML)` of the prefill/decode disaggregation policies (`shepherd-sim pd`): not in
/// the default comparison, whose pools have no roles (there they serve every request
/// aggregated, as `pd-never` does).
pub const PD_POLICIES: &[(&str, &str)] = &[
    ("pd-never", include_str!("../../policies/pd-never.yaml")),
    ("pd-always", include_str!("../../policies/pd-always.yaml")),
    ("pd-decider", include_str!("../../policies/pd-decider.yaml")),
];

/// A named Shepherd config.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Name in the report.
    pub name: String,
    /// The config.
    pub config: EndpointPickerConfig,
}

/// The top-level policy section the simulator reads its own settings from (the runner parses
/// it; a policy only declares it to the config parser).
pub const SIMULATION_SECTION: &str = "simulation";

impl Policy {
    /// Parses a config; `file` names it in errors. Besides the picker's sections it may have a
    /// `simulation` section with the simulator's own settings for the policy
    /// (`kvEventDelayMs`: when the engines' KV-cache events reach a precise index).
    pub fn from_yaml(name: &str, text: &str, file: &str) -> Result<Policy, SimError> {
        let sections = [SIMULATION_SECTION];
        let config = EndpointPickerConfig::from_yaml_with(text, &sections).map_err(|e| {
            let message = e.to_string();
            let line = message
                .split("at line ")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            SimError::yaml_input(file, line, message)
        })?;
        Ok(Policy {
            name: name.to_string(),
            config,
        })
    }

    /// Loads a user's config file as a policy named after the file.
    pub fn from_file(path: &Path) -> Result<Policy, SimError> {
        let text = SimError::read(path)?;
        let name = path
            .file_stem()
            .map_or_else(|| "custom".into(), |s| s.to_string_lossy().into_owned());
        Self::from_yaml(&name, &text, &path.display().to_string())
    }

    /// Whether the config asks for adaptive weights.
    pub fn is_adaptive(&self) -> bool {
        self.config.adaptive.is_some()
    }

    /// The adaptive controller bound to `scheduler`'s default profile, when the config has an
    /// `adaptive` section (see [`ControllerDriver::from_config`]). The runner ticks it on
    /// simulated time, exactly as the production driver does on the wall clock.
    pub fn tick_driver(
        &self,
        scheduler: &Scheduler,
    ) -> Result<Option<Box<dyn TickDriver>>, SimError> {
        let driver = ControllerDriver::from_config(&self.config, scheduler).map_err(|source| {
            SimError::Adaptive {
                policy: self.name.clone(),
                source,
            }
        })?;
        Ok(driver.map(|d| Box::new(d) as Box<dyn TickDriver>))
    }
}

/// The built-in policy called `name` (one of [`BUILTIN_POLICIES`] or [`PD_POLICIES`]).
pub fn builtin_policy(name: &str) -> Result<Policy, SimError> {
    let (_, yaml) = BUILTIN_POLICIES
        .iter()
        .chain(PD_POLICIES)
        .find(|(n, _)| *n == name)
        .ok_or_else(|| SimError::Unknown {
            kind: "policy",
            name: name.to_string(),
            known: BUILTIN_POLICIES
                .iter()
                .chain(PD_POLICIES)
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    Policy::from_yaml(name, yaml, &format!("<built-in {name}>"))
}

/// The policy `arg` names: a config file when `arg` is an existing path or ends in `.yaml` /
/// `.yml`, else the built-in policy of that name.
pub fn policy_by_name_or_path(arg: &str) -> Result<Policy, SimError> {
    if crate::workload::names_a_file(arg) {
        Policy::from_file(Path::new(arg))
    } else {
        builtin_policy(arg)
    }
}

/// Every built-in policy.
pub fn builtin_policies() -> Result<Vec<Policy>, SimError> {
    BUILTIN_POLICIES
        .iter()
        .map(|(n, _)| builtin_policy(n))
        .collect()
}

/// The built-in plugins plus the simulator's own.
pub fn sim_registry() -> Registry {
    let mut registry = shepherd_scorers::builtin_registry();
    registry.register(round_robin::TYPE_NAME, |_| {
        Ok(PluginInstance::picker(
            Arc::new(RoundRobinPicker::default()),
        ))
    });
    registry.register(sglang::TYPE_NAME, sglang::factory);
    registry.register(dynamo::TYPE_NAME, dynamo::factory);
    registry.register(smg::TYPE_NAME, smg::factory);
    registry
}
