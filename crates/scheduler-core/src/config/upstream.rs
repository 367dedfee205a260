//! Every plugin type the upstream endpoint picker (the llm-d router's
//! `registerInTreePlugins`) registers, with its status in Shepherd.
//!
//! A type is either built by Shepherd's scheduler [`Registry`](super::Registry) under the same
//! name ([`Status::Registry`]), honoured outside it by a fixed part of Shepherd
//! ([`Status::Framework`], see [`framework_plugin`](super::framework_plugin)), or not
//! implemented yet ([`Status::NotYet`], with the [`Area`] of work it belongs to). A config
//! naming a not-yet type fails with [`ConfigError::NotImplemented`](super::ConfigError),
//! which names the area — never with "unknown type". `docs/compatibility.md` is this table
//! written out, and a test keeps the two and the built-in registry in step.
//!
//! ```
//! use shepherd_scheduler_core::config::{Status, UPSTREAM_TYPES, upstream_type};
//!
//! assert_eq!(upstream_type("queue-scorer").unwrap().status, Status::Registry);
//! // Every type upstream registers today is implemented.
//! assert!(UPSTREAM_TYPES.iter().all(|t| !matches!(t.status, Status::NotYet(_))));
//! assert!(upstream_type("my-own-scorer").is_none());
//! ```

use std::fmt;

use super::PluginKind;

/// The area of work a not-yet-implemented upstream type belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Area {
    /// Scheduling filters, scorers and producers of the upstream-compatibility work that are
    /// still to come (label selectors, load-aware and LRU scorers, prefix-cache producers,
    /// tokenization).
    SchedulingPlugins,
    /// Prefill/decode (and encode) disaggregation, data-parallel ranks.
    Disaggregation,
    /// Precise prefix-cache scoring from model-server KV-cache events.
    PrecisePrefixCache,
    /// Latency prediction and SLO-aware scheduling and admission.
    PredictedLatency,
    /// Routing across several clusters.
    MultiCluster,
    /// Multimodal embeddings caches.
    Multimodal,
    /// Request parsers not implemented yet (none today: the gRPC ones are implemented).
    Parsers,
    /// Data-layer sources and extractors beyond the core metrics, and endpoint discovery.
    DataLayer,
    /// Topology-aware scheduling.
    Topology,
    /// Flow-control policies beyond round-robin fairness and FCFS ordering, and eviction.
    FlowControl,
    /// Request-control hooks: admitters, screeners, reporters, header processors.
    RequestControl,
    /// Plugins upstream registers for its conformance tests only.
    ConformanceTests,
}

impl fmt::Display for Area {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Area::SchedulingPlugins => "upstream scheduling plugins (filters, scorers, producers)",
            Area::Disaggregation => "disaggregation (prefill/decode, encode, data parallel)",
            Area::PrecisePrefixCache => "precise prefix cache (KV-cache events)",
            Area::PredictedLatency => "predicted latency and SLO-aware scheduling",
            Area::MultiCluster => "multi-cluster routing",
            Area::Multimodal => "multimodal caches",
            Area::Parsers => "request parsers for gRPC APIs",
            Area::DataLayer => "data layer (sources, extractors, discovery)",
            Area::Topology => "topology-aware scheduling",
            Area::FlowControl => "flow-control policies",
            Area::RequestControl => "request control (admission, screening, reporting)",
            Area::ConformanceTests => "upstream conformance-test plugins",
        })
    }
}

/// What Shepherd does with an upstream type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Built by Shepherd's registry under the same name.
    Registry,
    /// Honoured outside the registry by a fixed part of Shepherd.
    Framework,
    /// Not implemented yet.
    NotYet(Area),
}

/// One upstream plugin type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamType {
    /// The type name, as upstream registers it.
    pub name: &'static str,
    /// Its kind.
    pub kind: PluginKind,
    /// Its status in Shepherd.
    pub status: Status,
    /// How Shepherd's version differs, or what the name is an older spelling of; empty when
    /// there is nothing to say.
    pub note: &'static str,
}

const fn entry(name: &'static str, kind: PluginKind, status: Status) -> UpstreamType {
    UpstreamType {
        name,
        kind,
        status,
        note: "",
    }
}

const fn noted(
    name: &'static str,
    kind: PluginKind,
    status: Status,
    note: &'static str,
) -> UpstreamType {
    UpstreamType {
        name,
        kind,
        status,
        note,
    }
}

use PluginKind::{
    DataExtractor, DataSource, Decider, Discovery, Filter, FlowControl as Flow, Parser, Picker,
    Producer, ProfileHandler, RequestControl as Control, Scorer, Test,
};
use Status::{Framework, Registry};

/// Every type `registerInTreePlugins` registers, in its order (llm-d router at `ebab68792`).
#[rustfmt::skip]
pub const UPSTREAM_TYPES: &[UpstreamType] = &[
    noted("disaggregatedset-rollout-screener", Control, Registry, "runs first in every profile (a screener); ready pods are counted from the pool's members (labels from discovery, one per IP) that accept requests, not from a watch of every pod the scope selects; the revision draw is a hash of the request id and the scheduler's seed; the `llm_d_epp_disaggregatedset_*` metrics are not exported (a warning at start); Alpha upstream: needs `--allow-experimental-plugins`"),
    noted("label-selector-filter", Filter, Registry, "endpoint labels come from the `endpoints` section's `labels` (or an embedder's discovery)"),
    noted("by-label-selector", Filter, Registry, "deprecated upstream name of `label-selector-filter`"),
    noted("by-label", Filter, Registry, "upstream's single-label filter (`label`, `validValues`, `allowsNoLabel`)"),
    noted("encode-filter", Filter, Registry, "filters by the role label"),
    noted("decode-filter", Filter, Registry, "filters by the role label (unlabelled endpoints count as decode, as upstream)"),
    noted("prefill-filter", Filter, Registry, "filters by the role label"),
    noted("session-affinity-filter", Filter, Registry, "the `session_id` strategy only, as the scorer (upstream's default `encoded_endpoint_header` is refused by name: it needs response-header plugins; a bare filter reads `x-session-id`); `attribute` sources read a declared `agent-identity` or `session-id-producer`; Alpha upstream: needs `--allow-experimental-plugins`"),
    noted("endpoint-attribute-filter", Filter, Registry, "the attribute is a custom metric of the `core-metrics-extractor` (`engineConfigs[].customMetrics`), read at every scrape; `producer` is accepted, and any producer reads the same attributes (the extractor's custom metrics are Shepherd's only ones); Alpha upstream: needs `--allow-experimental-plugins`"),
    noted("topology-affinity-filter", Filter, Registry, "the peer is the decode pick, in the prefill and encode stages; topology comes from endpoint labels (see `topology-extractor`)"),
    noted("utilization-filter", Filter, Registry, "`active-requests` is the requests this picker routed and has not seen finish (the endpoints count them; `inFlightLoadProducerName` accepted); Alpha upstream: needs `--allow-experimental-plugins`"),
    noted("data-parallel-profile-handler", ProfileHandler, Registry, "deprecated upstream: runs the one scheduling profile (more are refused at load; upstream fails every request); the destination is the picked rank's own `ip:port`, as upstream's replacement `single-profile-handler` with Istio >= 1.28.1: `primaryPort` is checked and not applied (a warning)"),
    noted("load-aware-scorer", Scorer, Registry, "endpoints with stale metrics get the neutral score"),
    noted("context-length-aware", Scorer, Registry, "the request's length is the `token-producer`'s count when one is declared, else 4 bytes a token (upstream's estimate backend counts the same way)"),
    noted("session-affinity-scorer", Scorer, Registry, "the `session_id` strategy only (upstream's default `encoded_endpoint_header` is refused: it needs response-header plugins); `attribute` sources read a declared `agent-identity` or `session-id-producer`; `capacity` and `ttlSeconds` are Shepherd extensions"),
    noted("header-label-affinity-scorer", Scorer, Registry, "the adapters copy each configured `headerName` from the client's request; Alpha upstream: needs `--allow-experimental-plugins`"),
    noted("models-data-source", DataSource, Framework, "the runtime's scraper GETs each endpoint's `http://<endpoint><path>` (default `/v1/models`) every `interval` (default: the scrape interval); `https` is not polled (a warning at start; its certificate files are still checked as upstream); a failed poll keeps the last list, as upstream; one source per config (a second is ignored)"),
    noted("models-data-extractor", DataExtractor, Framework, "each endpoint's `data` entries (`id`, `object`, `created`, `owned_by`, `parent`; at most 256, fields cut at 512 bytes) kept in the `EndpointModels` table, a change logged; no scheduling plugin reads them, upstream or here"),
    noted("topology-extractor", DataExtractor, Registry, "reads the endpoints' labels when a topology plugin asks; upstream's fallback to the pod's `spec.hostname` is not applied (a warning at start)"),
    noted("dcgm-data-source", DataSource, Framework, "the runtime's scraper GETs each endpoint's exporter at `http://<endpoint ip>:<port><path>` every `interval` (default: the scrape interval); `https` is not scraped and `useNodeAddress` scrapes the endpoint's IP (a warning each at start); a failed scrape clears the attribute (upstream keeps the last value); one source per config (a second is ignored)"),
    noted("dcgm-extractor", DataExtractor, Framework, "the highest `DCGM_FI_DEV_GPU_UTIL` / 100 becomes the endpoint attribute `GPUUtilization` (samples of another `pod` skipped when the endpoint has a `pod` label); written whenever a `dcgm-data-source` is declared"),
    noted("prefix-cache-scorer", Scorer, Registry, "reads an `approx-prefix-cache-producer` (`prefixMatchInfoProducerName`, `matchLengthWeight`, `matchLengthScaleTokens`); the older all-in-one parameters (`blockSize`, `lruCapacityPerServer`, ...) still load, with its own index"),
    entry("max-score-picker", Picker, Registry),
    entry("random-picker", Picker, Registry),
    entry("weighted-random-picker", Picker, Registry),
    noted("single-profile-handler", ProfileHandler, Framework, "Shepherd's scheduler always runs one profile per request; several profiles without a handler load too (the first is used)"),
    noted("disagg-headers-handler", Control, Framework, "deprecated upstream (PreRequest): the `disagg-profile-handler` now does its job, and in Shepherd the adapters send `x-prefiller-host-port` and `x-encoder-hosts-ports`; its parameters (`prefillProfile`, `encodeProfile`) are accepted and unused (a warning): the headers name the stages the profile handler ran"),
    noted("prefill-header-handler", Control, Framework, "deprecated upstream name of `disagg-headers-handler` (accepted the same way)"),
    noted("pd-profile-handler", ProfileHandler, Registry, "deprecated upstream alias of `disagg-profile-handler` with the flat parameters (`decodeProfile`, `prefillProfile`, `deciderPluginName` defaulting to `prefix-based-pd-decider`, which must be declared); unknown keys ignored as upstream; a `primaryPort` is checked and not applied: Shepherd sends the picked rank's own `ip:port`"),
    noted("disagg-profile-handler", ProfileHandler, Registry, "decode, then encode (when the `encode` profile exists and `deciders.encode` approves), then prefill (`decode-first`); with `stageOrder: prefill-first`, prefill first for every request (no prefill decider, as upstream), then decode with the prefill pick as its peer endpoint (topology affinity), encode after the decode pick; the encode and prefill stages' hooks see the request ids `<id>:encode` and `<id>:prefill`; a stage that finds no server is left out; the adapters send `x-encoder-hosts-ports` (every encode pick, its picker's `maxNumOfEndpoints`, default 1) and `x-prefiller-host-port`, replacing any the client sent"),
    entry("always-disagg-pd-decider", Decider, Registry),
    noted("prefix-based-pd-decider", Decider, Registry, "prompt tokens are Shepherd's estimate (token ids, else 4 bytes a token); the cached part is the decode profile's prefix estimate for the decode server"),
    noted("always-disagg-multimodal-decider", Decider, Registry, "approves requests with media: a chat completions message with a content part that is not text (image, audio, video, file), as the parser reads it; upstream reads the multimodal features its `token-producer` found (for the `vllm` backend, vLLM's render); parameters are ignored, as upstream"),
    entry("kv-cache-utilization-scorer", Scorer, Registry),
    entry("queue-scorer", Scorer, Registry),
    entry("running-requests-size-scorer", Scorer, Registry),
    entry("lora-affinity-scorer", Scorer, Registry),
    noted("token-load-scorer", Scorer, Registry, "in-flight tokens are the endpoints' own counts through the `inflight-load-producer`'s settings (from this replica and its peers)"),
    noted("no-hit-lru-scorer", Scorer, Registry, "`prefixPluginType` is accepted and ignored"),
    noted("active-request-scorer", Scorer, Registry, "counts the scheduler's own in-flight requests; `requestTimeout` and `inFlightLoadProducerName` are accepted and ignored"),
    noted("precise-prefix-cache-scorer", Scorer, Registry, "deprecated upstream; a `precise-prefix-cache-producer` and a `prefix-cache-scorer` over it in one plugin, with the producer's differences"),
    noted("mm-embeddings-cache-scorer", Scorer, Registry, "records the picks of the profile it is listed in (upstream's producer records the primary profile's picks)"),
    noted("precise-prefix-cache-producer", Producer, Registry, "Shepherd hashes the token ids the events carry with its own chained hash (`hashSeed` not needed); GPU blocks of the first KV-cache group only; pods come from Shepherd's endpoints (`podLabelSelector`, `podNamespace` ignored; per-endpoint addresses from labels); the in-memory index only; `indexerConfig.tokenizersPoolConfig` and nested keys upstream's decoder ignores (`prefixStoreConfig`, say) accepted and unused, a warning each"),
    noted("header-profile-handler", ProfileHandler, Registry, "a header naming no configured profile fails the request with HTTP 400 (upstream: 429); the adapters copy the header; Alpha upstream: needs `--allow-experimental-plugins`"),
    noted("endpoint-attribute-scorer", Scorer, Registry, "the attribute is a custom metric of the `core-metrics-extractor` (`engineConfigs[].customMetrics`), read at every scrape; `producer` is accepted, and any producer reads the same attributes (the extractor's custom metrics are Shepherd's only ones); Alpha upstream: needs `--allow-experimental-plugins`"),
    noted("topology-affinity-scorer", Scorer, Registry, "the peer is the decode pick, in the prefill and encode stages; topology comes from endpoint labels (see `topology-extractor`)"),
    noted("burst-prefix-cache-producer", Producer, Registry, "requests are not held for `windowDurationMs`: each is steered as it arrives, within the window, to where the first request of its prompt went (that first one gets no affinity: the other scorers place it), up to `maxPerReplica`, then to the least window-loaded server (`balanceBy` requests or tokens); with `minColocateBlocks`, a new prompt sharing that many leading blocks joins the server holding the longest such prefix below its fair share of the window so far (upstream: of the sealed batch); past `maxBatchSize` a request gets no affinity (upstream fails it); prompts hashed as the approximate producer hashes them (a warning at start)"),
    noted("p2p-source-producer", Producer, Registry, "after each stage's pick, reads the named producer's prefix match for every endpoint of the pool, samples a source within one block of the most cached tokens (weights `1/(1+waiting)`, the request id's FNV-1a hash as coordinate) and, when it out-caches the computing server (the prefill pick, else the destination) by `minCachedTokenDelta`, the adapters send `x-kv-cache-source-host-port` (a client's value removed); every cached block counts (Shepherd's indexes have no CPU tier); `prefillProfileName` is not needed (a warning when set otherwise)"),
    noted("multicluster-session-affinity-filter", Filter, Registry, "a `session-affinity-filter` under another name, as upstream (the endpoints are clusters); the `session_id` strategy only, as the stock filter; Alpha upstream: needs `--allow-experimental-plugins`"),
    noted("multicluster-queue-scorer", Scorer, Registry, "reads the endpoint attribute `llm-d.ai/multicluster-queue-size` that the `multicluster-metrics-extractor` writes (a config without one is refused, as upstream); Alpha upstream: needs `--allow-experimental-plugins`"),
    noted("multicluster-kv-cache-utilization-scorer", Scorer, Registry, "reads the endpoint attribute `llm-d.ai/multicluster-kv-cache-utilization` that the `multicluster-metrics-extractor` writes (a config without one is refused, as upstream); Alpha upstream: needs `--allow-experimental-plugins`"),
    noted("multicluster-prefix-cache-scorer", Scorer, Registry, "a `prefix-cache-scorer` under another name, as upstream; a bare one reads a declared `multicluster-approx-prefix-cache-producer` (by its default name), else an `approx-prefix-cache-producer`; Alpha upstream: needs `--allow-experimental-plugins`"),
    noted("multicluster-approx-prefix-cache-producer", Producer, Registry, "an `approx-prefix-cache-producer` under another name, as upstream (its index keys on the endpoint: a cluster); Alpha upstream: needs `--allow-experimental-plugins`"),
    noted("global-strict-fairness-policy", Flow, Framework, "upstream's default fairness policy: a band whose `fairnessPolicyRef` names it serves its oldest request first, whatever its flow; Shepherd's default is round-robin"),
    noted("round-robin-fairness-policy", Flow, Framework, "Shepherd's default fairness policy"),
    noted("program-aware-fairness", Flow, Framework, "least attained service (`las`) with upstream's parameters, score, half-life decay and idle eviction; a program is charged `prompt + 2 × completion` tokens of each request's `usage` when it completes, as upstream; at most 65,536 programs tracked and 65,536 admitted requests awaited; no `program_aware_*` metrics"),
    entry("fcfs-ordering-policy", Flow, Framework),
    entry("edf-ordering-policy", Flow, Framework),
    entry("slo-deadline-ordering-policy", Flow, Framework),
    entry("static-usage-limit-policy", Flow, Framework),
    noted("sheddable-eviction-filter", Flow, Framework, "upstream's fixed eviction filter with `flowControl.enableEviction`: only sheddable requests (priority < 0) in flight are evicted; declared or not, as upstream; the `shepherd-epp` and `shepherd-gateway` adapters answer an evicted request 429 (see `docs/flow-control.md` for what each does mid-response)"),
    noted("priority-then-time-eviction-order-policy", Flow, Framework, "upstream's fixed eviction order with `flowControl.enableEviction`: the lowest priority first, then the most recently dispatched; declared or not, as upstream"),
    entry("priority-holdback-policy", Flow, Framework),
    noted("soft-reflective-ceiling-policy", Flow, Framework, "upstream's schedule (ceiling `1 - i·s/(N-1)` by rank, one shared tick alternating the gated bands with period `round(s/(1-s))`); the tick advances once per dispatch attempt (upstream: once per dispatch cycle); a request goes straight through only while its band is under its reflective ceiling"),
    noted("approx-prefix-cache-producer", Producer, Registry, "the block size is fixed when built (upstream can take it from the first candidate's metrics); auto-tuned capacity converts server blocks to index blocks"),
    noted("inflight-load-producer", Producer, Registry, "the endpoints count in-flight tokens themselves at every pick (pending prefill: uncached prompt tokens until the first token); the plugin holds the settings. `addEstimatedOutputTokens: true` counts in-flight prompt tokens × (1 + `outputRatio`) per endpoint, an approximation of upstream's per-request uncached input plus capped output; `syncCrossReplicaState` accepted (the `replicas` section exchanges loads)"),
    noted("predicted-latency-producer", Producer, Registry, "in process: a ridge-regression TTFT/TPOT model learned online from the scheduler's own finished requests (no training or prediction sidecars, no XGBoost); Shepherd's `window`, `minSamples`, `maxError`, `maxTracked`; `samplingMean`, `maxDecodeTokenSamplesForPrediction` and the in-flight and encoder-cache producer names are accepted and unused, `useEncoderCacheFeatures: true` is refused; a request carrying only one of the two objectives is not judged on the other (upstream measures it against 0)"),
    noted("tokenizer", Producer, Registry, "deprecated upstream name of `token-producer` (the same backends and parameters)"),
    noted("mm-embeddings-cache-producer", Producer, Registry, "media items are the chat-completions media content parts as the parser renders them (URLs, inline data hashed), not the `token-producer`'s multimodal features; capacity capped at 1,048,576 hashes per endpoint; upstream's `encoder_cache_*` metrics are not exported: `shepherd_mm_cache_items_{routed,hit}_total` and `shepherd_mm_cache_entries` count items sent to a picked server and those it held (no per-pod or per-modality labels)"),
    noted("token-producer", Producer, Registry, "the estimate backend (4 bytes a token), upstream's `vllm` render backend (the adapters post `/v1/completions/render` or `/v1/chat/completions/render` before the pick, within `vllm.timeout`; `http` is read as `url`; `modelName` alone with no local files selects it, as upstream, with a warning), or a real tokenizer from local files: the model's `tokenizer.json` (Hugging Face `tokenizers`) and chat template (minijinja, rendered as vLLM renders `/v1/chat/completions`), found by `modelName` in the local Hugging Face cache or by Shepherd's `tokenizerPath` (plus `chatTemplatePath`, `chatTemplateContentFormat`, `cacheMaxTokens`); nothing is downloaded. The deprecated `udsTokenizerConfig` is accepted with a warning: Shepherd does not speak the sidecar's protocol and uses the local tokenizer of `modelName`, else the estimate. Requests with `tools`, media parts, the responses and Anthropic APIs get no token ids (a typed error the consumer falls back on); `chat_template_kwargs` and other per-request template options are not applied"),
    noted("session-id-producer", Producer, Registry, "publishes `SessionIDDataKey` under its name for session-affinity `attribute` sources; the adapters copy its header (or `cookie`) only when the value is at most 64 bytes"),
    noted("latency-slo-admitter", Control, Registry, "runs before the profile's filters (listed in a profile); a refusal is HTTP 429"),
    noted("probabilistic-admitter", Control, Registry, "the draw is a hash of the request id and the scheduler's seed; a refusal is HTTP 429; an endpoint never scraped counts as saturated, as upstream counts one without metrics"),
    noted("prefix-cache-affinity-filter", Filter, Registry, "the exploration draw is a hash of the request id and the scheduler's seed; `ttftSource: latencyPredictor` reads the `predicted-latency-producer`'s TTFT (the gate is skipped while it has no predictions, as upstream does without them)"),
    noted("slo-headroom-tier-filter", Filter, Registry, "the exploration draw is a hash of the request id and the scheduler's seed; Shepherd's `latencyPredictionInfoProducerName` names the producer"),
    noted("latency-scorer", Scorer, Registry, "upstream's headroom tiers, idle preference, deficit buckets and composite fallback over the in-process `predicted-latency-producer` (one with the defaults is created when the config declares none)"),
    noted("header-based-testing-filter", Test, Registry, "a conformance-test plugin: keeps the endpoints the `test-epp-endpoint-selection` header names; no header keeps nothing (HTTP 503), as upstream"),
    noted("destination-endpoint-served-verifier", Test, Registry, "a conformance-test plugin: `shepherd-epp` answers the response headers with `x-conformance-test-served-endpoint` from Envoy's served-endpoint metadata (or upstream's failure text); `shepherd-gateway` names the endpoint it forwarded to"),
    noted("metrics-data-source", DataSource, Framework, "https scraping is not built in; the runtime scrapes every endpoint itself"),
    entry("core-metrics-extractor", DataExtractor, Framework),
    noted("multicluster-metrics-data-source", DataSource, Framework, "the runtime's scraper reads each cluster at its `metricsAddress`/`metricsPort` labels (else its address) over http; with `https` (upstream's default) the clusters are not scraped, a warning at start (https scraping is not built in, and never downgraded to clear text); TLS parameters checked and unused; Alpha upstream: needs `--allow-experimental-plugins`"),
    noted("multicluster-metrics-extractor", DataExtractor, Framework, "writes `llm-d.ai/multicluster-kv-cache-utilization` and `llm-d.ai/multicluster-queue-size`; every endpoint is then read as a cluster: the two averages are also its load metrics (waiting, KV utilization) and no engine mapping applies; Alpha upstream: needs `--allow-experimental-plugins`"),
    noted("k8s-notification-source", DataSource, Framework, "upstream's checks (`version` and `kind` required, one source per kind, only notification extractors wired to it); nothing is watched: Shepherd has no notification extractors (upstream's are compiled-in Go plugins, none in-tree) — a warning at start says so"),
    noted("endpoint-notification-source", DataSource, Framework, "the pool's membership does its job: the KV-event subscriptions and the producers hear of endpoints added and removed; its extractors (`precise-prefix-cache-producer`, `mm-embeddings-cache-producer`) are the producers declared in `plugins`"),
    noted("request-attribute-reporter", Control, Framework, "expressions in a CEL subset (numbers, strings, `usage.FIELD` paths, `has()`, arithmetic, comparison, logic, `?:`; integers and doubles are one number type); others are refused at load naming the subset. `shepherd-epp` sends the value as dynamic metadata with its answer to the response's end, as upstream (the usage is read from OpenAI-style JSON or SSE bodies, not from gRPC responses); `shepherd-gateway` evaluates it and logs the value at debug level (it has no dynamic metadata to set)"),
    noted("openai-parser", Parser, Framework, "claims chat/completions, completions, embeddings, responses (and the two `/render` sub-paths); `conversations` and `images/generations` are not claimed (the fallback, if any, forwards them); paths match at a `/` boundary"),
    noted("vllmgrpc-parser", Parser, Framework, "reads `GenerateRequest` (text or token ids, `stream`, `sampling_params.max_tokens`) and `EmbedRequest` (token ids) from the gRPC body; the messages carry no model, so the request has none; multimodal placeholders are not read; claimed by path whatever the pool's protocol; `shepherd-gateway` refuses its methods with 404 (it does not proxy gRPC; ext_proc only)"),
    noted("passthrough-parser", Parser, Framework, "the request has no model and no prompt: load and session scorers decide; `shepherd-gateway` forwards any POST path no other parser claims when `passthrough-parser` is listed explicitly (not as the default list's fallback)"),
    noted("anthropic-parser", Parser, Framework, "`system`, `messages` and `tools` rendered like chat (`cache_control` left out) for prefix matching; `model` is required; `count_tokens` is forwarded unread"),
    noted("vllmhttp-parser", Parser, Framework, "token ids must be JSON integers; `cache_salt` and multimodal `features` do not enter prefix matching"),
    noted("sglanghttp-parser", Parser, Framework, "`extra_key` (cache salt) does not enter prefix matching"),
    noted("vertexai-parser", Parser, Framework, "the OpenAI body in the gRPC message's `http_body.data` is read as chat (`PredictionService/ChatCompletions`) or responses (`RawPredict`, `StreamRawPredict`), as upstream, with `model` optional (the endpoint names it); claimed by path whatever the pool's protocol; `shepherd-gateway` refuses its methods with 404 (it does not proxy gRPC; ext_proc only)"),
    entry("concurrency-detector", Flow, Framework),
    entry("utilization-detector", Flow, Framework),
    noted("file-discovery", Discovery, Framework, "the endpoints file is polled every second with `watchFile` (upstream: fsnotify events); `name` and `namespace` are checked and not kept (Shepherd names endpoints by `ip:port`); a file that does not load on a reload keeps the endpoints in force; not combined with the `endpoints` section or Kubernetes discovery"),
    noted("multicluster-file-discovery", Discovery, Framework, "`file-discovery` with hostnames and IPv6 accepted; a hostname is resolved when the file is read (start and reloads) to its first address, which the picker routes to (upstream hands Envoy the hostname); `metricsAddress`/`metricsPort` labels move the scrape target; Alpha upstream: needs `--allow-experimental-plugins`"),
    noted("agent-identity", Control, Registry, "publishes the `agent-identity` attribute for session-affinity `attribute` sources and, as upstream's director, flow control takes it as the fairness id when no fairness header is sent (the `llm_d_epp_*` request metrics still label such a request with an empty `fairness_id`; a reload that drops the plugin keeps its identity in use until restart); Alpha upstream: needs `--allow-experimental-plugins`"),
];

/// Type names Shepherd registers that upstream used to register (the Gateway API Inference
/// Extension's, before the llm-d router), with the current upstream name when there is one.
pub const OLDER_UPSTREAM_NAMES: &[(&str, Option<&str>)] = &[
    ("kv-cache-scorer", Some("kv-cache-utilization-scorer")),
    ("lora-affinity-filter", None),
    ("prefix-cache", Some("prefix-cache-scorer")),
    ("kv-cache", Some("kv-cache-utilization-scorer")),
    ("queue", Some("queue-scorer")),
    ("max-score", Some("max-score-picker")),
    ("random", Some("random-picker")),
];

/// Type names that are Shepherd's own additions, not upstream's.
pub const SHEPHERD_EXTENSIONS: &[&str] = &[
    "prefill-load-scorer",
    "rendezvous-affinity-scorer",
    "hot-prefix-scorer",
    "slo-class-scorer",
    "prefill-duty-scorer",
    "prefill-load-pd-decider",
];

/// The upstream entry for `name`.
pub fn upstream_type(name: &str) -> Option<&'static UpstreamType> {
    UPSTREAM_TYPES.iter().find(|t| t.name == name)
}

/// The message a reference to a not-yet-implemented upstream type gets wherever it is refused
/// (a flow-control policy reference, say): the same words as
/// [`ConfigError::NotImplemented`](super::ConfigError::NotImplemented). `None` for a type that
/// is not such an upstream type.
pub fn not_implemented_message(plugin_type: &str) -> Option<String> {
    let t = upstream_type(plugin_type)?;
    let Status::NotYet(area) = t.status else {
        return None;
    };
    let note = if t.note.is_empty() {
        String::new()
    } else {
        format!("; {}", t.note)
    };
    Some(format!(
        "type `{plugin_type}` is an upstream plugin type Shepherd does not implement yet (area: {area}){note}"
    ))
}

impl UpstreamType {
    /// The one-word verdict `docs/compatibility.md` gives: `implemented`, `accepted with a
    /// difference` (an implemented type with a [`note`](Self::note)), or `not yet`.
    pub fn verdict(&self) -> &'static str {
        match (self.status, self.note.is_empty()) {
            (Status::NotYet(_), _) => "not yet",
            (_, true) => "implemented",
            (_, false) => "accepted with a difference",
        }
    }
}
