//! What a run measures: one [`RequestRecord`] per request, how it ended ([`Outcome`]), the
//! run's totals and time series ([`RunResult`]), and what each picker replica did
//! ([`ReplicaCounts`]).

use shepherd_adaptive::AdaptiveSample;
use shepherd_scheduler_core::flow::DropReason;
use shepherd_scorers::latency::ErrorTally;

use super::PickCost;
use crate::engine::EngineStats;

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Still running when the run ended (never happens in a finished run).
    Pending,
    /// Answered in full.
    Completed,
    /// Abandoned after the scenario's request timeout.
    TimedOut,
    /// Refused: no endpoint could be picked, or the prompt can never fit a server.
    Dropped,
    /// Refused by flow control before routing: shed or queue full (429), or expired in the
    /// queue (503).
    Rejected(DropReason),
}

/// Everything measured about one request. Times in nanoseconds of simulated time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestRecord {
    /// Stream index.
    pub stream: u32,
    /// Server index (`u32::MAX` when dropped before a pick).
    pub server: u32,
    /// Arrival at the router.
    pub arrival: u64,
    /// First put in a batch.
    pub first_scheduled: Option<u64>,
    /// First output token.
    pub first_token: Option<u64>,
    /// Handed to a server (after any wait in the flow-control queue).
    pub dispatched: Option<u64>,
    /// End (completion, timeout or drop).
    pub end: Option<u64>,
    /// Prompt tokens.
    pub prompt_tokens: u32,
    /// Output tokens asked for.
    pub output_tokens: u32,
    /// Prompt tokens served from the prefix cache.
    pub cached_tokens: u32,
    /// Times preempted.
    pub preemptions: u32,
    /// How it ended.
    pub outcome: Outcome,
    /// The server that prefilled it, when it was disaggregated (`server` then decoded it);
    /// `None` when it was served aggregated (also after a lost prefill).
    pub prefill_server: Option<u32>,
    /// Prompt tokens whose KV moved from the prefill server to the decode server.
    pub transferred_tokens: u32,
}

/// What one picker replica did in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaCounts {
    /// Requests it picked a server for.
    pub picks: u64,
    /// Of those, requests whose end (completion, failure or timeout) it was told.
    pub completions: u64,
    /// Requests its pool still counted in flight when the run ended (0 in a finished run).
    pub in_flight_at_end: u64,
}

/// The raw outcome of one run.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// Policy name.
    pub policy: String,
    /// One record per request, in arrival order.
    pub records: Vec<RequestRecord>,
    /// Per tick: time (ns) and each server's load (running + waiting).
    pub load_series: Vec<(u64, Vec<u32>)>,
    /// Adaptive ticks (empty for static policies).
    pub adaptive_series: Vec<AdaptiveSample>,
    /// Scorer names of the default profile (for the weights plot).
    pub scorer_names: Vec<String>,
    /// Simulated events processed.
    pub events: u64,
    /// Preemptions across servers.
    pub preemptions: u64,
    /// Prompt tokens (first admissions) and of those cached, across servers.
    pub prompt_tokens: u64,
    /// Cached prompt tokens across servers.
    pub cached_tokens: u64,
    /// Prompt tokens an infinite cache would have served (same request order).
    pub ceiling_cached_tokens: u64,
    /// Total prompt tokens offered, for the ceiling.
    pub ceiling_prompt_tokens: u64,
    /// Per picker replica, in order (one for a plain run).
    pub replicas: Vec<ReplicaCounts>,
    /// Wall-clock cost of the routing decisions (not part of any deterministic output).
    pub pick_cost: PickCost,
    /// The prediction errors of the policy's `latency-scorer` models (TTFT, TPOT by load
    /// level), summed over the replicas; `None` without one.
    pub latency_errors: Option<(ErrorTally, ErrorTally)>,
    /// Each server's engine counters at the end, by server index.
    pub server_stats: Vec<EngineStats>,
    /// Requests routed with a prefill stage on another server (prefill/decode
    /// disaggregation).
    pub disaggregated: u64,
    /// Of those, requests served aggregated after all (their prefill server lost the job).
    pub prefill_fallbacks: u64,
    /// Wall-clock seconds the run took (not part of any deterministic output).
    pub wall_seconds: f64,
}
