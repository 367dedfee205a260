//! Kubernetes discovery against the API-server double, with the real kube client: pods
//! turning Ready and NotReady, pool edits, refused pools, an API-server outage, 410 Gone, a
//! deleted pool, and the pool's in-flight counts across a pod that flaps.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use shepherd_kube_apiserver_double::{ApiServerDouble, Resource, objects};
use shepherd_runtime::config::{ALPHA_POOL_GROUP, KubernetesConfig};
use shepherd_runtime::discovery::kubernetes::{
    ACTIVE_PORTS_ANNOTATION, KubernetesDiscovery, Watched,
};
use shepherd_runtime::discovery::{Discovery, EndpointSet};
use tokio::sync::watch;

const NS: &str = "inference";
const APP: (&str, &str) = ("app", "vllm");

/// Short backoffs and publishing at once, so a restarted server is seen within a second.
fn fast(mut config: KubernetesConfig) -> KubernetesConfig {
    config.pool_namespace = Some(NS.into());
    config.backoff_initial_ms = 50;
    config.backoff_max_ms = 250;
    config.publish_interval_ms = 5;
    config.watch_timeout_secs = 30;
    config
}

fn start(server: &ApiServerDouble, config: KubernetesConfig) -> KubernetesDiscovery {
    let client = kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
    KubernetesDiscovery::with_client(&fast(config), client, "default").unwrap()
}

fn pod(name: &str, ip: Option<&str>, ready: bool, labels: &[(&str, &str)]) -> Value {
    objects::pod(NS, name, labels, ip, ready, &[8000, 8001])
}

fn pool(labels: &[(&str, &str)], ports: &[u16]) -> Value {
    objects::inference_pool(NS, "pool", labels, ports)
}

/// Waits (up to 5 s) for a set whose addresses are `expected`.
async fn expect(rx: &mut watch::Receiver<Arc<EndpointSet>>, expected: &[&str]) -> Arc<EndpointSet> {
    let found = {
        let wait = rx.wait_for(|set| set.addresses() == expected);
        match tokio::time::timeout(Duration::from_secs(5), wait).await {
            Ok(Ok(set)) => Some(Arc::clone(&set)),
            _ => None,
        }
    };
    found.unwrap_or_else(|| panic!("expected {expected:?}, have {:?}", rx.borrow().addresses()))
}

/// The set stays `expected` for `time`.
async fn stays(rx: &mut watch::Receiver<Arc<EndpointSet>>, expected: &[&str], time: Duration) {
    let changed = tokio::time::timeout(time, rx.wait_for(|set| set.addresses() != expected))
        .await
        .is_ok();
    assert!(!changed, "the set changed to {:?}", rx.borrow().addresses());
}

#[tokio::test]
async fn a_ready_pod_is_an_endpoint_per_port_and_leaves_when_not_ready_or_deleted() {
    let server = ApiServerDouble::start().await.unwrap();
    let pods = Resource::pods();
    server.apply(&Resource::inference_pools(), pool(&[APP], &[8000]));
    server.apply(
        &pods,
        pod(
            "a",
            Some("10.0.0.1"),
            true,
            &[APP, ("llm-d.ai/role", "decode")],
        ),
    );
    server.apply(
        &pods,
        pod("other", Some("10.0.0.9"), true, &[("app", "other")]),
    );
    let discovery = start(&server, KubernetesConfig::pool("pool"));
    let mut rx = discovery.subscribe();
    let set = expect(&mut rx, &["10.0.0.1:8000"]).await;
    // Pod labels are endpoint labels: the P/D role filters and label selectors read them.
    assert_eq!(
        set.get("10.0.0.1:8000").unwrap().label("llm-d.ai/role"),
        Some("decode")
    );

    server.apply(&pods, pod("b", Some("10.0.0.2"), false, &[APP]));
    stays(&mut rx, &["10.0.0.1:8000"], Duration::from_millis(300)).await;
    server.apply(&pods, pod("b", Some("10.0.0.2"), true, &[APP]));
    expect(&mut rx, &["10.0.0.1:8000", "10.0.0.2:8000"]).await;
    server.apply(&pods, pod("a", Some("10.0.0.1"), false, &[APP]));
    expect(&mut rx, &["10.0.0.2:8000"]).await;
    server.delete(&pods, NS, "b");
    expect(&mut rx, &[]).await;

    // A pod being deleted (deletionTimestamp set) leaves at once.
    server.apply(&pods, pod("c", Some("10.0.0.3"), true, &[APP]));
    expect(&mut rx, &["10.0.0.3:8000"]).await;
    let mut terminating = pod("c", Some("10.0.0.3"), true, &[APP]);
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z".into();
    server.apply(&pods, terminating);
    expect(&mut rx, &[]).await;
    assert!(!discovery.stats().stale());
}

#[tokio::test]
async fn pods_without_an_ip_are_skipped_until_they_have_one() {
    let server = ApiServerDouble::start().await.unwrap();
    let pods = Resource::pods();
    server.apply(&Resource::inference_pools(), pool(&[APP], &[8000]));
    server.apply(&pods, pod("a", Some("10.0.0.1"), true, &[APP]));
    server.apply(&pods, pod("pending", None, true, &[APP]));
    server.apply(&pods, pod("bad-ip", Some("not-an-ip"), true, &[APP]));
    let discovery = start(&server, KubernetesConfig::pool("pool"));
    let mut rx = discovery.subscribe();
    expect(&mut rx, &["10.0.0.1:8000"]).await;
    server.apply(&pods, pod("pending", Some("10.0.0.2"), true, &[APP]));
    expect(&mut rx, &["10.0.0.1:8000", "10.0.0.2:8000"]).await;
}

#[tokio::test]
async fn selector_and_port_edits_apply_live_and_active_ports_narrow() {
    let server = ApiServerDouble::start().await.unwrap();
    let pods = Resource::pods();
    let pools = Resource::inference_pools();
    server.apply(&pools, pool(&[("app", "blue")], &[8000]));
    server.apply(
        &pods,
        pod("blue", Some("10.0.0.1"), true, &[("app", "blue")]),
    );
    server.apply(
        &pods,
        pod("green", Some("10.0.0.2"), true, &[("app", "green")]),
    );
    let discovery = start(&server, KubernetesConfig::pool("pool"));
    let mut rx = discovery.subscribe();
    expect(&mut rx, &["10.0.0.1:8000"]).await;

    // The selector moves the pool.
    server.apply(&pools, pool(&[("app", "green")], &[8000]));
    expect(&mut rx, &["10.0.0.2:8000"]).await;
    // Two ports: two endpoints per pod (data-parallel ranks).
    server.apply(&pools, pool(&[("app", "green")], &[8000, 8001]));
    expect(&mut rx, &["10.0.0.2:8000", "10.0.0.2:8001"]).await;
    // The annotation narrows the pod to the ports it names.
    let mut narrowed = pod("green", Some("10.0.0.2"), true, &[("app", "green")]);
    objects::annotate(&mut narrowed, ACTIVE_PORTS_ANNOTATION, "8001");
    server.apply(&pods, narrowed.clone());
    expect(&mut rx, &["10.0.0.2:8001"]).await;
    objects::annotate(&mut narrowed, ACTIVE_PORTS_ANNOTATION, "");
    server.apply(&pods, narrowed);
    expect(&mut rx, &[]).await;
    // A pod whose labels change out of the selector leaves.
    server.apply(
        &pods,
        pod("green", Some("10.0.0.2"), true, &[("app", "green")]),
    );
    expect(&mut rx, &["10.0.0.2:8000", "10.0.0.2:8001"]).await;
    server.apply(
        &pods,
        pod("green", Some("10.0.0.2"), true, &[("app", "retired")]),
    );
    expect(&mut rx, &[]).await;
}

#[tokio::test]
async fn an_invalid_pool_is_refused_and_the_last_valid_one_stays() {
    let server = ApiServerDouble::start().await.unwrap();
    let pools = Resource::inference_pools();
    server.apply(&pools, pool(&[APP], &[8000]));
    server.apply(&Resource::pods(), pod("a", Some("10.0.0.1"), true, &[APP]));
    let discovery = start(&server, KubernetesConfig::pool("pool"));
    let mut rx = discovery.subscribe();
    expect(&mut rx, &["10.0.0.1:8000"]).await;

    let nine: Vec<u16> = (8000..8009).collect();
    server.apply(&pools, pool(&[APP], &nine));
    server.apply(&pools, pool(&[("bad key!", "x")], &[8000]));
    let mut no_selector = pool(&[APP], &[8001]);
    no_selector["spec"]["selector"]["matchLabels"] = serde_json::json!({});
    server.apply(&pools, no_selector);
    stays(&mut rx, &["10.0.0.1:8000"], Duration::from_millis(500)).await;
    assert_eq!(discovery.stats().refused(), 3);
    assert!(discovery.stats().pool_present());
    // A valid edit after them applies.
    server.apply(&pools, pool(&[APP], &[8001]));
    expect(&mut rx, &["10.0.0.1:8001"]).await;
}

#[tokio::test]
async fn a_deleted_pool_empties_the_pool_and_a_new_one_fills_it() {
    let server = ApiServerDouble::start().await.unwrap();
    let pools = Resource::inference_pools();
    server.apply(&pools, pool(&[APP], &[8000]));
    server.apply(&Resource::pods(), pod("a", Some("10.0.0.1"), true, &[APP]));
    let discovery = start(&server, KubernetesConfig::pool("pool"));
    let mut rx = discovery.subscribe();
    expect(&mut rx, &["10.0.0.1:8000"]).await;
    server.delete(&pools, NS, "pool");
    expect(&mut rx, &[]).await;
    assert!(!discovery.stats().pool_present());
    server.apply(&pools, pool(&[APP], &[8000]));
    expect(&mut rx, &["10.0.0.1:8000"]).await;
}

#[tokio::test]
async fn a_missing_pool_gives_no_endpoints_until_it_is_created() {
    let server = ApiServerDouble::start().await.unwrap();
    server.apply(&Resource::pods(), pod("a", Some("10.0.0.1"), true, &[APP]));
    let discovery = start(&server, KubernetesConfig::pool("pool"));
    let mut rx = discovery.subscribe();
    stays(&mut rx, &[], Duration::from_millis(300)).await;
    server.apply(&Resource::inference_pools(), pool(&[APP], &[8000]));
    expect(&mut rx, &["10.0.0.1:8000"]).await;
}

#[tokio::test]
async fn the_older_v1alpha2_pool_group_is_watched() {
    let server = ApiServerDouble::start().await.unwrap();
    let pools = Resource::inference_pools_v1alpha2();
    server.apply(
        &pools,
        objects::inference_pool_v1alpha2(NS, "pool", &[APP], 8001),
    );
    server.apply(&Resource::pods(), pod("a", Some("10.0.0.1"), true, &[APP]));
    let config = KubernetesConfig {
        pool_group: ALPHA_POOL_GROUP.into(),
        ..KubernetesConfig::pool("pool")
    };
    let discovery = start(&server, config);
    let mut rx = discovery.subscribe();
    expect(&mut rx, &["10.0.0.1:8001"]).await;
}

#[tokio::test]
async fn an_endpoint_selector_works_without_the_crd() {
    let server = ApiServerDouble::start().await.unwrap();
    let pods = Resource::pods();
    server.apply(
        &pods,
        pod("a", Some("10.0.0.1"), true, &[APP, ("env", "prod")]),
    );
    server.apply(&pods, pod("b", Some("10.0.0.2"), true, &[APP]));
    let discovery = start(
        &server,
        KubernetesConfig::selector("app=vllm,env=prod", [8000, 8001]),
    );
    let mut rx = discovery.subscribe();
    expect(&mut rx, &["10.0.0.1:8000", "10.0.0.1:8001"]).await;
}

#[tokio::test]
async fn a_410_gone_relists_and_misses_nothing() {
    let server = ApiServerDouble::start().await.unwrap();
    let pods = Resource::pods();
    server.apply(&Resource::inference_pools(), pool(&[APP], &[8000]));
    server.apply(&pods, pod("a", Some("10.0.0.1"), true, &[APP]));
    server.apply(&pods, pod("b", Some("10.0.0.2"), true, &[APP]));
    let discovery = start(&server, KubernetesConfig::pool("pool"));
    let mut rx = discovery.subscribe();
    expect(&mut rx, &["10.0.0.1:8000", "10.0.0.2:8000"]).await;
    let relists = discovery.stats().relists(Watched::Pods);

    // The history is compacted while the watches are cut: every resourceVersion the client
    // holds is too old, and changes made meanwhile only a relist can show.
    server.stop();
    server.compact();
    server.delete(&pods, NS, "a");
    server.apply(&pods, pod("c", Some("10.0.0.3"), true, &[APP]));
    server.restart().await.unwrap();
    expect(&mut rx, &["10.0.0.2:8000", "10.0.0.3:8000"]).await;
    assert!(server.stats().gone() >= 1, "the double answered 410");
    assert!(discovery.stats().relists(Watched::Pods) > relists);
}

#[tokio::test]
async fn an_api_server_outage_changes_nothing_and_watching_resumes_after() {
    let server = ApiServerDouble::start().await.unwrap();
    let pods = Resource::pods();
    server.apply(&Resource::inference_pools(), pool(&[APP], &[8000]));
    server.apply(&pods, pod("a", Some("10.0.0.1"), true, &[APP]));
    let discovery = start(&server, KubernetesConfig::pool("pool"));
    let mut rx = discovery.subscribe();
    expect(&mut rx, &["10.0.0.1:8000"]).await;

    server.stop();
    stays(&mut rx, &["10.0.0.1:8000"], Duration::from_secs(30)).await;
    assert!(discovery.stats().stale(), "the outage is visible");
    assert!(discovery.stats().errors(Watched::Pods) > 0);

    server.restart().await.unwrap();
    server.apply(&pods, pod("b", Some("10.0.0.2"), true, &[APP]));
    expect(&mut rx, &["10.0.0.1:8000", "10.0.0.2:8000"]).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while discovery.stats().stale() {
        assert!(tokio::time::Instant::now() < deadline, "still stale");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn the_runtime_follows_kubernetes_and_a_flapping_pod_keeps_no_stale_in_flight_count() {
    use shepherd_runtime::config::RuntimeConfig;
    use shepherd_runtime::{Runtime, RuntimeOptions};
    use shepherd_scheduler_core::prelude::*;

    let server = ApiServerDouble::start().await.unwrap();
    let pods = Resource::pods();
    server.apply(&Resource::inference_pools(), pool(&[APP], &[8000]));
    server.apply(&pods, pod("a", Some("10.0.0.1"), true, &[APP]));
    let discovery = Arc::new(start(&server, KubernetesConfig::pool("pool")));
    let mut rx = discovery.subscribe();
    expect(&mut rx, &["10.0.0.1:8000"]).await;
    let options = RuntimeOptions {
        discovery: Some(discovery.clone()),
        scrape: false,
        serve_admin: false,
        adaptive: false,
        kv_events: false,
        ..RuntimeOptions::default()
    };
    let handle = Runtime::start(RuntimeConfig::default(), options)
        .await
        .unwrap();
    let pool_of = |handle: &shepherd_runtime::RuntimeHandle| {
        handle
            .pool()
            .snapshot()
            .endpoints()
            .iter()
            .map(|e| (e.address().to_string(), e.in_flight_requests()))
            .collect::<Vec<_>>()
    };
    assert_eq!(pool_of(&handle), [("10.0.0.1:8000".to_string(), 0)]);

    let request = InferenceRequest::new("r1", "m", Prompt::Text("hello".into()));
    let response = handle.scheduler().schedule(&request).unwrap().into_handle();
    assert_eq!(pool_of(&handle), [("10.0.0.1:8000".to_string(), 1)]);

    // NotReady, then Ready again while the request still runs on the old endpoint.
    server.apply(&pods, pod("a", Some("10.0.0.1"), false, &[APP]));
    expect(&mut rx, &[]).await;
    server.apply(&pods, pod("a", Some("10.0.0.1"), true, &[APP]));
    expect(&mut rx, &["10.0.0.1:8000"]).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while handle.pool().snapshot().len() != 1 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        pool_of(&handle),
        [("10.0.0.1:8000".to_string(), 0)],
        "a fresh endpoint"
    );
    assert_eq!(
        handle.in_flight(),
        1,
        "the request on the old endpoint still counts"
    );
    drop(response);
    assert_eq!(pool_of(&handle), [("10.0.0.1:8000".to_string(), 0)]);
    assert_eq!(handle.in_flight(), 0);
    let report = handle.shutdown(Duration::from_secs(1)).await;
    assert!(report.drained);
}
