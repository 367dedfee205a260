//! The registry of every built-in plugin type.

use shepherd_scheduler_core::config::Registry;

use crate::filters::lora_affinity as lora_filter;
use crate::filters::{by_label, label_selector, prefix_affinity};
use crate::pickers::{max_score, random, weighted_random};
use crate::prefix_cache;
use crate::producers::{approx_prefix, token};
use crate::scorers::{
    active_request, kv_cache, load_aware, lora_affinity, no_hit_lru, prefill_load, queue,
    running_requests, session_affinity,
};

/// A [`Registry`] holding every built-in plugin type under the Gateway API Inference
/// Extension's type names:
///
/// - scorers: `prefix-cache-scorer`, `kv-cache-utilization-scorer` (also under its older name
///   `kv-cache-scorer`), `queue-scorer`, `running-requests-size-scorer`,
///   `active-request-scorer`, `prefill-load-scorer`, `lora-affinity-scorer`,
///   `session-affinity-scorer`;
/// - filters: `lora-affinity-filter`;
/// - pickers: `max-score-picker`, `random-picker`, `weighted-random-picker`.
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
        .register(lora_affinity::TYPE_NAME, lora_affinity::factory)
        .register(session_affinity::TYPE_NAME, session_affinity::factory)
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
        .register(weighted_random::TYPE_NAME, weighted_random::factory);
    registry
}
