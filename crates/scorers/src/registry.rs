//! The registry of every built-in plugin type.

use shepherd_scheduler_core::config::Registry;

use crate::admitters::{latency_slo, probabilistic};
use crate::attributes::{agent_identity, session_id};
use crate::conformance::{header_filter, served_verifier};
use crate::disagg::{
    data_parallel, deciders, header_profile_handler, load_decider, pd_profile_handler,
    profile_handler,
};
use crate::filters::endpoint_attribute as attribute_filter;
use crate::filters::lora_affinity as lora_filter;
use crate::filters::session_affinity as session_filter;
use crate::filters::{by_label, label_selector, prefix_affinity, slo_headroom_tier, utilization};
use crate::multicluster::{delegating as mc, scorers as mc_scorers};
use crate::multimodal::{producer as mm_producer, scorer as mm_scorer};
use crate::pickers::{max_score, random, weighted_random};
use crate::prefix_cache;
use crate::producers::{
    approx_prefix, burst_prefix, inflight_load, p2p_source, precise_prefix, predicted_latency,
    token,
};
use crate::scorers::{
    active_request, context_length, endpoint_attribute, header_label_affinity, hot_prefix,
    kv_cache, latency, load_aware, lora_affinity, no_hit_lru, prefill_duty, prefill_load, queue,
    rendezvous, running_requests, session_affinity, slo_class, token_load,
};
use crate::screener::rollout;
use crate::topology::{
    extractor as topology_extractor, filter as topology_filter, scorer as topology_scorer,
};

/// A [`Registry`] holding every built-in plugin type under the llm-d router's (formerly the
/// Gateway API Inference Extension's) type names:
///
/// - producers: `approx-prefix-cache-producer`, `precise-prefix-cache-producer`,
///   `predicted-latency-producer`, `token-producer` (also `tokenizer`);
/// - scorers: `prefix-cache-scorer`, `kv-cache-utilization-scorer`, `queue-scorer`,
///   `running-requests-size-scorer`, `active-request-scorer`, `load-aware-scorer`,
///   `no-hit-lru-scorer`, `lora-affinity-scorer`, `session-affinity-scorer`, `latency-scorer`,
///   and Shepherd's `prefill-load-scorer`, `prefill-duty-scorer`, `rendezvous-affinity-scorer`,
///   `hot-prefix-scorer` and `slo-class-scorer`; `header-label-affinity-scorer`, `endpoint-attribute-scorer`;
/// - filters: `lora-affinity-filter`, `label-selector-filter` (also `by-label-selector`),
///   `by-label`, `decode-filter`, `prefill-filter`, `encode-filter`,
///   `prefix-cache-affinity-filter`, `slo-headroom-tier-filter`, `utilization-filter`,
///   `endpoint-attribute-filter`, `session-affinity-filter`;
/// - request attributes: `session-id-producer`, `agent-identity`;
/// - admitters: `latency-slo-admitter`, `probabilistic-admitter`;
/// - profile handlers: `header-profile-handler`, the deprecated `data-parallel-profile-handler`;
/// - disaggregation: `disagg-profile-handler` (and its deprecated alias `pd-profile-handler`), `prefix-based-pd-decider`,
///   `always-disagg-pd-decider`, `prefill-load-pd-decider`, `always-disagg-multimodal-decider`;
/// - pickers: `max-score-picker`, `random-picker`, `weighted-random-picker`;
/// - multimodal: `mm-embeddings-cache-producer`, `mm-embeddings-cache-scorer`;
/// - topology: `topology-extractor`, `topology-affinity-filter`, `topology-affinity-scorer`;
/// - multi-cluster: `multicluster-session-affinity-filter`, `multicluster-queue-scorer`,
///   `multicluster-kv-cache-utilization-scorer`, `multicluster-prefix-cache-scorer`,
///   `multicluster-approx-prefix-cache-producer`;
/// - conformance tests: `header-based-testing-filter`, `destination-endpoint-served-verifier`;
/// - screeners: `disaggregatedset-rollout-screener`.
///
/// Earlier names of renamed types load too: `kv-cache-scorer`, and the short names of the
/// first config-file releases (`prefix-cache`, `kv-cache`, `queue`, `max-score`, `random`).
///
/// A plugin author adds a type with one more call:
///
/// ```
/// use std::sync::Arc;
/// use shepherd_scheduler_core::plugin::PluginInstance;
/// use shepherd_scorers::{builtin_registry, scorers::QueueScorer};
///
/// let mut registry = builtin_registry();
/// registry.register("my-queue-scorer", |_args| Ok(PluginInstance::scorer(Arc::new(QueueScorer))));
/// assert!(registry.contains("my-queue-scorer"));
/// assert!(registry.contains("prefix-cache-scorer"));
/// ```
pub fn builtin_registry() -> Registry {
    let mut registry = Registry::new();
    registry
        .register(prefix_cache::TYPE_NAME, prefix_cache::factory)
        .register(approx_prefix::TYPE_NAME, approx_prefix::factory)
        .register(precise_prefix::TYPE_NAME, precise_prefix::factory)
        .register(
            precise_prefix::SCORER_TYPE_NAME,
            precise_prefix::scorer_factory,
        )
        .register(token::TYPE_NAME, token::factory)
        .register(token::LEGACY_TYPE_NAME, token::factory)
        .register(kv_cache::TYPE_NAME, kv_cache::factory)
        .register(kv_cache::LEGACY_TYPE_NAME, kv_cache::factory)
        .register(queue::TYPE_NAME, queue::factory)
        .register(running_requests::TYPE_NAME, running_requests::factory)
        .register(active_request::TYPE_NAME, active_request::factory)
        .register(load_aware::TYPE_NAME, load_aware::factory)
        .register(no_hit_lru::TYPE_NAME, no_hit_lru::factory)
        .register(prefill_load::TYPE_NAME, prefill_load::factory)
        .register(token_load::TYPE_NAME, token_load::factory)
        .register(context_length::TYPE_NAME, context_length::factory)
        .register(inflight_load::TYPE_NAME, inflight_load::factory)
        .register(p2p_source::TYPE_NAME, p2p_source::factory)
        .register(burst_prefix::TYPE_NAME, burst_prefix::factory)
        .register(prefill_duty::TYPE_NAME, prefill_duty::factory)
        .register(lora_affinity::TYPE_NAME, lora_affinity::factory)
        .register(session_affinity::TYPE_NAME, session_affinity::factory)
        .register(rendezvous::TYPE_NAME, rendezvous::factory)
        .register(hot_prefix::TYPE_NAME, hot_prefix::factory)
        .register(slo_class::TYPE_NAME, slo_class::factory)
        .register(latency::TYPE_NAME, latency::factory)
        .register(predicted_latency::TYPE_NAME, predicted_latency::factory)
        .register(slo_headroom_tier::TYPE_NAME, slo_headroom_tier::factory)
        .register(latency_slo::TYPE_NAME, latency_slo::factory)
        .register(probabilistic::TYPE_NAME, probabilistic::factory)
        .register(utilization::TYPE_NAME, utilization::factory)
        .register(session_filter::TYPE_NAME, session_filter::factory)
        .register(session_id::TYPE_NAME, session_id::factory)
        .register(agent_identity::TYPE_NAME, agent_identity::factory)
        .register(endpoint_attribute::TYPE_NAME, endpoint_attribute::factory)
        .register(attribute_filter::TYPE_NAME, attribute_filter::factory)
        .register(
            header_label_affinity::TYPE_NAME,
            header_label_affinity::factory,
        )
        .register(profile_handler::TYPE_NAME, profile_handler::factory)
        .register(pd_profile_handler::TYPE_NAME, pd_profile_handler::factory)
        .register(
            header_profile_handler::TYPE_NAME,
            header_profile_handler::factory,
        )
        .register(data_parallel::TYPE_NAME, data_parallel::factory)
        .register(
            deciders::PREFIX_BASED_TYPE_NAME,
            deciders::prefix_based_factory,
        )
        .register(deciders::ALWAYS_TYPE_NAME, deciders::always_factory)
        .register(load_decider::TYPE_NAME, load_decider::factory)
        .register(deciders::MULTIMODAL_TYPE_NAME, deciders::multimodal_factory)
        .register(lora_filter::TYPE_NAME, lora_filter::factory)
        .register(label_selector::TYPE_NAME, label_selector::factory)
        .register(
            label_selector::DEPRECATED_TYPE_NAME,
            label_selector::factory,
        )
        .register(by_label::TYPE_NAME, by_label::factory)
        .register(by_label::DECODE_TYPE_NAME, by_label::decode_factory)
        .register(by_label::PREFILL_TYPE_NAME, by_label::prefill_factory)
        .register(by_label::ENCODE_TYPE_NAME, by_label::encode_factory)
        .register(prefix_affinity::TYPE_NAME, prefix_affinity::factory)
        .register(max_score::TYPE_NAME, max_score::factory)
        .register(random::TYPE_NAME, random::factory)
        .register(weighted_random::TYPE_NAME, weighted_random::factory)
        .register(mm_producer::TYPE_NAME, mm_producer::factory)
        .register(mm_scorer::TYPE_NAME, mm_scorer::factory)
        .register(topology_extractor::TYPE_NAME, topology_extractor::factory)
        .register(topology_filter::TYPE_NAME, topology_filter::factory)
        .register(topology_scorer::TYPE_NAME, topology_scorer::factory)
        .register(
            mc::SESSION_AFFINITY_FILTER_TYPE_NAME,
            mc::session_affinity_filter_factory,
        )
        .register(
            mc::PREFIX_CACHE_SCORER_TYPE_NAME,
            mc::prefix_cache_scorer_factory,
        )
        .register(
            mc::APPROX_PREFIX_PRODUCER_TYPE_NAME,
            mc::approx_prefix_producer_factory,
        )
        .register(mc_scorers::QUEUE_TYPE_NAME, mc_scorers::queue_factory)
        .register(mc_scorers::KV_CACHE_TYPE_NAME, mc_scorers::kv_cache_factory)
        .register(header_filter::TYPE_NAME, header_filter::factory)
        .register(served_verifier::TYPE_NAME, served_verifier::factory)
        .register(rollout::TYPE_NAME, rollout::factory);
    for (old, factory) in OLD_SHORT_NAMES {
        registry.register(*old, *factory);
    }
    registry
}

type Factory = fn(
    &shepherd_scheduler_core::config::PluginArgs<'_>,
) -> Result<
    shepherd_scheduler_core::plugin::PluginInstance,
    shepherd_scheduler_core::config::PluginError,
>;

/// Short type names used by the first releases that loaded plugins from a config file, before
/// the `-scorer` / `-picker` suffixes.
const OLD_SHORT_NAMES: &[(&str, Factory)] = &[
    ("prefix-cache", prefix_cache::factory),
    ("kv-cache", kv_cache::factory),
    ("queue", queue::factory),
    ("max-score", max_score::factory),
    ("random", random::factory),
];

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn every_upstream_name_and_alias_is_registered() {
        let registry = builtin_registry();
        for name in [
            "approx-prefix-cache-producer",
            "token-producer",
            "tokenizer",
            "prefix-cache-scorer",
            "kv-cache-utilization-scorer",
            "kv-cache-scorer",
            "queue-scorer",
            "running-requests-size-scorer",
            "active-request-scorer",
            "load-aware-scorer",
            "no-hit-lru-scorer",
            "lora-affinity-scorer",
            "session-affinity-scorer",
            "lora-affinity-filter",
            "label-selector-filter",
            "by-label-selector",
            "by-label",
            "decode-filter",
            "prefill-filter",
            "encode-filter",
            "prefix-cache-affinity-filter",
            "max-score-picker",
            "random-picker",
            "weighted-random-picker",
            "prefix-cache",
            "kv-cache",
            "queue",
            "max-score",
            "random",
        ] {
            assert!(registry.contains(name), "{name}");
        }
    }
}
