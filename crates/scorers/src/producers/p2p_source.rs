//! `p2p-source-producer`: names a server that already holds more of the prompt's KV cache than
//! the server about to compute it, so llm-d's routing sidecar pulls those blocks over the P2P
//! connector instead of recomputing them
//! ([`KV_CACHE_SOURCE_HEADER`](shepherd_scheduler_core::disagg::KV_CACHE_SOURCE_HEADER),
//! `x-kv-cache-source-host-port`).
//!
//! Once per stage of a request, after the pick, it reads the prefix match of a prefix-cache
//! producer (`prefixMatchInfoProducerName`) for every endpoint of the pool; among those within
//! one block of the most cached prompt tokens it samples one, weighted by
//! `1 / (1 + waiting requests)`, with the FNV-1a hash of the request id as the sampling
//! coordinate (so a widely cached prefix does not send every pull to one server, and a
//! request always samples the same). The header is set only when that server out-caches the
//! computing server by at least `minCachedTokenDelta` tokens (and is not the computing server
//! itself). The computing server is the prefill pick of a disaggregated request, else the
//! destination. Any value a client sent is removed by the adapters.
//!
//! ## Parameters
//!
//! | parameter | default | meaning |
//! |---|---|---|
//! | `prefixMatchInfoProducerName` | `approx-prefix-cache-producer` | the producer whose match is read (created with its defaults when the config has none, as upstream's default producer) |
//! | `minCachedTokenDelta` | 1 | cached prompt tokens the source must hold beyond the computing server; must be ≥ 1 |
//! | `prefillProfileName` | `prefill` | upstream's name of the prefill profile; Shepherd takes the computing server from the profile handler's prefill stage whatever its profile is called (a warning when set otherwise) |
//!
//! Differences from upstream: Shepherd's indexes hold no per-tier counts (the precise index
//! holds GPU blocks), so every cached block counts where upstream counts only CPU-tier blocks
//! when its producer reports tiers; the candidates are the pool's endpoints.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::config::build_scheduler_in;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::builtin_registry;
//!
//! let config = EndpointPickerConfig::from_yaml("
//! plugins:
//! - type: approx-prefix-cache-producer
//! - type: p2p-source-producer
//!   parameters: {prefixMatchInfoProducerName: approx-prefix-cache-producer, minCachedTokenDelta: 64}
//! - type: prefix-cache-scorer
//! - type: active-request-scorer
//! - type: max-score-picker
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - {pluginRef: prefix-cache-scorer, weight: 0}
//!   - {pluginRef: active-request-scorer, weight: 1}
//!   - {pluginRef: max-score-picker}
//! ").unwrap();
//! let shared = SharedState::new(Arc::new(Pool::new()));
//! shared.pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
//! let scheduler = build_scheduler_in(&config, &builtin_registry(), &shared).unwrap();
//! let prompt = Prompt::Text("x".repeat(4096)); // 16 blocks of 64 pseudo tokens
//! // The first request fills one server's cache; while it runs, the second goes to the other
//! // server, which is told to pull the prompt's blocks from the first.
//! let first = scheduler.schedule(&InferenceRequest::new("a", "m", prompt.clone())).unwrap();
//! assert_eq!(first.kv_cache_source(), None);
//! let second = scheduler.schedule(&InferenceRequest::new("b", "m", prompt)).unwrap();
//! assert_ne!(second.primary().address(), first.primary().address());
//! assert_eq!(second.kv_cache_source(), Some(first.primary().address()));
//! # first.finish(Completion::success(None));
//! # second.finish(Completion::success(None));
//! ```

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::disagg::KvCacheSource;
use shepherd_scheduler_core::endpoint::{Endpoint, Pool};
use shepherd_scheduler_core::plugin::{CycleState, PickHook, PluginInstance};

use super::approx_prefix;
use super::link::ProducerLink;

/// Registry type name.
pub const TYPE_NAME: &str = "p2p-source-producer";

/// Upstream's default prefill profile name.
pub const DEFAULT_PREFILL_PROFILE: &str = "prefill";

/// The `p2p-source-producer` parameters, as upstream (strictly decoded).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct P2pSourceParameters {
    /// The prefix-cache producer whose match is read.
    pub prefix_match_info_producer_name: Option<String>,
    /// Cached prompt tokens the source must hold beyond the computing server (default 1).
    pub min_cached_token_delta: Option<i64>,
    /// Upstream's prefill profile name (default `prefill`).
    pub prefill_profile_name: Option<String>,
}

impl P2pSourceParameters {
    /// `minCachedTokenDelta`, checked as upstream checks it (≥ 1).
    pub fn min_delta(&self) -> Result<u64, PluginError> {
        let delta = self.min_cached_token_delta.unwrap_or(1);
        u64::try_from(delta)
            .ok()
            .filter(|d| *d >= 1)
            .ok_or_else(|| {
                PluginError::invalid(
                    "minCachedTokenDelta",
                    format!("{TYPE_NAME}: minCachedTokenDelta must be >= 1, got {delta}"),
                )
            })
    }

    /// What Shepherd does differently with these parameters, for the start-up log.
    pub fn warnings(&self) -> Vec<String> {
        match self.prefill_profile_name.as_deref() {
            Some(name) if !name.is_empty() && name != DEFAULT_PREFILL_PROFILE => vec![format!(
                "`prefillProfileName` ({name:?}) is not needed: the computing server is the \
                 profile handler's prefill pick whatever its profile is called"
            )],
            _ => Vec::new(),
        }
    }
}

/// A server within reach of the most cached prefix, and how much of the prompt it holds.
#[derive(Debug, Clone, Copy)]
struct Held<'a> {
    endpoint: &'a Arc<Endpoint>,
    tokens: u64,
}

/// The producer: a pick hook in every profile.
#[derive(Debug)]
pub struct P2pSourceProducer {
    link: ProducerLink,
    pool: Arc<Pool>,
    min_delta: u64,
}

impl P2pSourceProducer {
    /// The source for the request of `cycle`, computed on `picked` (see the module docs).
    fn source(&self, cycle: &mut CycleState<'_>, picked: &Arc<Endpoint>) -> Option<String> {
        let request = cycle.request;
        let id = if request.id.is_empty() {
            cycle.request_id()
        } else {
            request.id.as_str()
        };
        let fraction = spread_fraction(id);
        let producer = self.link.get();
        let info = producer.produce(cycle)?;
        let block = info.block_size_tokens() as u64;
        let snapshot = self.pool.load();
        let cached = |e: &Endpoint| info.match_blocks(e) as u64 * block;
        let held: Vec<Held<'_>> = snapshot
            .endpoints()
            .iter()
            .map(|endpoint| Held {
                endpoint,
                tokens: cached(endpoint),
            })
            .filter(|h| h.tokens > 0)
            .collect();
        let most = held.iter().map(|h| h.tokens).max()?;
        let best = sample(&held, most, block, fraction)?;
        let computing = cached(picked);
        if best.endpoint.address() == picked.address()
            || best.tokens.saturating_sub(computing) < self.min_delta
        {
            return None;
        }
        Some(best.endpoint.address().to_string())
    }
}

/// Among `held` within one `block` of `most`, the one `fraction` of the way through the
/// weights `1 / (1 + waiting)`.
fn sample<'a>(held: &[Held<'a>], most: u64, block: u64, fraction: f64) -> Option<Held<'a>> {
    let band: Vec<(Held<'a>, f64)> = held
        .iter()
        .filter(|h| h.tokens + block >= most)
        .map(|h| {
            let waiting = h.endpoint.load_metrics().waiting;
            (*h, 1.0 / (1.0 + f64::from(waiting)))
        })
        .collect();
    let total: f64 = band.iter().map(|(_, w)| w).sum();
    let mut target = fraction * total;
    for (h, w) in &band {
        if target < *w {
            return Some(*h);
        }
        target -= w;
    }
    band.last().map(|(h, _)| *h)
}

/// The request id's FNV-1a 32-bit hash over `2^32`: a coordinate in `[0, 1)`, the same for
/// every pick of the request.
fn spread_fraction(request_id: &str) -> f64 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in request_id.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    f64::from(hash) / 4_294_967_296.0
}

impl PickHook for P2pSourceProducer {
    fn on_pick(&self, cycle: &mut CycleState<'_>, picked: &Arc<Endpoint>) {
        if let Some(source) = self.source(cycle, picked) {
            cycle.extensions.insert(KvCacheSource(source));
        }
    }
}

/// Builds a `p2p-source-producer`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let params: P2pSourceParameters = args.parse()?;
    let min_delta = params.min_delta()?;
    let producer = params
        .prefix_match_info_producer_name
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| approx_prefix::TYPE_NAME.to_string());
    let hook = Arc::new(P2pSourceProducer {
        link: ProducerLink::new(args.resources, args.pool, vec![producer], None),
        pool: Arc::clone(args.pool),
        min_delta,
    });
    Ok(PluginInstance::default().with_every_profile_hook(hook))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn params(json: serde_json::Value) -> Result<P2pSourceParameters, String> {
        serde_json::from_value(json).map_err(|e| e.to_string())
    }

    #[test]
    fn upstreams_parameters_and_checks() {
        // README.md's example.
        let readme = params(serde_json::json!({
            "prefixMatchInfoProducerName": "precise-prefix-cache-producer",
            "prefillProfileName": "prefill",
            "minCachedTokenDelta": 1
        }))
        .unwrap();
        assert_eq!(readme.min_delta().unwrap(), 1);
        assert!(readme.warnings().is_empty());
        // producer_test.go: the default delta is 1; below 1 is refused; unknown keys too.
        assert_eq!(
            params(serde_json::json!({})).unwrap().min_delta().unwrap(),
            1
        );
        for bad in [0, -3] {
            let err = params(serde_json::json!({"minCachedTokenDelta": bad}))
                .unwrap()
                .min_delta()
                .unwrap_err()
                .to_string();
            assert!(err.contains("must be >= 1"), "{err}");
        }
        assert!(params(serde_json::json!({"minCachedTokens": 1})).is_err());
        let renamed = params(serde_json::json!({"prefillProfileName": "my-prefill"})).unwrap();
        assert!(renamed.warnings()[0].contains("my-prefill"));
    }

    #[test]
    fn the_spread_coordinate_is_fnv1a() {
        // FNV-1a 32 of "" is the offset basis; of "a" is 0xe40c292c.
        assert_eq!(
            spread_fraction(""),
            f64::from(0x811c_9dc5_u32) / 4_294_967_296.0
        );
        assert_eq!(
            spread_fraction("a"),
            f64::from(0xe40c_292c_u32) / 4_294_967_296.0
        );
        assert!((0.0..1.0).contains(&spread_fraction("request-123")));
    }

    /// Upstream's test blocks: 16 tokens.
    const BLOCK: u64 = 16;

    /// Endpoints at `10.0.0.i:8080` with `(cached blocks, waiting)`.
    fn pool(specs: &[(u64, u32)]) -> (Vec<Arc<Endpoint>>, Vec<u64>) {
        let pool = Pool::new();
        let endpoints: Vec<Arc<Endpoint>> = specs
            .iter()
            .enumerate()
            .map(|(i, (_, waiting))| {
                let e = pool.add(&format!("10.0.0.{}:8080", i + 1));
                e.set_metrics(shepherd_scheduler_core::endpoint::EndpointMetrics {
                    waiting: *waiting,
                    ..Default::default()
                });
                e
            })
            .collect();
        (endpoints, specs.iter().map(|(b, _)| b * BLOCK).collect())
    }

    /// How often each address is sampled over `n` request ids `{prefix}-{i}`.
    fn shares(specs: &[(u64, u32)], prefix: &str, n: usize) -> Vec<(String, usize)> {
        let (endpoints, tokens) = pool(specs);
        let held: Vec<Held<'_>> = endpoints
            .iter()
            .zip(&tokens)
            .map(|(endpoint, tokens)| Held {
                endpoint,
                tokens: *tokens,
            })
            .collect();
        let most = *tokens.iter().max().unwrap();
        let mut counts: Vec<(String, usize)> = endpoints
            .iter()
            .map(|e| (e.address().to_string(), 0))
            .collect();
        for i in 0..n {
            let best = sample(
                &held,
                most,
                BLOCK,
                spread_fraction(&format!("{prefix}-{i}")),
            )
            .unwrap();
            let at = endpoints
                .iter()
                .position(|e| e.address() == best.endpoint.address())
                .unwrap();
            counts[at].1 += 1;
        }
        counts
    }

    #[test]
    fn shares_by_inverse_queue_weight() {
        // TestProduce_SharesByInverseQueueWeight: weights 1/13, 1/3, 1/8.
        let c = shares(&[(3, 12), (3, 2), (3, 7)], "req", 400);
        assert!(c[1].1 > c[2].1 && c[2].1 > c[0].1 && c[0].1 > 0, "{c:?}");
    }

    #[test]
    fn a_near_tie_does_not_herd() {
        // TestProduce_NearTie_NoHerding: weights 1 and 0.5.
        let c = shares(&[(3, 0), (3, 1)], "near", 600);
        assert!(c[0].1 > c[1].1, "{c:?}");
        assert!(c[1].1 > 600 / 6, "{c:?}");
    }

    #[test]
    fn beyond_the_band_wins_over_idle() {
        // TestProduce_BeyondBandWinsOverIdle: 5 blocks at queue 20 beat 3 blocks idle.
        let c = shares(&[(5, 20), (3, 0)], "req-strict", 50);
        assert_eq!(c[1].1, 0, "{c:?}");
    }

    #[test]
    fn one_block_short_shares_by_queue() {
        // TestProduce_OneBlockShort_SharesByQueue: weights 1/21 and 1.
        let c = shares(&[(4, 20), (3, 0)], "band", 400);
        assert!(c[1].1 > c[0].1 && c[0].1 > 0, "{c:?}");
    }

    #[test]
    fn equal_queues_spread_by_request_id_and_repeat() {
        // TestProduce_EqualQueues_SpreadByRequestID.
        let c = shares(&[(3, 0), (3, 0), (3, 0)], "req", 64);
        assert!(c.iter().all(|(_, n)| *n > 0), "{c:?}");
        assert_eq!(spread_fraction("req-7"), spread_fraction("req-7"));
    }
}
