//! The upstream picker's metric families: names, help, buckets, as the llm-d router declares
//! them (`pkg/epp/metrics/llm_d_router_metrics.go`, `grpc_stream_metrics.go`,
//! `approximateprefix/metrics.go` at llm-d/llm-d-router `ebab687`), and their deprecated
//! names (`metrics.go`, the Gateway API Inference Extension's `inference_objective_*`,
//! `inference_pool_*`, `inference_extension_*`).

use shepherd_scheduler_core::metrics::MetricDesc;

/// A family under its current name and, when it has one, its deprecated twin.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Family {
    pub(crate) desc: MetricDesc<'static>,
    /// The deprecated name, and the labels it keeps (renamed `(new, old)`); `None`: no twin.
    pub(crate) legacy: Option<Legacy>,
}

/// A deprecated twin: its name and which of the current labels it keeps, under which name.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Legacy {
    pub(crate) name: &'static str,
    pub(crate) labels: &'static [(&'static str, &'static str)],
}

const fn family(name: &'static str, help: &'static str, legacy: Option<Legacy>) -> Family {
    Family {
        desc: MetricDesc::new(name, help),
        legacy,
    }
}

const fn legacy(
    name: &'static str,
    labels: &'static [(&'static str, &'static str)],
) -> Option<Legacy> {
    Some(Legacy { name, labels })
}

const MODEL: &[(&str, &str)] = &[
    ("model_name", "model_name"),
    ("target_model_name", "target_model_name"),
];
const MODEL_PRIORITY: &[(&str, &str)] = &[
    ("model_name", "model_name"),
    ("target_model_name", "target_model_name"),
    ("priority", "priority"),
];
const MODEL_ERROR: &[(&str, &str)] = &[
    ("model_name", "model_name"),
    ("target_model_name", "target_model_name"),
    ("error_code", "error_code"),
];
const POOL: &[(&str, &str)] = &[("name", "name")];
const NONE: &[(&str, &str)] = &[];

// --- request families: labels model_name, target_model_name, fairness_id, priority ---

pub(crate) const REQUEST_TOTAL: Family = family(
    "llm_d_epp_request_total",
    "Total number of processed requests.",
    legacy("inference_objective_request_total", MODEL_PRIORITY),
);
pub(crate) const REQUEST_ERROR_TOTAL: Family = family(
    "llm_d_epp_request_error_total",
    "Total number of request errors.",
    legacy("inference_objective_request_error_total", MODEL_ERROR),
);
pub(crate) const REQUEST_DURATION: Family = family(
    "llm_d_epp_request_duration_seconds",
    "End-to-end request latency distribution in seconds.",
    legacy("inference_objective_request_duration_seconds", MODEL),
);
pub(crate) const REQUEST_SIZE: Family = family(
    "llm_d_epp_request_size_bytes",
    "Incoming request body size distribution in bytes.",
    legacy("inference_objective_request_sizes", MODEL),
);
pub(crate) const RESPONSE_SIZE: Family = family(
    "llm_d_epp_response_size_bytes",
    "Outgoing response body size distribution in bytes.",
    legacy("inference_objective_response_sizes", MODEL),
);
pub(crate) const INPUT_TOKENS: Family = family(
    "llm_d_epp_request_input_tokens",
    "Input token count distribution per request.",
    legacy("inference_objective_input_tokens", MODEL),
);
pub(crate) const OUTPUT_TOKENS: Family = family(
    "llm_d_epp_request_output_tokens",
    "Output token count distribution per request.",
    legacy("inference_objective_output_tokens", MODEL),
);
pub(crate) const CACHED_TOKENS: Family = family(
    "llm_d_epp_request_cached_tokens",
    "Distribution of prompt tokens read from cache per request, as reported by the model server in the response.",
    legacy("inference_objective_prompt_cached_tokens", MODEL),
);
pub(crate) const RUNNING: Family = family(
    "llm_d_epp_request_running",
    "Current number of active running requests.",
    legacy(
        "inference_objective_running_requests",
        &[("model_name", "model_name")],
    ),
);
pub(crate) const NTPOT: Family = family(
    "llm_d_epp_request_ntpot_seconds",
    "Normalized time per output token in seconds (end-to-end latency divided by output token count).",
    legacy(
        "inference_objective_normalized_time_per_output_token_seconds",
        MODEL,
    ),
);
/// Labels: the request labels plus `streaming`.
pub(crate) const TTFT: Family = family(
    "llm_d_epp_request_ttft_seconds",
    "Time to first token in seconds, measured from request received to first response byte. For non-streaming requests, this equals total request duration.",
    None,
);
pub(crate) const STREAMING_TPOT: Family = family(
    "llm_d_epp_request_streaming_tpot_seconds",
    "Average time per output token in seconds for streaming requests, computed as (e2e - TTFT) / (output_tokens - 1).",
    None,
);

// --- pool families: label name (the pool) ---

pub(crate) const AVG_KV: Family = family(
    "llm_d_epp_average_kv_cache_utilization",
    "The average kv cache utilization for an inference server pool.",
    legacy("inference_pool_average_kv_cache_utilization", POOL),
);
pub(crate) const AVG_QUEUE: Family = family(
    "llm_d_epp_average_queue_size",
    "The average number of requests pending in the model server queue.",
    legacy("inference_pool_average_queue_size", POOL),
);
pub(crate) const AVG_RUNNING: Family = family(
    "llm_d_epp_average_running_requests",
    "The average number of running requests across model servers in the pool.",
    legacy("inference_pool_average_running_requests", POOL),
);
pub(crate) const READY_ENDPOINTS: Family = family(
    "llm_d_epp_ready_endpoints",
    "The number of ready endpoints in the inference server pool.",
    legacy("inference_pool_ready_pods", POOL),
);
/// Labels: `name`, `model_server_endpoint`.
pub(crate) const PER_ENDPOINT_QUEUE: Family = family(
    "llm_d_epp_per_endpoint_queue_size",
    "The total number of requests pending in the model server queue for each underlying endpoint.",
    legacy(
        "inference_pool_per_pod_queue_size",
        &[
            ("name", "name"),
            ("model_server_endpoint", "model_server_pod"),
        ],
    ),
);

/// Labels: `model_rewrite_name`, `model_name`, `target_model`.
pub(crate) const MODEL_REWRITE_DECISIONS: Family = family(
    "llm_d_epp_model_rewrite_decisions_total",
    "Total number of inference model rewrite decisions.",
    legacy(
        "inference_extension_model_rewrite_decisions_total",
        &[
            ("model_rewrite_name", "model_rewrite_name"),
            ("model_name", "model_name"),
            ("target_model", "target_model"),
        ],
    ),
);

// --- scheduling ---

pub(crate) const SCHEDULER_E2E: Family = family(
    "llm_d_epp_scheduler_e2e_duration_seconds",
    "End-to-end scheduling latency distribution in seconds.",
    legacy("inference_extension_scheduler_e2e_duration_seconds", NONE),
);
/// Labels: `status`, `target_model_name`, `endpoint_name`, `namespace`, `port`.
pub(crate) const SCHEDULER_ATTEMPTS: Family = family(
    "llm_d_epp_scheduler_attempts_total",
    "Total number of scheduling attempts.",
    legacy(
        "inference_extension_scheduler_attempts_total",
        &[
            ("status", "status"),
            ("target_model_name", "target_model_name"),
            ("endpoint_name", "pod_name"),
            ("namespace", "namespace"),
            ("port", "port"),
        ],
    ),
);
/// Labels: `extension_point`, `plugin_type`, `plugin_name`.
pub(crate) const PLUGIN_DURATION: Family = family(
    "llm_d_epp_plugin_duration_seconds",
    "Plugin processing latency distribution in seconds for each extension point, plugin type and plugin name.",
    legacy(
        "inference_extension_plugin_duration_seconds",
        &[
            ("extension_point", "extension_point"),
            ("plugin_type", "plugin_type"),
            ("plugin_name", "plugin_name"),
        ],
    ),
);

// --- prefix index: labels plugin_name, plugin_type (none on the deprecated twins) ---

pub(crate) const PREFIX_SIZE: Family = family(
    "llm_d_epp_prefix_indexer_size",
    "Size of the prefix indexer.",
    legacy("inference_extension_prefix_indexer_size", NONE),
);
pub(crate) const PREFIX_HIT_RATIO: Family = family(
    "llm_d_epp_prefix_indexer_hit_ratio",
    "Ratio of prefix length matched to total prefix length in the cache lookup.",
    legacy("inference_extension_prefix_indexer_hit_ratio", NONE),
);

// --- flow control ---

const FLOW_QUEUE_LABELS: &[(&str, &str)] = &[
    ("fairness_id", "fairness_id"),
    ("priority", "priority"),
    ("inference_pool", "inference_pool"),
    ("model_name", "model_name"),
    ("target_model_name", "target_model_name"),
];

/// Labels: `fairness_id`, `priority`, `inference_pool`, `model_name`, `target_model_name`.
pub(crate) const FLOW_QUEUE_SIZE: Family = family(
    "llm_d_epp_flow_control_queue_size",
    "Current number of requests actively held in the Flow Control queue.",
    legacy(
        "inference_extension_flow_control_queue_size",
        FLOW_QUEUE_LABELS,
    ),
);
/// Labels: as [`FLOW_QUEUE_SIZE`].
pub(crate) const FLOW_QUEUE_BYTES: Family = family(
    "llm_d_epp_flow_control_queue_bytes",
    "Current total size in bytes of requests actively held in the Flow Control queue.",
    legacy(
        "inference_extension_flow_control_queue_bytes",
        FLOW_QUEUE_LABELS,
    ),
);
/// Labels: `inference_pool`, `stage`.
pub(crate) const FLOW_SATURATION: Family = family(
    "llm_d_epp_flow_control_pool_saturation",
    "Pool saturation signal gating Flow Control dispatch ('effective' is the value used for gating; 1.0 is the gating set point).",
    legacy(
        "inference_extension_flow_control_pool_saturation",
        &[("inference_pool", "inference_pool"), ("stage", "stage")],
    ),
);
/// Labels: `fairness_id`, `priority`, `outcome`, `inference_pool`, `model_name`, `target_model_name`.
pub(crate) const FLOW_QUEUE_DURATION: Family = family(
    "llm_d_epp_flow_control_request_queue_duration_seconds",
    "Distribution of total time requests spend in the Flow Control layer (from enqueue to final outcome).",
    legacy(
        "inference_extension_flow_control_request_queue_duration_seconds",
        &[
            ("fairness_id", "fairness_id"),
            ("priority", "priority"),
            ("outcome", "outcome"),
            ("inference_pool", "inference_pool"),
            ("model_name", "model_name"),
            ("target_model_name", "target_model_name"),
        ],
    ),
);
/// Labels: `outcome`, `priority`, `inference_pool`.
pub(crate) const FLOW_REQUESTS: Family = family(
    "llm_d_epp_flow_control_requests_total",
    "Total number of requests processed by the Flow Control layer.",
    None,
);

// --- ext_proc streams ---

pub(crate) const EXTPROC_INFLIGHT: Family = family(
    "llm_d_epp_extproc_streams_inflight",
    "Number of ext_proc gRPC streams currently open.",
    None,
);
/// Labels: `code`.
pub(crate) const EXTPROC_TOTAL: Family = family(
    "llm_d_epp_extproc_streams_total",
    "Total ext_proc gRPC streams completed, by gRPC status code.",
    None,
);
pub(crate) const EXTPROC_DURATION: Family = family(
    "llm_d_epp_extproc_stream_duration_seconds",
    "Duration an ext_proc gRPC stream stays open, in seconds.",
    None,
);

// --- buckets ---

/// Long-running inference, 5 ms to 1 hour.
pub(crate) static GENERAL_LATENCY: [f64; 35] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 120.0, 180.0, 240.0, 300.0, 360.0, 480.0, 600.0, 900.0,
    1200.0, 1800.0, 2700.0, 3600.0,
];
pub(crate) static REQUEST_BYTES: [f64; 25] = [
    64.0,
    128.0,
    256.0,
    512.0,
    1024.0,
    2048.0,
    4096.0,
    8192.0,
    16384.0,
    32768.0,
    65536.0,
    131072.0,
    262144.0,
    524288.0,
    1048576.0,
    2097152.0,
    4194304.0,
    8388608.0,
    16777216.0,
    33554432.0,
    67108864.0,
    134217728.0,
    268435456.0,
    536870912.0,
    1073741824.0,
];
pub(crate) static RESPONSE_BYTES: [f64; 15] = [
    1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0,
    32778.0, 65536.0,
];
/// Input and cached tokens (upstream's 32778 is kept as written).
pub(crate) static INPUT_TOKEN_BUCKETS: [f64; 19] = [
    1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0,
    32778.0, 65536.0, 131072.0, 262144.0, 524288.0, 1048576.0,
];
pub(crate) static OUTPUT_TOKEN_BUCKETS: [f64; 12] = [
    1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0,
];
pub(crate) static NTPOT_BUCKETS: [f64; 13] = [
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0,
];
pub(crate) static TTFT_BUCKETS: [f64; 24] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 120.0,
];
pub(crate) static TPOT_BUCKETS: [f64; 19] = [
    0.0005, 0.00205, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.125, 0.15, 0.2, 0.3, 0.4, 0.5,
    0.6, 0.8, 1.0, 2.0,
];
/// Scheduling and plugin latency, 100 µs to 100 ms.
pub(crate) static SCHEDULING: [f64; 10] = [
    0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1,
];
pub(crate) static FLOW_QUEUE_DURATION_BUCKETS: [f64; 16] = [
    0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];
pub(crate) static EXTPROC_STREAM_BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

/// Nanoseconds per second: the sum scale of second-valued histograms.
pub(crate) const SECONDS: f64 = 1e9;
/// The sum scale of count-valued histograms (bytes, tokens).
pub(crate) const UNITS: f64 = 1.0;
