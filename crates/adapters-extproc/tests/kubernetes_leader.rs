//! Upstream's active-passive mode: two `shepherd-epp --ha-enable-leader-election` replicas
//! against the API-server double (the real kube client in the binaries). One leads: it
//! reports SERVING on the gRPC health services `readiness`, `""` and the ext_proc service,
//! and 200 on `/readyz`; the follower reports NOT_SERVING and 503, but `liveness` SERVING, and
//! keeps its pool view warm. Killed, the leader's lease expires and the follower takes over;
//! stopped with SIGTERM, it hands the lease over at once.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod e2e;

use std::net::SocketAddr;
use std::time::Duration;

use e2e::Epp;
use shepherd_kube_apiserver_double::{ApiServerDouble, Resource, objects};
use tokio::time::Instant;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

const NS: &str = "inference";
const SERVING: i32 = 1;
const NOT_SERVING: i32 = 2;

async fn health(addr: SocketAddr, service: &str) -> i32 {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: service.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .status
}

async fn readyz(addr: SocketAddr) -> u16 {
    reqwest::get(format!("http://{addr}/readyz"))
        .await
        .unwrap()
        .status()
        .as_u16()
}

async fn endpoints(epp: &Epp) -> f64 {
    let page = reqwest::get(format!("http://{}/metrics", epp.admin))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    e2e::sample(&page, "shepherd_discovery_endpoints")
}

/// Which of `epps` report SERVING on `readiness` (waits up to `within` for exactly one).
async fn leader(epps: &[&Epp], within: Duration) -> usize {
    let deadline = Instant::now() + within;
    loop {
        let mut serving = Vec::new();
        for (i, epp) in epps.iter().enumerate() {
            if health(epp.health, "readiness").await == SERVING {
                serving.push(i);
            }
        }
        if serving.len() == 1 {
            return serving[0];
        }
        assert!(serving.len() < 2, "two leaders at once");
        assert!(Instant::now() < deadline, "no leader within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_leads_and_the_follower_takes_over() {
    let server = ApiServerDouble::start().await.unwrap();
    // A simulated model server as the pool's one pod (a ready picker has fresh metrics).
    let sims = shepherd_sim::serve::spawn(shepherd_sim::serve::ServeConfig::ephemeral(1))
        .await
        .unwrap();
    let port = sims.addrs()[0].port();
    server.apply(
        &Resource::inference_pools(),
        objects::inference_pool(NS, "vllm-pool", &[("app", "vllm")], &[port]),
    );
    server.apply(
        &Resource::pods(),
        objects::pod(
            NS,
            "vllm-0",
            &[("app", "vllm")],
            Some("127.0.0.1"),
            true,
            &[port],
        ),
    );
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig, NS).unwrap();
    let config = dir.path().join("shepherd.yaml");
    std::fs::write(
        &config,
        format!(
            "server: {{extprocPort: 0, healthPort: 0, metricsPort: 0}}\n\
             discovery:\n  kubernetes:\n    poolName: vllm-pool\n    poolNamespace: {NS}\n    publishIntervalMs: 10\n\
             \x20   leaderElection: {{leaseDurationMs: 2000, renewDeadlineMs: 1000, retryPeriodMs: 200}}\n"
        ),
    )
    .unwrap();
    let env = [("KUBECONFIG".to_string(), kubeconfig.display().to_string())];
    let args = ["--ha-enable-leader-election"];
    let a = Epp::start_with_env(&config, &args, false, &env).await;
    let b = Epp::start_with_env(&config, &args, false, &env).await;
    let first = leader(&[&a, &b], Duration::from_secs(10)).await;
    let (leading, following) = if first == 0 { (&a, &b) } else { (&b, &a) };
    for service in ["", "readiness", shepherd_adapters_extproc::SERVICE_NAME] {
        assert_eq!(
            health(leading.health, service).await,
            SERVING,
            "{service:?}"
        );
        assert_eq!(
            health(following.health, service).await,
            NOT_SERVING,
            "{service:?}"
        );
    }
    assert_eq!(health(following.health, "liveness").await, SERVING);
    assert_eq!(readyz(following.admin).await, 503);
    // Both keep the pool (a follower is warm), whatever they report.
    let deadline = Instant::now() + Duration::from_secs(5);
    while endpoints(&a).await != 1.0 || endpoints(&b).await != 1.0 {
        assert!(Instant::now() < deadline, "a replica has no pool");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        following.log().contains("now a follower"),
        "{}",
        following.log()
    );

    // The leader killed: the lease expires (2 s) and the follower takes over.
    let (mut gone, survivor) = if first == 0 { (a, b) } else { (b, a) };
    gone.kill();
    let t0 = Instant::now();
    leader(&[&survivor], Duration::from_secs(5)).await;
    let takeover = t0.elapsed();
    println!("leader killed -> follower SERVING after {takeover:?}");
    assert!(
        takeover >= Duration::from_millis(1500),
        "not before the lease expired: {takeover:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while readyz(survivor.admin).await != 200 {
        assert!(Instant::now() < deadline, "the new leader never ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A new follower; the leader stopped with SIGTERM hands the lease over at once.
    let c = Epp::start_with_env(&config, &args, false, &env).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(health(c.health, "readiness").await, NOT_SERVING);
    survivor.terminate();
    let t0 = Instant::now();
    leader(&[&c], Duration::from_secs(5)).await;
    let handover = t0.elapsed();
    println!("leader stopped -> follower SERVING after {handover:?}");
    assert!(
        handover < Duration::from_millis(1500),
        "released, not expired: {handover:?}"
    );
    drop(sims);
}
