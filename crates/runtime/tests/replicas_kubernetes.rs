//! The direct exchange's peers found on Kubernetes (`replicas.peers: {kubernetes: ...}`),
//! against the API-server double with the real kube client: three runtimes on three loopback
//! addresses (127.0.0.2-4, one port, as pods share a container port) find each other by label
//! selector; a replica whose pod is not listed (or not Ready) is not heard; a pod that
//! appears is added and one deleted is dropped (its load expires); an API-server outage keeps
//! the peers; `maxPeers` bounds them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::UdpSocket;
use std::path::Path;
use std::time::Duration;

use common::wait_until;
use shepherd_kube_apiserver_double::{ApiServerDouble, Resource, objects};
use shepherd_runtime::RuntimeHandle;
use shepherd_runtime::config::RuntimeConfig;
use shepherd_scheduler_core::endpoint::Endpoint;
use std::sync::Arc;

const NS: &str = "inference";
const ENDPOINT: &str = "127.0.0.1:9";
const WAIT: Duration = Duration::from_secs(10);
const SECRET: &str = "test-replicas-shared-secret-0123";

/// One UDP port free on each of `ips`.
fn common_port(ips: &[&str]) -> u16 {
    for _ in 0..50 {
        let first = UdpSocket::bind((ips[0], 0)).unwrap();
        let port = first.local_addr().unwrap().port();
        let others: Vec<_> = ips[1..]
            .iter()
            .filter_map(|ip| UdpSocket::bind((*ip, port)).ok())
            .collect();
        if others.len() == ips.len() - 1 {
            return port;
        }
    }
    panic!("no common free port on {ips:?}");
}

fn epp_pod(name: &str, ip: &str, ready: bool) -> serde_json::Value {
    objects::pod(NS, name, &[("app", "epp")], Some(ip), ready, &[9400])
}

/// A runtime over three endpoints listening on `ip:port`, its peers the Ready `app=epp` pods.
async fn replica(ip: &str, port: u16, kubeconfig: &Path, extra: &str) -> RuntimeHandle {
    let yaml = format!(
        "endpoints: [{ENDPOINT}, 127.0.0.1:10, 127.0.0.1:11]\n\
         replicas:\n  listen: {ip}:{port}\n  intervalMs: 10\n  expireMs: 1000\n  key: {SECRET}\n  \
         peers:\n    kubernetes:\n      selector: app=epp\n      namespace: {NS}\n      \
         kubeconfig: {}\n      backoffInitialMs: 50\n      backoffMaxMs: 250\n{extra}",
        kubeconfig.display()
    );
    common::replicas::start_quiet(&yaml).await
}

fn endpoint(handle: &RuntimeHandle) -> Arc<Endpoint> {
    handle
        .pool()
        .snapshot()
        .get_by_address(ENDPOINT)
        .cloned()
        .unwrap()
}

fn peer_requests(handle: &RuntimeHandle) -> u64 {
    endpoint(handle).peer_load().requests
}

fn metric(handle: &RuntimeHandle, name: &str) -> Option<f64> {
    handle.render_metrics().lines().find_map(|line| {
        let (key, value) = line.split_once(' ')?;
        (key == name).then(|| value.parse().ok())?
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_find_each_other_follow_pods_and_keep_peers_through_an_outage() {
    let server = ApiServerDouble::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig, NS).unwrap();
    let pods = Resource::pods();
    let (ip_a, ip_b, ip_c) = ("127.0.0.2", "127.0.0.3", "127.0.0.4");
    let port = common_port(&[ip_a, ip_b, ip_c]);
    server.apply(&pods, epp_pod("epp-a", ip_a, true));
    server.apply(&pods, epp_pod("epp-b", ip_b, true));
    // Another app's pod on C's address: not a peer.
    server.apply(
        &pods,
        objects::pod(NS, "vllm-0", &[("app", "vllm")], Some(ip_c), true, &[8000]),
    );

    let a = replica(ip_a, port, &kubeconfig, "").await;
    let b = replica(ip_b, port, &kubeconfig, "").await;
    // C runs, but its pod is not listed yet.
    let c = replica(ip_c, port, &kubeconfig, "").await;

    // A and B discover each other (and only each other): B's requests count on A.
    let held_b: Vec<_> = (0..2).map(|_| endpoint(&b).start_request(100)).collect();
    let held_c: Vec<_> = (0..5).map(|_| endpoint(&c).start_request(100)).collect();
    assert!(
        wait_until(WAIT, || peer_requests(&a) == 2).await,
        "A sees {}",
        peer_requests(&a)
    );
    assert!(
        wait_until(WAIT, || peer_requests(&b) == 0
            && metric(&b, "shepherd_replicas_live_peers") == Some(1.0))
        .await
    );
    assert_eq!(metric(&a, "shepherd_replicas_discovered_peers"), Some(1.0));
    assert_eq!(
        metric(&a, "shepherd_replicas_peer_discovery_stale"),
        Some(0.0)
    );
    // C, holding the key but not a listed pod, is refused.
    let refused = "shepherd_replicas_rejected_datagrams_total{reason=\"unknown_peer\"}";
    assert!(wait_until(WAIT, || metric(&a, refused).is_some_and(|n| n > 0.0)).await);
    assert_eq!(peer_requests(&a), 2);

    // C's pod appears, first not Ready (still no peer), then Ready: added everywhere.
    server.apply(&pods, epp_pod("epp-c", ip_c, false));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(peer_requests(&a), 2);
    server.apply(&pods, epp_pod("epp-c", ip_c, true));
    assert!(
        wait_until(WAIT, || peer_requests(&a) == 7).await,
        "A sees {}",
        peer_requests(&a)
    );
    assert!(wait_until(WAIT, || peer_requests(&b) == 5).await);
    assert!(wait_until(WAIT, || peer_requests(&c) == 2).await);
    assert_eq!(metric(&a, "shepherd_replicas_discovered_peers"), Some(2.0));

    // B's pod is deleted: A and C stop hearing B, whose load expires (B still sends).
    server.delete(&pods, NS, "epp-b");
    assert!(
        wait_until(WAIT, || peer_requests(&a) == 5 && peer_requests(&c) == 0).await,
        "A sees {}, C sees {}",
        peer_requests(&a),
        peer_requests(&c)
    );
    assert_eq!(metric(&a, "shepherd_replicas_discovered_peers"), Some(1.0));
    assert!(metric(&a, "shepherd_replicas_expired_peers_total").unwrap() >= 1.0);

    // The API server goes away: the peers stay, and load keeps flowing between A and C.
    server.stop();
    assert!(
        wait_until(WAIT, || metric(
            &a,
            "shepherd_replicas_peer_discovery_stale"
        ) == Some(1.0))
        .await
    );
    drop(held_c);
    let held_a: Vec<_> = (0..3).map(|_| endpoint(&a).start_request(100)).collect();
    assert!(wait_until(WAIT, || peer_requests(&a) == 0 && peer_requests(&c) == 3).await);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        (peer_requests(&a), peer_requests(&c)),
        (0, 3),
        "after an expiry"
    );
    assert_eq!(metric(&a, "shepherd_replicas_discovered_peers"), Some(1.0));

    // It comes back: the discovery resumes and follows pods again (B's pod returns).
    server.restart().await.unwrap();
    assert!(
        wait_until(WAIT, || metric(
            &a,
            "shepherd_replicas_peer_discovery_stale"
        ) == Some(0.0))
        .await
    );
    server.apply(&pods, epp_pod("epp-b", ip_b, true));
    assert!(
        wait_until(WAIT, || peer_requests(&c) == 5).await,
        "C sees {}",
        peer_requests(&c)
    );
    drop((held_a, held_b));
    for handle in [a, b, c] {
        let _ = handle.shutdown(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_peers_bounds_the_discovered_peers() {
    let server = ApiServerDouble::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig, NS).unwrap();
    let pods = Resource::pods();
    let port = common_port(&["127.0.0.5"]);
    // A hundred Ready pods of the selector (loopback addresses where nothing listens); the
    // replica keeps two.
    server.apply(&pods, epp_pod("epp-self", "127.0.0.5", true));
    for i in 0..100u8 {
        let ip = format!("127.0.1.{i}");
        server.apply(&pods, epp_pod(&format!("epp-{i}"), &ip, true));
    }
    let a = replica("127.0.0.5", port, &kubeconfig, "      maxPeers: 2\n").await;
    assert!(
        wait_until(WAIT, || metric(&a, "shepherd_replicas_discovered_peers")
            == Some(100.0))
        .await
    );
    assert_eq!(metric(&a, "shepherd_replicas_peers_over_limit"), Some(98.0));
    let _ = a.shutdown(Duration::from_millis(50)).await;
}

/// The example manifests: the replicas' config loads, its selector matches the Deployment's
/// pod labels, the UDP port is declared, the replica learns its pod IP and name from the
/// downward API, and the base manifest's Role lets it list and watch pods.
#[test]
fn the_example_manifest_finds_its_own_pods() {
    use serde::Deserialize;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/deploy/kubernetes");
    let read = |name: &str| -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        serde_norway::Deserializer::from_str(&text)
            .map(|doc| serde_json::Value::deserialize(doc).unwrap())
            .collect()
    };
    let docs = read("shepherd-epp-replicas.yaml");
    let find = |docs: &[serde_json::Value], kind: &str| {
        docs.iter().find(|d| d["kind"] == kind).cloned().unwrap()
    };
    let text = find(&docs, "ConfigMap")["data"]["shepherd.yaml"]
        .as_str()
        .unwrap()
        .to_owned();
    let config = RuntimeConfig::from_yaml(&text).unwrap();
    let replicas = config.replicas.unwrap();
    let peers = replicas.peers.kubernetes().unwrap();
    let port = replicas.peer_port();
    let deployment = find(&docs, "Deployment");
    let template = &deployment["spec"]["template"];
    let (key, value) = peers.selector.split_once('=').unwrap();
    assert_eq!(template["metadata"]["labels"][key], value);
    let container = &template["spec"]["containers"][0];
    assert!(container["ports"].as_array().unwrap().iter().any(|p| {
        p["containerPort"].as_u64() == Some(u64::from(port)) && p["protocol"] == "UDP"
    }));
    let env = container["env"].as_array().unwrap();
    let field = |name: &str| {
        env.iter()
            .find(|e| e["name"] == name)
            .map(|e| e["valueFrom"]["fieldRef"]["fieldPath"].clone())
    };
    assert_eq!(field("POD_IP"), Some("status.podIP".into()));
    assert_eq!(field("POD_NAME"), Some("metadata.name".into()));
    // The key file is mounted from a Secret where the config reads it.
    let shepherd_runtime::config::Secret::File { file } = replicas.key.unwrap() else {
        panic!("the key is a file");
    };
    let mounts = container["volumeMounts"].as_array().unwrap();
    assert!(
        mounts
            .iter()
            .any(|m| file.starts_with(m["mountPath"].as_str().unwrap())
                && m["name"] == "replicas-key")
    );
    // The base manifest's Role: pods get, list, watch.
    let base = read("shepherd-epp.yaml");
    let role = find(&base, "Role");
    assert!(role["rules"].as_array().unwrap().iter().any(|r| {
        r["resources"].as_array().unwrap().contains(&"pods".into())
            && ["list", "watch"]
                .iter()
                .all(|v| r["verbs"].as_array().unwrap().contains(&(*v).into()))
    }));
}
