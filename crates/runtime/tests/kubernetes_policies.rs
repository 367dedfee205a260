//! The pool's InferenceObjectives and InferenceModelRewrites, and leader election over a
//! Lease, against the API-server double with the real kube client.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::collections::HashMap;
use std::time::Duration;

use shepherd_kube_apiserver_double::{ApiServerDouble, Resource, Settings, objects};
use shepherd_runtime::config::KubernetesConfig;
use shepherd_runtime::discovery::Discovery;
use shepherd_runtime::discovery::kubernetes::{
    KubernetesDiscovery, LeaderElection, LeaseSettings, lease_name,
};
use shepherd_runtime::policies::RequestPolicies;
use shepherd_scheduler_core::request::{InferenceRequest, ParseLimits, Prompt};

const NS: &str = "inference";

fn client(server: &ApiServerDouble) -> kube::Client {
    kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap()
}

fn start(server: &ApiServerDouble) -> KubernetesDiscovery {
    let mut config = KubernetesConfig::pool("pool");
    config.pool_namespace = Some(NS.into());
    config.backoff_initial_ms = 50;
    config.backoff_max_ms = 250;
    config.publish_interval_ms = 5;
    KubernetesDiscovery::with_client(&config, client(server), "default").unwrap()
}

/// Waits (up to 5 s) until `check` holds.
async fn until(what: &str, check: impl Fn() -> bool) {
    for _ in 0..500 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

fn objectives(policies: &RequestPolicies) -> HashMap<String, Option<i32>> {
    (*policies.objectives()).clone()
}

/// Where a request for `model` goes, over `n` draws: counts per target.
fn split(policies: &RequestPolicies, model: &str, n: usize) -> HashMap<String, usize> {
    let body = format!(r#"{{"model":"{model}","prompt":"p"}}"#);
    let mut counts = HashMap::new();
    for _ in 0..n {
        let mut request = InferenceRequest::new("r", model, Prompt::Text("p".into()));
        policies.rewrite(&mut request, body.as_bytes(), &ParseLimits::default());
        *counts.entry(request.model).or_default() += 1;
    }
    counts
}

#[tokio::test]
async fn objectives_of_the_pool_give_their_priority_live() {
    let server = ApiServerDouble::start().await.unwrap();
    let kind = Resource::inference_objectives();
    server.apply(
        &kind,
        objects::inference_objective(NS, "critical", "pool", Some(100)),
    );
    server.apply(
        &kind,
        objects::inference_objective(NS, "batch", "pool", Some(-10)),
    );
    server.apply(
        &kind,
        objects::inference_objective(NS, "plain", "pool", None),
    );
    server.apply(
        &kind,
        objects::inference_objective(NS, "elsewhere", "other-pool", Some(5)),
    );
    let discovery = start(&server);
    let policies = discovery.request_policies().expect("a pool keeps policies");
    until("three objectives", || objectives(&policies).len() == 3).await;
    assert_eq!(policies.objective_priority(Some("critical")), 100);
    assert_eq!(policies.objective_priority(Some("batch")), -10);
    assert_eq!(policies.objective_priority(Some("plain")), 0);
    assert_eq!(
        policies.objective_priority(Some("elsewhere")),
        0,
        "another pool's"
    );
    assert_eq!(policies.objective_priority(Some("unknown")), 0);

    // Edited, moved to another pool, deleted: each applies live.
    server.apply(
        &kind,
        objects::inference_objective(NS, "batch", "pool", Some(-20)),
    );
    until("the edit", || {
        policies.objective_priority(Some("batch")) == -20
    })
    .await;
    server.apply(
        &kind,
        objects::inference_objective(NS, "critical", "other-pool", Some(100)),
    );
    until("the move", || {
        !objectives(&policies).contains_key("critical")
    })
    .await;
    assert!(server.delete(&kind, NS, "plain"));
    until("the deletion", || objectives(&policies).len() == 1).await;
}

#[tokio::test]
async fn rewrites_split_by_weight_with_exact_matches_first_and_apply_live() {
    let server = ApiServerDouble::start().await.unwrap();
    let kind = Resource::inference_model_rewrites();
    server.apply(
        &kind,
        objects::inference_model_rewrite(
            NS,
            "canary",
            "pool",
            Some("food-review"),
            &[("food-review-v1", Some(90)), ("food-review-v2", Some(10))],
        ),
    );
    server.apply(
        &kind,
        objects::inference_model_rewrite(NS, "catch-all", "pool", None, &[("default-model", None)]),
    );
    let discovery = start(&server);
    let policies = discovery.request_policies().unwrap();
    until("two rewrites", || policies.rewrites().objects() == 2).await;
    let counts = split(&policies, "food-review", 2_000);
    let v2 = counts.get("food-review-v2").copied().unwrap_or(0);
    assert!(
        (140..=260).contains(&v2),
        "10 % of 2,000 within ±3 points: {counts:?}"
    );
    assert_eq!(
        counts.get("food-review-v1").copied().unwrap_or(0) + v2,
        2_000
    );
    assert_eq!(split(&policies, "anything", 10)["default-model"], 10);

    // An older exact rule wins over a newer one for the same model.
    server.apply(
        &kind,
        objects::inference_model_rewrite(
            NS,
            "newer",
            "pool",
            Some("food-review"),
            &[("ignored", None)],
        ),
    );
    until("three rewrites", || policies.rewrites().objects() == 3).await;
    assert!(!split(&policies, "food-review", 200).contains_key("ignored"));
    let choice = policies.rewrites().choose("food-review", 0).unwrap();
    assert_eq!(choice.rule.as_ref(), "canary", "named after its object");

    // The canary goes to 100 %, then away.
    server.apply(
        &kind,
        objects::inference_model_rewrite(
            NS,
            "canary",
            "pool",
            Some("food-review"),
            &[("food-review-v2", Some(1))],
        ),
    );
    until("the edit", || {
        split(&policies, "food-review", 20).get("food-review-v2") == Some(&20)
    })
    .await;
    assert!(server.delete(&kind, NS, "canary"));
    until("the deletion", || {
        split(&policies, "food-review", 20).get("ignored") == Some(&20)
    })
    .await;
}

#[tokio::test]
async fn the_older_group_is_watched_when_llm_d_ai_is_not_served() {
    let legacy_objectives = Resource::inference_objectives().in_legacy_group();
    let settings = Settings {
        resources: vec![
            Resource::pods(),
            Resource::inference_pools(),
            legacy_objectives.clone(),
        ],
        ..Settings::default()
    };
    let server = ApiServerDouble::start_with(settings).await.unwrap();
    server.apply(
        &legacy_objectives,
        objects::inference_objective(NS, "old", "pool", Some(7)),
    );
    let discovery = start(&server);
    let policies = discovery.request_policies().unwrap();
    until("the legacy objective", || {
        policies.objective_priority(Some("old")) == 7
    })
    .await;
    // No rewrite kind is served: no rewrite, and nothing breaks.
    assert!(policies.rewrites().is_empty());
}

#[tokio::test]
async fn an_api_server_outage_keeps_the_policies_in_force() {
    let server = ApiServerDouble::start().await.unwrap();
    let kind = Resource::inference_objectives();
    server.apply(
        &kind,
        objects::inference_objective(NS, "batch", "pool", Some(-1)),
    );
    let discovery = start(&server);
    let policies = discovery.request_policies().unwrap();
    until("the objective", || {
        policies.objective_priority(Some("batch")) == -1
    })
    .await;
    server.stop();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        policies.objective_priority(Some("batch")),
        -1,
        "kept through the outage"
    );
    server.restart().await.unwrap();
    server.apply(
        &kind,
        objects::inference_objective(NS, "batch", "pool", Some(-3)),
    );
    until("the edit after the outage", || {
        policies.objective_priority(Some("batch")) == -3
    })
    .await;
}

#[tokio::test]
async fn a_selector_pool_has_no_policies() {
    let server = ApiServerDouble::start().await.unwrap();
    let mut config = KubernetesConfig::selector("app=vllm", vec![8000]);
    config.pool_namespace = Some(NS.into());
    let discovery = KubernetesDiscovery::with_client(&config, client(&server), "default").unwrap();
    assert!(discovery.request_policies().is_none());
}

fn lease(identity: &str) -> LeaseSettings {
    let mut settings = LeaseSettings::new(lease_name(NS, "pool"), NS, identity);
    settings.lease_duration = Duration::from_millis(600);
    settings.renew_deadline = Duration::from_millis(400);
    settings.retry_period = Duration::from_millis(100);
    settings
}

fn leaders(elections: &[&LeaderElection]) -> usize {
    elections.iter().filter(|e| e.is_leader()).count()
}

#[tokio::test]
async fn one_replica_leads_and_a_follower_takes_over_when_it_stops() {
    let server = ApiServerDouble::start().await.unwrap();
    let a = LeaderElection::start(client(&server), lease("a"));
    let b = LeaderElection::start(client(&server), lease("b"));
    let c = LeaderElection::start(client(&server), lease("c"));
    until("a leader", || leaders(&[&a, &b, &c]) == 1).await;
    // Never two leaders, over many renewals.
    for _ in 0..40 {
        assert!(leaders(&[&a, &b, &c]) <= 1);
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(leaders(&[&a, &b, &c]), 1);
    let lease_object = server
        .object(&Resource::leases(), NS, "epp-inference-pool.llm-d.ai")
        .expect("the lease upstream names");
    let holder = lease_object["spec"]["holderIdentity"]
        .as_str()
        .unwrap()
        .to_string();

    // The leader stops without a word: a follower takes over once the lease expires.
    let (gone, rest): (Vec<_>, Vec<_>) = [a, b, c].into_iter().partition(|e| e.is_leader());
    drop(gone);
    let started = std::time::Instant::now();
    until("a new leader", || {
        rest.iter().filter(|e| e.is_leader()).count() == 1
    })
    .await;
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "not before the lease expired"
    );
    let after = server
        .object(&Resource::leases(), NS, "epp-inference-pool.llm-d.ai")
        .unwrap();
    assert_ne!(
        after["spec"]["holderIdentity"].as_str(),
        Some(holder.as_str())
    );
    assert_eq!(after["spec"]["leaseTransitions"], 1);

    // A leader that releases hands over at the follower's next try.
    let (leader, follower): (Vec<_>, Vec<_>) = rest.into_iter().partition(|e| e.is_leader());
    let follower = follower.into_iter().next().unwrap();
    leader.into_iter().next().unwrap().release().await;
    let started = std::time::Instant::now();
    until("the follower leads", || follower.is_leader()).await;
    assert!(
        started.elapsed() < Duration::from_millis(600),
        "released, not expired"
    );
}

#[tokio::test]
async fn a_leader_that_cannot_renew_steps_down() {
    let server = ApiServerDouble::start().await.unwrap();
    let a = LeaderElection::start(client(&server), lease("a"));
    until("a leads", || a.is_leader()).await;
    server.stop();
    until("a steps down", || !a.is_leader()).await;
    server.restart().await.unwrap();
    until("a leads again", || a.is_leader()).await;
}

#[tokio::test]
async fn leases_are_written_with_optimistic_concurrency() {
    let server = ApiServerDouble::start().await.unwrap();
    let url = format!("{}/apis/coordination.k8s.io/v1", server.url());
    let (status, body) = server.get(&url).await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"Lease\""));
    let (status, _) = server
        .get(&format!("{}/apis/llm-d.ai/v1alpha2", server.url()))
        .await
        .unwrap();
    assert_eq!(status, 200);
    let (status, _) = server
        .get(&format!("{}/apis/nothing.example/v1", server.url()))
        .await
        .unwrap();
    assert_eq!(status, 404);
}
