//! One model-server engine's mapping, and the built-in presets.

use serde::{Deserialize, Serialize};

use super::spec::{MetricSpec, Specs};

/// Label of [`EngineMapping::cache_info_spec`] giving the block size, unless overridden.
pub const DEFAULT_BLOCK_SIZE_LABEL: &str = "block_size";
/// Label of [`EngineMapping::cache_info_spec`] giving the number of GPU blocks, unless
/// overridden.
pub const DEFAULT_NUM_BLOCKS_LABEL: &str = "num_gpu_blocks";
/// Label of the LoRA info series listing running adapters (comma-separated).
pub const LORA_RUNNING_LABEL: &str = "running_lora_adapters";
/// Label of the LoRA info series listing waiting adapters (comma-separated).
pub const LORA_WAITING_LABEL: &str = "waiting_lora_adapters";
/// Label of the LoRA info series giving the most adapters the server holds at once.
pub const LORA_MAX_LABEL: &str = "max_lora";
/// Label naming the model a series is about (vLLM and SGLang both write it).
pub const MODEL_NAME_LABEL: &str = "model_name";

/// Which metrics of one engine's `/metrics` page give each signal the router needs.
///
/// Field names are the upstream `core-metrics-extractor`'s `engineConfigs` entries (see the
/// [module docs](super)), so its configurations load unchanged; `modelName` and spec lists
/// are Shepherd extensions. An empty spec disables its signal.
///
/// ```
/// use shepherd_runtime::mapping::EngineMapping;
///
/// let custom: EngineMapping = serde_json::from_str(r#"{
///     "name": "my-engine",
///     "queuedRequestsSpec": "queue_size{status=waiting}",
///     "runningRequestsSpec": "running_size",
///     "kvUsageSpec": ["cache_utilization", "old_cache_utilization"]
/// }"#).unwrap();
/// assert_eq!(custom.kv_usage_spec.as_slice().len(), 2);
/// assert!(custom.lora_spec.is_empty());
/// assert_eq!(EngineMapping::preset("vllm"), Some(EngineMapping::vllm()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EngineMapping {
    /// Engine name (`vllm`, `sglang`, or any other), matched against an endpoint's engine.
    pub name: String,
    /// Requests waiting in the server's queue (summed over series).
    #[serde(default)]
    pub queued_requests_spec: Specs,
    /// Requests the server is running (summed over series).
    #[serde(default)]
    pub running_requests_spec: Specs,
    /// KV-cache utilization in `[0, 1]` (maximum over series).
    #[serde(default)]
    pub kv_usage_spec: Specs,
    /// LoRA info series: value is the series' creation time, labels list adapters; the newest
    /// series wins.
    #[serde(default)]
    pub lora_spec: Specs,
    /// Info series whose labels give the cache geometry (first matching series).
    #[serde(default)]
    pub cache_info_spec: Specs,
    /// Label of the cache info series giving the block size in tokens (default `block_size`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_block_size_label_name: Option<String>,
    /// Label of the cache info series giving the number of GPU blocks (default
    /// `num_gpu_blocks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_num_blocks_label_name: Option<String>,
    /// A gauge whose value is the block size (instead of a label of the info series; wins when
    /// both give one).
    #[serde(default, skip_serializing_if = "Specs::is_empty")]
    pub cache_block_size_spec: Specs,
    /// A gauge whose value is the number of GPU blocks (instead of a label of the info series;
    /// wins when both give one).
    #[serde(default, skip_serializing_if = "Specs::is_empty")]
    pub cache_num_blocks_spec: Specs,
    /// Shepherd extension: read only series whose `model_name` label is this model (series
    /// without that label are still read). Unset: all series are combined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
    /// Upstream's `customMetrics`: scalar metrics read into endpoint attributes (the
    /// `endpoint-attribute-scorer` and `-filter` read them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub custom_metrics: Vec<CustomMetric>,
}

/// One of upstream's `customMetrics` entries: the value of the newest series matching
/// `metricSpec` becomes the endpoint's attribute `attributeKey` at every scrape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CustomMetric {
    /// The endpoint attribute the value is stored under (`custom.queue_depth`, say).
    pub attribute_key: String,
    /// The series read (`custom_queue_depth{tier=gold}`, say).
    pub metric_spec: MetricSpec,
}

/// A spec list from names known to be valid.
fn specs(names: &[&'static str]) -> Specs {
    Specs::from(
        names
            .iter()
            .filter_map(|name| MetricSpec::new(name).ok())
            .collect::<Vec<_>>(),
    )
}

impl EngineMapping {
    /// A mapping named `name` that reads nothing.
    pub fn empty(name: impl Into<String>) -> EngineMapping {
        EngineMapping {
            name: name.into(),
            queued_requests_spec: Specs::none(),
            running_requests_spec: Specs::none(),
            kv_usage_spec: Specs::none(),
            lora_spec: Specs::none(),
            cache_info_spec: Specs::none(),
            cache_block_size_label_name: None,
            cache_num_blocks_label_name: None,
            cache_block_size_spec: Specs::none(),
            cache_num_blocks_spec: Specs::none(),
            model_name: None,
            custom_metrics: Vec::new(),
        }
    }

    /// vLLM (DESIGN §9): `vllm:num_requests_waiting`, `vllm:num_requests_running`,
    /// `vllm:kv_cache_usage_perc` falling back to the older `vllm:gpu_cache_usage_perc`,
    /// `vllm:lora_requests_info`, and `vllm:cache_config_info{block_size,num_gpu_blocks}`.
    pub fn vllm() -> EngineMapping {
        EngineMapping {
            queued_requests_spec: specs(&["vllm:num_requests_waiting"]),
            running_requests_spec: specs(&["vllm:num_requests_running"]),
            kv_usage_spec: specs(&["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"]),
            lora_spec: specs(&["vllm:lora_requests_info"]),
            cache_info_spec: specs(&["vllm:cache_config_info"]),
            ..EngineMapping::empty("vllm")
        }
    }

    /// SGLang (DESIGN §9): `sglang:num_queue_reqs`, `sglang:num_running_reqs`,
    /// `sglang:token_usage`, and `sglang:cache_config_info{page_size,num_pages}`; no LoRA.
    pub fn sglang() -> EngineMapping {
        EngineMapping {
            queued_requests_spec: specs(&["sglang:num_queue_reqs"]),
            running_requests_spec: specs(&["sglang:num_running_reqs"]),
            kv_usage_spec: specs(&["sglang:token_usage"]),
            cache_info_spec: specs(&["sglang:cache_config_info"]),
            cache_block_size_label_name: Some("page_size".to_owned()),
            cache_num_blocks_label_name: Some("num_pages".to_owned()),
            ..EngineMapping::empty("sglang")
        }
    }

    /// The built-in preset named `name` (`vllm` or `sglang`).
    pub fn preset(name: &str) -> Option<EngineMapping> {
        match name {
            "vllm" => Some(EngineMapping::vllm()),
            "sglang" => Some(EngineMapping::sglang()),
            _ => None,
        }
    }

    /// The label of the cache info series giving the block size.
    pub fn block_size_label(&self) -> &str {
        non_empty(&self.cache_block_size_label_name).unwrap_or(DEFAULT_BLOCK_SIZE_LABEL)
    }

    /// The label of the cache info series giving the number of GPU blocks.
    pub fn num_blocks_label(&self) -> &str {
        non_empty(&self.cache_num_blocks_label_name).unwrap_or(DEFAULT_NUM_BLOCKS_LABEL)
    }

    /// Every metric name this mapping reads, in field order, without repeats.
    pub fn metric_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for specs in [
            &self.queued_requests_spec,
            &self.running_requests_spec,
            &self.kv_usage_spec,
            &self.lora_spec,
            &self.cache_info_spec,
            &self.cache_block_size_spec,
            &self.cache_num_blocks_spec,
        ] {
            for spec in specs.as_slice() {
                if !names.contains(&spec.name()) {
                    names.push(spec.name());
                }
            }
        }
        names
    }
}

/// The value of an optional string, unless unset or empty (upstream treats `""` as unset).
fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|v| !v.is_empty())
}
