//! Kubernetes discovery's two figures (issue 29), against the API-server double on loopback
//! with the real kube client:
//!
//! 1. **Pod Ready → first pick**: a pool of one pod flips NotReady → Ready in the double; the
//!    time until the runtime's scheduler first picks it (p50 / p99 of 200 flips), with the
//!    default publish interval (100 ms: a set published less than 100 ms earlier delays the
//!    next one) and with none (`publishIntervalMs: 0`).
//! 2. **CPU per 1,000 pod events**: a pool of 5,000 pods, 1,000 events (a pod turning NotReady
//!    or Ready) at 50 per second; the CPU time of the thread that runs the discovery, the
//!    kube client and the runtime's membership (a current-thread tokio runtime of its own; the
//!    double runs on another thread), less that thread's CPU over an idle period of 5 s before
//!    (the adaptive loop ticking over 5,000 endpoints), scaled to the same length.
//!
//! ```text
//! cargo bench -p shepherd-benches --bench kubernetes_discovery
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use shepherd_kube_apiserver_double::{ApiServerDouble, Resource, Settings, objects};
use shepherd_runtime::config::{KubernetesConfig, RuntimeConfig};
use shepherd_runtime::discovery::Discovery;
use shepherd_runtime::discovery::kubernetes::KubernetesDiscovery;
use shepherd_runtime::{Runtime, RuntimeHandle, RuntimeOptions};
use shepherd_scheduler_core::request::{InferenceRequest, Prompt};

const NS: &str = "bench";

fn pod(n: usize, ready: bool) -> serde_json::Value {
    let ip = format!("127.{}.{}.{}", 1 + n / 65_536, (n / 256) % 256, n % 256);
    objects::pod(
        NS,
        &format!("vllm-{n}"),
        &[("app", "vllm")],
        Some(&ip),
        ready,
        &[8000],
    )
}

fn client(server: &ApiServerDouble) -> kube::Client {
    let url = server.url().parse().expect("a URL");
    kube::Client::try_from(kube::Config::new(url)).expect("a client")
}

async fn runtime_over(discovery: Arc<KubernetesDiscovery>) -> RuntimeHandle {
    let options = RuntimeOptions {
        discovery: Some(discovery),
        scrape: false,
        serve_admin: false,
        watch_config: false,
        kv_events: false,
        ..RuntimeOptions::default()
    };
    Runtime::start(RuntimeConfig::default(), options)
        .await
        .expect("runtime")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Pod Ready → first pick, `flips` times.
async fn ready_to_pick(publish_interval_ms: u64, flips: usize) -> Vec<Duration> {
    let server = ApiServerDouble::start().await.expect("double");
    let pods = Resource::pods();
    server.apply(
        &Resource::inference_pools(),
        objects::inference_pool(NS, "pool", &[("app", "vllm")], &[8000]),
    );
    server.apply(&pods, pod(0, false));
    let config = KubernetesConfig {
        pool_namespace: Some(NS.into()),
        publish_interval_ms,
        ..KubernetesConfig::pool("pool")
    };
    let discovery =
        Arc::new(KubernetesDiscovery::with_client(&config, client(&server), NS).expect("start"));
    let handle = runtime_over(Arc::clone(&discovery)).await;
    let request = InferenceRequest::new("r", "m", Prompt::Text("hello".into()));
    let mut times = Vec::with_capacity(flips);
    for _ in 0..flips {
        server.apply(&pods, pod(0, false));
        while !handle.pool().snapshot().is_empty() {
            tokio::task::yield_now().await;
        }
        let start = Instant::now();
        server.apply(&pods, pod(0, true));
        loop {
            if handle.scheduler().schedule(&request).is_ok() {
                break;
            }
            tokio::task::yield_now().await;
        }
        times.push(start.elapsed());
    }
    handle.shutdown(Duration::from_millis(100)).await;
    times
}

/// This thread's CPU time (user + system), from /proc.
fn thread_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()))
        .sum();
    Duration::from_millis(ticks * 10)
}

fn main() {
    let current = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio")
    };
    for interval in [100, 0] {
        let mut times = current().block_on(ready_to_pick(interval, 200));
        times.sort();
        println!(
            "pod Ready -> first pick, publishIntervalMs {interval}: p50 {:?}, p99 {:?}, max {:?} (200 flips)",
            percentile(&times, 0.5),
            percentile(&times, 0.99),
            times[times.len() - 1],
        );
    }

    // CPU per 1,000 pod events over 5,000 pods: the double on this thread's runtime, the
    // discovery and the runtime on a thread of their own.
    const PODS: usize = 5_000;
    const EVENTS: usize = 1_000;
    let double_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("tokio");
    let server = Arc::new(
        double_runtime
            .block_on(ApiServerDouble::start_with(Settings {
                history: 20_000,
                ..Settings::default()
            }))
            .expect("double"),
    );
    let pods = Resource::pods();
    server.apply(
        &Resource::inference_pools(),
        objects::inference_pool(NS, "pool", &[("app", "vllm")], &[8000]),
    );
    for n in 0..PODS {
        server.apply(&pods, pod(n, true));
    }
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let url_server = Arc::clone(&server);
    let worker = std::thread::spawn(move || {
        current().block_on(async move {
            let config = KubernetesConfig {
                pool_namespace: Some(NS.into()),
                ..KubernetesConfig::pool("pool")
            };
            let discovery = Arc::new(
                KubernetesDiscovery::with_client(&config, client(&url_server), NS).expect("start"),
            );
            let handle = runtime_over(Arc::clone(&discovery)).await;
            let mut sets = discovery.subscribe();
            let _ = sets.wait_for(|s| s.len() == PODS).await;
            let idle_start = thread_cpu();
            let idle_since = Instant::now();
            tokio::time::sleep(Duration::from_secs(5)).await;
            let idle = thread_cpu().saturating_sub(idle_start).as_secs_f64()
                / idle_since.elapsed().as_secs_f64();
            let before = thread_cpu();
            let since = Instant::now();
            let _ = ready_tx.send(());
            // Run the discovery until the driver says the events are all sent and applied.
            loop {
                if done_rx.try_recv().is_ok() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let cpu = thread_cpu().saturating_sub(before).as_secs_f64();
            let net = (cpu - idle * since.elapsed().as_secs_f64()).max(0.0);
            handle.shutdown(Duration::from_millis(100)).await;
            (cpu, net)
        })
    });
    ready_rx.recv().expect("the discovery listed the pods");
    let start = Instant::now();
    for i in 0..EVENTS {
        let due = start + Duration::from_millis(20 * i as u64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let n = (i * 7_919) % PODS;
        server.apply(&pods, pod(n, i % 2 == 1));
    }
    std::thread::sleep(Duration::from_millis(500));
    let _ = done_tx.send(());
    let (cpu, net) = worker.join().expect("the discovery thread");
    println!(
        "CPU per 1,000 pod events over {PODS} pods (50 events/s, default publish interval): {:.0} ms ({:.0} ms with the runtime's idle work, over {:.1} s)",
        net * 1000.0,
        cpu * 1000.0,
        start.elapsed().as_secs_f64()
    );
    drop(server);
}
