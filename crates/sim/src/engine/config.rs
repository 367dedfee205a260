//! The engine's geometry, limits and step-time model, with presets for common GPUs.

use serde::{Deserialize, Serialize};

use super::CostModel;

/// Engine geometry, limits and step-time model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineConfig {
    /// Tokens per KV block.
    pub block_size: u32,
    /// KV blocks on the GPU.
    pub num_gpu_blocks: u32,
    /// Most requests in a batch.
    pub max_num_seqs: u32,
    /// Token budget of one step.
    pub max_num_batched_tokens: u32,
    /// Step-time model.
    pub cost: CostModel,
}

impl EngineConfig {
    /// Llama-3-8B on one H100 80GB: the KV blocks vLLM reports at `gpu_memory_utilization`
    /// 0.9, and vLLM V1's defaults for the OpenAI server on a GPU of 70 GiB or more that is
    /// not an A100 (`EngineArgs::_set_default_args`: 1024 sequences, 8192 tokens per step).
    pub fn h100_llama8b() -> Self {
        EngineConfig {
            block_size: 16,
            num_gpu_blocks: 27_793,
            max_num_seqs: 1024,
            max_num_batched_tokens: 8192,
            cost: CostModel::h100_llama8b(),
        }
    }

    /// Llama-3-8B on one A100 80GB: the KV blocks of vLLM's memory profile at
    /// `gpu_memory_utilization` 0.9, and vLLM V1's defaults for the OpenAI server on an A100
    /// (256 sequences, 2048 tokens per step).
    pub fn a100_llama8b() -> Self {
        EngineConfig {
            block_size: 16,
            num_gpu_blocks: 27_800,
            max_num_seqs: 256,
            max_num_batched_tokens: 2048,
            cost: CostModel::a100_llama8b(),
        }
    }

    /// The preset called `name` (`h100-llama8b` or `a100-llama8b`).
    pub fn preset(name: &str) -> Option<Self> {
        match name {
            "h100-llama8b" | "h100" => Some(Self::h100_llama8b()),
            "a100-llama8b" | "a100" => Some(Self::a100_llama8b()),
            _ => None,
        }
    }

    /// Names of the presets.
    pub const PRESETS: &'static [&'static str] = &["h100-llama8b", "a100-llama8b"];
}
