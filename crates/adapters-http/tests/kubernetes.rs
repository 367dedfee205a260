//! `shepherd-gateway --pool-name` on Kubernetes discovery: the binary (the real kube client,
//! through a kubeconfig) watching the API-server double, simulated vLLM servers as the pool's
//! pods (each at 127.0.0.1, its own port named by its `llm-d.ai/active-ports` annotation).
//! A pod turning Ready gets traffic, and one turning NotReady or deleted loses it, each within
//! 1 s; an API-server outage of 30 s changes nothing for routing, and watching resumes after.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{SERVER_HEADER, completion, sims};
use serde_json::Value;
use shepherd_kube_apiserver_double::{ApiServerDouble, Resource, objects};
use shepherd_sim::serve::ServeHandle;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::time::Instant;

const NS: &str = "inference";

struct Gateway {
    _child: Child,
    url: String,
    http: reqwest::Client,
}

async fn start_gateway(dir: &Path, server: &ApiServerDouble) -> Gateway {
    start_gateway_with(dir, server, "").await
}

/// The gateway with `extra` top-level config after the generated sections.
async fn start_gateway_with(dir: &Path, server: &ApiServerDouble, extra: &str) -> Gateway {
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig, NS).unwrap();
    let config = dir.join("shepherd.yaml");
    std::fs::write(
        &config,
        format!(
            "server: {{httpPort: 0, metricsPort: 0}}\nscraping: {{intervalMs: 50}}\n\
             discovery:\n  kubernetes:\n    poolName: vllm-pool\n    backoffInitialMs: 100\n    backoffMaxMs: 1000\n    publishIntervalMs: 10\n{extra}"
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_shepherd-gateway"))
        .arg("--config")
        .arg(&config)
        .args([
            "--pool-name",
            "vllm-pool",
            "--pool-namespace",
            NS,
            "--shutdown-timeout",
            "2",
        ])
        .env("KUBECONFIG", &kubeconfig)
        .env("SHEPHERD_LOG", "warn")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(url) = line.strip_prefix("shepherd-gateway: listening on ") {
                return url.to_owned();
            }
        }
        panic!("shepherd-gateway exited before listening");
    })
    .await
    .expect("shepherd-gateway did not start");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Gateway {
        _child: child,
        url,
        http: reqwest::Client::new(),
    }
}

fn pod(sims: &ServeHandle, index: usize, ready: bool) -> Value {
    let port = sims.addrs()[index].port();
    let mut pod = objects::pod(
        NS,
        &format!("vllm-{index}"),
        &[("app", "vllm")],
        Some("127.0.0.1"),
        ready,
        &[port],
    );
    objects::annotate(&mut pod, "llm-d.ai/active-ports", &port.to_string());
    pod
}

fn pool(sims: &ServeHandle) -> Value {
    let ports: Vec<u16> = sims.addrs().iter().map(|a| a.port()).collect();
    objects::inference_pool(NS, "vllm-pool", &[("app", "vllm")], &ports)
}

fn sample(page: &str, series: &str) -> f64 {
    page.lines()
        .find_map(|line| {
            line.strip_prefix(series)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0.0)
}

impl Gateway {
    async fn metric(&self, series: &str) -> f64 {
        let page = self
            .http
            .get(format!("{}/metrics", self.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        sample(&page, series)
    }

    async fn wait_metric(&self, series: &str, value: f64) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.metric(series).await != value {
            assert!(Instant::now() < deadline, "{series} never {value}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Batches of 4 concurrent completions for `time`: each answer's send time from `t0` and
    /// the server that served it. Every request must succeed.
    async fn traffic(&self, t0: Instant, time: Duration, tag: &str) -> Vec<(Duration, String)> {
        let mut served = Vec::new();
        let mut n = 0;
        while t0.elapsed() < time {
            let sent = t0.elapsed();
            let send = |i: usize| {
                let body = completion(&format!("{tag} request {i} {}", "x".repeat(64)), 2, false);
                self.http
                    .post(format!("{}/v1/completions", self.url))
                    .json(&body)
                    .send()
            };
            let replies = tokio::join!(send(n), send(n + 1), send(n + 2), send(n + 3));
            n += 4;
            for reply in [replies.0, replies.1, replies.2, replies.3] {
                let reply = reply.unwrap();
                assert_eq!(reply.status(), 200);
                let server = reply.headers()[SERVER_HEADER].to_str().unwrap().to_string();
                served.push((sent, server));
            }
        }
        served
    }
}

#[tokio::test]
async fn pods_turning_ready_not_ready_or_deleted_move_traffic_within_a_second() {
    let server = ApiServerDouble::start().await.unwrap();
    let sims = sims(3, 50.0).await;
    let dir = tempfile::tempdir().unwrap();
    let gateway = start_gateway(dir.path(), &server).await;
    let pods = Resource::pods();
    server.apply(&Resource::inference_pools(), pool(&sims));
    server.apply(&pods, pod(&sims, 0, true));
    server.apply(&pods, pod(&sims, 1, true));
    server.apply(&pods, pod(&sims, 2, false));
    gateway
        .wait_metric("shepherd_discovery_endpoints", 2.0)
        .await;
    // The simulated servers name themselves by index.
    let name = |i: usize| i.to_string();

    let t0 = Instant::now();
    server.apply(&pods, pod(&sims, 2, true));
    let served = gateway
        .traffic(t0, Duration::from_millis(1500), "ready")
        .await;
    let first = served.iter().find(|(_, s)| *s == name(2)).map(|(t, _)| *t);
    println!("gateway: pod Ready -> first request served there: {first:?}");
    if first.is_none() {
        let mut counts = std::collections::BTreeMap::new();
        for (_, s) in &served {
            *counts.entry(s.clone()).or_insert(0) += 1;
        }
        println!(
            "served: {counts:?}, servers {:?}, metrics endpoints {}",
            sims.addrs(),
            gateway.metric("shepherd_discovery_endpoints").await
        );
    }
    assert!(
        first.is_some_and(|t| t <= Duration::from_secs(1)),
        "{first:?}"
    );

    let t0 = Instant::now();
    server.apply(&pods, pod(&sims, 0, false));
    let served = gateway
        .traffic(t0, Duration::from_millis(1500), "not-ready")
        .await;
    let last = served
        .iter()
        .filter(|(_, s)| *s == name(0))
        .map(|(t, _)| *t)
        .max();
    println!("gateway: pod NotReady -> last request sent there: {last:?}");
    assert!(last.is_none_or(|t| t < Duration::from_secs(1)), "{last:?}");

    let t0 = Instant::now();
    server.delete(&pods, NS, "vllm-1");
    let served = gateway
        .traffic(t0, Duration::from_millis(1500), "deleted")
        .await;
    let last = served
        .iter()
        .filter(|(_, s)| *s == name(1))
        .map(|(t, _)| *t)
        .max();
    println!("gateway: pod deleted -> last request sent there: {last:?}");
    assert!(last.is_none_or(|t| t < Duration::from_secs(1)), "{last:?}");
    assert!(served.iter().rev().take(8).all(|(_, s)| *s == name(2)));
}

#[tokio::test]
async fn an_api_server_outage_of_30_seconds_changes_nothing_for_routing() {
    let server = ApiServerDouble::start().await.unwrap();
    let sims = sims(2, 50.0).await;
    let dir = tempfile::tempdir().unwrap();
    let gateway = start_gateway(dir.path(), &server).await;
    let pods = Resource::pods();
    server.apply(&Resource::inference_pools(), pool(&sims));
    server.apply(&pods, pod(&sims, 0, true));
    gateway
        .wait_metric("shepherd_discovery_endpoints", 1.0)
        .await;

    server.stop();
    let served = gateway
        .traffic(Instant::now(), Duration::from_secs(30), "outage")
        .await;
    assert!(served.len() > 100, "{}", served.len());
    assert_eq!(
        gateway
            .metric("shepherd_discovery_stale{source=\"kubernetes\"}")
            .await,
        1.0
    );

    server.restart().await.unwrap();
    server.apply(&pods, pod(&sims, 1, true));
    gateway
        .wait_metric("shepherd_discovery_endpoints", 2.0)
        .await;
    gateway
        .wait_metric("shepherd_discovery_stale{source=\"kubernetes\"}", 0.0)
        .await;
}

const CANARY: &str = "food-review-v2";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewrite_90_10_through_the_gateway_lands_within_3_points() {
    let server = ApiServerDouble::start().await.unwrap();
    let mut config = shepherd_sim::serve::ServeConfig::ephemeral(2);
    config.speed = 50.0;
    config.aliases = vec![CANARY.into()];
    let sims = shepherd_sim::serve::spawn(config).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let gateway = start_gateway(dir.path(), &server).await;
    server.apply(&Resource::inference_pools(), pool(&sims));
    server.apply(&Resource::pods(), pod(&sims, 0, true));
    server.apply(&Resource::pods(), pod(&sims, 1, true));
    server.apply(
        &Resource::inference_model_rewrites(),
        objects::inference_model_rewrite(
            NS,
            "canary",
            "vllm-pool",
            Some("food-review"),
            &[(common::MODEL, Some(90)), (CANARY, Some(10))],
        ),
    );
    gateway
        .wait_metric("shepherd_discovery_endpoints", 2.0)
        .await;
    gateway
        .wait_metric("shepherd_inference_model_rewrites", 1.0)
        .await;
    let n = 2_000;
    let mut counts = std::collections::BTreeMap::new();
    for batch in 0..n / 16 {
        let sends = (0..16).map(|i| {
            let body = serde_json::json!({
                "model": "food-review",
                "prompt": format!("rewrite {batch} {i} {}", "x".repeat(32)),
                "max_tokens": 1,
            });
            gateway
                .http
                .post(format!("{}/v1/completions", gateway.url))
                .json(&body)
                .send()
        });
        for reply in futures_util::future::join_all(sends).await {
            let reply = reply.unwrap();
            assert_eq!(reply.status(), 200);
            let body: Value = reply.json().await.unwrap();
            *counts
                .entry(body["model"].as_str().unwrap().to_string())
                .or_insert(0usize) += 1;
        }
    }
    let canary = counts.get(CANARY).copied().unwrap_or(0);
    println!("gateway: rewrite 90/10 over {n} requests: {counts:?}");
    assert!((140..=260).contains(&canary), "{counts:?}");
    assert_eq!(
        gateway
            .metric(&format!("llm_d_epp_model_rewrite_decisions_total{{model_rewrite_name=\"canary\",model_name=\"food-review\",target_model=\"{CANARY}\"}}"))
            .await,
        canary as f64
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_objective_with_a_negative_priority_is_shed_under_saturation() {
    let server = ApiServerDouble::start().await.unwrap();
    let sims = sims(1, 1.0).await;
    let dir = tempfile::tempdir().unwrap();
    let extra = "gateway:\n  trustedHeaders: [x-llm-d-inference-objective]\n\
        plugins:\n- name: one-at-a-time\n  type: concurrency-detector\n  parameters:\n    maxConcurrency: 1\n\
        flowControl:\n  saturationDetector:\n    pluginRef: one-at-a-time\n";
    let gateway = start_gateway_with(dir.path(), &server, extra).await;
    server.apply(&Resource::inference_pools(), pool(&sims));
    server.apply(&Resource::pods(), pod(&sims, 0, true));
    let kind = Resource::inference_objectives();
    server.apply(
        &kind,
        objects::inference_objective(NS, "batch", "vllm-pool", Some(-1)),
    );
    server.apply(
        &kind,
        objects::inference_objective(NS, "critical", "vllm-pool", Some(10)),
    );
    gateway
        .wait_metric("shepherd_discovery_endpoints", 1.0)
        .await;
    gateway
        .wait_metric("shepherd_inference_objectives", 2.0)
        .await;
    let post = |prompt: String, tokens: u32, objective: &'static str| {
        gateway
            .http
            .post(format!("{}/v1/completions", gateway.url))
            .header("x-llm-d-inference-objective", objective)
            .json(&completion(&prompt, tokens, false))
            .send()
    };
    let long = post(format!("long {}", "y".repeat(400)), 150, "critical");
    let long = tokio::spawn(long);
    gateway.wait_metric("shepherd_flow_saturation", 1.0).await;
    let shed = post("batch".into(), 2, "batch").await.unwrap();
    assert_eq!(shed.status(), 429);
    assert_eq!(shed.headers()["x-shepherd-dropped-reason"], "shed");
    let critical = post(format!("critical {}", "z".repeat(400)), 2, "critical")
        .await
        .unwrap();
    assert_eq!(critical.status(), 200);
    assert_eq!(long.await.unwrap().unwrap().status(), 200);
}
