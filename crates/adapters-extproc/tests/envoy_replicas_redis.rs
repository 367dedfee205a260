//! Two and four `shepherd-epp` replicas behind one real Envoy sharing their approximate index
//! and load through a real `redis-server` (`replicas.backend: redis`): requests sharing a new
//! prefix go to one server whichever replica picks them; Redis killed for 10 s under load
//! fails no request, and the replicas share again once it is back; a replica restarted under
//! load reads the index stream back and routes as well as before (a cold restart does not).
//! Skipped without `SHEPHERD_ENVOY` (see `e2e/mod.rs`) or without `redis-server`
//! (`scripts/install-redis.sh`), unless `SHEPHERD_REQUIRE_E2E=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod e2e;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use e2e::{Options, Stack, sample, tally, unique_prompt};
use shepherd_test_util::redis::{RedisAuth, RedisServer};

const MAIN: &str = "inference";

async fn stack(redis: &RedisServer, replicas: usize) -> Option<Stack> {
    Stack::start(Options {
        servers: 3,
        replicas,
        redis_url: Some(redis.url()),
        ..Options::default()
    })
    .await
}

/// Sends 16 requests sharing a new prefix through Envoy; the servers that answered them.
async fn shared_prefix_servers(stack: &Stack, tag: &str) -> Vec<String> {
    let system = unique_prompt(tag, 4096);
    // The first pick reaches every replica through Redis (one interval, 10 ms, when idle).
    let first = format!("{system} question 0");
    let mut served = vec![stack.routed_and_shared(MAIN, &first).await];
    for i in 1..16 {
        served.push(stack.routed(MAIN, &format!("{system} question {i}")).await);
    }
    served
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_and_four_replicas_keep_a_shared_prefix_on_one_server_through_redis() {
    let Some(binary) = RedisServer::binary("two_and_four_replicas_through_redis") else {
        return;
    };
    for replicas in [2, 4] {
        let redis = RedisServer::start(&binary, RedisAuth::Open);
        let Some(stack) = stack(&redis, replicas).await else {
            return;
        };
        stack.wait_replicas_ready(false).await;
        let served = shared_prefix_servers(&stack, &format!("{replicas} replicas")).await;
        let servers = tally(served.iter().map(String::as_str));
        assert_eq!(servers.len(), 1, "{replicas} replicas: {servers:?}");
        let mut pickers = 0;
        for epp in stack.epps() {
            let m = stack.metrics_of(epp).await;
            if sample(&m, "shepherd_picks_total{profile=\"default\"}") >= 1.0 {
                pickers += 1;
            }
            assert!(sample(&m, "shepherd_replicas_redis_entries_read_total") > 0.0);
            assert_eq!(sample(&m, "shepherd_replicas_redis_outages_total"), 0.0);
        }
        println!(
            "{replicas} replicas: 16 requests sharing a prefix, all on one server, picked by {pickers} replicas"
        );
        assert!(pickers >= 2, "{replicas} replicas, {pickers} picked");
    }
}

/// Requests sent by `clients` loops until `stop`: (answered 200, failed).
fn load(
    stack: &Stack,
    clients: usize,
    stop: Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<(u64, u64)>> {
    (0..clients)
        .map(|c| {
            let http = stack.http.clone();
            let url = format!("{}/v1/completions", stack.url(MAIN));
            let stop = Arc::clone(&stop);
            tokio::spawn(async move {
                let (mut ok, mut failed) = (0, 0);
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let group = unique_prompt(&format!("load group {}", i % 8), 2048);
                    let body = Stack::completion(&format!("{group} client {c} request {i}"), 4);
                    let answer = http
                        .post(&url)
                        .header("content-type", "application/json")
                        .timeout(Duration::from_secs(10))
                        .body(body)
                        .send()
                        .await;
                    match answer {
                        Ok(r) if r.status() == 200 => {
                            let _ = r.bytes().await;
                            ok += 1;
                        }
                        _ => failed += 1,
                    }
                }
                (ok, failed)
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_for_ten_seconds_under_load_fails_no_request() {
    let Some(binary) = RedisServer::binary("redis_killed_for_ten_seconds_under_load") else {
        return;
    };
    let mut redis = RedisServer::start(&binary, RedisAuth::Open);
    let Some(stack) = stack(&redis, 2).await else {
        return;
    };
    stack.wait_replicas_ready(false).await;
    let stop = Arc::new(AtomicBool::new(false));
    let clients = load(&stack, 4, Arc::clone(&stop));
    tokio::time::sleep(Duration::from_secs(1)).await;
    redis.kill();
    let killed = std::time::Instant::now();
    for epp in stack.epps() {
        stack
            .wait_metric(epp, "shepherd_replicas_redis_outages_total", 1.0)
            .await;
    }
    tokio::time::sleep(Duration::from_secs(10).saturating_sub(killed.elapsed())).await;
    redis.restart();
    // Back: every replica writes and reads again, and sees the other.
    for epp in stack.epps() {
        stack
            .wait_metric(epp, "shepherd_replicas_redis_up", 1.0)
            .await;
    }
    stack.wait_replicas_ready(false).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let (mut ok, mut failed) = (0, 0);
    for client in clients {
        let (o, f) = client.await.unwrap();
        ok += o;
        failed += f;
    }
    println!("Redis killed for 10 s under load: {ok} requests answered, {failed} failed");
    assert_eq!(failed, 0);
    assert!(ok > 100, "{ok}");
    for epp in stack.epps() {
        let m = stack.metrics_of(epp).await;
        assert_eq!(
            sample(&m, "shepherd_replicas_redis_outages_total"),
            1.0,
            "one outage, counted once"
        );
    }
    // Shared again: a new prefix stays on one server whichever replica picks.
    let served = shared_prefix_servers(&stack, "after the outage").await;
    assert_eq!(
        tally(served.iter().map(String::as_str)).len(),
        1,
        "{served:?}"
    );
}

/// The share of `requests` questions over `groups` answered by their group's home.
async fn hit_rate(
    stack: &Stack,
    systems: &[String],
    homes: &[String],
    round: usize,
    requests: usize,
) -> f64 {
    let mut hits = 0;
    for r in 0..requests {
        let g = r % systems.len();
        let served = stack
            .routed(MAIN, &format!("{} round {round} question {r}", systems[g]))
            .await;
        if served == homes[g] {
            hits += 1;
        }
    }
    hits as f64 / requests as f64
}

/// The hit rate of 100 requests right after replica 1 restarted, once Envoy sends it streams
/// again (its outlier detection ejected it for 5 s when it died under load); asserts it
/// picked a fair share of them.
async fn measured(stack: &Stack, systems: &[String], homes: &[String], round: usize) -> f64 {
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    let restarted = &stack.more_epps[0];
    let picks = |m: &str| sample(m, "shepherd_picks_total{profile=\"default\"}");
    let at_start = picks(&stack.metrics_of(restarted).await);
    let rate = hit_rate(stack, systems, homes, round, 100).await;
    let picked = picks(&stack.metrics_of(restarted).await) - at_start;
    assert!(
        picked >= 30.0,
        "the restarted replica picked {picked} of the 100"
    );
    rate
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_restarted_under_load_routes_as_well_as_before() {
    let Some(binary) = RedisServer::binary("a_replica_restarted_under_load") else {
        return;
    };
    let redis = RedisServer::start(&binary, RedisAuth::Open);
    let Some(mut stack) = stack(&redis, 2).await else {
        return;
    };
    stack.wait_replicas_ready(false).await;
    // 24 prefixes, their first requests sent at once (long answers, so the load spreads
    // them over the servers): their homes.
    let systems: Vec<String> = (0..24)
        .map(|g| unique_prompt(&format!("restart group {g}"), 3072))
        .collect();
    let firsts: Vec<_> = systems
        .iter()
        .map(|s| {
            let http = stack.http.clone();
            let url = format!("{}/v1/completions", stack.url(MAIN));
            let body = Stack::completion(&format!("{s} first"), 64);
            tokio::spawn(async move {
                let r = http
                    .post(url)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                let served = r
                    .headers()
                    .get(e2e::SERVED)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                assert_eq!(r.status(), 200);
                served.unwrap()
            })
        })
        .collect();
    let mut homes = Vec::new();
    for first in firsts {
        homes.push(first.await.unwrap());
    }
    let distinct = tally(homes.iter().map(String::as_str));
    assert!(distinct.len() >= 2, "{distinct:?}");
    tokio::time::sleep(Duration::from_millis(50)).await;
    let before = hit_rate(&stack, &systems, &homes, 1, 100).await;

    // Replica 1 restarts (SIGKILL, then the same config) while replica 0 serves.
    let stop = Arc::new(AtomicBool::new(false));
    let clients = load(&stack, 2, Arc::clone(&stop));
    stack.more_epps[0].kill();
    stack.more_epps[0].wait_exit(Duration::from_secs(5)).await;
    stack.more_epps[0].restart(true).await;
    let warm_keys = Arc::new(AtomicU64::new(0));
    let restarted = &stack.more_epps[0];
    stack
        .wait_metric(
            restarted,
            "shepherd_replicas_redis_warm_start_keys_total",
            1.0,
        )
        .await;
    warm_keys.store(
        sample(
            &stack.metrics_of(restarted).await,
            "shepherd_replicas_redis_warm_start_keys_total",
        ) as u64,
        Ordering::Relaxed,
    );
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        let (_, failed) = client.await.unwrap();
        let _ = failed;
    }
    let warm = measured(&stack, &systems, &homes, 2).await;

    // The same restart without the warm start: the replica knows only what the other
    // replica's picks teach it from then on.
    let config = stack.dir.path().join("shepherd-1.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("{text}    warmStart: false\n")).unwrap();
    stack.more_epps[0].kill();
    stack.more_epps[0].wait_exit(Duration::from_secs(5)).await;
    stack.more_epps[0].restart(true).await;
    stack.wait_replicas_ready(false).await;
    let cold = measured(&stack, &systems, &homes, 3).await;
    println!(
        "first 100 requests through both replicas after one restarted: hit rate {warm:.2} with the warm start ({} keys read back), {cold:.2} started cold; {before:.2} before the restart",
        warm_keys.load(Ordering::Relaxed)
    );
    assert!(warm >= 0.95 * before, "{warm} < 0.95 × {before}");
}
