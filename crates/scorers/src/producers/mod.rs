//! Data producers: plugins that compute, once per request, what other plugins read.
//!
//! | type name | produces | read by |
//! |---|---|---|
//! | `approx-prefix-cache-producer` | each candidate's prefix match ([`PrefixMatchInfo`]) over its [`PrefixProducer`]'s index | `prefix-cache-scorer`, `prefix-cache-affinity-filter`, `no-hit-lru-scorer` |
//! | `precise-prefix-cache-producer` | each candidate's prefix match over the [`PreciseKvEvents`] index its servers' KV-cache events feed | the same consumers |
//! | `inflight-load-producer` | how each endpoint's in-flight tokens are counted ([`inflight_load::InFlightLoad`]: the endpoints' own pending prefill counts) | `token-load-scorer`, `prefix-cache-affinity-filter` |
//! | `burst-prefix-cache-producer` | a full prefix match on the server a burst of one prompt is steered to within a window ([`burst_prefix`]) | `prefix-cache-scorer` |
//! | `p2p-source-producer` | a server to pull the prompt's cached KV blocks from ([`p2p_source`], the `x-kv-cache-source-host-port` header) | the adapters |
//! | `token-producer` | the request's token ids as the model server sees them ([`TokenProducer`]: a real tokenizer and chat template, or the estimate backend), and its [`TokenCount`] | `precise-prefix-cache-producer`, token-aware plugins |
//!
//! Producers are declared in `plugins`; as upstream, they need not be listed in a scheduling
//! profile. Their consumers find them by name in the shared resources.

pub mod approx_prefix;
pub mod burst_prefix;
mod indexes;
pub mod inflight_load;
mod kv_event_limits;
pub(crate) mod link;
pub mod p2p_source;
pub mod precise_prefix;
mod precise_warnings;
pub mod predicted_latency;
mod prefix_producer;
pub mod token;

pub use approx_prefix::ApproxPrefixParameters;
pub use indexes::approximate_indexes;
pub use precise_prefix::{
    KvEventLimits, KvEventSubscription, PreciseKvEvents, PrecisePrefixParameters,
};
pub use predicted_latency::PredictedLatencyParameters;
pub use prefix_producer::{PrefixMatchInfo, PrefixProducer};
pub use token::{TokenCount, TokenProducer};
