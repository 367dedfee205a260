//! `/metrics` render time at 512 endpoints (issue 32 target: at most 2 ms): the whole page the
//! admin port answers — the scheduler's core counters and per-endpoint figures, the plugins'
//! sources, the scraper's, the adaptive controller's, and the upstream `llm_d_epp_*`
//! families, with 200 request label sets filled — in two shapes:
//!
//! - `current-names`: the default;
//! - `with-legacy-names`: `metrics.legacyNames: true` (the deprecated twins summed too).
//!
//! ```text
//! cargo bench -p shepherd-benches --bench metrics_render
//! ```

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion};
use shepherd_runtime::config::RuntimeConfig;
use shepherd_runtime::{Runtime, RuntimeHandle, RuntimeOptions};
use shepherd_scheduler_core::completion::{Completion, Usage};
use shepherd_scheduler_core::metrics::render_prometheus;
use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
use shepherd_test_util::fresh;

const ENDPOINTS: usize = 512;

async fn started(legacy: bool) -> RuntimeHandle {
    let mut text = String::from("endpoints:\n");
    for i in 0..ENDPOINTS {
        text.push_str(&format!(
            "  - 10.{}.{}.{}:8000\n",
            i / 65536,
            (i / 256) % 256,
            i % 256
        ));
    }
    let config = RuntimeConfig::from_yaml(&text).unwrap();
    let options = RuntimeOptions {
        serve_admin: false,
        scrape: false,
        watch_config: false,
        kv_events: false,
        legacy_metric_names: Some(legacy),
        ..RuntimeOptions::default()
    };
    let handle = Runtime::start(config, options).await.unwrap();
    // Every endpoint with figures, as after a scrape.
    let pool = handle.pool();
    for (i, e) in pool.load().endpoints().iter().enumerate() {
        e.set_metrics(fresh(
            (i % 7) as u32,
            (i % 13) as u32,
            (i % 10) as f64 / 10.0,
        ));
    }
    // Picks spread over the endpoints, and 200 upstream label sets (5 models, 20 tenants,
    // 2 priorities) with every request family filled.
    let upstream = handle.upstream_metrics();
    let scheduler = handle.scheduler();
    for i in 0..4_000usize {
        let model = format!("model-{}", i % 5);
        let tenant = format!("tenant-{}", i % 20);
        let mut request = InferenceRequest::new(
            format!("r{i}"),
            &model,
            Prompt::Text(format!("shared prefix {} question {i}", i % 50)),
        );
        request.fairness_id = Some(tenant.clone());
        request.priority = (i % 2) as i32;
        let mut observation = upstream.observe(
            &model,
            &model,
            Some(&tenant),
            request.priority,
            900,
            i % 2 == 0,
        );
        if let Ok(decision) = scheduler.schedule(&request) {
            observation.scheduled(
                Duration::from_micros(40),
                Some(decision.primary().address()),
            );
            observation.first_byte();
            observation.response_bytes(2_000);
            let usage = Usage {
                prompt_tokens: 300,
                completion_tokens: 40,
                cached_tokens: Some(128),
            };
            observation.finish(Some(&usage));
            decision
                .into_handle()
                .finish(Completion::success(Some(usage)));
        }
    }
    handle
}

/// This thread's CPU time so far, from `/proc/thread-self/schedstat` (Linux).
fn thread_cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("metrics_render_512_endpoints");
    for (name, legacy) in [("current-names", false), ("with-legacy-names", true)] {
        let handle = runtime.block_on(started(legacy));
        let bytes = handle.render_metrics().len();
        eprintln!("{name}: /metrics is {bytes} bytes");
        // CPU time of this thread per render (the machine may be shared: wall time then
        // includes waiting for a core).
        if let Some(before) = thread_cpu_ns() {
            for _ in 0..200 {
                black_box(handle.render_metrics());
            }
            if let Some(after) = thread_cpu_ns() {
                eprintln!(
                    "{name}: {:.3} ms of CPU per render",
                    (after - before) as f64 / 200.0 / 1e6
                );
            }
        }
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| black_box(handle.render_metrics()))
        });
        if !legacy {
            // The two largest parts alone: the scheduler (per-endpoint families) and the
            // upstream families.
            let scheduler = handle.scheduler();
            group.bench_function("scheduler-part", |b| {
                b.iter(|| black_box(render_prometheus(&[&**scheduler])))
            });
            let upstream = handle.upstream_metrics();
            group.bench_function("upstream-part", |b| {
                b.iter(|| black_box(render_prometheus(&[&**upstream])))
            });
        }
        runtime.block_on(handle.shutdown(Duration::from_secs(1)));
    }
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
}
