//! Scenario files: the simulated pool and the traffic streams that load it (YAML).
//!
//! ```
//! use shepherd_sim::workload::Scenario;
//!
//! let yaml = r#"
//! name: tiny
//! servers: 2
//! streams:
//!   - kind: shared-prefix
//!     groups: 4
//!     systemTokens: 1000
//!     questionTokens: 100
//!     outputTokens: 50
//!     load: { closed: 8 }
//!     endS: 10
//!     slo: { ttftMs: 500 }
//! "#;
//! let scenario = Scenario::from_yaml(yaml, "tiny.yaml").unwrap();
//! assert_eq!(scenario.servers, 2);
//! assert_eq!(scenario.streams[0].spec.slo.and_then(|o| o.ttft_ms), Some(500.0));
//! ```

use std::num::{NonZeroU32, NonZeroU64};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::gzip::trace_text;
use super::roles::RolesSpec;
use super::slo::SloSpec;
use super::trace::{TraceRecord, parse_trace};
use crate::engine::{EngineConfig, KvTransfer, KvTransferSpec};
use crate::error::SimError;

/// How a stream issues requests, as written: `{ closed: N }` or `{ rate: R }`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoadSpec {
    /// Closed loop at this concurrency.
    #[serde(default)]
    pub closed: Option<NonZeroU32>,
    /// Open loop at this rate per second.
    #[serde(default)]
    pub rate: Option<f64>,
}

/// How a stream issues requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Load {
    /// Closed loop: this many sessions at once, each issuing its next request when the last
    /// one ends.
    Closed(NonZeroU32),
    /// Open loop: new sessions start at this Poisson rate per second.
    Rate(f64),
}

/// The kind of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StreamKind {
    /// System prompts shared by groups of questions (like inference-perf's `shared_prefix`).
    SharedPrefix,
    /// Conversations whose prompts grow turn by turn.
    MultiTurn,
    /// Replay of a Mooncake-format trace.
    Trace,
}

/// Engine settings a scenario may override on top of its hardware preset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EngineOverrides {
    /// Tokens per KV block.
    pub block_size: Option<NonZeroU32>,
    /// KV blocks per server.
    pub num_gpu_blocks: Option<NonZeroU32>,
    /// Most requests per batch.
    pub max_num_seqs: Option<NonZeroU32>,
    /// Step token budget.
    pub max_num_batched_tokens: Option<NonZeroU32>,
}

/// One stream of traffic, as written in a scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StreamSpec {
    /// Name shown in per-stream results (default `kind` and index).
    #[serde(default)]
    pub name: Option<String>,
    /// What the stream sends.
    pub kind: StreamKind,
    /// Streams with the same key share system prompts (default: the stream's name).
    #[serde(default)]
    pub prefix_key: Option<String>,
    /// Distinct system prompts.
    #[serde(default = "one")]
    pub groups: NonZeroU32,
    /// Distinct questions per system prompt (shared-prefix).
    #[serde(default = "one")]
    pub prompts_per_group: NonZeroU32,
    /// Tokens of each system prompt (0 for none).
    #[serde(default)]
    pub system_tokens: u32,
    /// Tokens of each question (shared-prefix).
    #[serde(default = "one")]
    pub question_tokens: NonZeroU32,
    /// Tokens of each user message (multi-turn).
    #[serde(default = "one")]
    pub user_tokens: NonZeroU32,
    /// Tokens generated per request.
    #[serde(default = "one")]
    pub output_tokens: NonZeroU32,
    /// Turns per conversation (multi-turn).
    #[serde(default = "one")]
    pub turns: NonZeroU32,
    /// Seconds between a turn's answer and the next turn (multi-turn).
    #[serde(default)]
    pub think_time_s: f64,
    /// How requests are issued (not for traces).
    #[serde(default)]
    pub load: Option<LoadSpec>,
    /// When the stream starts, seconds.
    #[serde(default)]
    pub start_s: f64,
    /// When it stops issuing, seconds (required except for traces).
    #[serde(default)]
    pub end_s: Option<f64>,
    /// Trace file (Mooncake JSONL), relative to the scenario file.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// Trace timestamps are multiplied by this (0.5 replays twice as fast).
    #[serde(default = "one_f64")]
    pub time_scale: f64,
    /// The resolution the trace's timestamps were recorded at, in milliseconds (traces
    /// only; 0, the default, replays them as written). The Mooncake trace's are 3-second
    /// bins: read as written, every request of a bin arrives at the same instant. With a
    /// resolution, each request arrives at a seeded uniform point of its interval
    /// `[t, t + resolution)` instead, in the order of those points.
    #[serde(default)]
    pub timestamp_resolution_ms: f64,
    /// Priority of the stream's requests, as a flow controller reads it from the request's
    /// objective: higher is more important, negative is sheddable (default 0).
    #[serde(default)]
    pub priority: i32,
    /// Fairness id (tenant) of the stream's requests, as a flow controller reads it from the
    /// request's header (default: none, the one default flow).
    #[serde(default)]
    pub fairness_id: Option<String>,
    /// Latency objectives of the stream's requests (default: none): carried on each request
    /// as the headers [`SLO_TTFT_HEADER`](super::SLO_TTFT_HEADER) and
    /// [`SLO_TPOT_HEADER`](super::SLO_TPOT_HEADER), and counted in the reports' SLO
    /// attainment.
    #[serde(default)]
    pub slo: Option<SloSpec>,
}

fn one() -> NonZeroU32 {
    NonZeroU32::MIN
}

fn one_f64() -> f64 {
    1.0
}

fn default_hardware() -> String {
    "h100-llama8b".into()
}

fn default_scrape() -> u64 {
    50
}

fn default_tick() -> NonZeroU64 {
    NonZeroU64::new(100).unwrap_or(NonZeroU64::MIN)
}

fn default_timeout() -> f64 {
    600.0
}

/// A scenario file as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScenarioSpec {
    /// Scenario name.
    pub name: String,
    /// One line saying what it models.
    #[serde(default)]
    pub description: String,
    /// Number of model servers.
    pub servers: NonZeroU32,
    /// Hardware preset (`h100-llama8b`, `a100-llama8b`).
    #[serde(default = "default_hardware")]
    pub hardware: String,
    /// Engine overrides.
    #[serde(default)]
    pub engine: EngineOverrides,
    /// Server roles for prefill/decode disaggregation (default: none, no server labelled;
    /// see [`RolesSpec`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roles: Option<RolesSpec>,
    /// The KV transfer model between servers (default: the hardware's, see
    /// [`KvTransfer`]).
    #[serde(default)]
    pub kv_transfer: KvTransferSpec,
    /// How often the router scrapes each server's metrics, ms (0: fresh at every pick).
    #[serde(default = "default_scrape")]
    pub scrape_interval_ms: u64,
    /// Period of the adaptive tick and of load sampling, ms.
    #[serde(default = "default_tick")]
    pub tick_ms: NonZeroU64,
    /// A request unfinished this long after arrival is abandoned (timed out).
    #[serde(default = "default_timeout")]
    pub request_timeout_s: f64,
    /// The scenario's latency objectives, both TTFT and TPOT (`objectives: { ttftMs: T,
    /// tpotMs: P }`): what the report judges every request by (SLO attainment, goodput,
    /// `--max-goodput`), stated before any run. A stream's own `slo` overrides them objective
    /// by objective. Unlike a stream's `slo`, they are not sent on the requests: they are the
    /// judge's, not the client's.
    #[serde(default)]
    pub objectives: Option<SloSpec>,
    /// Traffic.
    pub streams: Vec<StreamSpec>,
}

/// A validated stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Stream {
    /// Display name.
    pub name: String,
    /// The spec.
    pub spec: StreamSpec,
    /// Content key for system prompts.
    pub prefix_key: u64,
    /// How it issues requests (`None` for traces).
    pub load: Option<Load>,
    /// Trace records, for trace streams.
    pub trace: Vec<TraceRecord>,
    /// Stop issuing at (seconds; infinite for traces).
    pub end_s: f64,
}

/// A validated scenario, ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Number of servers.
    pub servers: u32,
    /// Hardware preset name.
    pub hardware: String,
    /// Engine configuration of every server.
    pub engine: EngineConfig,
    /// Server `i`'s role (the `llm-d.ai/role` label of its endpoint); empty: no server is
    /// labelled.
    pub roles: Vec<String>,
    /// How KV caches move from prefill to decode servers.
    pub kv_transfer: KvTransfer,
    /// Scrape interval, ms (0 = fresh metrics at every pick).
    pub scrape_interval_ms: u64,
    /// Tick period, ms.
    pub tick_ms: u64,
    /// Request timeout, seconds.
    pub request_timeout_s: f64,
    /// The scenario's objectives (TTFT and TPOT), for every stream without its own.
    pub objectives: Option<SloSpec>,
    /// Streams.
    pub streams: Vec<Stream>,
}

impl Scenario {
    /// Parses and validates YAML; `file` names the source in errors (trace paths are resolved
    /// against its directory).
    pub fn from_yaml(text: &str, file: &str) -> Result<Scenario, SimError> {
        Self::from_yaml_with(text, file, &[])
    }

    /// [`Scenario::from_yaml`], where a trace `path` written exactly as one of `embedded`'s
    /// names reads that name's bytes instead of a file (the built-in scenarios' traces).
    pub(crate) fn from_yaml_with(
        text: &str,
        file: &str,
        embedded: &[(&str, &[u8])],
    ) -> Result<Scenario, SimError> {
        let spec: ScenarioSpec = serde_norway::from_str(text).map_err(|e| yaml_error(&e, file))?;
        Self::from_spec(spec, text, file, embedded)
    }

    /// Loads a scenario file.
    pub fn from_file(path: &Path) -> Result<Scenario, SimError> {
        let text = SimError::read(path)?;
        Self::from_yaml(&text, &path.display().to_string())
    }

    /// A scenario replaying `trace` over `servers` H100 servers.
    pub fn for_trace(path: &Path, servers: u32, time_scale: f64) -> Result<Scenario, SimError> {
        let name = path
            .file_stem()
            .map_or_else(|| "trace".into(), |s| s.to_string_lossy().into_owned());
        let yaml = format!(
            "name: {name}\ndescription: replay of {path}\nservers: {servers}\nstreams:\n  - kind: trace\n    name: trace\n    path: {path:?}\n    timeScale: {time_scale}\n",
            path = path.display(),
            servers = servers.max(1),
        );
        Self::from_yaml(&yaml, "--trace")
    }

    fn from_spec(
        spec: ScenarioSpec,
        text: &str,
        file: &str,
        embedded: &[(&str, &[u8])],
    ) -> Result<Scenario, SimError> {
        let bad = |field: String, key: &str, reason: String| SimError::Input {
            file: file.to_string(),
            line: locate(text, key),
            field,
            reason,
        };
        let mut engine = EngineConfig::preset(&spec.hardware).ok_or_else(|| {
            bad(
                "hardware".into(),
                "hardware",
                format!(
                    "unknown preset `{}` (known: {})",
                    spec.hardware,
                    EngineConfig::PRESETS.join(", ")
                ),
            )
        })?;
        let o = spec.engine;
        if let Some(v) = o.block_size {
            engine.block_size = v.get();
        }
        if let Some(v) = o.num_gpu_blocks {
            engine.num_gpu_blocks = v.get();
        }
        if let Some(v) = o.max_num_seqs {
            engine.max_num_seqs = v.get();
        }
        if let Some(v) = o.max_num_batched_tokens {
            engine.max_num_batched_tokens = v.get();
        }
        let roles = match &spec.roles {
            Some(r) => r
                .resolve(spec.servers.get())
                .map_err(|reason| bad("roles".into(), "roles", reason))?,
            None => Vec::new(),
        };
        let kv_transfer = spec
            .kv_transfer
            .apply(KvTransfer::for_hardware(&spec.hardware))
            .map_err(|(field, reason)| {
                bad(format!("kvTransfer.{field}"), "kvTransfer", reason.into())
            })?;
        if !(spec.request_timeout_s.is_finite() && spec.request_timeout_s > 0.0) {
            return Err(bad(
                "requestTimeoutS".into(),
                "requestTimeoutS",
                "must be a positive number of seconds".into(),
            ));
        }
        if let Some(o) = &spec.objectives {
            let missing = match (o.ttft_ms, o.tpot_ms) {
                (None, _) => Some("ttftMs"),
                (_, None) => Some("tpotMs"),
                _ => None,
            };
            if let Some(key) = missing {
                return Err(bad(
                    format!("objectives.{key}"),
                    "objectives",
                    "a scenario's objectives state both `ttftMs` and `tpotMs`".into(),
                ));
            }
            if let Err((key, reason)) = o.validate() {
                return Err(bad(format!("objectives.{key}"), "objectives", reason));
            }
        }
        if spec.streams.is_empty() {
            return Err(bad(
                "streams".into(),
                "streams",
                "at least one stream is required".into(),
            ));
        }
        let base = Path::new(file).parent().map(Path::to_path_buf);
        let mut streams = Vec::new();
        let mut slos_seen = 0;
        for (i, s) in spec.streams.into_iter().enumerate() {
            let field = |f: &str| format!("streams[{i}].{f}");
            let name = s.name.clone().unwrap_or_else(|| {
                format!(
                    "{}-{i}",
                    serde_json::to_value(s.kind)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default()
                )
            });
            if !(s.start_s.is_finite() && s.start_s >= 0.0) {
                return Err(bad(field("startS"), "startS", "must be ≥ 0".into()));
            }
            if !(s.think_time_s.is_finite() && s.think_time_s >= 0.0) {
                return Err(bad(field("thinkTimeS"), "thinkTimeS", "must be ≥ 0".into()));
            }
            if let Some(slo) = &s.slo {
                if let Err((key, reason)) = slo.validate() {
                    let at = if key == "slo" {
                        field("slo")
                    } else {
                        field(&format!("slo.{key}"))
                    };
                    return Err(SimError::Input {
                        file: file.to_string(),
                        line: locate_nth(text, "slo", slos_seen),
                        field: at,
                        reason: format!("stream `{name}`: {reason}"),
                    });
                }
                slos_seen += 1;
            }
            let mut trace = Vec::new();
            let mut load = None;
            let end_s = if s.kind == StreamKind::Trace {
                let Some(path) = &s.path else {
                    return Err(bad(
                        field("path"),
                        "kind",
                        "a trace stream needs a path".into(),
                    ));
                };
                if !(s.time_scale.is_finite() && s.time_scale > 0.0) {
                    return Err(bad(field("timeScale"), "timeScale", "must be > 0".into()));
                }
                if !(s.timestamp_resolution_ms.is_finite() && s.timestamp_resolution_ms >= 0.0) {
                    return Err(bad(
                        field("timestampResolutionMs"),
                        "timestampResolutionMs",
                        "must be ≥ 0".into(),
                    ));
                }
                trace = if let Some((name, bytes)) = embedded
                    .iter()
                    .find(|(n, _)| Path::new(n) == path.as_path())
                {
                    let name = format!("<built-in {name}>");
                    parse_trace(&trace_text(bytes, &name)?, &name)?
                } else {
                    let resolved = match (&base, path.is_relative()) {
                        (Some(dir), true) if !dir.as_os_str().is_empty() => dir.join(path),
                        _ => path.clone(),
                    };
                    let name = resolved.display().to_string();
                    let bytes = std::fs::read(&resolved).map_err(|source| SimError::Io {
                        path: name.clone(),
                        source,
                    })?;
                    parse_trace(&trace_text(&bytes, &name)?, &name)?
                };
                s.end_s.unwrap_or(f64::INFINITY)
            } else {
                if s.timestamp_resolution_ms != 0.0 {
                    return Err(bad(
                        field("timestampResolutionMs"),
                        "timestampResolutionMs",
                        "only for trace streams".into(),
                    ));
                }
                load = Some(match s.load.unwrap_or_default() {
                    LoadSpec {
                        closed: Some(c),
                        rate: None,
                    } => Load::Closed(c),
                    LoadSpec {
                        closed: None,
                        rate: Some(r),
                    } => {
                        if !(r.is_finite() && r > 0.0) {
                            return Err(bad(field("load.rate"), "rate", "must be > 0".into()));
                        }
                        Load::Rate(r)
                    }
                    _ => {
                        return Err(bad(
                            field("load"),
                            "kind",
                            "required: exactly one of { closed: N } or { rate: R }".into(),
                        ));
                    }
                });
                match s.end_s {
                    Some(e) if e.is_finite() && e > s.start_s => e,
                    _ => {
                        return Err(bad(
                            field("endS"),
                            "endS",
                            "required, and after startS".into(),
                        ));
                    }
                }
            };
            let prefix_key = super::tokens::name_id(s.prefix_key.as_deref().unwrap_or(&name));
            streams.push(Stream {
                name,
                spec: s,
                load,
                prefix_key,
                trace,
                end_s,
            });
        }
        Ok(Scenario {
            name: spec.name,
            description: spec.description,
            servers: spec.servers.get(),
            hardware: spec.hardware,
            engine,
            roles,
            kv_transfer,
            scrape_interval_ms: spec.scrape_interval_ms,
            tick_ms: spec.tick_ms.get(),
            request_timeout_s: spec.request_timeout_s,
            objectives: spec.objectives,
            streams,
        })
    }
}

/// The 1-based line where `key:` first appears, 0 when it does not.
fn locate(text: &str, key: &str) -> usize {
    locate_nth(text, key, 0)
}

/// The 1-based line where `key:` appears for the `n`-th time (from 0), 0 when it does not.
fn locate_nth(text: &str, key: &str, n: usize) -> usize {
    let needle = format!("{key}:");
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.trim_start().trim_start_matches("- ").starts_with(&needle))
        .nth(n)
        .map_or(0, |(i, _)| i + 1)
}

fn yaml_error(e: &serde_norway::Error, file: &str) -> SimError {
    SimError::yaml_input(file, e.location().map_or(0, |l| l.line()), e.to_string())
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
