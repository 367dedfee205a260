//! A network partition between ONE replica and Redis, while Redis stays up for the others
//! (`replicas.backend: redis`, a real `redis-server`): replica B reaches Redis through a
//! [`TcpRelay`] the test cuts, replica A directly. Both shapes of a cut are tried: a reset
//! (B's connections reset, new ones refused) and a black hole (nothing passes and nothing
//! answers, as in a real partition: only B's own timeouts end its commands).
//!
//! During the cut B's picks are answered at once (each far below `timeoutMs`) and none
//! fails; B counts and logs one outage however many commands fail; A keeps talking to Redis,
//! forgets B's load after `expireMs` and learns nothing new from B. After the heal B reads
//! what A wrote meanwhile (a prefix A picked during the cut routes to the same server from
//! B), writes what it picked meanwhile (A learns it), and its load reaches A again. A replica
//! that starts behind a black hole starts after `timeoutMs`, routes at once, and reads the
//! index stream back (its warm start) when the path heals.
//!
//! The server is Debian's `redis-server` (`scripts/install-redis.sh`); without it each test
//! says it is skipped and passes, unless `SHEPHERD_REQUIRE_E2E=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::replicas::{counter, group_prompt, known_blocks, peer_requests, pick};
use shepherd_runtime::RuntimeHandle;
use shepherd_test_util::redis::{RedisAuth, RedisServer};
use shepherd_test_util::tcp_relay::{Cut, TcpRelay};
use tokio::time::Instant;

const ENDPOINTS: [&str; 3] = ["127.0.0.1:9", "127.0.0.1:10", "127.0.0.1:11"];
const WAIT: Duration = Duration::from_secs(5);
/// Each replica's bound on one Redis command: a pick that waited for Redis would take at
/// least this long.
const TIMEOUT_MS: u64 = 500;
const UP: &str = "shepherd_replicas_redis_up";
const OUTAGES: &str = "shepherd_replicas_redis_outages_total";
const ERRORS: &str = "shepherd_replicas_redis_errors_total";
const WRITTEN: &str = "shepherd_replicas_redis_entries_written_total";
const KEYS_RECEIVED: &str = "shepherd_replicas_index_keys_received_total";

async fn replica(url: &str, name: &str) -> RuntimeHandle {
    let yaml = format!(
        "endpoints: [{}]\nreplicas:\n  backend: redis\n  intervalMs: 10\n  expireMs: 1000\n  redis:\n    url: {url}\n    name: {name}\n    timeoutMs: {TIMEOUT_MS}\n",
        ENDPOINTS.join(", ")
    );
    common::replicas::start_quiet(&yaml).await
}

/// B's picks while the test waits for something: one every 10 ms (each a fresh prompt),
/// until `condition` holds or `limit` passes.
struct Picker<'a> {
    replica: &'a RuntimeHandle,
    picks: usize,
    slowest: Duration,
}

impl Picker<'_> {
    async fn until(&mut self, limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if condition() {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            let started = Instant::now();
            let n = self.picks;
            pick(self.replica, &format!("b-{n}"), &group_prompt(1_000 + n, 0));
            self.slowest = self.slowest.max(started.elapsed());
            self.picks += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

async fn partition_between_one_replica_and_redis(test: &str, cut: Cut) {
    let Some(binary) = RedisServer::binary(test) else {
        return;
    };
    let server = RedisServer::start(&binary, RedisAuth::Open);
    let relay = TcpRelay::start(SocketAddr::from(([127, 0, 0, 1], server.port())))
        .await
        .unwrap();
    let a = replica(&server.url(), "a").await;
    let b = replica(&format!("redis://{}", relay.address()), "b").await;
    let on = |handle: &RuntimeHandle, address: &str| {
        handle
            .pool()
            .snapshot()
            .get_by_address(address)
            .cloned()
            .unwrap()
    };

    // Before: B's requests in flight count at A, A's at B, and A's picks reach B.
    let held_b: Vec<_> = (0..2)
        .map(|_| on(&b, ENDPOINTS[0]).start_request(500))
        .collect();
    let held_a = on(&a, ENDPOINTS[1]).start_request(500);
    assert!(
        common::wait_until(WAIT, || peer_requests(&a, ENDPOINTS[0]) == 2
            && peer_requests(&b, ENDPOINTS[1]) == 1)
        .await,
        "{}",
        a.render_metrics()
    );
    let before = group_prompt(1, 0);
    let home = pick(&a, "a-before", &before);
    assert!(common::wait_until(WAIT, || known_blocks(&b, &before, &home) > 0).await);

    relay.cut(cut);
    let mut picker = Picker {
        replica: &b,
        picks: 0,
        slowest: Duration::ZERO,
    };
    // B finds Redis gone and goes on failing (several failed attempts, one outage), while A
    // forgets B's load after expireMs of silence.
    let cut_at = Instant::now();
    assert!(
        picker
            .until(Duration::from_secs(10), || counter(&b, UP) == 0.0
                && counter(&b, ERRORS) >= 4.0
                && peer_requests(&a, ENDPOINTS[0]) == 0)
            .await,
        "{}\n{}",
        b.render_metrics(),
        a.render_metrics()
    );
    let noticed = cut_at.elapsed();
    assert_eq!(counter(&b, OUTAGES), 1.0, "one outage, counted once");
    assert!(counter(&a, "shepherd_replicas_expired_peers_total") >= 1.0);
    assert_eq!(
        (counter(&a, UP), counter(&a, OUTAGES)),
        (1.0, 0.0),
        "A's path to Redis is whole"
    );
    // B's own requests still count at B.
    assert_eq!(on(&b, ENDPOINTS[0]).in_flight_requests(), 2);

    // Each picks a prefix of its own during the cut; A learns nothing new from B (for the
    // next 20 intervals of A's writes at least), nor B from A.
    let during_a = group_prompt(2, 0);
    let home_a = pick(&a, "a-during", &during_a);
    let during_b = group_prompt(3, 0);
    let home_b = pick(&b, "b-during", &during_b);
    let keys_at_a = counter(&a, KEYS_RECEIVED);
    let written = counter(&a, WRITTEN);
    assert!(
        picker
            .until(WAIT, || counter(&a, WRITTEN) >= written + 20.0)
            .await
    );
    assert_eq!(counter(&a, KEYS_RECEIVED), keys_at_a);
    assert_eq!(peer_requests(&a, ENDPOINTS[0]), 0);
    assert_eq!(known_blocks(&a, &during_b, &home_b), 0);
    assert_eq!(known_blocks(&b, &during_a, &home_a), 0);
    assert_eq!(pick(&b, "b-during-again", &group_prompt(3, 1)), home_b);
    assert_eq!(
        counter(&b, OUTAGES),
        1.0,
        "still one outage after {} errors",
        counter(&b, ERRORS)
    );

    relay.heal();
    let healed_at = Instant::now();
    // B catches up from where it stopped reading: it reads what A wrote meanwhile, writes
    // what it picked meanwhile, and its load reaches A again.
    let blocks_a = known_blocks(&a, &during_a, &home_a);
    assert!(
        picker
            .until(Duration::from_secs(10), || counter(&b, UP) == 1.0
                && known_blocks(&b, &during_a, &home_a) == blocks_a
                && known_blocks(&a, &during_b, &home_b) > 0
                && peer_requests(&a, ENDPOINTS[0]) == 2)
            .await,
        "{}\n{}",
        b.render_metrics(),
        a.render_metrics()
    );
    let caught_up = healed_at.elapsed();
    assert_eq!(counter(&b, OUTAGES), 1.0);
    assert_eq!(
        counter(&b, "shepherd_replicas_redis_resyncs_total"),
        0.0,
        "the streams were whole: B resumed, it did not start over"
    );
    // With no load in flight, each routes the other's prefix of the partition where the other
    // did.
    drop(held_b);
    drop(held_a);
    assert!(
        common::wait_until(WAIT, || peer_requests(&a, ENDPOINTS[0]) == 0
            && peer_requests(&b, ENDPOINTS[1]) == 0)
        .await
    );
    assert_eq!(pick(&b, "b-after", &group_prompt(2, 1)), home_a);
    assert_eq!(pick(&a, "a-after", &group_prompt(3, 2)), home_b);

    let slowest = picker.slowest;
    println!(
        "{cut:?} between B and Redis: B noticed in {} ms ({} errors, 1 outage), caught up {} ms after the heal; {} picks by B, the slowest {:.1} ms (timeoutMs {TIMEOUT_MS}); relay accepted {} connections",
        noticed.as_millis(),
        counter(&b, ERRORS),
        caught_up.as_millis(),
        picker.picks,
        slowest.as_secs_f64() * 1e3,
        relay.accepted(),
    );
    assert!(
        slowest < Duration::from_millis(TIMEOUT_MS),
        "a pick took {slowest:?}: it waited for Redis"
    );
    a.shutdown(Duration::from_millis(50)).await;
    b.shutdown(Duration::from_millis(50)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_partition_between_a_replica_and_redis_costs_no_pick_and_heals() {
    partition_between_one_replica_and_redis(
        "a_reset_partition_between_a_replica_and_redis",
        Cut::Reset,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_black_hole_between_a_replica_and_redis_costs_no_pick_and_heals() {
    partition_between_one_replica_and_redis(
        "a_black_hole_between_a_replica_and_redis",
        Cut::BlackHole,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_starts_behind_a_black_hole_starts_routes_and_warms_up_when_it_heals() {
    let Some(binary) = RedisServer::binary("a_replica_that_starts_behind_a_black_hole") else {
        return;
    };
    let server = RedisServer::start(&binary, RedisAuth::Open);
    let relay = TcpRelay::start(SocketAddr::from(([127, 0, 0, 1], server.port())))
        .await
        .unwrap();
    let a = replica(&server.url(), "a").await;
    let known = group_prompt(1, 0);
    let home = pick(&a, "a-1", &known);
    let written = counter(&a, WRITTEN);
    assert!(common::wait_until(WAIT, || counter(&a, WRITTEN) > written + 1.0).await);

    // B starts with nothing answering on its path to Redis: the start check gives up after
    // timeoutMs (a start is not refused for an unreachable Redis), and B routes at once.
    relay.cut(Cut::BlackHole);
    let started = Instant::now();
    let b = replica(&format!("redis://{}", relay.address()), "b").await;
    let took = started.elapsed();
    assert_eq!(counter(&b, UP), 0.0);
    assert_eq!(counter(&b, OUTAGES), 1.0);
    assert_eq!(known_blocks(&b, &known, &home), 0, "nothing read yet");
    pick(&b, "b-1", &group_prompt(2, 0));

    // Healed: B reads the index stream back (its warm start) and routes A's prefix there.
    relay.heal();
    assert!(
        common::wait_until(Duration::from_secs(10), || known_blocks(&b, &known, &home)
            > 0)
        .await,
        "{}",
        b.render_metrics()
    );
    assert!(counter(&b, "shepherd_replicas_redis_warm_start_keys_total") > 0.0);
    assert_eq!(pick(&b, "b-2", &group_prompt(1, 1)), home);
    assert_eq!(counter(&b, UP), 1.0);
    assert_eq!(counter(&b, OUTAGES), 1.0);
    println!(
        "a replica started behind a black hole: Runtime::start took {} ms (timeoutMs {TIMEOUT_MS})",
        took.as_millis()
    );
    assert!(
        took < Duration::from_millis(TIMEOUT_MS) + Duration::from_secs(2),
        "the start waited {took:?} for Redis"
    );
    a.shutdown(Duration::from_millis(50)).await;
    b.shutdown(Duration::from_millis(50)).await;
}
