//! `precise-prefix-cache-producer` (and the deprecated all-in-one `precise-prefix-cache-scorer`):
//! the prefix match of each request against what the model servers' KV-cache events say they
//! hold.
//!
//! The producer owns a [`PreciseIndex`] fed by the servers' `BlockStored` / `BlockRemoved`
//! events (vLLM's `--kv-events-config`; the runtime subscribes, see `docs/kv-events.md`), and
//! hands consumers the same [`PrefixMatchInfo`](super::PrefixMatchInfo) an `approx-prefix-cache-producer` does: a
//! `prefix-cache-scorer` with `prefixMatchInfoProducerName: precise-prefix-cache-producer`
//! scores by it, and a profile may use approximate and precise producers side by side. Picks
//! are never recorded: the server's events say what it cached, and what it evicted.
//!
//! Requests are cut into the engine's block size (`tokenProcessorConfig.blockSize`, 16 by
//! default, vLLM's default) and hashed from their tokens: the token ids the request carries,
//! those of a `token-producer` with a real tokenizer, else 4-byte pseudo tokens (which match
//! only a server that tokenizes the same way, such as `shepherd-sim serve`). Against a real
//! vLLM, configure a `token-producer` with the model's tokenizer.
//!
//! ## Parameters (upstream's names)
//!
//! | parameter | default | meaning in Shepherd |
//! |---|---|---|
//! | `tokenProcessorConfig.blockSize` (also `blockSizeTokens`) | 16 | the engine's tokens per KV block; must equal the servers' `--block-size` (events of another size are skipped and counted) |
//! | `tokenProcessorConfig.hashSeed` | `""` | accepted, not needed: Shepherd hashes tokens with its own chained hash, not the engine's |
//! | `kvEventsConfig.discoverPods` | true | subscribe to every endpoint of the pool at `tcp://<endpoint ip>:<socketPort>` |
//! | `kvEventsConfig.podDiscoveryConfig.socketPort` | 5557 | the servers' PUB port (vLLM's `endpoint`) |
//! | `kvEventsConfig.podDiscoveryConfig.replaySocketPort` | — | the servers' replay ROUTER port (vLLM's `replay_endpoint`); without it gaps cannot be filled |
//! | `kvEventsConfig.podDiscoveryConfig.podLabelSelector`, `podNamespace` | — | accepted; Shepherd's endpoints come from its own discovery |
//! | `kvEventsConfig.zmqEndpoint` | — | also bind a SUB socket here (e.g. `tcp://*:5557`) for servers that connect to Shepherd (vLLM `endpoint: tcp://<shepherd>:5557`); the topic `kv@<ip[:port]>@<model>` names the endpoint |
//! | `kvEventsConfig.topicFilter` | `kv@` | the SUB subscription prefix |
//! | `kvEventsConfig.engineType` | `vllm` | `vllm` or `sglang` (the same format) |
//! | `kvEventsConfig.concurrency`, `tracing` | 4, false | accepted; each subscription is its own task |
//! | `indexerConfig.kvBlockIndexConfig.inMemoryConfig` (`size`, `podCacheSize`), `enableMetrics`, `metricsLoggingInterval` | — | accepted; memory is bounded by each engine's `num_gpu_blocks` instead |
//! | `indexerConfig.kvCacheBackendConfigs` | gpu | accepted; only GPU blocks are indexed |
//! | `indexerConfig.kvBlockIndexConfig.redisConfig` / `valkeyConfig` (`address`, `backendType`, `enableRDMA`) | — | accepted, with a warning, and not connected to: upstream keeps one index in Redis for the replicas to share; every Shepherd replica subscribes to every server's KV events and holds the same facts in its own memory, so the index needs no Redis (a pick never waits on the network). What replicas share through Redis is the `replicas` section's (`backend: redis`, `docs/replicas.md`). `backendType` must be `redis` or `valkey` when given |
//! | `indexerConfig.kvBlockIndexConfig.costAwareMemoryConfig` | — | refused: the index's memory is bounded by each engine's `num_gpu_blocks` |
//! | `indexerConfig.tokenizersPoolConfig` | — | accepted and unused, with a warning (deprecated upstream): tokenization is the `token-producer`'s; configure one with the model's tokenizer |
//! | other keys inside `tokenProcessorConfig`, `indexerConfig` (the older `prefixStoreConfig`, say) and `kvBlockIndexConfig` | — | accepted and unused, a warning each, as upstream's decoder ignores them |
//! | `speculativeIndexing` | false | record each pick's blocks for the picked endpoint at once, as speculative entries, so the requests that follow before the server's events arrive (its queue wait and prefill) see them; the events confirm them, and unconfirmed ones are taken out when they expire |
//! | `speculativeTTL` | 2s | how long a speculative entry lasts (Go duration) |
//!
//! Shepherd extensions in `kvEventsConfig`: the bounds of what a ZeroMQ peer (a publisher, a
//! replay socket, or anyone who connects to `zmqEndpoint`) can make Shepherd hold. A peer that
//! declares more is disconnected and counted (`docs/kv-events.md`).
//!
//! | parameter | default | meaning |
//! |---|---|---|
//! | `kvEventsConfig.maxMessageBytes` | 4194304 (4 MiB) | the largest message (all its frames) read from a publisher or a replay socket; a frame declaring more is refused at its header |
//! | `kvEventsConfig.maxConnections` | 64 | the most publishers connected at once to the bound `zmqEndpoint`; more are refused |
//! | `kvEventsConfig.handshakeTimeout` | 5s | how long a peer may take to complete the ZMTP handshake (Go duration) |
//! | `kvEventsConfig.maxReplayBytes` | 67108864 (64 MiB) | the most bytes one replay answer may carry; over it the replay is abandoned |
//! | `kvEventsConfig.maxReplayBatches` | 100000 | the most batches one replay answer may carry (vLLM buffers 10,000 by default) |
//!
//! Shepherd extensions, on an endpoint's labels (the `endpoints` section): `shepherd.dev/kv-events-endpoint`
//! and `shepherd.dev/kv-events-replay-endpoint` give that endpoint's publisher and replay
//! addresses when they are not `<ip>:<socketPort>` (several servers on one host).
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::kv_events::{BlockStored, EngineBlockHash, KvEvent, KvEventBatch};
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::builtin_registry;
//! use shepherd_scorers::producers::PreciseKvEvents;
//! use shepherd_scheduler_core::config::build_scheduler_in;
//!
//! let config = EndpointPickerConfig::from_yaml("
//! plugins:
//! - type: precise-prefix-cache-producer
//!   parameters:
//!     kvEventsConfig:
//!       podDiscoveryConfig: {socketPort: 5557, replaySocketPort: 5558}
//! - type: prefix-cache-scorer
//!   parameters:
//!     prefixMatchInfoProducerName: precise-prefix-cache-producer
//! - type: max-score-picker
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - pluginRef: prefix-cache-scorer
//!   - pluginRef: max-score-picker
//! ").unwrap();
//! let shared = SharedState::new(Arc::new(Pool::new()));
//! shared.pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
//! let scheduler = build_scheduler_in(&config, &builtin_registry(), &shared).unwrap();
//!
//! // What the runtime does with the events of 10.0.0.2: 4 blocks of 16 pseudo tokens.
//! let feeds = shared.resources.all::<PreciseKvEvents>();
//! let (_, feed) = &feeds[0];
//! assert_eq!(feed.subscription.per_endpoint.unwrap().replay_port, Some(5558));
//! let prompt = "You are a helpful assistant. ".repeat(10); // 280 bytes = 70 pseudo tokens
//! let tokens: Vec<u32> = prompt.as_bytes()[..256]
//!     .chunks(4)
//!     .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
//!     .collect();
//! let stored = BlockStored {
//!     block_hashes: (1..=4).map(EngineBlockHash).collect(),
//!     token_ids: tokens,
//!     block_size: 16,
//!     ..BlockStored::default()
//! };
//! let id = shared.pool.snapshot().get_by_address("10.0.0.2:8000").unwrap().id();
//! feed.index.apply(id, &KvEventBatch { events: vec![KvEvent::BlockStored(stored)], ..Default::default() });
//!
//! let request = InferenceRequest::new("r", "m", Prompt::Text(prompt));
//! assert_eq!(scheduler.schedule(&request).unwrap().primary().address(), "10.0.0.2:8000");
//! ```

use std::sync::Arc;
use std::time::Duration;

use std::collections::BTreeMap;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::flow::parse_go_duration;
use shepherd_scheduler_core::kv_events::{PreciseIndex, PreciseIndexConfig, ResetReason};
use shepherd_scheduler_core::metrics::{MetricDesc, MetricsSource, MetricsVisitor};
use shepherd_scheduler_core::plugin::{PickHook, PluginInstance};

use super::PrefixProducer;
pub use super::kv_event_limits::KvEventLimits;
use crate::prefix_cache::{MatchFormula, PrefixCacheScorer};

/// Upstream's default `speculativeTTL`: long enough to cover a request's wait and prefill
/// before the server's events arrive.
pub const DEFAULT_SPECULATIVE_TTL: Duration = Duration::from_secs(2);

/// Registry type name of the producer.
pub const TYPE_NAME: &str = "precise-prefix-cache-producer";

/// Registry type name of the deprecated all-in-one scorer (a producer and a
/// `prefix-cache-scorer` over it).
pub const SCORER_TYPE_NAME: &str = "precise-prefix-cache-scorer";

/// Endpoint label naming the endpoint's KV-event publisher (`tcp://ip:port`), when it is not
/// `<endpoint ip>:<socketPort>`.
pub const PUBLISHER_LABEL: &str = "shepherd.dev/kv-events-endpoint";

/// Endpoint label naming the endpoint's KV-event replay socket (`tcp://ip:port`).
pub const REPLAY_LABEL: &str = "shepherd.dev/kv-events-replay-endpoint";

/// The `precise-prefix-cache-producer` parameters (see the module docs).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct PrecisePrefixParameters {
    /// How requests are cut into blocks.
    pub token_processor_config: TokenProcessorConfig,
    /// The index's settings.
    pub indexer_config: IndexerConfig,
    /// Where the events come from.
    pub kv_events_config: KvEventsConfig,
    /// Record each pick's blocks speculatively until the server's events confirm them.
    pub speculative_indexing: bool,
    /// How long speculative entries live.
    #[serde(rename = "speculativeTTL")]
    pub speculative_ttl: Option<String>,
}

/// `tokenProcessorConfig`. Keys upstream's decoder ignores are kept in `ignored` (a
/// warning each, [`PrecisePrefixParameters::warnings`]).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TokenProcessorConfig {
    /// The engine's tokens per KV block.
    #[serde(alias = "blockSizeTokens")]
    pub block_size: usize,
    /// The seed of the engine's hash (not needed by Shepherd).
    pub hash_seed: String,
    /// Keys Shepherd does not read.
    #[serde(flatten)]
    pub ignored: BTreeMap<String, serde_json::Value>,
}

impl Default for TokenProcessorConfig {
    fn default() -> Self {
        TokenProcessorConfig {
            block_size: 16,
            hash_seed: String::new(),
            ignored: BTreeMap::new(),
        }
    }
}

/// `indexerConfig`. Keys upstream's decoder ignores (the older `prefixStoreConfig`, say) are
/// kept in `ignored`, a warning each.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct IndexerConfig {
    /// The block index's settings.
    pub kv_block_index_config: KvBlockIndexConfig,
    /// Per-tier weights (only GPU blocks are indexed).
    pub kv_cache_backend_configs: Vec<BackendConfig>,
    /// The deprecated in-indexer tokenizer (accepted and unused, a warning: tokenization is
    /// the `token-producer`'s).
    pub tokenizers_pool_config: Option<serde_json::Value>,
    /// Keys Shepherd does not read.
    #[serde(flatten)]
    pub ignored: BTreeMap<String, serde_json::Value>,
}

/// `indexerConfig.kvBlockIndexConfig`. Keys upstream's decoder ignores are kept in `ignored`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct KvBlockIndexConfig {
    /// The in-memory index's sizes (accepted; engine capacities bound memory).
    pub in_memory_config: Option<InMemoryConfig>,
    /// Upstream's index metrics switch (Shepherd always exports its counters).
    pub enable_metrics: bool,
    /// Upstream's metrics logging interval (accepted).
    pub metrics_logging_interval: Option<serde_json::Value>,
    /// Upstream's Redis-backed index (accepted with a warning; the index stays in memory).
    pub redis_config: Option<RedisIndexConfig>,
    /// Upstream's Valkey-backed index (the same settings; accepted with a warning).
    pub valkey_config: Option<RedisIndexConfig>,
    /// Upstream's cost-aware memory index (refused).
    pub cost_aware_memory_config: Option<serde_json::Value>,
    /// Keys Shepherd does not read.
    #[serde(flatten)]
    pub ignored: BTreeMap<String, serde_json::Value>,
}

/// `redisConfig` / `valkeyConfig`: upstream's external index. Shepherd reads it to check it
/// and to say, in a warning, that the index stays in every replica's memory; it never
/// connects to `address` (nor shows it: it may hold a password).
#[derive(Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RedisIndexConfig {
    /// The server's address (`redis://`, `rediss://`, `valkey://`, `valkeys://` or `host:port`).
    pub address: Option<String>,
    /// `redis` or `valkey`.
    pub backend_type: Option<String>,
    /// Valkey's RDMA transport.
    #[serde(rename = "enableRDMA")]
    pub enable_rdma: bool,
    /// Keys Shepherd does not read.
    #[serde(flatten)]
    pub ignored: BTreeMap<String, serde_json::Value>,
}

impl std::fmt::Debug for RedisIndexConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisIndexConfig")
            .field("address", &self.address.as_ref().map(|_| "<not shown>"))
            .field("backend_type", &self.backend_type)
            .field("enable_rdma", &self.enable_rdma)
            .finish_non_exhaustive()
    }
}

/// `inMemoryConfig`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct InMemoryConfig {
    /// Most keys held.
    pub size: Option<u64>,
    /// Most endpoints per key.
    pub pod_cache_size: Option<u64>,
}

/// One `kvCacheBackendConfigs` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BackendConfig {
    /// The tier (`gpu`, `cpu`, ...).
    pub name: String,
    /// Its weight in upstream's score.
    #[serde(default)]
    pub weight: f64,
}

/// `kvEventsConfig`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct KvEventsConfig {
    /// A SUB socket to bind for servers that connect to Shepherd.
    pub zmq_endpoint: Option<String>,
    /// The subscription prefix.
    pub topic_filter: String,
    /// Upstream's worker count (accepted).
    pub concurrency: usize,
    /// `vllm` or `sglang`.
    pub engine_type: Option<String>,
    /// Upstream's event tracing switch (accepted).
    pub tracing: bool,
    /// Subscribe to every endpoint of the pool.
    pub discover_pods: bool,
    /// Where each endpoint publishes.
    pub pod_discovery_config: PodDiscoveryConfig,
    /// Shepherd: the largest ZeroMQ message accepted from a peer, in bytes.
    pub max_message_bytes: u64,
    /// Shepherd: the most peers connected at once to the bound `zmqEndpoint`.
    pub max_connections: u64,
    /// Shepherd: how long a peer may take to complete the ZMTP handshake (Go duration).
    pub handshake_timeout: Option<String>,
    /// Shepherd: the most bytes one replay answer may carry.
    pub max_replay_bytes: u64,
    /// Shepherd: the most batches one replay answer may carry.
    pub max_replay_batches: u64,
}

impl Default for KvEventsConfig {
    fn default() -> Self {
        KvEventsConfig {
            zmq_endpoint: None,
            topic_filter: "kv@".into(),
            concurrency: 4,
            engine_type: None,
            tracing: false,
            discover_pods: true,
            pod_discovery_config: PodDiscoveryConfig::default(),
            max_message_bytes: KvEventLimits::default().max_message_bytes as u64,
            max_connections: KvEventLimits::default().max_connections as u64,
            handshake_timeout: None,
            max_replay_bytes: KvEventLimits::default().max_replay_bytes,
            max_replay_batches: KvEventLimits::default().max_replay_batches,
        }
    }
}

/// `kvEventsConfig.podDiscoveryConfig`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct PodDiscoveryConfig {
    /// Kubernetes label selector (accepted).
    pub pod_label_selector: String,
    /// Kubernetes namespace (accepted).
    pub pod_namespace: Option<String>,
    /// The servers' PUB port.
    pub socket_port: u16,
    /// The servers' replay port; absent, 0 or negative: none.
    pub replay_socket_port: Option<i64>,
}

impl Default for PodDiscoveryConfig {
    fn default() -> Self {
        PodDiscoveryConfig {
            pod_label_selector: "llm-d.ai/inference-serving=true".into(),
            pod_namespace: None,
            socket_port: 5557,
            replay_socket_port: None,
        }
    }
}

/// Per-endpoint sockets: `tcp://<endpoint ip>:<port>` unless the endpoint's labels say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointSockets {
    /// The PUB port.
    pub port: u16,
    /// The replay port.
    pub replay_port: Option<u16>,
}

/// What the runtime subscribes to for one precise producer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvEventSubscription {
    /// Subscribe to every endpoint (`discoverPods`).
    pub per_endpoint: Option<EndpointSockets>,
    /// Bind a SUB socket here (`zmqEndpoint`).
    pub bind: Option<String>,
    /// The subscription prefix.
    pub topic_filter: String,
    /// The bounds of the ZeroMQ peers.
    pub limits: KvEventLimits,
}

/// A precise producer's index and where its events come from, kept in the shared resources
/// under [`feed_name`] for the runtime to find with `resources.all::<PreciseKvEvents>()`.
#[derive(Debug)]
pub struct PreciseKvEvents {
    /// The plugin's name.
    pub name: String,
    /// The index the events feed.
    pub index: Arc<PreciseIndex>,
    /// What to subscribe to.
    pub subscription: KvEventSubscription,
    /// How long speculative entries last, when the producer records them
    /// (`speculativeIndexing`): what a peer replica's speculation sent here should last too.
    pub speculative_ttl: Option<Duration>,
}

/// The resource name of the [`PreciseKvEvents`] of the producer named `plugin`.
pub fn feed_name(plugin: &str) -> String {
    format!("kv-events/{plugin}")
}

impl PrecisePrefixParameters {
    /// How long speculative entries last, when `speculativeIndexing` is on (`speculativeTTL`,
    /// a Go duration, default 2 s, as upstream).
    pub fn speculative_ttl(&self) -> Result<Option<Duration>, PluginError> {
        if !self.speculative_indexing {
            return Ok(None);
        }
        match self.speculative_ttl.as_deref().filter(|t| !t.is_empty()) {
            None => Ok(Some(DEFAULT_SPECULATIVE_TTL)),
            Some(text) => match parse_go_duration(text) {
                Some(ttl) if !ttl.is_zero() => Ok(Some(ttl)),
                _ => Err(PluginError::invalid(
                    "speculativeTTL",
                    format!("`{text}` is not a positive Go duration (e.g. 2s, 500ms)"),
                )),
            },
        }
    }

    /// The index configuration and the subscription, or why the parameters are refused.
    pub fn validate(&self) -> Result<(PreciseIndexConfig, KvEventSubscription), PluginError> {
        let block = self.token_processor_config.block_size;
        if block == 0 {
            return Err(PluginError::invalid(
                "tokenProcessorConfig.blockSize",
                "must be at least 1",
            ));
        }
        let refuse = |parameter: &str, why: &str| Err(PluginError::invalid(parameter, why));
        let index = &self.indexer_config.kv_block_index_config;
        if index.cost_aware_memory_config.is_some() {
            return refuse(
                "indexerConfig.kvBlockIndexConfig.costAwareMemoryConfig",
                "the index's memory is bounded by each engine's num_gpu_blocks: remove it",
            );
        }
        for (name, external) in [
            ("redisConfig", &index.redis_config),
            ("valkeyConfig", &index.valkey_config),
        ] {
            if let Some(backend) = external.as_ref().and_then(|c| c.backend_type.as_deref())
                && !matches!(backend, "redis" | "valkey")
            {
                return Err(PluginError::invalid(
                    format!("indexerConfig.kvBlockIndexConfig.{name}.backendType"),
                    format!("`{backend}` is neither `redis` nor `valkey`"),
                ));
            }
        }
        let events = &self.kv_events_config;
        if let Some(engine) = &events.engine_type
            && !matches!(engine.as_str(), "vllm" | "sglang")
        {
            return refuse(
                "kvEventsConfig.engineType",
                "must be `vllm` or `sglang` (both publish vLLM's event format)",
            );
        }
        let pods = &events.pod_discovery_config;
        let replay_port = match pods.replay_socket_port {
            None => None,
            Some(p) if p <= 0 => None,
            Some(p) => Some(u16::try_from(p).map_err(|_| {
                PluginError::invalid(
                    "kvEventsConfig.podDiscoveryConfig.replaySocketPort",
                    format!("{p} is not a port"),
                )
            })?),
        };
        if events.discover_pods && pods.socket_port == 0 {
            return refuse(
                "kvEventsConfig.podDiscoveryConfig.socketPort",
                "must be a port above 0",
            );
        }
        if let Some(bind) = &events.zmq_endpoint
            && !bind.starts_with("tcp://")
        {
            return refuse(
                "kvEventsConfig.zmqEndpoint",
                "must be a `tcp://host:port` address (ipc and inproc are not supported)",
            );
        }
        let limits = events.limits()?;
        let config = PreciseIndexConfig {
            block_tokens: block,
            max_blocks: (131_072 / block).max(1),
            ..PreciseIndexConfig::default()
        };
        let subscription = KvEventSubscription {
            per_endpoint: events.discover_pods.then_some(EndpointSockets {
                port: pods.socket_port,
                replay_port,
            }),
            bind: events.zmq_endpoint.clone().filter(|e| !e.is_empty()),
            topic_filter: events.topic_filter.clone(),
            limits,
        };
        Ok((config, subscription))
    }
}

/// Builds the producer: the [`PreciseIndex`] (kept across reloads with the same settings), a
/// precise [`PrefixProducer`] under the plugin's name (for `prefixMatchInfoProducerName`), and
/// the [`PreciseKvEvents`] under [`feed_name`].
fn build(
    args: &PluginArgs<'_>,
) -> Result<(Arc<PrefixProducer>, Arc<PreciseKvEvents>), PluginError> {
    let parameters: PrecisePrefixParameters = args.parse()?;
    let (config, subscription) = parameters.validate()?;
    let speculative_ttl = parameters.speculative_ttl()?;
    let feed_key = feed_name(args.name);
    let index = args
        .resources
        .get::<PreciseKvEvents>(&feed_key)
        .map(|old| Arc::clone(&old.index))
        .filter(|index| *index.config() == config)
        .unwrap_or_else(|| Arc::new(PreciseIndex::new(config)));
    let producer = Arc::new(PrefixProducer::precise(
        &index,
        speculative_ttl,
        args.name,
        args.resources,
    ));
    let feed = Arc::new(PreciseKvEvents {
        name: args.name.to_string(),
        index,
        subscription,
        speculative_ttl,
    });
    args.resources.insert(args.name, Arc::clone(&producer));
    args.resources.insert(feed_key, Arc::clone(&feed));
    Ok((producer, feed))
}

/// Builds a `precise-prefix-cache-producer`.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let (producer, feed) = build(args)?;
    Ok(PluginInstance::default()
        .with_pick_hook(producer as Arc<dyn PickHook>)
        .with_membership_listener(Arc::clone(&feed.index) as _)
        .with_metrics_source(feed))
}

/// Builds the deprecated all-in-one `precise-prefix-cache-scorer`: the producer and a
/// `prefix-cache-scorer` over it (score = matched blocks / request blocks, as upstream).
pub fn scorer_factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let (producer, feed) = build(args)?;
    let scorer = Arc::new(PrefixCacheScorer::over_producer(
        producer,
        MatchFormula::default(),
    ));
    Ok(PluginInstance::scorer(scorer.clone())
        .with_pick_hook(scorer)
        .with_membership_listener(Arc::clone(&feed.index) as _)
        .with_metrics_source(feed))
}

const ENTRIES: MetricDesc<'static> = MetricDesc::new(
    "shepherd_prefix_index_entries",
    "(block, endpoint) entries held by the prefix-cache index.",
);
const STORED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_kv_events_stored_blocks_total",
    "Engine blocks reported stored by KV-cache events and applied to the precise index.",
);
const REMOVED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_kv_events_removed_blocks_total",
    "Engine blocks reported removed by KV-cache events.",
);
const ORPHANS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_kv_events_orphan_blocks_total",
    "Stored blocks skipped because their parent block was unknown (their prefix is unknown).",
);
const SKIPPED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_kv_events_skipped_blocks_total",
    "Stored blocks not indexed: another tier or KV-cache group, extra keys beyond the LoRA \
     adapter, malformed, or another block size.",
);
const UNKNOWN: MetricDesc<'static> = MetricDesc::new(
    "shepherd_kv_events_unknown_events_total",
    "Events of a kind Shepherd does not know, skipped.",
);
const RESETS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_kv_events_endpoint_resets_total",
    "Times an endpoint's precise entries were dropped, by reason.",
);

impl MetricsSource for PreciseKvEvents {
    fn visit_metrics(&self, v: &mut dyn MetricsVisitor) {
        let plugin = [("plugin", self.name.as_str())];
        let stats = self.index.stats();
        v.gauge(ENTRIES, &plugin, self.index.index().stats().entries as f64);
        v.counter(STORED, &plugin, stats.stored_blocks);
        v.counter(REMOVED, &plugin, stats.removed_blocks);
        v.counter(ORPHANS, &plugin, stats.orphan_blocks);
        v.counter(
            SKIPPED,
            &plugin,
            stats.skipped_blocks + stats.block_size_mismatches,
        );
        v.counter(UNKNOWN, &plugin, stats.unknown_events);
        for reason in ResetReason::ALL {
            let labels = [("plugin", self.name.as_str()), ("reason", reason.label())];
            v.counter(RESETS, &labels, stats.resets_for(reason));
        }
    }
}
