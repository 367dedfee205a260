//! Stage four of the report pipeline: the documents — one scenario's rows and judgements
//! ([`ScenarioReport`]) and the whole comparison ([`Report`], JSON schema
//! `shepherd-sim/report/v1`). Wall-clock timings are never written here, so the same seeds
//! give byte-identical JSON.
//!
//! ```
//! use shepherd_sim::report::document::Report;
//!
//! let r = Report { schema: "shepherd-sim/report/v1", seed: 42, seeds: vec![42], scenarios: Vec::new() };
//! assert!(serde_json::to_string(&r).unwrap().contains("\"seeds\":[42]"));
//! ```

use serde::Serialize;

use super::attainment::StreamObjectives;
use super::best::Judgement;
use super::max_goodput::MaxGoodput;
use super::summary::PolicySummary;

/// One scenario's results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScenarioReport {
    /// Scenario name.
    pub scenario: String,
    /// Its description.
    pub description: String,
    /// Servers.
    pub servers: u32,
    /// Hardware preset.
    pub hardware: String,
    /// Cache hit rate an infinite cache would reach on this workload (token weighted).
    pub cache_hit_ceiling: f64,
    /// The latency objectives of the streams that have them (not written when none has).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub objectives: Vec<StreamObjectives>,
    /// One row per policy, then the bounds.
    pub results: Vec<PolicySummary>,
    /// Best and within-5 % policies on TTFT p90, output tokens/s and goodput, by the interval
    /// rule.
    pub judgements: Vec<Judgement>,
    /// With `--max-goodput`: per policy (bounds aside), the highest arrival rate at which 90 %
    /// of the requests meet their objectives.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub max_goodput: Vec<MaxGoodput>,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Schema id.
    pub schema: &'static str,
    /// The base seed (`--seed`).
    pub seed: u64,
    /// Every seed run, derived from `seed` (the first is `seed` itself).
    pub seeds: Vec<u64>,
    /// Scenarios in order.
    pub scenarios: Vec<ScenarioReport>,
}
