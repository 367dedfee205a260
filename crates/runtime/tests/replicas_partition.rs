//! A network partition between two replicas of the direct exchange (UDP): each replica's peer
//! is a stand-in of a [`UdpRelay`] that the test cuts (every datagram dropped, either way) and
//! heals. While cut, each side routes on its own knowledge: the other's load expires after
//! `expireMs`, and neither learns the other's picks; healed, load reports and index deltas
//! flow again, and a prefix one side picks routes to the same server from the other. The
//! deltas sent during the partition are lost (they are not sent again).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use common::replicas::{counter, group_prompt, known_blocks, peer_requests, pick};
use common::wait_until;
use shepherd_runtime::RuntimeHandle;
use shepherd_test_util::udp_relay::UdpRelay;

const ENDPOINTS: [&str; 3] = ["127.0.0.1:9", "127.0.0.1:10", "127.0.0.1:11"];
const WAIT: Duration = Duration::from_secs(5);
const SECRET: &str = "test-replicas-shared-secret-0123";
const EXPIRED: &str = "shepherd_replicas_expired_peers_total";
const LIVE: &str = "shepherd_replicas_live_peers";

/// Two free UDP ports on loopback (bound, read, released).
fn two_ports() -> [SocketAddr; 2] {
    let sockets = [
        UdpSocket::bind("127.0.0.1:0").unwrap(),
        UdpSocket::bind("127.0.0.1:0").unwrap(),
    ];
    [
        sockets[0].local_addr().unwrap(),
        sockets[1].local_addr().unwrap(),
    ]
}

/// A replica listening on `listen`, known to its peer as `advertise`, whose one peer is at
/// `peer`.
async fn replica(listen: SocketAddr, advertise: SocketAddr, peer: SocketAddr) -> RuntimeHandle {
    let yaml = format!(
        "endpoints: [{}]\nreplicas:\n  listen: {listen}\n  advertise: {advertise}\n  peers: [{peer}]\n  intervalMs: 10\n  expireMs: 1000\n  key: {SECRET}\n",
        ENDPOINTS.join(", ")
    );
    common::replicas::start_quiet(&yaml).await
}

fn endpoint(
    handle: &RuntimeHandle,
    address: &str,
) -> std::sync::Arc<shepherd_scheduler_core::endpoint::Endpoint> {
    handle
        .pool()
        .snapshot()
        .get_by_address(address)
        .cloned()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_between_replicas_leaves_each_on_its_own_knowledge_until_it_heals() {
    let [listen_a, listen_b] = two_ports();
    let relay = UdpRelay::start(listen_a, listen_b).await.unwrap();
    let a = replica(listen_a, relay.a(), relay.b()).await;
    let b = replica(listen_b, relay.b(), relay.a()).await;

    // Before: each sees the other's requests in flight, and learns its picks.
    let held_a: Vec<_> = (0..2)
        .map(|_| endpoint(&a, ENDPOINTS[0]).start_request(500))
        .collect();
    let held_b: Vec<_> = (0..3)
        .map(|_| endpoint(&b, ENDPOINTS[1]).start_request(500))
        .collect();
    assert!(
        wait_until(WAIT, || peer_requests(&b, ENDPOINTS[0]) == 2
            && peer_requests(&a, ENDPOINTS[1]) == 3)
        .await,
        "{}",
        b.render_metrics()
    );
    let before = group_prompt(1, 0);
    let home = pick(&a, "a-before", &before);
    assert!(wait_until(WAIT, || known_blocks(&b, &before, &home) > 0).await);

    relay.cut();
    // Each side's load expires at the other after expireMs of silence.
    assert!(
        wait_until(WAIT, || peer_requests(&b, ENDPOINTS[0]) == 0
            && peer_requests(&a, ENDPOINTS[1]) == 0)
        .await,
        "{}",
        a.render_metrics()
    );
    for side in [&a, &b] {
        assert_eq!(counter(side, EXPIRED), 1.0);
        assert_eq!(counter(side, LIVE), 0.0);
    }
    // Their own requests still count on their own side.
    assert_eq!(endpoint(&a, ENDPOINTS[0]).in_flight_requests(), 2);
    assert_eq!(endpoint(&b, ENDPOINTS[1]).in_flight_requests(), 3);
    // Each side routes on its own knowledge: its own picks of the partition stay its own.
    let sent_a = counter(&a, "shepherd_replicas_index_deltas_sent_total");
    let sent_b = counter(&b, "shepherd_replicas_index_deltas_sent_total");
    let during_a = group_prompt(2, 0);
    let home_a = pick(&a, "a-during", &during_a);
    let during_b = group_prompt(3, 0);
    let home_b = pick(&b, "b-during", &during_b);
    assert_eq!(pick(&a, "a-during-again", &group_prompt(2, 1)), home_a);
    assert_eq!(pick(&b, "b-during-again", &group_prompt(3, 1)), home_b);
    assert!(
        wait_until(WAIT, || counter(
            &a,
            "shepherd_replicas_index_deltas_sent_total"
        ) > sent_a
            && counter(&b, "shepherd_replicas_index_deltas_sent_total")
                > sent_b)
        .await
    );
    let dropped = relay.dropped();
    assert!(wait_until(WAIT, || relay.dropped() > dropped + 20).await);
    assert_eq!(known_blocks(&b, &during_a, &home_a), 0);
    assert_eq!(known_blocks(&a, &during_b, &home_b), 0);

    relay.heal();
    // Load flows again both ways.
    assert!(
        wait_until(WAIT, || peer_requests(&b, ENDPOINTS[0]) == 2
            && peer_requests(&a, ENDPOINTS[1]) == 3)
        .await,
        "{}",
        b.render_metrics()
    );
    assert_eq!(counter(&a, LIVE), 1.0);
    assert_eq!(counter(&b, LIVE), 1.0);
    drop(held_a);
    drop(held_b);
    assert!(
        wait_until(WAIT, || peer_requests(&b, ENDPOINTS[0]) == 0
            && peer_requests(&a, ENDPOINTS[1]) == 0)
        .await
    );
    // And so do the deltas: a prefix A picks after the heal routes to the same server from B,
    // and one B picks, from A.
    let after = group_prompt(4, 0);
    let home_after = pick(&a, "a-after", &after);
    let blocks = known_blocks(&a, &after, &home_after);
    assert!(wait_until(WAIT, || known_blocks(&b, &after, &home_after) == blocks).await);
    assert_eq!(pick(&b, "b-after", &group_prompt(4, 1)), home_after);
    let after_b = group_prompt(5, 0);
    let home_after_b = pick(&b, "b-after-own", &after_b);
    assert!(wait_until(WAIT, || known_blocks(&a, &after_b, &home_after_b) > 0).await);
    assert_eq!(pick(&a, "a-after-b", &group_prompt(5, 1)), home_after_b);
    // What was picked during the partition was not sent again: lost, as the datagrams were
    // (the deltas sent after the heal, later on the same path, have arrived).
    assert_eq!(known_blocks(&b, &during_a, &home_a), 0);
    assert_eq!(known_blocks(&a, &during_b, &home_b), 0);
    // Nothing was refused on the way: a gap in the sequence numbers is not a replay.
    for side in [&a, &b] {
        assert!(
            !side.render_metrics().lines().any(|l| l
                .starts_with("shepherd_replicas_rejected_datagrams_total")
                && !l.ends_with(" 0")),
            "{}",
            side.render_metrics()
        );
    }
    println!(
        "direct partition: {} datagrams dropped while cut, {} relayed",
        relay.dropped(),
        relay.passed()
    );
    a.shutdown(Duration::from_millis(50)).await;
    b.shutdown(Duration::from_millis(50)).await;
}
