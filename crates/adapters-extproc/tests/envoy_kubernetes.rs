//! End to end on Kubernetes discovery: `shepherd-epp --pool-name` watching the API-server
//! double (the real kube client in the binary, through a kubeconfig), a real Envoy, and
//! simulated vLLM servers as the pool's pods. Each pod is at 127.0.0.1; the pool's target
//! ports are the servers' ports and each pod's `llm-d.ai/active-ports` annotation names its
//! own, so one pod is one server.
//!
//! A pod turning Ready gets traffic, and one turning NotReady or deleted loses it, each
//! within 1 s; an edit of the pool's selector moves the pool; the API server stopped for 30 s
//! changes nothing for routing, and watching resumes after. Skipped without `SHEPHERD_ENVOY`
//! (see `tests/e2e/mod.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod e2e;

use std::time::Duration;

use e2e::{Options, Stack, sample, unique_prompt};
use serde_json::Value;
use shepherd_kube_apiserver_double::{ApiServerDouble, Resource, objects};
use tokio::time::Instant;

const NS: &str = "inference";

fn pod(stack: &Stack, index: usize, ready: bool, app: &str) -> Value {
    let port = stack.sims.addrs()[index].port();
    let name = format!("vllm-{index}");
    let mut pod = objects::pod(
        NS,
        &name,
        &[("app", app)],
        Some("127.0.0.1"),
        ready,
        &[port],
    );
    objects::annotate(&mut pod, "llm-d.ai/active-ports", &port.to_string());
    pod
}

fn pool(stack: &Stack, app: &str) -> Value {
    let ports: Vec<u16> = stack.sims.addrs().iter().map(|a| a.port()).collect();
    objects::inference_pool(NS, "vllm-pool", &[("app", app)], &ports)
}

/// Waits (10 s at most) for the picker to report `endpoints` endpoints.
async fn wait_endpoints(stack: &Stack, endpoints: f64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let page = stack.metrics().await;
        if sample(&page, "shepherd_discovery_endpoints") == endpoints {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the picker never had {endpoints} endpoints; log:\n{}",
            stack.epp.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Sends batches of 4 concurrent requests for `time`; returns each answer's send time (from
/// `t0`) and the server that served it. Every request must be answered.
async fn traffic(stack: &Stack, t0: Instant, time: Duration, tag: &str) -> Vec<(Duration, String)> {
    let mut served = Vec::new();
    let mut n = 0;
    while t0.elapsed() < time {
        let sent = t0.elapsed();
        let replies = futures_join(stack, tag, n).await;
        n += 4;
        for reply in replies {
            stack.assert_routed(&reply);
            served.push((sent, reply.served.unwrap()));
        }
    }
    served
}

async fn futures_join(stack: &Stack, tag: &str, n: usize) -> Vec<e2e::Reply> {
    let a = stack.post(
        "inference",
        Stack::completion(&unique_prompt(&format!("{tag}-{n}"), 64), 2),
    );
    let b = stack.post(
        "inference",
        Stack::completion(&unique_prompt(&format!("{tag}-{}", n + 1), 64), 2),
    );
    let c = stack.post(
        "inference",
        Stack::completion(&unique_prompt(&format!("{tag}-{}", n + 2), 64), 2),
    );
    let d = stack.post(
        "inference",
        Stack::completion(&unique_prompt(&format!("{tag}-{}", n + 3), 64), 2),
    );
    let (a, b, c, d) = tokio::join!(a, b, c, d);
    vec![a, b, c, d]
}

#[tokio::test]
async fn pods_turning_ready_not_ready_or_deleted_move_traffic_within_a_second() {
    let server = ApiServerDouble::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig, NS).unwrap();
    let options = Options {
        servers: 3,
        listed: Some(Vec::new()),
        extra_config: (format!(
            "discovery:\n  kubernetes:\n    poolName: vllm-pool\n    poolNamespace: {NS}\n    backoffInitialMs: 100\n    backoffMaxMs: 500\n    publishIntervalMs: 10\n"
        )),
        epp_args: vec![
            "--pool-name".into(),
            "vllm-pool".into(),
            "--pool-namespace".into(),
            NS.into(),
        ],
        epp_env: vec![("KUBECONFIG".into(), kubeconfig.display().to_string())],
        wait_ready: Some(false),
        ..Options::default()
    };
    let Some(stack) = Stack::start(options).await else {
        return;
    };
    let pods = Resource::pods();
    server.apply(&Resource::inference_pools(), pool(&stack, "vllm"));
    server.apply(&pods, pod(&stack, 0, true, "vllm"));
    server.apply(&pods, pod(&stack, 1, true, "vllm"));
    server.apply(&pods, pod(&stack, 2, false, "vllm"));
    wait_endpoints(&stack, 2.0).await;
    let (s0, s1, s2) = (stack.server(0), stack.server(1), stack.server(2));
    let early = traffic(&stack, Instant::now(), Duration::from_millis(500), "early").await;
    assert!(
        early.iter().all(|(_, s)| *s != s2),
        "a NotReady pod got traffic"
    );

    // Ready: traffic within 1 s.
    let t0 = Instant::now();
    server.apply(&pods, pod(&stack, 2, true, "vllm"));
    let served = traffic(&stack, t0, Duration::from_millis(1500), "ready").await;
    let first = served.iter().find(|(_, s)| *s == s2).map(|(t, _)| *t);
    println!("pod Ready -> first request served there: {first:?}");
    assert!(
        first.is_some_and(|t| t <= Duration::from_secs(1)),
        "{first:?}"
    );

    // NotReady: no traffic from 1 s on.
    let t0 = Instant::now();
    server.apply(&pods, pod(&stack, 0, false, "vllm"));
    let served = traffic(&stack, t0, Duration::from_millis(1500), "not-ready").await;
    let last = served
        .iter()
        .filter(|(_, s)| *s == s0)
        .map(|(t, _)| *t)
        .max();
    println!("pod NotReady -> last request sent there: {last:?}");
    assert!(last.is_none_or(|t| t < Duration::from_secs(1)), "{last:?}");

    // Deleted: the same.
    let t0 = Instant::now();
    server.delete(&pods, NS, "vllm-1");
    let served = traffic(&stack, t0, Duration::from_millis(1500), "deleted").await;
    let last = served
        .iter()
        .filter(|(_, s)| *s == s1)
        .map(|(t, _)| *t)
        .max();
    println!("pod deleted -> last request sent there: {last:?}");
    assert!(last.is_none_or(|t| t < Duration::from_secs(1)), "{last:?}");
    assert!(served.iter().rev().take(8).all(|(_, s)| *s == s2));

    // A selector edit moves the pool, in one step: pod 0 (Ready again) is relabelled, the
    // pool follows it, and no request fails on the way.
    server.apply(&pods, pod(&stack, 0, true, "canary"));
    let t0 = Instant::now();
    server.apply(&Resource::inference_pools(), pool(&stack, "canary"));
    let served = traffic(&stack, t0, Duration::from_millis(1500), "moved").await;
    let last = served
        .iter()
        .filter(|(_, s)| *s == s2)
        .map(|(t, _)| *t)
        .max();
    println!("selector edit -> last request sent to the old pod: {last:?}");
    assert!(last.is_none_or(|t| t < Duration::from_secs(1)), "{last:?}");
    assert!(
        served.iter().rev().take(8).all(|(_, s)| *s == s0),
        "{served:?}"
    );
}

#[tokio::test]
async fn an_api_server_outage_of_30_seconds_changes_nothing_for_routing() {
    let server = ApiServerDouble::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig, NS).unwrap();
    let options = Options {
        servers: 3,
        listed: Some(Vec::new()),
        extra_config: (format!(
            "discovery:\n  kubernetes:\n    poolName: vllm-pool\n    poolNamespace: {NS}\n    backoffInitialMs: 100\n    backoffMaxMs: 1000\n    publishIntervalMs: 10\n"
        )),
        epp_args: vec!["--pool-name".into(), "vllm-pool".into()],
        epp_env: vec![
            ("KUBECONFIG".into(), kubeconfig.display().to_string()),
            ("NAMESPACE".into(), NS.into()),
        ],
        wait_ready: Some(false),
        ..Options::default()
    };
    let Some(stack) = Stack::start(options).await else {
        return;
    };
    let pods = Resource::pods();
    server.apply(&Resource::inference_pools(), pool(&stack, "vllm"));
    server.apply(&pods, pod(&stack, 0, true, "vllm"));
    server.apply(&pods, pod(&stack, 1, true, "vllm"));
    wait_endpoints(&stack, 2.0).await;

    server.stop();
    let t0 = Instant::now();
    let served = traffic(&stack, t0, Duration::from_secs(30), "outage").await;
    let (s0, s1) = (stack.server(0), stack.server(1));
    assert!(served.len() > 100, "{}", served.len());
    assert!(served.iter().any(|(_, s)| *s == s0) && served.iter().any(|(_, s)| *s == s1));
    let page = stack.metrics().await;
    assert_eq!(
        sample(&page, "shepherd_discovery_stale{source=\"kubernetes\"}"),
        1.0
    );
    assert_eq!(sample(&page, "shepherd_discovery_endpoints"), 2.0);

    server.restart().await.unwrap();
    server.apply(&pods, pod(&stack, 2, true, "vllm"));
    wait_endpoints(&stack, 3.0).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while sample(
        &stack.metrics().await,
        "shepherd_discovery_stale{source=\"kubernetes\"}",
    ) != 0.0
    {
        assert!(
            Instant::now() < deadline,
            "still stale; log:\n{}",
            stack.epp.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = stack.epp.log();
    assert!(log.contains("Kubernetes discovery is stale"), "{log}");
    assert!(log.contains("Kubernetes discovery resumed"), "{log}");
}
