//! Workloads: scenario files, traffic generators, trace replay, server roles for
//! prefill/decode disaggregation ([`RolesSpec`]), latency objectives per stream
//! ([`SloSpec`]), the deterministic prompt contents shared by the scheduler and the engines,
//! and the same workload on a larger pool at the same load per server
//! ([`Scenario::at_servers`]).

mod at_scale;
mod builtin;
mod gzip;
mod roles;
mod scenario_derived;
mod slo;
mod spec;
mod tokens;
mod trace;
mod traffic;

pub(crate) use builtin::names_a_file;
pub use builtin::{
    BUILTIN_SCENARIOS, BUILTIN_TRACES, OVERLOAD_SCENARIO, PD_SCENARIOS, builtin_scenario,
    builtin_scenarios, scenario_by_name_or_path,
};
pub use gzip::trace_text;
pub use roles::{KNOWN_ROLES, ROLE_LABEL, RolesSpec};
pub use slo::{SLO_TPOT_HEADER, SLO_TTFT_HEADER, SloSpec};
pub use spec::{
    EngineOverrides, Load, LoadSpec, Scenario, ScenarioSpec, Stream, StreamKind, StreamSpec,
};
pub use tokens::{Segment, VOCAB, block_hashes, materialize, name_id, segment_id};
pub use trace::{TRACE_BLOCK_TOKENS, TraceRecord, parse_trace};
pub use traffic::{Issue, RequestSpec, Traffic};
