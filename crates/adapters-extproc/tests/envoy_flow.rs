//! End-to-end flow control through a real Envoy (from `SHEPHERD_ENVOY`): `shepherd-epp` with a
//! `flowControl` section holds requests while the simulated pool is saturated or empty, sheds
//! sheddable ones with a 429, and lets the others through as capacity returns. Without
//! `SHEPHERD_ENVOY` every test says it is skipped and passes. See `e2e/mod.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod e2e;

use std::sync::Arc;
use std::time::Duration;

use e2e::{ONE_AT_A_TIME, Options, Reply, Stack, sample, unique_prompt};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep};

const MAIN: &str = "inference";
const PRIORITY: &str = "x-shepherd-priority";

/// A request sent in the background, with the moment its answer arrived.
fn spawn_post(
    stack: &Arc<Stack>,
    prompt: String,
    max_tokens: u32,
    priority: &'static str,
) -> JoinHandle<(Reply, Instant)> {
    let stack = Arc::clone(stack);
    tokio::spawn(async move {
        let reply = stack
            .post_with(
                MAIN,
                Stack::completion(&prompt, max_tokens),
                &[(PRIORITY, priority)],
            )
            .await;
        (reply, Instant::now())
    })
}

/// Waits until the picker's `/metrics` sample `series` is at least `value`.
async fn wait_for_sample(stack: &Stack, series: &str, value: f64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let metrics = stack.metrics().await;
        if sample(&metrics, series) >= value {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{series} never reached {value}:\n{metrics}\nepp log:\n{}",
            stack.epp.log()
        );
        sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_saturation_priority_0_waits_and_completes_while_sheddable_gets_429() {
    // One slow server at speed 1 (a decode step takes a few ms): a 150-token answer keeps it
    // busy for about a second.
    let Some(stack) = Stack::start(Options {
        servers: 1,
        speed: 1.0,
        subset: vec![0],
        extra_config: ONE_AT_A_TIME.into(),
        ..Options::default()
    })
    .await
    else {
        return;
    };
    let stack = Arc::new(stack);
    let long = spawn_post(&stack, unique_prompt("long", 200), 150, "0");
    // The long request is in flight: the pool is saturated.
    wait_for_sample(&stack, "shepherd_flow_saturation", 1.0).await;

    // A sheddable request is refused at once (it never enters the queue), without reaching a
    // server.
    let enqueued = sample(&stack.metrics().await, "shepherd_flow_enqueued_total");
    let shed = stack
        .post_with(MAIN, Stack::completion("sheddable", 2), &[(PRIORITY, "-1")])
        .await;
    assert_eq!(shed.status, 429, "{shed:?}\nepp log:\n{}", stack.epp.log());
    assert_eq!(shed.reason.as_deref(), Some("shed"), "{shed:?}");
    assert_eq!(shed.served, None, "{shed:?}");
    assert_eq!(
        sample(&stack.metrics().await, "shepherd_flow_enqueued_total"),
        enqueued
    );

    // Standard requests wait in the queue while the long one runs ...
    let waiting: Vec<_> = (0..3)
        .map(|i| spawn_post(&stack, unique_prompt(&format!("p0 {i}"), 200), 2, "0"))
        .collect();
    wait_for_sample(&stack, "shepherd_flow_queued_requests", 3.0).await;
    assert!(!long.is_finished(), "the long request ended too soon");
    assert!(waiting.iter().all(|w| !w.is_finished()));

    // ... and are routed and answered once it is over, one after the other.
    let (long, long_done) = long.await.unwrap();
    stack.assert_routed(&long);
    for task in waiting {
        let (reply, done) = task.await.unwrap();
        stack.assert_routed(&reply);
        assert_eq!(reply.reason, None);
        // The picker frees the long request's slot when it sees the end of its answer, just
        // before Envoy hands that end to the client: allow a few milliseconds.
        assert!(
            done + Duration::from_millis(20) >= long_done,
            "a queued request finished before the long one"
        );
    }

    let metrics = stack.metrics().await;
    assert_eq!(
        sample(&metrics, "shepherd_flow_dropped_total{reason=\"shed\"}"),
        1.0,
        "{metrics}"
    );
    assert_eq!(
        sample(&metrics, "shepherd_flow_enqueued_total"),
        3.0,
        "{metrics}"
    );
    assert_eq!(
        sample(&metrics, "shepherd_flow_admitted_total{path=\"queued\"}"),
        3.0,
        "{metrics}"
    );
    assert_eq!(
        sample(&metrics, "shepherd_flow_admitted_total{path=\"immediate\"}"),
        1.0,
        "{metrics}"
    );
    assert_eq!(sample(&metrics, "shepherd_flow_queued_requests"), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_endpoint_a_request_waits_and_completes_once_one_appears() {
    // The picker starts with an empty pool (the default utilization detector: a pool with no
    // endpoint is saturated) and a server it does not know about yet.
    let Some(stack) = Stack::start(Options {
        servers: 1,
        listed: Some(Vec::new()),
        subset: vec![0],
        extra_config: "flowControl:\n  defaultRequestTTL: 30s\n".into(),
        ..Options::default()
    })
    .await
    else {
        return;
    };
    let stack = Arc::new(stack);
    let request = spawn_post(&stack, unique_prompt("scale from zero", 200), 2, "0");
    wait_for_sample(&stack, "shepherd_flow_enqueued_total", 1.0).await;
    sleep(Duration::from_secs(1)).await;
    assert!(!request.is_finished(), "answered with no endpoint");
    let metrics = stack.metrics().await;
    assert_eq!(sample(&metrics, "shepherd_flow_queued_requests"), 1.0);

    // The server appears in the config; the picker (polling the file every 100 ms) adds it,
    // scrapes it, and the queued request goes there.
    stack.write_config(&e2e::shepherd_config(
        &[stack.sims.addrs()[0]],
        &stack.options,
    ));
    let (reply, _) = request.await.unwrap();
    stack.assert_routed(&reply);
    assert_eq!(reply.served, Some(stack.server(0)));
    let metrics = stack.metrics().await;
    assert_eq!(
        sample(&metrics, "shepherd_flow_admitted_total{path=\"queued\"}"),
        1.0,
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            "shepherd_flow_dropped_total{reason=\"ttl_expired\"}"
        ),
        0.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_endpoint_sheddable_gets_429_a_client_that_leaves_is_dequeued_the_rest_503_at_the_ttl()
 {
    let Some(stack) = Stack::start(Options {
        servers: 1,
        listed: Some(Vec::new()),
        subset: vec![0],
        extra_config: "flowControl:\n  defaultRequestTTL: 500ms\n".into(),
        // Shorter than the TTL: in the example's FULL_DUPLEX_STREAMED mode Envoy does not apply
        // the ext_proc message timeout to a request the picker holds, so the answer below is the
        // picker's 503, not Envoy's 504 (docs/ext-proc.md, "Flow control").
        envoy_edits: vec![("message_timeout: 10s", "message_timeout: 0.1s")],
        ..Options::default()
    })
    .await
    else {
        return;
    };
    // No endpoint: the pool is saturated, so a sheddable request is refused at once ...
    let shed = stack
        .post_with(MAIN, Stack::completion("sheddable", 2), &[(PRIORITY, "-5")])
        .await;
    assert_eq!((shed.status, shed.reason.as_deref()), (429, Some("shed")));
    assert_eq!(
        sample(&stack.metrics().await, "shepherd_flow_enqueued_total"),
        0.0
    );

    // ... a client that gives up while its request waits takes it out of the queue ...
    let gave_up = stack
        .http
        .post(format!("{}/v1/completions", stack.url(MAIN)))
        .header("content-type", "application/json")
        .timeout(Duration::from_millis(200))
        .body(Stack::completion("impatient", 2))
        .send()
        .await;
    assert!(gave_up.is_err_and(|e| e.is_timeout()));
    wait_for_sample(&stack, "shepherd_flow_cancelled_total", 1.0).await;
    assert_eq!(
        sample(&stack.metrics().await, "shepherd_flow_queued_requests"),
        0.0
    );

    // ... and a standard one waits its 500 ms, then gets 503.
    let sent = Instant::now();
    let expired = stack
        .post_with(
            MAIN,
            Stack::completion("waits in vain", 2),
            &[
                (PRIORITY, "0"),
                ("x-gateway-inference-fairness-id", "tenant-a"),
            ],
        )
        .await;
    let waited = sent.elapsed();
    assert_eq!(expired.status, 503, "{expired:?}\n{}", stack.epp.log());
    assert_eq!(expired.reason.as_deref(), Some("ttl_expired"));
    assert_eq!(expired.served, None);
    assert!(waited >= Duration::from_millis(450), "{waited:?}");
    let metrics = stack.metrics().await;
    for (reason, count) in [("ttl_expired", 1.0), ("shed", 1.0), ("queue_full", 0.0)] {
        let series = format!("shepherd_flow_dropped_total{{reason=\"{reason}\"}}");
        assert_eq!(sample(&metrics, &series), count, "{series}\n{metrics}");
    }
    assert_eq!(sample(&metrics, "shepherd_flow_enqueued_total"), 2.0);
    assert_eq!(sample(&metrics, "shepherd_flow_cancelled_total"), 1.0);
}
