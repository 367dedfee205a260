//! `/metrics`: the Prometheus text a vLLM server exposes, with vLLM's metric names.
//!
//! Series carry `model_name` and `engine="0"` labels, as vLLM V1's do; counters end in
//! `_total` with their `# HELP`/`# TYPE` lines named that way, as Python's
//! `prometheus_client` writes them; values are floats (`1.0`). `vllm:cache_config_info`
//! carries the cache geometry as labels (`block_size`, `num_gpu_blocks`, ...) and the value 1.
//! The `shepherd_sim_*` counters are the simulator's own: the prefill/decode work of
//! [`super::sidecar`] and `kv_transfer_params`.

use std::fmt::Write as _;

use std::sync::atomic::Ordering;

use super::driver::Gauges;
use super::pd_counters::PdCounters;

/// The content type of the Prometheus text format.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Renders the metrics of a server serving `model`.
pub(crate) fn render(model: &str, g: &Gauges, pd: &PdCounters) -> String {
    let model = escape(model);
    let labels = format!("model_name=\"{model}\",engine=\"0\"");
    let snap = &g.snapshot;
    let stats = &g.stats;
    let mut out = String::with_capacity(4096);
    let mut family = |name: &str, kind: &str, help: &str, samples: &[(&str, f64)]| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (extra, value) in samples {
            let _ = writeln!(out, "{name}{{{labels}{extra}}} {value:?}");
        }
    };
    family(
        "vllm:num_requests_running",
        "gauge",
        "Number of requests in model execution batches.",
        &[("", f64::from(snap.running))],
    );
    family(
        "vllm:num_requests_waiting",
        "gauge",
        "Number of requests waiting to be processed.",
        &[("", f64::from(snap.waiting))],
    );
    family(
        "vllm:gpu_cache_usage_perc",
        "gauge",
        "GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: Use vllm:kv_cache_usage_perc instead.",
        &[("", snap.kv_utilization)],
    );
    family(
        "vllm:kv_cache_usage_perc",
        "gauge",
        "KV-cache usage. 1 means 100 percent usage.",
        &[("", snap.kv_utilization)],
    );
    family(
        "vllm:prefix_cache_queries_total",
        "counter",
        "Prefix cache queries, in terms of number of queried tokens.",
        &[("", stats.prompt_tokens as f64)],
    );
    family(
        "vllm:prefix_cache_hits_total",
        "counter",
        "Prefix cache hits, in terms of number of cached tokens.",
        &[("", stats.cached_tokens as f64)],
    );
    family(
        "vllm:num_preemptions_total",
        "counter",
        "Cumulative number of preemption from the engine.",
        &[("", stats.preemptions as f64)],
    );
    family(
        "vllm:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
        &[("", stats.prompt_tokens as f64)],
    );
    family(
        "vllm:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        &[("", stats.generated_tokens as f64)],
    );
    family(
        "vllm:request_success_total",
        "counter",
        "Count of successfully processed requests.",
        &[
            (",finished_reason=\"stop\"", g.finished_stop as f64),
            (",finished_reason=\"length\"", g.finished_length as f64),
            (",finished_reason=\"abort\"", g.aborted as f64),
        ],
    );
    let count = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed) as f64;
    family(
        "shepherd_sim_prefills_for_remote_decode_total",
        "counter",
        "Requests prefilled here for a decode on another server (kv_transfer_params.do_remote_decode).",
        &[("", count(&pd.prefills_for_remote))],
    );
    family(
        "shepherd_sim_remote_prefills_total",
        "counter",
        "Requests decoded here whose prompt KV was read from a remote prefill (kv_transfer_params.do_remote_prefill).",
        &[("", count(&pd.remote_prefills))],
    );
    family(
        "shepherd_sim_kv_transfer_tokens_total",
        "counter",
        "Prompt tokens whose KV was read from a remote prefill.",
        &[("", count(&pd.transferred_tokens))],
    );
    family(
        "shepherd_sim_remote_prefill_fallbacks_total",
        "counter",
        "Requests naming a prefill server (x-prefiller-host-port) whose remote prefill failed, served aggregated here.",
        &[("", count(&pd.fallbacks))],
    );
    let _ = writeln!(
        out,
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig"
    );
    let _ = writeln!(out, "# TYPE vllm:cache_config_info gauge");
    let _ = writeln!(
        out,
        "vllm:cache_config_info{{block_size=\"{}\",cache_dtype=\"auto\",\
         enable_prefix_caching=\"True\",gpu_memory_utilization=\"0.9\",num_cpu_blocks=\"0\",\
         num_gpu_blocks=\"{}\",engine=\"0\",model_name=\"{model}\"}} 1.0",
        snap.block_size, snap.num_gpu_blocks
    );
    out
}

/// The value of the first sample of metric `name` (any labels) in Prometheus text `text`, as
/// `/metrics` renders it: what a test reads of a simulated server.
///
/// ```
/// let text = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\"} 2.0\n";
/// assert_eq!(shepherd_sim::serve::metric_sample(text, "vllm:num_requests_running"), Some(2.0));
/// assert_eq!(shepherd_sim::serve::metric_sample(text, "vllm:num_requests"), None);
/// ```
pub fn metric_sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{'))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Escapes a label value (backslash, double quote, newline).
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use crate::engine::{Engine, EngineConfig, EngineStats};

    use super::*;

    #[test]
    fn vllm_names_help_type_and_labels() {
        let engine = Engine::new(EngineConfig::h100_llama8b());
        let g = Gauges {
            snapshot: engine.snapshot(),
            stats: EngineStats {
                prompt_tokens: 100,
                cached_tokens: 48,
                ..Default::default()
            },
            finished_length: 2,
            finished_stop: 1,
            aborted: 0,
        };
        let text = render("m\"x", &g, &PdCounters::default());
        for line in [
            "# TYPE vllm:num_requests_waiting gauge",
            "vllm:num_requests_waiting{model_name=\"m\\\"x\",engine=\"0\"} 0.0",
            "vllm:num_requests_running{model_name=\"m\\\"x\",engine=\"0\"} 0.0",
            "vllm:kv_cache_usage_perc{model_name=\"m\\\"x\",engine=\"0\"} 0.0",
            "vllm:gpu_cache_usage_perc{model_name=\"m\\\"x\",engine=\"0\"} 0.0",
            "# TYPE vllm:prefix_cache_hits_total counter",
            "vllm:prefix_cache_queries_total{model_name=\"m\\\"x\",engine=\"0\"} 100.0",
            "vllm:prefix_cache_hits_total{model_name=\"m\\\"x\",engine=\"0\"} 48.0",
            "vllm:request_success_total{model_name=\"m\\\"x\",engine=\"0\",finished_reason=\"length\"} 2.0",
            "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line}\n{text}");
        }
        let info = text
            .lines()
            .find(|l| l.starts_with("vllm:cache_config_info{"))
            .unwrap();
        assert!(info.contains("block_size=\"16\""), "{info}");
        assert!(info.contains("num_gpu_blocks=\"27793\""), "{info}");
        assert!(info.ends_with("} 1.0"), "{info}");
        // Every sample line belongs to a family announced by # HELP and # TYPE.
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            let name = &l[..l.find('{').unwrap()];
            assert!(text.contains(&format!("# TYPE {name} ")), "{name}");
        }
    }
}
