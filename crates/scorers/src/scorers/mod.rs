//! The built-in scorers, one per file.
//!
//! | type name | category | scores |
//! |---|---|---|
//! | `kv-cache-utilization-scorer` | distribution | 1 − KV-cache utilization |
//! | `queue-scorer` | distribution | fewest waiting requests (min-max) |
//! | `running-requests-size-scorer` | distribution | fewest running requests (min-max) |
//! | `active-request-scorer` | distribution | fewest requests in flight from this scheduler: idle 1, busy `(max − n) / max × maxBusyScore` |
//! | `load-aware-scorer` | distribution | 0.5 × (1 − waiting / threshold), empty queue 0.5 |
//! | `no-hit-lru-scorer` | distribution | cold requests: endpoints least recently given a cold request first; warm requests 0.5 |
//! | `prefill-load-scorer` | distribution | shortest expected prefill wait: pending prefill + this request's uncached tokens (relative to the worst) |
//! | `context-length-aware` | affinity (and a filter with `enableFiltering`) | upstream's: the endpoint's `llm-d.ai/context-length-range` label (`min-max` tokens) against the prompt's length: inside scores 0.3–1 (narrow ranges and headroom higher), outside at most 0.3, unlabelled 0.5 |
//! | `token-load-scorer` | distribution | upstream's: `1 − min(load, queueThresholdTokens) / queueThresholdTokens`, load = in-flight tokens (the `inflight-load-producer`'s: pending prefill by default) + this request's uncached tokens there |
//! | `prefill-duty-scorer` | distribution | Shepherd's: least pending prefill averaged over the last `windowMs` (relative to the busiest, at least `scaleTokens`): decodes keep off the servers that have been prefilling |
//! | `latency-scorer` | distribution | lowest predicted TTFT (+ `tpotWeight` × TPOT) from a model learned online from finished requests; neutral until the model is ready |
//! | `lora-affinity-scorer` | affinity | adapter running 1, room to load 0.8, waiting 0.6, else 0 |
//! | `session-affinity-scorer` | affinity | 1 for the endpoint that served the session before |
//! | `hot-prefix-scorer` | affinity | Shepherd's: a prefix with a large share of the work in flight and fewer homes than that share deserves scores its non-holders 1 and its holders 0 (a new home); otherwise neutral |
//! | `slo-class-scorer` | balance | Shepherd's: a request with a TTFT objective of at least `tolerantTtftMs` scores the share of tolerant requests in flight on each candidate (relative to the most), one with a tighter objective the complement; neutral without an objective or tolerant work in flight |
//! | `rendezvous-affinity-scorer` | affinity | Shepherd's: rank of the endpoint in the rendezvous hash of the prompt's first blocks (1 for the home every replica agrees on, down to 0; optional `loadFactor` passes over overloaded homes) |
//!
//! Scorers that read scraped metrics give [`Score::NEUTRAL`](shepherd_scheduler_core::plugin::Score::NEUTRAL)
//! to a candidate whose metrics are stale (older than the cycle's staleness bound, or never
//! scraped): they cannot judge it, and neither reward nor punish it. The breakdown marks such
//! scores as neutral.

pub mod active_request;
pub mod context_length;
pub mod endpoint_attribute;
pub mod header_label_affinity;
pub mod hot_prefix;
pub mod kv_cache;
pub mod latency;
pub mod load_aware;
pub mod lora_affinity;
pub mod no_hit_lru;
mod normalize;
pub mod prefill_duty;
pub mod prefill_load;
pub mod queue;
pub mod rendezvous;
pub mod running_requests;
pub mod session_affinity;
pub mod session_source;
mod session_store;
pub mod slo_class;
pub mod token_load;

pub use active_request::{ActiveRequestParameters, ActiveRequestScorer};
pub use context_length::{ContextLengthAware, ContextLengthParameters};
pub use endpoint_attribute::{EndpointAttributeScorer, EndpointAttributeScorerParameters};
pub use header_label_affinity::{HeaderLabelAffinityParameters, HeaderLabelAffinityScorer};
pub use hot_prefix::{HotPrefixParameters, HotPrefixScorer};
pub use kv_cache::KvCacheUtilizationScorer;
pub use latency::{HeadroomStrategy, LatencyScorer, LatencyScorerParameters};
pub use load_aware::LoadAwareScorer;
pub use lora_affinity::LoraAffinityScorer;
pub use no_hit_lru::NoHitLruScorer;
pub use prefill_duty::{PrefillDutyParameters, PrefillDutyScorer};
pub use prefill_load::PrefillLoadScorer;
pub use queue::QueueScorer;
pub use rendezvous::{RendezvousAffinityScorer, RendezvousParameters};
pub use running_requests::RunningRequestsScorer;
pub use session_affinity::{SessionAffinityParameters, SessionAffinityScorer};
pub use slo_class::{SloClass, SloClassParameters, SloClassScorer};
pub use token_load::{TokenLoadParameters, TokenLoadScorer};
