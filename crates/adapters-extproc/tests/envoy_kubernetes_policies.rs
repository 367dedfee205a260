//! End to end with the pool's InferenceModelRewrite and InferenceObjective objects:
//! `shepherd-epp --pool-name` watching the API-server double, a real Envoy, simulated vLLM
//! servers as the pool's pods.
//!
//! A 90/10 rewrite lands within ±3 points over 2,000 requests and the server answers for the
//! rewritten model (the client asks for a name no server serves), in Envoy's streamed and
//! buffered body modes; an objective with a negative priority is shed under saturation while
//! a higher one waits and is served. Skipped without `SHEPHERD_ENVOY` (see `tests/e2e/mod.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod e2e;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use e2e::{MODEL, ONE_AT_A_TIME, Options, Reply, Stack, sample, unique_prompt};
use serde_json::{Value, json};
use shepherd_kube_apiserver_double::{ApiServerDouble, Resource, objects};
use tokio::time::Instant;

const NS: &str = "inference";
const POOL: &str = "vllm-pool";
const CANARY: &str = "food-review-v2";
const OBJECTIVE: &str = "x-llm-d-inference-objective";

fn pod(stack: &Stack, index: usize) -> Value {
    let port = stack.sims.addrs()[index].port();
    let mut pod = objects::pod(
        NS,
        &format!("vllm-{index}"),
        &[("app", "vllm")],
        Some("127.0.0.1"),
        true,
        &[port],
    );
    objects::annotate(&mut pod, "llm-d.ai/active-ports", &port.to_string());
    pod
}

/// A stack whose picker watches `server` for the pool (`servers` pods), with `extra` config.
async fn start(
    server: &ApiServerDouble,
    dir: &tempfile::TempDir,
    servers: usize,
    speed: f64,
    extra: &str,
    envoy_edits: Vec<(&'static str, &'static str)>,
) -> Option<Stack> {
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig, NS).unwrap();
    let options = Options {
        servers,
        speed,
        subset: vec![0],
        listed: Some(Vec::new()),
        model_aliases: vec![CANARY],
        envoy_edits,
        extra_config: format!(
            "discovery:\n  kubernetes:\n    poolName: {POOL}\n    poolNamespace: {NS}\n    backoffInitialMs: 100\n    backoffMaxMs: 500\n    publishIntervalMs: 10\n{extra}"
        ),
        epp_env: vec![("KUBECONFIG".into(), kubeconfig.display().to_string())],
        wait_ready: Some(false),
        ..Options::default()
    };
    let stack = Stack::start(options).await?;
    let ports: Vec<u16> = stack.sims.addrs().iter().map(|a| a.port()).collect();
    server.apply(
        &Resource::inference_pools(),
        objects::inference_pool(NS, POOL, &[("app", "vllm")], &ports),
    );
    for i in 0..servers {
        server.apply(&Resource::pods(), pod(&stack, i));
    }
    Some(stack)
}

/// Waits (10 s at most) until the picker's `/metrics` sample `series` is `value`.
async fn wait_sample(stack: &Stack, series: &str, value: f64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let page = stack.metrics().await;
        if sample(&page, series) == value {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{series} never reached {value}:\n{page}\nlog:\n{}",
            stack.epp.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn request(model: &str, prompt: &str, max_tokens: u32) -> String {
    json!({"model": model, "prompt": prompt, "max_tokens": max_tokens}).to_string()
}

/// Sends `n` requests for `food-review`, 16 at a time; counts the models that answered.
async fn rewritten(stack: &Arc<Stack>, n: usize, tag: &str) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for batch in 0..n.div_ceil(16) {
        let tasks: Vec<_> = (0..16.min(n - batch * 16))
            .map(|i| {
                let stack = Arc::clone(stack);
                let prompt = unique_prompt(&format!("{tag}-{batch}-{i}"), 32);
                tokio::spawn(async move {
                    stack
                        .post("inference", request("food-review", &prompt, 1))
                        .await
                })
            })
            .collect();
        for task in tasks {
            let reply = task.await.unwrap();
            stack.assert_routed(&reply);
            let body: Value = serde_json::from_str(&reply.body).unwrap();
            let model = body["model"].as_str().unwrap().to_string();
            *counts.entry(model).or_default() += 1;
        }
    }
    counts
}

async fn rewrite_split(envoy_edits: Vec<(&'static str, &'static str)>, n: usize) {
    let server = ApiServerDouble::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let Some(stack) = start(&server, &dir, 2, 50.0, "", envoy_edits).await else {
        return;
    };
    server.apply(
        &Resource::inference_model_rewrites(),
        objects::inference_model_rewrite(
            NS,
            "canary",
            POOL,
            Some("food-review"),
            &[(MODEL, Some(90)), (CANARY, Some(10))],
        ),
    );
    wait_sample(&stack, "shepherd_discovery_endpoints", 2.0).await;
    wait_sample(&stack, "shepherd_inference_model_rewrites", 1.0).await;
    let stack = Arc::new(stack);
    let counts = rewritten(&stack, n, "split").await;
    let canary = counts.get(CANARY).copied().unwrap_or(0);
    let share = canary as f64 / n as f64;
    println!(
        "rewrite 90/10 over {n} requests: {counts:?} ({:.1} % canary)",
        share * 100.0
    );
    assert_eq!(counts.values().sum::<usize>(), n, "{counts:?}");
    // Within 3 points over 2,000 (4.5 standard deviations); over fewer, within 4.5
    // standard deviations too.
    let tolerance = (4.5 * (0.1 * 0.9 / n as f64).sqrt()).max(0.03);
    assert!(
        (share - 0.1).abs() <= tolerance,
        "{counts:?}, tolerance {tolerance}"
    );
    let page = stack.metrics().await;
    let decided = sample(
        &page,
        &format!(
            "llm_d_epp_model_rewrite_decisions_total{{model_rewrite_name=\"canary\",model_name=\"food-review\",target_model=\"{CANARY}\"}}"
        ),
    );
    assert_eq!(decided, canary as f64, "{page}");
    assert_eq!(
        sample(
            &page,
            "shepherd_model_rewrites_total{outcome=\"rewritten\"}"
        ),
        n as f64,
        "{page}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewrite_90_10_lands_within_3_points_and_the_server_sees_the_new_model() {
    rewrite_split(Vec::new(), 2_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewrite_in_buffered_mode_carries_the_new_body_and_length() {
    rewrite_split(
        vec![(
            "request_body_mode: FULL_DUPLEX_STREAMED",
            "request_body_mode: BUFFERED",
        )],
        400,
    )
    .await;
}

fn spawn_post(
    stack: &Arc<Stack>,
    prompt: String,
    max_tokens: u32,
    objective: &'static str,
) -> tokio::task::JoinHandle<Reply> {
    let stack = Arc::clone(stack);
    tokio::spawn(async move {
        stack
            .post_with(
                "inference",
                Stack::completion(&prompt, max_tokens),
                &[(OBJECTIVE, objective)],
            )
            .await
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_objective_with_a_negative_priority_is_shed_first_under_saturation() {
    let server = ApiServerDouble::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let Some(stack) = start(&server, &dir, 1, 1.0, ONE_AT_A_TIME, Vec::new()).await else {
        return;
    };
    let kind = Resource::inference_objectives();
    server.apply(
        &kind,
        objects::inference_objective(NS, "batch", POOL, Some(-1)),
    );
    server.apply(
        &kind,
        objects::inference_objective(NS, "critical", POOL, Some(10)),
    );
    wait_sample(&stack, "shepherd_discovery_endpoints", 1.0).await;
    wait_sample(&stack, "shepherd_inference_objectives", 2.0).await;
    let stack = Arc::new(stack);

    // A long request of the critical objective saturates the one server.
    let long = spawn_post(&stack, unique_prompt("long", 200), 150, "critical");
    wait_sample(&stack, "shepherd_flow_saturation", 1.0).await;

    // The batch objective's priority is negative: shed at once, never reaching a server.
    let shed = stack
        .post_with(
            "inference",
            Stack::completion("batch", 2),
            &[(OBJECTIVE, "batch")],
        )
        .await;
    assert_eq!(shed.status, 429, "{shed:?}\nlog:\n{}", stack.epp.log());
    assert_eq!(shed.reason.as_deref(), Some("shed"), "{shed:?}");
    assert_eq!(shed.served, None);

    // The critical objective and an unknown one (the default priority 0) wait and are served.
    let critical = spawn_post(&stack, unique_prompt("critical", 200), 2, "critical");
    let unknown = spawn_post(
        &stack,
        unique_prompt("unknown", 200),
        2,
        "no-such-objective",
    );
    stack.assert_routed(&long.await.unwrap());
    stack.assert_routed(&critical.await.unwrap());
    stack.assert_routed(&unknown.await.unwrap());
    let page = stack.metrics().await;
    assert_eq!(
        sample(&page, "shepherd_flow_dropped_total{reason=\"shed\"}"),
        1.0,
        "{page}"
    );
    assert_eq!(
        sample(&page, "shepherd_objective_lookups_total{found=\"false\"}"),
        1.0,
        "{page}"
    );
    // The objective's priority labels the upstream families, as upstream's picker does.
    assert!(page.contains("priority=\"-1\""), "{page}");
    assert!(page.contains("priority=\"10\""), "{page}");
}
