//! Several runtimes sharing their load and index inserts through a real `redis-server`
//! (`replicas.backend: redis`): a replica's picks reach the others' indexes and its requests
//! their peer load, nothing echoes; a replica that starts reads the index stream back (warm
//! start) and routes like a long-running one; Redis killed: every replica routes on, counts
//! and logs one outage, and catches up when Redis returns empty; an ACL user with its
//! password is admitted and a wrong password stops the start with a clear error.
//!
//! The server is Debian's `redis-server` (`scripts/install-redis.sh`); without it every test
//! says it is skipped and passes, unless `SHEPHERD_REQUIRE_E2E=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::replicas::{counter, group_prompt as prompt, known_blocks, peer_requests, pick};
use common::wait_until;
use shepherd_runtime::config::RuntimeConfig;
use shepherd_runtime::{Runtime, RuntimeError, RuntimeHandle, RuntimeOptions};
use shepherd_scheduler_core::request::InferenceRequest;
use shepherd_test_util::redis::{RedisAuth, RedisServer};

const ENDPOINTS: [&str; 3] = ["127.0.0.1:9", "127.0.0.1:10", "127.0.0.1:11"];
const WAIT: Duration = Duration::from_secs(5);

fn options() -> RuntimeOptions {
    RuntimeOptions {
        scrape: false,
        serve_admin: false,
        watch_config: false,
        ..RuntimeOptions::default()
    }
}

fn yaml(url: &str, name: &str, extra: &str) -> String {
    format!(
        "endpoints: [{}]\nreplicas:\n  backend: redis\n  intervalMs: 10\n  expireMs: 1000\n  redis:\n    url: {url}\n    name: {name}\n{extra}",
        ENDPOINTS.join(", ")
    )
}

async fn replica(url: &str, name: &str, extra: &str) -> RuntimeHandle {
    try_replica(url, name, extra).await.unwrap()
}

async fn try_replica(url: &str, name: &str, extra: &str) -> Result<RuntimeHandle, RuntimeError> {
    Runtime::start(
        RuntimeConfig::from_yaml(&yaml(url, name, extra)).unwrap(),
        options(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn picks_and_load_reach_the_other_replicas_through_redis_and_nothing_echoes() {
    let Some(binary) = RedisServer::binary("picks_and_load_reach_the_other_replicas") else {
        return;
    };
    let server = RedisServer::start(&binary, RedisAuth::Open);
    let url = server.url();
    let a = replica(&url, "a", "").await;
    let b = replica(&url, "b", "").await;

    let shared = prompt(1, 0);
    let home = pick(&a, "a-1", &shared);
    let blocks = known_blocks(&a, &shared, &home);
    assert!(blocks > 0);
    assert!(
        wait_until(WAIT, || known_blocks(&b, &shared, &home) == blocks).await,
        "{}",
        b.render_metrics()
    );
    // B routes the prefix where A did; A's index got nothing back of its own.
    assert_eq!(pick(&b, "b-1", &prompt(1, 1)), home);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(counter(&a, "shepherd_replicas_index_keys_received_total") <= blocks as f64 + 1.0);
    assert!(counter(&b, "shepherd_replicas_redis_entries_written_total") > 0.0);

    // A's requests in flight count on B's endpoints, and leave with them.
    let endpoint = a
        .pool()
        .snapshot()
        .get_by_address(ENDPOINTS[0])
        .cloned()
        .unwrap();
    let held: Vec<_> = (0..3).map(|_| endpoint.start_request(1_000)).collect();
    assert!(wait_until(WAIT, || peer_requests(&b, ENDPOINTS[0]) == 3).await);
    assert_eq!(
        peer_requests(&a, ENDPOINTS[0]),
        0,
        "a replica never counts its own requests as a peer's"
    );
    assert!(
        b.render_metrics()
            .contains("shepherd_replicas_live_peers 1")
    );
    drop(held);
    assert!(wait_until(WAIT, || peer_requests(&b, ENDPOINTS[0]) == 0).await);

    // A stops with a request in flight: its last report is empty, B forgets it at once.
    let _held = endpoint.start_request(100);
    assert!(wait_until(WAIT, || peer_requests(&b, ENDPOINTS[0]) == 1).await);
    a.shutdown(Duration::from_millis(50)).await;
    assert!(
        wait_until(Duration::from_millis(500), || peer_requests(
            &b,
            ENDPOINTS[0]
        ) == 0)
        .await
    );
    assert_eq!(counter(&b, "shepherd_replicas_redis_outages_total"), 0.0);
    b.shutdown(Duration::from_millis(50)).await;
}

/// Fraction of `n` fresh questions (of groups `0..n`, question `q`) that `handle` routes to
/// their group's home.
fn hit_rate(handle: &RuntimeHandle, homes: &[String], q: usize) -> f64 {
    let hits = homes
        .iter()
        .enumerate()
        .filter(|(g, home)| pick(handle, &format!("{g}-{q}"), &prompt(*g, q)) == **home)
        .count();
    hits as f64 / homes.len() as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_starting_replica_reads_the_index_back_and_routes_like_a_warm_one() {
    let Some(binary) = RedisServer::binary("a_starting_replica_reads_the_index_back") else {
        return;
    };
    let server = RedisServer::start(&binary, RedisAuth::Open);
    let url = server.url();
    let warm = replica(&url, "warm", "").await;
    // 100 groups, each first routed by the warm replica, their requests held in flight so
    // the load spreads them over the three servers: their homes.
    let mut held = Vec::new();
    let homes: Vec<String> = (0..100)
        .map(|g| {
            let decision = warm
                .scheduler()
                .schedule(&InferenceRequest::new(format!("{g}-0"), "m", prompt(g, 0)))
                .unwrap();
            let home = decision.primary().address().to_string();
            held.push(decision);
            home
        })
        .collect();
    drop(held);
    let distinct: std::collections::BTreeSet<_> = homes.iter().collect();
    assert_eq!(distinct.len(), 3, "{homes:?}");
    assert!(
        wait_until(WAIT, || counter(
            &warm,
            "shepherd_replicas_redis_entries_written_total"
        ) > 1.0)
        .await
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let warm_rate = hit_rate(&warm, &homes, 1);

    // A replica that starts now (a restart of another one) reads the index stream back; one
    // with `warmStart: false` starts cold.
    // The cold one first, under a prefix of its own: it neither hears the others' picks of
    // these questions nor teaches them its own.
    let cold = replica(&url, "cold", "    warmStart: false\n    prefix: cold\n").await;
    let cold_rate = hit_rate(&cold, &homes, 3);
    let restarted = replica(&url, "restarted", "").await;
    assert!(
        wait_until(WAIT, || counter(
            &restarted,
            "shepherd_replicas_redis_warm_start_keys_total"
        ) > 0.0)
        .await,
        "{}",
        restarted.render_metrics()
    );
    let restarted_rate = hit_rate(&restarted, &homes, 2);
    println!(
        "first 100 requests' hit rate: warm replica {warm_rate:.2}, restarted (warm start) {restarted_rate:.2}, started cold {cold_rate:.2}"
    );
    assert!(warm_rate > 0.9, "{warm_rate}");
    assert!(
        restarted_rate >= 0.95 * warm_rate,
        "{restarted_rate} < 0.95 × {warm_rate}"
    );
    assert!(
        cold_rate < 0.8 * warm_rate,
        "the cold start is not cold: {cold_rate}"
    );
    for handle in [warm, restarted, cold] {
        handle.shutdown(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_costs_no_pick_and_the_replicas_catch_up_when_it_returns() {
    let Some(binary) = RedisServer::binary("redis_killed_costs_no_pick") else {
        return;
    };
    let mut server = RedisServer::start(&binary, RedisAuth::Open);
    let url = server.url();
    let a = replica(&url, "a", "    timeoutMs: 200\n").await;
    let b = replica(&url, "b", "    timeoutMs: 200\n").await;
    let endpoint = a
        .pool()
        .snapshot()
        .get_by_address(ENDPOINTS[1])
        .cloned()
        .unwrap();
    let _held = endpoint.start_request(100);
    assert!(wait_until(WAIT, || peer_requests(&b, ENDPOINTS[1]) == 1).await);

    server.kill();
    // Every pick is answered while Redis is gone, at once; what A routes meanwhile stays
    // A's own.
    let during = prompt(7, 0);
    let home = pick(&a, "a-outage", &during);
    for i in 0..200 {
        pick(&b, &format!("b-outage-{i}"), &prompt(100 + i, 0));
    }
    assert!(wait_until(WAIT, || counter(&a, "shepherd_replicas_redis_up") == 0.0).await);
    assert!(wait_until(WAIT, || counter(&b, "shepherd_replicas_redis_up") == 0.0).await);
    // A's load expires on B after expireMs of silence (a silent replica's load expires).
    assert!(wait_until(WAIT, || peer_requests(&b, ENDPOINTS[1]) == 0).await);
    assert_eq!(known_blocks(&b, &during, &home), 0);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        counter(&a, "shepherd_replicas_redis_outages_total"),
        1.0,
        "one outage, counted once"
    );

    server.restart();
    // Redis came back empty: A writes what it picked during the outage, B reads the streams
    // anew, and the load flows again.
    assert!(
        wait_until(Duration::from_secs(10), || known_blocks(&b, &during, &home)
            > 0)
        .await,
        "{}",
        b.render_metrics()
    );
    assert!(wait_until(WAIT, || peer_requests(&b, ENDPOINTS[1]) == 1).await);
    assert_eq!(counter(&a, "shepherd_replicas_redis_up"), 1.0);
    assert_eq!(counter(&b, "shepherd_replicas_redis_outages_total"), 1.0);
    assert_eq!(counter(&b, "shepherd_replicas_redis_up"), 1.0);
    a.shutdown(Duration::from_millis(50)).await;
    b.shutdown(Duration::from_millis(50)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_user_is_admitted_and_a_wrong_password_refused_at_start() {
    let Some(binary) = RedisServer::binary("an_acl_user_is_admitted") else {
        return;
    };
    let password = "correct-horse-battery-staple-31";
    let server = RedisServer::start(
        &binary,
        RedisAuth::Acl {
            user: "shepherd".into(),
            password: password.into(),
            keys: "shepherd:*".into(),
        },
    );
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good");
    let bad = dir.path().join("bad");
    std::fs::write(&good, format!("{password}\n")).unwrap();
    std::fs::write(&bad, "not-the-password-at-all\n").unwrap();
    let auth = |file: &std::path::Path| {
        format!(
            "    username: shepherd\n    password: {{file: {}}}\n",
            file.display()
        )
    };

    let a = replica(&url, "a", &auth(&good)).await;
    let b = replica(&url, "b", &auth(&good)).await;
    let shared = prompt(3, 0);
    let home = pick(&a, "a-1", &shared);
    assert!(wait_until(WAIT, || known_blocks(&b, &shared, &home) > 0).await);
    // /debug/config and the metrics name the file, never the password.
    assert!(!format!("{:?}", a.config()).contains(password));

    let Err(refused) = try_replica(&url, "c", &auth(&bad)).await else {
        panic!("a wrong password starts");
    };
    let message = refused.to_string();
    println!("wrong password: {message}");
    assert!(message.contains("refused"), "{message}");
    assert!(message.contains(&bad.display().to_string()), "{message}");
    assert!(!message.contains("not-the-password"), "{message}");
    // No password at all, or the `default` user: refused too.
    let Err(anonymous) = try_replica(&url, "d", "").await else {
        panic!("no password starts");
    };
    assert!(anonymous.to_string().contains("refused"), "{anonymous}");
    // A user whose keys are not the replicas' prefix is refused at start.
    let Err(elsewhere) =
        try_replica(&url, "e", &format!("{}    prefix: other\n", auth(&good))).await
    else {
        panic!("a user without the keys starts");
    };
    assert!(
        elsewhere.to_string().contains("NOPERM") || elsewhere.to_string().contains("refused"),
        "{elsewhere}"
    );
    a.shutdown(Duration::from_millis(50)).await;
    b.shutdown(Duration::from_millis(50)).await;
}
