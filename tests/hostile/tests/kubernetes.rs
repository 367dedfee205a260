//! Kubernetes discovery under churn: `shepherd-epp --pool-name` (a child process, its memory
//! and CPU its own) watching the API-server double while 5,000 pods churn 10 times a second
//! (a pod turning NotReady, turning Ready again, or replaced by a new pod with a new IP).
//! Its memory must stay bounded and its endpoint count must follow the pods exactly; the
//! discovery's CPU per 1,000 pod events is measured and printed.
//!
//! The pods' IPs are in 127.0.0.0/8 on a port nothing listens on, so the picker's scraper
//! (slowed to once an hour here: each endpoint is tried when it joins) is refused at once
//! instead of waiting on unroutable addresses. The CPU figure is the picker's CPU during the
//! churn less its CPU over an idle period of the same length before it (the adaptive loop and
//! the rest of the runtime over 5,000 endpoints).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::Value;
use shepherd_hostile_tests::{Process, config_file, metric};
use shepherd_kube_apiserver_double::{ApiServerDouble, Resource, Settings, objects};
use tokio::time::Instant;

const NS: &str = "inference";
const PODS: usize = 5_000;
const EVENTS_PER_SECOND: u64 = 10;
const CHURN: Duration = Duration::from_secs(90);
/// The idle period measured before the churn.
const IDLE: Duration = Duration::from_secs(10);
/// Allowed growth of the picker's resident memory over the second half of the churn (the
/// allocator's working set for sets of 5,000 endpoints rebuilt ten times a second is reached
/// in the first half, then memory stays flat).
const RSS_MARGIN_KIB: u64 = 16 * 1024;
/// Allowed growth from the end of the first list to the end of the churn.
const RSS_TOTAL_MARGIN_KIB: u64 = 128 * 1024;

fn ip(n: usize) -> String {
    format!("127.{}.{}.{}", 1 + n / 65_536, (n / 256) % 256, n % 256)
}

fn pod(n: usize, ready: bool) -> Value {
    objects::pod(
        NS,
        &format!("vllm-{n}"),
        &[
            ("app", "vllm"),
            (
                "llm-d.ai/role",
                if n.is_multiple_of(2) {
                    "decode"
                } else {
                    "prefill"
                },
            ),
        ],
        Some(&ip(n)),
        ready,
        &[9],
    )
}

/// The process's CPU time (user + system), from /proc.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces, in parentheses).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()))
        .sum();
    // USER_HZ is 100 on Linux.
    Duration::from_millis(ticks * 10)
}

async fn wait_endpoints(admin: std::net::SocketAddr, expected: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let have = metric(admin, "shepherd_discovery_endpoints").await;
        if have as usize == expected {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{have} endpoints, expected {expected}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn five_thousand_pods_churning_keep_memory_bounded() {
    let server = ApiServerDouble::start_with(Settings {
        history: 20_000,
        ..Settings::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig, NS).unwrap();
    let pools = Resource::inference_pools();
    let pods = Resource::pods();
    server.apply(
        &pools,
        objects::inference_pool(NS, "pool", &[("app", "vllm")], &[9]),
    );
    for n in 0..PODS {
        server.apply(&pods, pod(n, true));
    }
    let config = config_file(
        "endpoints: []\nscraping: {intervalMs: 3600000}\n\
         discovery:\n  kubernetes:\n    poolName: pool\n    publishIntervalMs: 100\n",
    );
    let kubeconfig = kubeconfig.display().to_string();
    let epp = Process::epp_with_env(&config, &[], &[("KUBECONFIG", &kubeconfig)]).await;
    let admin = epp.addr("admin");
    let listed = Instant::now();
    wait_endpoints(admin, PODS).await;
    println!(
        "first list of {PODS} pods applied in {:?}",
        listed.elapsed()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let baseline = epp.rss_kib();
    let idle_start = cpu_time(epp.pid());
    tokio::time::sleep(IDLE).await;
    let idle = cpu_time(epp.pid()).saturating_sub(idle_start);
    let cpu_before = cpu_time(epp.pid());

    // The churn: a fixed, seeded sequence of events.
    let mut state: Vec<(usize, bool)> = (0..PODS).map(|n| (n, true)).collect();
    let mut next_name = PODS;
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut events = 0u64;
    let start = Instant::now();
    let mut ticker = tokio::time::interval(Duration::from_millis(1000 / EVENTS_PER_SECOND));
    let mut peak = baseline;
    let churn = std::env::var("SHEPHERD_CHURN_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(CHURN, Duration::from_secs);
    let mut samples = Vec::new();
    while start.elapsed() < churn {
        ticker.tick().await;
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let slot = (seed % PODS as u64) as usize;
        let (n, ready) = state[slot];
        match (seed >> 32) % 3 {
            0 | 1 => {
                server.apply(&pods, pod(n, !ready));
                state[slot] = (n, !ready);
            }
            _ => {
                server.delete(&pods, NS, &format!("vllm-{n}"));
                server.apply(&pods, pod(next_name, true));
                state[slot] = (next_name, true);
                next_name += 1;
                events += 1;
            }
        }
        events += 1;
        if events.is_multiple_of(50) {
            let rss = epp.rss_kib();
            samples.push(rss / 1024);
            peak = peak.max(rss);
        }
    }
    let rss_end = epp.rss_kib();
    let half = samples[samples.len() / 2] * 1024;
    let expected = state.iter().filter(|(_, ready)| *ready).count();
    wait_endpoints(admin, expected).await;
    let elapsed = start.elapsed();
    let cpu = cpu_time(epp.pid()).saturating_sub(cpu_before);
    let idle_rate = idle.as_secs_f64() / IDLE.as_secs_f64();
    let discovery = (cpu.as_secs_f64() - idle_rate * elapsed.as_secs_f64()).max(0.0);
    println!("RSS every 50 events (MiB): {samples:?}");
    println!(
        "{events} pod events over {elapsed:?}: picker CPU {cpu:?}, idle {idle:?} per {IDLE:?}; discovery and membership {:.0} ms per 1,000 events; RSS {baseline} KiB after the first list, {half} KiB halfway, {rss_end} KiB at the end of the churn, peak {peak} KiB",
        discovery * 1000.0 * 1000.0 / events as f64,
    );
    assert!(
        rss_end < half + RSS_MARGIN_KIB,
        "RSS still growing in the second half: {half} KiB -> {rss_end} KiB"
    );
    assert!(
        rss_end < baseline + RSS_TOTAL_MARGIN_KIB,
        "RSS grew from {baseline} KiB to {rss_end} KiB"
    );
    assert_eq!(metric(admin, "shepherd_discovery_stale").await, 0.0);
    assert_eq!(
        metric(admin, "shepherd_discovery_serving_pods").await as usize,
        expected
    );
}
