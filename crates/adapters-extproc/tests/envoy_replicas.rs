//! Two `shepherd-epp` replicas behind one real Envoy (an ext_proc cluster of two hosts), in
//! precise mode against `shepherd-sim serve` publishing KV-cache events, exchanging their
//! in-flight load (`replicas` section): both replicas pick, requests sharing a prefix go to the
//! server that holds it whichever replica picked them, and each replica counts the other's
//! requests in flight; and in approximate mode, where the replicas' index deltas keep requests
//! sharing a new prefix on one server whichever replica picks them. Skipped without
//! `SHEPHERD_ENVOY` (see `e2e/mod.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod e2e;

use e2e::{Options, PRECISE_POLICY, Stack, sample, tally, unique_prompt};

const MAIN: &str = "inference";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_the_servers_caches_and_their_load() {
    let Some(stack) = Stack::start(Options {
        servers: 3,
        kv_events: true,
        replicas: 2,
        extra_config: PRECISE_POLICY.into(),
        ..Options::default()
    })
    .await
    else {
        return;
    };
    stack.wait_replicas_ready(true).await;
    let epps = stack.epps();

    // Server 1 computes a system prompt; both replicas hear its events.
    let system = unique_prompt("shared across replicas", 2560);
    stack.hold_on_server(1, &system).await;

    // Envoy spreads the ext_proc streams over both replicas; every request sharing the prompt
    // goes to server 1, whichever replica picked it.
    let mut served = Vec::new();
    for i in 0..16 {
        served.push(stack.routed(MAIN, &format!("{system} question {i}")).await);
    }
    let servers = tally(served.iter().map(String::as_str));
    assert_eq!(servers.len(), 1, "{servers:?}");
    assert_eq!(served[0], stack.server(1));
    let picks = |m: &str| sample(m, "shepherd_picks_total{profile=\"default\"}");
    let (a, b) = (
        picks(&stack.metrics_of(epps[0]).await),
        picks(&stack.metrics_of(epps[1]).await),
    );
    assert!(a >= 1.0 && b >= 1.0 && a + b >= 16.0, "picks {a} and {b}");

    // Long generations in flight through both replicas: each replica counts the other's
    // (its endpoints' peer in-flight gauge), and nothing exchanged is refused.
    let long: Vec<_> = (0..6)
        .map(|i| {
            let body = Stack::completion(&unique_prompt(&format!("long {i}"), 512), 8_000);
            let url = format!("{}/v1/completions", stack.url(MAIN));
            let http = stack.http.clone();
            tokio::spawn(async move {
                http.post(url)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .map(|r| r.status().as_u16())
            })
        })
        .collect();
    stack.wait_peer_load().await;
    for epp in epps {
        let m = stack.metrics_of(epp).await;
        for reason in ["malformed", "bad_mac", "replayed", "unknown_peer"] {
            let series =
                format!("shepherd_replicas_rejected_datagrams_total{{reason=\"{reason}\"}}");
            assert_eq!(sample(&m, &series), 0.0, "{series}");
        }
    }
    for request in long {
        assert_eq!(request.await.unwrap().unwrap(), 200);
    }
}

/// Approximate mode (the adaptive preset, no KV events): the replicas' index deltas make a
/// prompt one replica routed known to the other within an interval, so requests sharing a new
/// prefix stay on one server whichever replica picks them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_their_approximate_index() {
    let Some(stack) = Stack::start(Options {
        servers: 3,
        replicas: 2,
        ..Options::default()
    })
    .await
    else {
        return;
    };
    stack.wait_replicas_ready(false).await;
    let epps = stack.epps();
    let system = unique_prompt("a prefix no replica has seen", 4096);
    // The first pick reaches the other replica (one interval, 10 ms, when idle).
    let mut served = vec![
        stack
            .routed_and_shared(MAIN, &format!("{system} question 0"))
            .await,
    ];
    for i in 1..16 {
        served.push(stack.routed(MAIN, &format!("{system} question {i}")).await);
    }
    let servers = tally(served.iter().map(String::as_str));
    assert_eq!(servers.len(), 1, "{servers:?}");
    let picks = |m: &str| sample(m, "shepherd_picks_total{profile=\"default\"}");
    let received = |m: &str| sample(m, "shepherd_replicas_index_keys_received_total");
    let (a, b) = (
        stack.metrics_of(epps[0]).await,
        stack.metrics_of(epps[1]).await,
    );
    assert!(
        picks(&a) >= 1.0 && picks(&b) >= 1.0,
        "both replicas picked: {} and {}",
        picks(&a),
        picks(&b)
    );
    assert!(received(&a) > 0.0 && received(&b) > 0.0, "deltas both ways");
}
