//! The published figures the engine presets are calibrated against.

use super::{Measure, Provenance, Reference};

const OFFLOAD_BLOG: &str = "vLLM blog, \"Inside vLLM's New KV Offloading Connector\" (2026-01-08), \
    Fig. 1 \"Single Request TTFT, Llama-3.1-8B-Instruct, NVIDIA H100\", GPU-compute curve: vLLM \
    commit 2a1776b7, FlashAttention, prefix caching and de/tokenization off, block size 16. \
    https://blog.vllm.ai/2026/01/08/kv-offloading-connector.html";

const FP8_BLOG: &str = "vLLM blog, \"The State of FP8 KV-Cache and Attention Quantization in \
    vLLM\" (2026-04-22): bf16 KV cache, concurrency 1, fitted ITL = 6.44 ms + 4.37e-5 ms × \
    context tokens; vLLM 0.19.1, FlashAttention-3, H100. \
    https://blog.vllm.ai/2026/04/22/fp8-kvcache.html";

const INFERENCE_BENCH: &str = "InferenceBench, \"Recipe: concurrency sweep\": H100-80GB-HBM3, \
    vLLM 0.21.0, Llama-3.1-8B-Instruct, workload llm.inference.chatbot-short, concurrency 1: \
    TTFT p50 13.98 ms, TPOT p50 6.48 ms. \
    https://yobitelcomm.github.io/bench/recipes/concurrency-sweep/";

const LAMBDA_H100: &str = "LambdaLabsML/vllm-benchmark, \
    results/prompt_10/1xH100-80GB-SXM/Meta-Llama-3-8B-Instruct_tp1_len2048.json: a burst of \
    10 ShareGPT prompts, vLLM 0.6.0 with 10 scheduler steps; median ITL 72.3 ms per 10-token \
    chunk. ShareGPT answers are short and unequal, so the median chunk runs while most of the \
    burst has already finished: about 4 requests still decoding, at about 150-250 context \
    tokens each";

const LAMBDA_A100: &str = "LambdaLabsML/vllm-benchmark, \
    results/prompt_10/1xA100-80GB-SXM/Meta-Llama-3-8B-Instruct_tp1_len2048.json: a burst of \
    10 ShareGPT prompts, vLLM 0.6.0 with 10 scheduler steps; median ITL 114.9 ms per 10-token \
    chunk. ShareGPT answers are short and unequal, so the median chunk runs while most of the \
    burst has already finished: about 4 requests still decoding, at about 150-250 context \
    tokens each";

const NIM_LOG: &str = "NVIDIA Cloud Functions documentation, \"Elastic NIM\" guide: \
    llama3-8b-instruct start-up log (NIM 1.0.0, vLLM 0.4.1, bf16, gpu_memory_utilization 0.9, \
    80 GB GPU): \"Loading model weights took 14.9595 GB\", \"# GPU blocks: 27793\"";

const VIDUR_A100: &str = "microsoft/vidur, \
    data/profiling/compute/a100/meta-llama/Meta-Llama-3-8B/mlp.csv (commit 2bb7a086): median \
    CUDA-event times of the linear layers, norms and activation of one layer × 32 layers, TP 1, \
    A100 80GB, eager mode (attention and lm_head not included)";

const KV_ARITHMETIC: &str = "vLLM's memory profile for an 80 GB A100 (79.15 GiB reported): \
    0.9 × 79.15 GiB − 14.96 GiB of weights − about 2 GiB of activations and graphs ≈ 54.3 GiB \
    of KV cache at 2 MiB per 16-token block (32 layers × 8 KV heads × 128 × 2 × 2 bytes per \
    token); the H100 log above gives the same within 1 %";

const H100: &str = "h100-llama8b";
const A100: &str = "a100-llama8b";

const fn reference(
    preset: &'static str,
    quantity: &'static str,
    published: f64,
    unit: &'static str,
    provenance: Provenance,
    source: &'static str,
    measure: Measure,
) -> Reference {
    Reference {
        preset,
        quantity,
        published,
        unit,
        provenance,
        source,
        measure,
    }
}

use Provenance::{Chart, Derived, Printed};

/// Every published figure, H100 first.
pub const REFERENCES: &[Reference] = &[
    reference(
        H100,
        "TTFT, short chat prompt (taken as 50 tokens), idle server",
        13.98,
        "ms",
        Printed,
        INFERENCE_BENCH,
        Measure::Ttft { prompt: 50 },
    ),
    reference(
        H100,
        "TTFT, 1k-token prompt, idle server",
        27.0,
        "ms",
        Chart,
        OFFLOAD_BLOG,
        Measure::Ttft { prompt: 1024 },
    ),
    reference(
        H100,
        "TTFT, 4k-token prompt (between the chart's 1k and 10k points)",
        95.0,
        "ms",
        Derived,
        OFFLOAD_BLOG,
        Measure::Ttft { prompt: 4096 },
    ),
    reference(
        H100,
        "TTFT, 10k-token prompt",
        260.0,
        "ms",
        Chart,
        OFFLOAD_BLOG,
        Measure::Ttft { prompt: 10_000 },
    ),
    reference(
        H100,
        "TTFT, 16k-token prompt (between the chart's 10k and 20k points)",
        480.0,
        "ms",
        Derived,
        OFFLOAD_BLOG,
        Measure::Ttft { prompt: 16_384 },
    ),
    reference(
        H100,
        "TTFT, 20k-token prompt",
        640.0,
        "ms",
        Chart,
        OFFLOAD_BLOG,
        Measure::Ttft { prompt: 20_000 },
    ),
    reference(
        H100,
        "TTFT, 100k-token prompt",
        6850.0,
        "ms",
        Chart,
        OFFLOAD_BLOG,
        Measure::Ttft { prompt: 100_000 },
    ),
    reference(
        H100,
        "prefill throughput, 10k-token prompt (prompt / TTFT)",
        38_500.0,
        "tok/s",
        Derived,
        OFFLOAD_BLOG,
        Measure::PrefillThroughput { prompt: 10_000 },
    ),
    reference(
        H100,
        "decode step, batch 1, 1k context (from the fit)",
        6.49,
        "ms",
        Derived,
        FP8_BLOG,
        Measure::DecodeStep {
            batch: 1,
            context: 1024,
        },
    ),
    reference(
        H100,
        "decode step, batch 1, 16k context (from the fit)",
        7.16,
        "ms",
        Derived,
        FP8_BLOG,
        Measure::DecodeStep {
            batch: 1,
            context: 16_384,
        },
    ),
    reference(
        H100,
        "TPOT, concurrency 1 (short chat: taken as 300 context tokens)",
        6.48,
        "ms",
        Printed,
        INFERENCE_BENCH,
        Measure::DecodeStep {
            batch: 1,
            context: 300,
        },
    ),
    reference(
        H100,
        "decode step at the burst's median chunk (about 4 ShareGPT requests still decoding, about 200 context tokens each)",
        7.23,
        "ms",
        Derived,
        LAMBDA_H100,
        Measure::DecodeStep {
            batch: 4,
            context: 200,
        },
    ),
    reference(
        H100,
        "KV-cache blocks at gpu_memory_utilization 0.9",
        27_793.0,
        "blocks",
        Printed,
        NIM_LOG,
        Measure::KvBlocks,
    ),
    reference(
        A100,
        "linear layers of one forward pass, 32 tokens",
        10.9,
        "ms",
        Derived,
        VIDUR_A100,
        Measure::LinearLayers { tokens: 32 },
    ),
    reference(
        A100,
        "linear layers, 128 tokens",
        13.2,
        "ms",
        Derived,
        VIDUR_A100,
        Measure::LinearLayers { tokens: 128 },
    ),
    reference(
        A100,
        "linear layers, 256 tokens",
        19.5,
        "ms",
        Derived,
        VIDUR_A100,
        Measure::LinearLayers { tokens: 256 },
    ),
    reference(
        A100,
        "linear layers, 512 tokens",
        34.6,
        "ms",
        Derived,
        VIDUR_A100,
        Measure::LinearLayers { tokens: 512 },
    ),
    reference(
        A100,
        "linear layers, 2,048 tokens (the A100's default step budget)",
        145.6,
        "ms",
        Derived,
        VIDUR_A100,
        Measure::LinearLayers { tokens: 2048 },
    ),
    reference(
        A100,
        "linear layers, 16k tokens",
        1082.8,
        "ms",
        Derived,
        VIDUR_A100,
        Measure::LinearLayers { tokens: 16_384 },
    ),
    reference(
        A100,
        "decode step at the burst's median chunk (about 4 ShareGPT requests still decoding, about 200 context tokens each)",
        11.49,
        "ms",
        Derived,
        LAMBDA_A100,
        Measure::DecodeStep {
            batch: 4,
            context: 200,
        },
    ),
    reference(
        A100,
        "KV-cache blocks at gpu_memory_utilization 0.9",
        27_800.0,
        "blocks",
        Derived,
        KV_ARITHMETIC,
        Measure::KvBlocks,
    ),
];
