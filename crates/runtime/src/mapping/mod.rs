//! Which model-server metrics feed the router, as configuration.
//!
//! An [`EngineMapping`] names, for one engine, the metrics that give each signal the core's
//! [`EndpointMetrics`](shepherd_scheduler_core::endpoint::EndpointMetrics) holds; its
//! [`extract`](EngineMapping::extract) turns a parsed page ([`prom::Scrape`](crate::prom::Scrape))
//! into those metrics, sanitizing garbage and saying what was missing or corrected
//! ([`Extraction`]). The built-in presets follow DESIGN §9:
//!
//! | signal | [`vllm`](EngineMapping::vllm) | [`sglang`](EngineMapping::sglang) | combined over series |
//! |---|---|---|---|
//! | waiting | `vllm:num_requests_waiting` | `sglang:num_queue_reqs` | sum |
//! | running | `vllm:num_requests_running` | `sglang:num_running_reqs` | sum |
//! | KV utilization | `vllm:kv_cache_usage_perc`, else `vllm:gpu_cache_usage_perc` | `sglang:token_usage` | max |
//! | geometry | `vllm:cache_config_info{block_size,num_gpu_blocks}` | `sglang:cache_config_info{page_size,num_pages}` | first series |
//! | LoRA | `vllm:lora_requests_info{max_lora,running_lora_adapters,waiting_lora_adapters}` | — | newest series (largest value) |
//!
//! ```
//! use shepherd_runtime::mapping::{EngineMapping, Signal};
//! use shepherd_runtime::prom::parse;
//!
//! let page = br#"vllm:num_requests_waiting{engine="0",model_name="llama"} 2.0
//! vllm:num_requests_waiting{engine="1",model_name="llama"} 3.0
//! vllm:gpu_cache_usage_perc{engine="0",model_name="llama"} 0.25
//! vllm:gpu_cache_usage_perc{engine="1",model_name="llama"} 0.5
//! vllm:cache_config_info{block_size="16",num_gpu_blocks="4096"} 1.0
//! vllm:lora_requests_info{max_lora="2",running_lora_adapters="a,b",waiting_lora_adapters=""} 1.7e9
//! "#;
//! let scrape = parse(page).unwrap();
//! let out = EngineMapping::vllm().extract(&scrape);
//! assert_eq!(out.metrics.waiting, 5); // summed over data-parallel engines
//! assert_eq!(out.metrics.kv_utilization, 0.5); // the older name, the busiest engine
//! assert_eq!(out.metrics.block_size, Some(16));
//! assert_eq!(out.metrics.num_gpu_blocks, Some(4096));
//! assert!(out.metrics.lora.is_running("b"));
//! assert_eq!(out.missing, [Signal::Running]);
//! assert!(out.issues.is_empty());
//! ```
//!
//! # Configuration, and what it shares with upstream
//!
//! Upstream, the Gateway API Inference Extension's endpoint picker (now the llm-d router,
//! repository `llm-d/llm-d-inference-scheduler`) configures the same thing with two plugins,
//! documented in `pkg/epp/framework/plugins/datalayer/source/metrics/README.md` and
//! `pkg/epp/framework/plugins/datalayer/extractor/metrics/README.md`, with their parameter
//! structs in `datasource.go` and `factories.go` of those folders (read at commit `520af47`,
//! May 2026). Shepherd accepts the same parameter names:
//!
//! - `metrics-data-source` ([`MetricsDataSourceParams`]): `scheme` (default `http`), `path`
//!   (default `/metrics`), `insecureSkipVerify` (default `true`).
//! - `core-metrics-extractor` ([`CoreMetricsExtractorParams`]): `engineLabelKey` (default
//!   `llm-d.ai/engine-type`; the older `inference.networking.k8s.io/engine-type` is read as a
//!   fallback upstream), `defaultEngine` (default `vllm`), and `engineConfigs`, a list of
//!   [`EngineMapping`]s with `name`, `queuedRequestsSpec`, `runningRequestsSpec`,
//!   `kvUsageSpec`, `loraSpec`, `cacheInfoSpec`, `cacheBlockSizeLabelName` (default
//!   `block_size`), `cacheNumBlocksLabelName` (default `num_gpu_blocks`), and the direct-gauge
//!   alternatives `cacheBlockSizeSpec` and `cacheNumBlocksSpec`. A spec is a PromQL-like
//!   selector `name{label=value}` (quotes optional); an empty string disables the signal. An
//!   engine config named like a built-in replaces it whole; the name `default` is reserved;
//!   endpoints naming an unknown engine get the default engine's mapping.
//!
//! Where Shepherd differs, on purpose:
//!
//! - a spec field may also be a **list** of specs, tried in order (the vLLM preset reads
//!   `vllm:gpu_cache_usage_perc` when `vllm:kv_cache_usage_perc` is absent; upstream's preset
//!   reads only the newer name);
//! - when several series match a count or utilization spec, upstream keeps the one with the
//!   latest sample timestamp (in practice the first, as these servers write no timestamps);
//!   Shepherd **sums** counts and takes the **maximum** utilization, so a data-parallel vLLM
//!   (one series per `engine`) or a multi-model server is seen whole; `modelName`, an
//!   extension, restricts reading to one model's series;
//! - label matchers other than `=` are refused instead of ignored;
//! - upstream also presets `trtllm-serve` and `triton-tensorrt-llm`; Shepherd presets only
//!   `vllm` and `sglang` (the others can be written as `engineConfigs`).

mod engine;
mod extract;
mod plugins;
mod spec;

pub use engine::{
    CustomMetric, DEFAULT_BLOCK_SIZE_LABEL, DEFAULT_NUM_BLOCKS_LABEL, EngineMapping,
    LORA_MAX_LABEL, LORA_RUNNING_LABEL, LORA_WAITING_LABEL, MODEL_NAME_LABEL,
};
pub use extract::{Extraction, Issue, Reason, Signal};
pub use plugins::{
    CORE_METRICS_EXTRACTOR_TYPE, CoreMetricsExtractorParams, DEFAULT_ENGINE,
    DEFAULT_ENGINE_LABEL_KEY, EngineMappings, LEGACY_ENGINE_LABEL_KEY, METRICS_DATA_SOURCE_TYPE,
    MetricsDataSourceParams, RESERVED_ENGINE_NAME,
};
pub use spec::{MetricSpec, Specs};
