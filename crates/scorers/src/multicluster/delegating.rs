//! The three multicluster types that are their stock plugin under another name, as upstream
//! (`multicluster.go` beside each stock plugin): over cluster-endpoints the stock behaviour
//! already is the cluster-scoped one.
//!
//! - `multicluster-session-affinity-filter` builds a `session-affinity-filter` (same
//!   parameters, same checks): a session stays on the cluster that served it.
//! - `multicluster-approx-prefix-cache-producer` builds an `approx-prefix-cache-producer`,
//!   kept under its own plugin name: its index records (cluster, block).
//! - `multicluster-prefix-cache-scorer` builds a `prefix-cache-scorer`; a bare one (without
//!   `prefixMatchInfoProducerName`) reads the producer named
//!   `multicluster-approx-prefix-cache-producer` when the config declares one, else one
//!   named `approx-prefix-cache-producer`, else an index of its own.
//!
//! Upstream's 64-token blocks apply: a shared prefix must be about 64 tokens long to match.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::builtin_registry;
//!
//! let config = EndpointPickerConfig::from_yaml("
//! plugins:
//! - type: multicluster-approx-prefix-cache-producer
//! - type: multicluster-prefix-cache-scorer
//! - type: max-score-picker
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - pluginRef: multicluster-prefix-cache-scorer
//!   - pluginRef: max-score-picker
//! ").unwrap();
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["127.0.0.1:8443", "127.0.0.2:8443", "127.0.0.3:8443"]);
//! let scheduler = build_scheduler(&config, &builtin_registry(), pool).unwrap();
//! let prompt = "a system prompt shared by one tenant's requests, long enough to fill blocks ".repeat(20);
//! let first = scheduler
//!     .schedule(&InferenceRequest::new("r0", "m", Prompt::Text(prompt.clone())))
//!     .unwrap()
//!     .primary()
//!     .address()
//!     .to_string();
//! for i in 1..5 {
//!     let request = InferenceRequest::new(format!("r{i}"), "m", Prompt::Text(prompt.clone()));
//!     assert_eq!(scheduler.schedule(&request).unwrap().primary().address(), first);
//! }
//! ```

use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::plugin::PluginInstance;

use crate::filters::session_affinity;
use crate::prefix_cache;
use crate::producers::approx_prefix;

/// Registry type name of the session-affinity filter.
pub const SESSION_AFFINITY_FILTER_TYPE_NAME: &str = "multicluster-session-affinity-filter";

/// Registry type name of the prefix-cache scorer.
pub const PREFIX_CACHE_SCORER_TYPE_NAME: &str = "multicluster-prefix-cache-scorer";

/// Registry type name of the approximate prefix-cache producer.
pub const APPROX_PREFIX_PRODUCER_TYPE_NAME: &str = "multicluster-approx-prefix-cache-producer";

/// Builds a `multicluster-session-affinity-filter` (a `session-affinity-filter`).
pub fn session_affinity_filter_factory(
    args: &PluginArgs<'_>,
) -> Result<PluginInstance, PluginError> {
    session_affinity::factory(args)
}

/// Builds a `multicluster-prefix-cache-scorer` (a `prefix-cache-scorer`).
pub fn prefix_cache_scorer_factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    prefix_cache::factory_linking(
        args,
        &[APPROX_PREFIX_PRODUCER_TYPE_NAME, approx_prefix::TYPE_NAME],
    )
}

/// Builds a `multicluster-approx-prefix-cache-producer` (an `approx-prefix-cache-producer`).
pub fn approx_prefix_producer_factory(
    args: &PluginArgs<'_>,
) -> Result<PluginInstance, PluginError> {
    approx_prefix::factory(args)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::Arc;

    use shepherd_scheduler_core::prelude::*;
    use shepherd_scheduler_core::shared::SharedState;

    use super::*;
    use crate::builtin_registry;
    use crate::producers::PrefixProducer;

    // sessionaffinity/multicluster_test.go: the factory builds the stock filter (with no
    // parameters, as upstream's test).
    #[test]
    fn the_session_filter_is_the_stock_filter() {
        let shared = SharedState::new(Arc::new(Pool::new()));
        let none = serde_json::Value::Null;
        let args = PluginArgs::new("mc", SESSION_AFFINITY_FILTER_TYPE_NAME, &none, &shared, 1);
        let plugin = session_affinity_filter_factory(&args).unwrap();
        assert!(plugin.as_filter().is_some());
        assert!(plugin.as_pick_hook().is_some());
        // The stock filter's checks apply.
        let bad = serde_json::json!({"strategy": "no-such-strategy"});
        let args = PluginArgs::new("mc", SESSION_AFFINITY_FILTER_TYPE_NAME, &bad, &shared, 1);
        assert!(session_affinity_filter_factory(&args).is_err());
    }

    // prefix/multicluster_test.go and approximateprefix/multicluster_test.go: the factories
    // build the stock scorer and producer; the producer is kept under its own name.
    #[test]
    fn the_prefix_scorer_and_producer_are_the_stock_ones() {
        let shared = SharedState::new(Arc::new(Pool::new()));
        let none = serde_json::Value::Null;
        let args = PluginArgs::new("mc", PREFIX_CACHE_SCORER_TYPE_NAME, &none, &shared, 1);
        assert!(
            prefix_cache_scorer_factory(&args)
                .unwrap()
                .as_scorer()
                .is_some()
        );
        let args = PluginArgs::new(
            "mc-producer",
            APPROX_PREFIX_PRODUCER_TYPE_NAME,
            &none,
            &shared,
            1,
        );
        approx_prefix_producer_factory(&args).unwrap();
        assert!(
            shared
                .resources
                .get::<PrefixProducer>("mc-producer")
                .is_some()
        );
    }

    // A session pinned to a cluster stays there (the filter over cluster-endpoints).
    #[test]
    fn a_session_stays_on_its_cluster() {
        let config = EndpointPickerConfig::from_yaml(
            "plugins:\n- type: multicluster-session-affinity-filter\n  name: session-affinity\n  parameters: {strategy: session_id}\n- type: random-picker\nschedulingProfiles:\n- name: default\n  plugins:\n  - pluginRef: session-affinity\n  - pluginRef: random-picker\n",
        )
        .unwrap();
        let pool = Arc::new(Pool::new());
        pool.set_members(["127.0.0.1:8443", "127.0.0.2:8443", "127.0.0.3:8443"]);
        let scheduler = build_scheduler(&config, &builtin_registry(), pool).unwrap();
        let mut request = InferenceRequest::new("r0", "m", Prompt::Text("hi".into()));
        request.session_key = Some("tenant-7".into());
        let first = scheduler
            .schedule(&request)
            .unwrap()
            .primary()
            .address()
            .to_string();
        for i in 1..20 {
            request.id = format!("r{i}");
            assert_eq!(
                scheduler.schedule(&request).unwrap().primary().address(),
                first
            );
        }
    }

    // A bare multicluster scorer reads the declared multicluster producer (by its default
    // name), so what the producer records is what the scorer sees.
    #[test]
    fn a_bare_scorer_reads_the_multicluster_producer() {
        let config = EndpointPickerConfig::from_yaml(
            "plugins:\n- type: multicluster-prefix-cache-scorer\n- type: multicluster-approx-prefix-cache-producer\n- type: max-score-picker\nschedulingProfiles:\n- name: default\n  plugins:\n  - pluginRef: multicluster-prefix-cache-scorer\n  - pluginRef: max-score-picker\n",
        )
        .unwrap();
        let pool = Arc::new(Pool::new());
        pool.set_members(["127.0.0.1:8443", "127.0.0.2:8443"]);
        let scheduler = build_scheduler(&config, &builtin_registry(), pool).unwrap();
        let prompt = "x".repeat(4096);
        let _decision = scheduler
            .schedule(&InferenceRequest::new("r0", "m", Prompt::Text(prompt)))
            .unwrap();
        let producer = scheduler
            .shared()
            .resources
            .get::<PrefixProducer>(APPROX_PREFIX_PRODUCER_TYPE_NAME)
            .unwrap();
        assert!(
            producer.index().entries() > 0,
            "the pick was recorded in its index"
        );
    }
}
