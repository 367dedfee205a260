//! What the two replica benches share: the pool of 64 endpoints, a runtime started from a
//! config text with fixed metrics, unique prompts, and the picks-per-second loop.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use shepherd_runtime::config::RuntimeConfig;
use shepherd_runtime::{Runtime, RuntimeHandle, RuntimeOptions};
use shepherd_scheduler_core::completion::RequestHandle;
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

/// What one round of picks measured.
#[derive(Debug, Clone, Copy)]
pub struct PickRate {
    /// Picks per second of wall time.
    pub wall: f64,
    /// Picks per second of the picking thread's own CPU time (what the picks cost, whatever
    /// share of a core the machine gave the thread).
    pub cpu: f64,
    /// The picking thread's CPU time over the wall time (its share of a core).
    pub share: f64,
}

/// This thread's CPU time so far (`/proc/thread-self/schedstat`: nanoseconds on a CPU), or
/// `None` where the kernel does not say.
pub fn thread_cpu() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

#[allow(dead_code)] // replica_redis's (redis-server's CPU), not replica_sync's
/// CPU time (user + system) of process `pid` so far, from `/proc/PID/stat`, in clock ticks
/// of 10 ms.
pub fn process_cpu(pid: u32) -> Option<Duration> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command's closing parenthesis; utime and stime are the 12th and
    // 13th of them.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// Picks per second on one thread over `for_`, each request held for the last `hold` picks,
/// with the picking thread's CPU time.
pub fn picks_per_second_and_cpu(handle: &RuntimeHandle, for_: Duration, hold: usize) -> PickRate {
    let requests: Vec<InferenceRequest> = (0..512).map(prompt).collect();
    let mut held = VecDeque::with_capacity(hold + 1);
    let cpu_before = thread_cpu();
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
    let wall = start.elapsed().as_secs_f64();
    let cpu = match (cpu_before, thread_cpu()) {
        (Some(before), Some(after)) => (after - before).as_secs_f64(),
        _ => wall,
    };
    PickRate {
        wall: n as f64 / wall,
        cpu: n as f64 / cpu.max(1e-9),
        share: cpu / wall,
    }
}

/// The median of `v` (not empty).
/// What [`paced_picks`] did; `held` keeps its last second of requests in flight until dropped.
pub struct PacedPicks {
    pub seconds: f64,
    pub picks: usize,
    pub held: VecDeque<(Instant, RequestHandle)>,
}

/// About 1,000 picks a second on `handle` for 3 s, each held 1 s (about 1,000 in flight).
pub fn paced_picks(handle: &RuntimeHandle) -> PacedPicks {
    let requests: Vec<InferenceRequest> = (0..1_000).map(prompt).collect();
    let mut held = VecDeque::new();
    let start = Instant::now();
    let mut i = 0usize;
    while start.elapsed() < Duration::from_secs(3) {
        let due = start.elapsed().as_micros() as usize / 1_000;
        while i < due {
            if let Ok(decision) = handle.scheduler().schedule(&requests[i % requests.len()]) {
                held.push_back((Instant::now(), decision.into_handle()));
            }
            i += 1;
        }
        while held
            .front()
            .is_some_and(|(t, _)| t.elapsed() > Duration::from_secs(1))
        {
            held.pop_front();
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    PacedPicks {
        seconds: start.elapsed().as_secs_f64(),
        picks: i,
        held,
    }
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
