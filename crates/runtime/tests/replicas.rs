//! Several runtimes exchanging their in-flight load over UDP on loopback (the `replicas`
//! section): a replica's requests show as its peers' peer load, go when they end, vanish at
//! once when it shuts down, expire when it falls silent, and datagrams from strangers, without
//! the key, or replayed are refused; a replica's picks reach its peers' approximate prefix
//! indexes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use common::replicas::{counter, known_blocks};
use common::wait_until;
use shepherd_runtime::config::RuntimeConfig;
use shepherd_runtime::replicas::frame::{Kind, Sealer};
use shepherd_runtime::replicas::key::MacKey;
use shepherd_runtime::replicas::wire::{Entry, encode};
use shepherd_runtime::{Runtime, RuntimeHandle, RuntimeOptions};
use shepherd_scheduler_core::endpoint::PeerLoad;
use shepherd_scheduler_core::request::{InferenceRequest, Prompt};

const ENDPOINT: &str = "127.0.0.1:9";
const WAIT: Duration = Duration::from_secs(5);
/// The replicas' shared secret in these tests.
const SECRET: &str = "test-replicas-shared-secret-0123";

/// Free UDP ports on loopback (bound, read, released).
fn ports(n: usize) -> Vec<SocketAddr> {
    let sockets: Vec<UdpSocket> = (0..n)
        .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    sockets.iter().map(|s| s.local_addr().unwrap()).collect()
}

async fn replica(listen: SocketAddr, peers: &[SocketAddr]) -> RuntimeHandle {
    replica_with(listen, peers, "  expireMs: 1000\n").await
}

/// A runtime over three endpoints (no scraping, no admin server) with a `replicas` section
/// listening on `listen`, naming `peers`, plus `extra` lines of that section.
async fn replica_with(listen: SocketAddr, peers: &[SocketAddr], extra: &str) -> RuntimeHandle {
    let peers: Vec<String> = peers.iter().map(ToString::to_string).collect();
    let yaml = format!(
        "endpoints: [{ENDPOINT}, 127.0.0.1:10, 127.0.0.1:11]\nreplicas:\n  listen: {listen}\n  peers: [{}]\n  intervalMs: 10\n  key: {SECRET}\n{extra}",
        peers.join(", ")
    );
    common::replicas::start_quiet(&yaml).await
}

fn peer_requests(handle: &RuntimeHandle) -> u64 {
    let endpoint = handle
        .pool()
        .snapshot()
        .get_by_address(ENDPOINT)
        .cloned()
        .unwrap();
    endpoint.peer_load().requests
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_see_each_others_load_until_it_ends_stops_or_falls_silent() {
    let addrs = ports(3);
    let a = replica(addrs[0], &[addrs[1], addrs[2]]).await;
    let b = replica(addrs[1], &[addrs[0], addrs[2]]).await;
    // The third peer is a bare socket speaking the protocol with the key: it reports, then
    // falls silent (as a crashed replica does: no last report).
    let c = UdpSocket::bind(addrs[2]).unwrap();
    let report = |sealer: &mut Sealer, requests: u64| {
        let entry = Entry {
            address: ENDPOINT.to_string(),
            load: PeerLoad {
                requests,
                prompt_tokens: requests * 500,
                prefill_tokens: 0,
            },
        };
        let mut payloads = Vec::new();
        encode(1, &[entry], 1_300, &mut payloads);
        sealer.seal(Kind::Report, &payloads[0])
    };
    let mut sealer = Sealer::new(MacKey::derive(SECRET), addrs[2], 1);
    let first = report(&mut sealer, 2);
    c.send_to(&first, addrs[1]).unwrap();
    c.send_to(&first, addrs[0]).unwrap();

    // Three requests in flight on A, two reported by C: B counts five that are not its own.
    let on = |h: &RuntimeHandle| {
        h.pool()
            .snapshot()
            .get_by_address(ENDPOINT)
            .cloned()
            .unwrap()
    };
    let held_a: Vec<_> = (0..3).map(|_| on(&a).start_request(1_000)).collect();
    assert!(
        wait_until(WAIT, || peer_requests(&b) == 5).await,
        "{}",
        peer_requests(&b)
    );
    let endpoint = on(&b);
    assert_eq!(endpoint.in_flight_requests(), 0);
    assert_eq!(endpoint.total_in_flight_requests(), 5);
    assert_eq!(endpoint.peer_load().prompt_tokens, 4_000);
    assert!(
        b.render_metrics()
            .contains("shepherd_replicas_live_peers 2")
    );
    // A hears B (nothing in flight) and C: two.
    assert!(wait_until(WAIT, || peer_requests(&a) == 2).await);

    // A's requests end: they leave B's count with A's next report.
    drop(held_a);
    assert!(wait_until(WAIT, || peer_requests(&b) == 2).await);

    // C is silent: after the expiry (1 s) its load no longer counts.
    assert!(wait_until(WAIT, || peer_requests(&b) == 0).await);
    assert!(
        b.render_metrics()
            .contains("shepherd_replicas_expired_peers_total 1")
    );

    // A shuts down with a request in flight: its last report is empty, and B forgets it
    // at once instead of after the expiry (which would count a second expired peer).
    let held = on(&a).start_request(100);
    assert!(wait_until(WAIT, || peer_requests(&b) == 1).await);
    let _ = a.shutdown(Duration::from_millis(50)).await;
    assert!(wait_until(WAIT, || peer_requests(&b) == 0).await);
    assert!(
        b.render_metrics()
            .contains("shepherd_replicas_expired_peers_total 1\n")
    );
    drop(held);

    // Refused: from an address that is not a peer; the previous protocol's report from a
    // peer; C's first report again (a replay); a report sealed with another key.
    let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
    stranger.send_to(&report(&mut sealer, 9), addrs[1]).unwrap();
    let mut old_version = b"SHR1".to_vec();
    old_version.resize(64, 0);
    c.send_to(&old_version, addrs[1]).unwrap();
    c.send_to(&first, addrs[1]).unwrap();
    let mut forger = Sealer::new(MacKey::derive("a guess at the secret"), addrs[2], 9);
    c.send_to(&report(&mut forger, 9), addrs[1]).unwrap();
    for reason in ["unknown_peer", "malformed", "replayed", "bad_mac"] {
        let line = format!("shepherd_replicas_rejected_datagrams_total{{reason=\"{reason}\"}} 1");
        assert!(
            wait_until(WAIT, || b.render_metrics().contains(&line)).await,
            "{}",
            b.render_metrics()
        );
    }
    assert_eq!(peer_requests(&b), 0);
    b.shutdown(Duration::from_millis(50)).await;
}

#[test]
fn a_bad_replicas_section_is_refused() {
    for (yaml, field) in [
        (
            "replicas: {listen: 127.0.0.1:9400, intervalMs: 0, key: 0123456789abcdef}\n",
            "intervalMs",
        ),
        (
            "replicas: {listen: 127.0.0.1:9400, intervalMs: 100, expireMs: 50, key: 0123456789abcdef}\n",
            "expireMs",
        ),
        (
            "replicas: {listen: 127.0.0.1:9400, peers: [127.0.0.1:9400], key: 0123456789abcdef}\n",
            "peers",
        ),
        (
            "replicas: {listen: 127.0.0.1:9400, peer: [127.0.0.1:9401], key: 0123456789abcdef}\n",
            "peer",
        ),
        // No key, and insecure not written out.
        ("replicas: {listen: 127.0.0.1:9400}\n", "replicas.key"),
        (
            "replicas: {listen: 127.0.0.1:9400, insecure: false}\n",
            "replicas.key",
        ),
        (
            "replicas: {listen: 127.0.0.1:9400, key: short}\n",
            "replicas.key",
        ),
        (
            "replicas: {listen: 127.0.0.1:9400, key: 0123456789abcdef, insecure: true}\n",
            "replicas.insecure",
        ),
        (
            "replicas: {listen: 0.0.0.0:9400, key: 0123456789abcdef}\n",
            "replicas.advertise",
        ),
    ] {
        let err = RuntimeConfig::from_yaml(yaml).unwrap_err().to_string();
        assert!(err.contains(field), "{yaml}: {err}");
    }
    // The key is never shown, and a variable that is not set stops the start with its name.
    let config = RuntimeConfig::from_yaml(
        "replicas: {listen: 127.0.0.1:9400, key: inline-secret-0123456789}\n",
    )
    .unwrap();
    let replicas = config.replicas.as_ref().unwrap();
    assert!(!format!("{replicas:?}").contains("inline-secret"));
    assert!(
        !serde_json::to_string(replicas)
            .unwrap()
            .contains("inline-secret")
    );
    let unset = RuntimeConfig::from_yaml(
        "replicas: {listen: 0.0.0.0:9400, advertise: 10.0.0.5:9400, key: {env: SHEPHERD_TEST_NO_SUCH_KEY}}\n",
    )
    .unwrap();
    let err = unset.replicas.unwrap().mac_key().unwrap_err().to_string();
    assert!(
        err.contains("replicas.key") && err.contains("SHEPHERD_TEST_NO_SUCH_KEY"),
        "{err}"
    );
    // Insecure, written out: runs without a key.
    let insecure =
        RuntimeConfig::from_yaml("replicas: {listen: 127.0.0.1:9400, insecure: true}\n").unwrap();
    assert!(insecure.replicas.unwrap().mac_key().is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_with_different_keys_hear_nothing_of_each_other() {
    let addrs = ports(2);
    let a = replica(addrs[0], &[addrs[1]]).await;
    let peers = addrs[0].to_string();
    let yaml = format!(
        "endpoints: [{ENDPOINT}, 127.0.0.1:10, 127.0.0.1:11]\nreplicas:\n  listen: {}\n  peers: [{peers}]\n  key: another-secret-entirely-0123\n",
        addrs[1]
    );
    let options = RuntimeOptions {
        scrape: false,
        serve_admin: false,
        watch_config: false,
        ..RuntimeOptions::default()
    };
    let b = Runtime::start(RuntimeConfig::from_yaml(&yaml).unwrap(), options)
        .await
        .unwrap();
    let endpoint = b
        .pool()
        .snapshot()
        .get_by_address(ENDPOINT)
        .cloned()
        .unwrap();
    let held = endpoint.start_request(10);
    let line = "shepherd_replicas_rejected_datagrams_total{reason=\"bad_mac\"}";
    assert!(
        wait_until(WAIT, || counter(&a, line) >= 3.0).await,
        "{}",
        a.render_metrics()
    );
    assert_eq!(peer_requests(&a), 0);
    assert!(
        a.render_metrics()
            .contains("shepherd_replicas_live_peers 0")
    );
    drop(held);
    a.shutdown(Duration::from_millis(50)).await;
    b.shutdown(Duration::from_millis(50)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicas_picks_teach_its_peers_index() {
    let addrs = ports(3);
    let a = replica_with(addrs[0], &[addrs[1]], "").await;
    let b = replica_with(addrs[1], &[addrs[0]], "").await;
    // A prompt of 16 blocks that only A routes.
    let prompt = Prompt::Text("a system prompt only A has seen ".repeat(128));
    let decision = a
        .scheduler()
        .schedule(&InferenceRequest::new("a-1", "m", prompt.clone()))
        .unwrap();
    let home = decision.primary().address().to_string();
    drop(decision);
    assert!(known_blocks(&a, &prompt, &home) > 0);
    // Within an interval or so B's index holds it too, on the same server.
    assert!(
        wait_until(WAIT, || known_blocks(&b, &prompt, &home) > 0).await,
        "{}",
        b.render_metrics()
    );
    let blocks = known_blocks(&a, &prompt, &home);
    assert_eq!(known_blocks(&b, &prompt, &home), blocks);
    assert_eq!(
        counter(&b, "shepherd_replicas_index_keys_received_total"),
        blocks as f64
    );
    // Recording a peer's keys journals nothing: they do not echo back to A.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        counter(&a, "shepherd_replicas_index_keys_received_total"),
        0.0
    );
    // B routes the prompt's next request where A did; its own pick goes to A (a refresh).
    let again = b
        .scheduler()
        .schedule(&InferenceRequest::new("b-1", "m", prompt.clone()))
        .unwrap();
    assert_eq!(again.primary().address(), home);
    drop(again);
    assert!(
        wait_until(WAIT, || counter(
            &a,
            "shepherd_replicas_index_keys_received_total"
        ) == blocks as f64)
        .await
    );

    // With `indexDeltas: false` a replica neither sends its inserts nor records a peer's.
    let c = replica_with(addrs[2], &[addrs[0]], "  indexDeltas: false\n").await;
    let other = Prompt::Text("a prompt only C has seen ".repeat(160));
    drop(
        c.scheduler()
            .schedule(&InferenceRequest::new("c-1", "m", other.clone()))
            .unwrap(),
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        counter(&c, "shepherd_replicas_index_deltas_sent_total"),
        0.0
    );
    assert_eq!(
        counter(&a, "shepherd_replicas_index_keys_received_total"),
        blocks as f64
    );
}
