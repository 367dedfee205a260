//! The llm-d router's `multicluster-*` scheduling plugins: for a cluster-scoped picker whose
//! candidate endpoints are *clusters* (each a peer cluster's inference gateway, found by
//! `multicluster-file-discovery`), not model-server pods.
//!
//! A cluster-endpoint has no per-pod metrics of its own. What the picker knows of it is its
//! pool's aggregate load, which the peer's picker publishes as
//! `llm_d_epp_average_kv_cache_utilization` and `llm_d_epp_average_queue_size`; the runtime's
//! `multicluster-metrics-data-source` scrapes that page and its `multicluster-metrics-extractor`
//! writes the two values into the endpoint attributes [`KV_CACHE_UTILIZATION_KEY`] and
//! [`QUEUE_SIZE_KEY`] ([`EndpointAttributes`](shepherd_scheduler_core::endpoint::EndpointAttributes)),
//! which the two metric scorers read:
//!
//! | type | what it does |
//! |---|---|
//! | `multicluster-queue-scorer` | the pool queue size, min-max normalized over the candidates: shortest 1, longest 0, all equal 1 ([`scorers`]) |
//! | `multicluster-kv-cache-utilization-scorer` | `1 − ` the pool KV-cache utilization ([`scorers`]) |
//! | `multicluster-session-affinity-filter` | `session-affinity-filter` unchanged: the endpoint a session is pinned to *is* its cluster ([`delegating`]) |
//! | `multicluster-prefix-cache-scorer` | `prefix-cache-scorer` unchanged: a repeated prefix goes back to the cluster that served it ([`delegating`]) |
//! | `multicluster-approx-prefix-cache-producer` | `approx-prefix-cache-producer` unchanged: its index keys on the endpoint, here a cluster ([`delegating`]) |
//!
//! An endpoint without the attribute (never scraped, or its page lacked the metric) scores 0,
//! as upstream leaves it unscored. All five are Alpha upstream: they load only with
//! `--allow-experimental-plugins`.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::endpoint::EndpointAttributes;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::builtin_registry;
//! use shepherd_scorers::multicluster::QUEUE_SIZE_KEY;
//!
//! let config = EndpointPickerConfig::from_yaml("
//! plugins:
//! - type: multicluster-queue-scorer
//!   name: queue
//! - type: max-score-picker
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - pluginRef: queue
//!   - pluginRef: max-score-picker
//! ").unwrap();
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["127.0.0.1:8443", "127.0.0.2:8443"]);
//! let scheduler = build_scheduler(&config, &builtin_registry(), Arc::clone(&pool)).unwrap();
//! // What the multicluster metrics extractor writes at every scrape of each peer.
//! let table = EndpointAttributes::of(&scheduler.shared().resources);
//! for (address, queue) in [("127.0.0.1:8443", 9.0), ("127.0.0.2:8443", 2.0)] {
//!     let id = pool.snapshot().get_by_address(address).unwrap().id();
//!     table.set(id, &[(QUEUE_SIZE_KEY.to_string(), queue)]);
//! }
//! let request = InferenceRequest::new("r", "m", Prompt::Text("hi".into()));
//! assert_eq!(scheduler.schedule(&request).unwrap().primary().address(), "127.0.0.2:8443");
//! ```

pub mod delegating;
pub mod scorers;

/// The endpoint attribute holding a cluster's pool-aggregate KV-cache utilization (upstream's
/// `MultiClusterKVCacheUtilizationKey`).
pub const KV_CACHE_UTILIZATION_KEY: &str = "llm-d.ai/multicluster-kv-cache-utilization";

/// The endpoint attribute holding a cluster's pool-aggregate waiting-queue size (upstream's
/// `MultiClusterQueueSizeKey`).
pub const QUEUE_SIZE_KEY: &str = "llm-d.ai/multicluster-queue-size";

/// The metric the extractor reads for [`KV_CACHE_UTILIZATION_KEY`] unless configured.
pub const DEFAULT_KV_CACHE_UTILIZATION_METRIC: &str = "llm_d_epp_average_kv_cache_utilization";

/// The metric the extractor reads for [`QUEUE_SIZE_KEY`] unless configured.
pub const DEFAULT_QUEUE_SIZE_METRIC: &str = "llm_d_epp_average_queue_size";

/// The scorer types that read the extractor's attributes: a config declaring one needs a
/// `multicluster-metrics-extractor` (upstream refuses it at load otherwise).
pub const METRIC_SCORER_TYPES: [&str; 2] = [scorers::QUEUE_TYPE_NAME, scorers::KV_CACHE_TYPE_NAME];
