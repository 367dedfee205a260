//! What the two replica benches share: the pool of 64 endpoints, a runtime started from a
//! config text with fixed metrics, unique prompts, and the picks-per-second loop.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use shepherd_runtime::config::RuntimeConfig;
use shepherd_runtime::{Runtime, RuntimeHandle, RuntimeOptions};
use shepherd_scheduler_core::endpoint::EndpointMetrics;
use shepherd_scheduler_core::request::{InferenceRequest, Prompt};

/// Endpoints in the pool.
pub const ENDPOINTS: usize = 64;

/// The endpoints' addresses, as a YAML flow list's items.
pub fn endpoints() -> String {
    (0..ENDPOINTS)
        .map(|i| format!("127.0.{}.{}:8000", i / 250, i % 250 + 1))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A runtime over the endpoints with `extra` config (a `replicas` section, or nothing):
/// no scraping, metrics set once.
pub async fn start_with(extra: &str) -> RuntimeHandle {
    let yaml = format!("endpoints: [{}]\n{extra}", endpoints());
    let options = RuntimeOptions {
        scrape: false,
        serve_admin: false,
        watch_config: false,
        ..RuntimeOptions::default()
    };
    let handle = Runtime::start(RuntimeConfig::from_yaml(&yaml).expect("config"), options)
        .await
        .expect("runtime");
    for (i, endpoint) in handle.pool().snapshot().endpoints().iter().enumerate() {
        endpoint.set_metrics(EndpointMetrics {
            waiting: (i % 5) as u32,
            running: (i % 17) as u32,
            kv_utilization: (i % 10) as f64 / 20.0,
            ..EndpointMetrics::default()
        });
    }
    handle
}

/// Request `i`: unique from the first byte (no prefix affinity, so the load spreads).
pub fn prompt(i: u64) -> InferenceRequest {
    let text = format!(
        "{i:08} {}",
        "an unrelated prompt of about one kilobyte. ".repeat(24)
    );
    InferenceRequest::new(format!("r{i}"), "m", Prompt::Text(text))
}

/// Picks per second on one thread over `for_`, each request held for the last `hold` picks.
pub fn picks_per_second(handle: &RuntimeHandle, for_: Duration, hold: usize) -> f64 {
    let requests: Vec<InferenceRequest> = (0..512).map(prompt).collect();
    let mut held = VecDeque::with_capacity(hold + 1);
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < for_ {
        for request in &requests[..64] {
            if let Ok(decision) = handle.scheduler().schedule(request) {
                held.push_back(decision.into_handle());
                if held.len() > hold {
                    held.pop_front();
                }
            }
            n += 1;
        }
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// The median of `v` (not empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
