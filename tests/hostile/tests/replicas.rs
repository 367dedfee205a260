//! The replica exchange's UDP port tried as a hostile sender: datagrams forged without the key,
//! a real replica's datagrams recorded and replayed, cut short, padded past the limit, and a
//! flood from many source addresses. None changes a pick or grows the replica; each is counted
//! by reason; a real peer (restarted, even) is still heard.
//!
//! The attacker sends from an address listed in `replicas.peers` (on a real network it would
//! forge that source address; on loopback the test simply owns it), the strongest position a
//! stranger can take.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::Duration;

use shepherd_hostile_tests::{Process, backends, config_file, metric};
use shepherd_runtime::replicas::frame::{self, Header, Kind};
use shepherd_runtime::replicas::key::MacKey;
use tokio::net::UdpSocket;

const MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";
/// The replicas' shared secret (the attacker does not know it).
const KEY: &str = "hostile-replicas-shared-secret-0123456789";
const REJECTED: &str = "shepherd_replicas_rejected_datagrams_total";

/// A free UDP port on loopback (bound, read, released).
fn free_udp() -> SocketAddr {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.local_addr().unwrap()
}

/// A config over `servers` with a `replicas` section (and, for the gateway, `/debug/explain`).
fn replica_config(
    servers: &[SocketAddr],
    listen: SocketAddr,
    peers: &[SocketAddr],
    gateway: bool,
) -> tempfile::NamedTempFile {
    let endpoints: String = servers
        .iter()
        .map(|a| format!("  - address: {a}\n"))
        .collect();
    let peers: Vec<String> = peers.iter().map(ToString::to_string).collect();
    let explain = if gateway {
        "gateway:\n  explain: true\n"
    } else {
        ""
    };
    config_file(&format!(
        "endpoints:\n{endpoints}{explain}replicas:\n  listen: {listen}\n  peers: [{}]\n  key: {KEY}\n",
        peers.join(", ")
    ))
}

fn body(prompt: &str) -> String {
    serde_json::json!({"model": MODEL, "prompt": prompt, "max_tokens": 2}).to_string()
}

/// What `gateway` would do with `prompt` now (a dry run: nothing is recorded): the endpoint
/// it picks, and the prefix scorer's score for `address` (how much of the prompt it believes
/// `address` holds: 0 for a prompt it knows nothing of).
async fn pick(
    client: &reqwest::Client,
    gateway: &Process,
    prompt: &str,
    address: &str,
) -> (String, f64) {
    let answer: serde_json::Value = client
        .post(format!(
            "http://{}/debug/explain/v1/completions",
            gateway.addr("http")
        ))
        .header("content-type", "application/json")
        .body(body(prompt))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let breakdown = &answer["breakdown"];
    let scorers = breakdown["scorers"].as_array().unwrap();
    let column = scorers
        .iter()
        .position(|c| c["name"].as_str().is_some_and(|n| n.contains("prefix")))
        .unwrap_or_else(|| panic!("no prefix scorer in {scorers:?}"));
    let score = breakdown["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["address"] == address)
        .map_or(0.0, |r| r["scores"][column]["value"].as_f64().unwrap());
    (answer["endpoints"][0].as_str().unwrap().to_owned(), score)
}

/// Sends `prompt` through `gateway` for real (its pick is recorded and journaled).
async fn route(client: &reqwest::Client, gateway: &Process, prompt: &str) {
    let status = client
        .post(format!("http://{}/v1/completions", gateway.addr("http")))
        .header("content-type", "application/json")
        .body(body(prompt))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 200);
}

/// Waits (at most 15 s) until `name` on `admin`'s `/metrics` is at least `value`.
async fn wait_metric(admin: SocketAddr, name: &str, value: f64) -> f64 {
    let mut seen = 0.0;
    for _ in 0..300 {
        seen = metric(admin, name).await;
        if seen >= value {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{name} stayed at {seen}, below {value}");
}

/// The datagrams that arrive on `tap` within `within`.
async fn capture(tap: &UdpSocket, within: Duration) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + within;
    let mut buf = vec![0u8; 2048];
    while out.len() < 10_000 {
        match tokio::time::timeout_at(deadline, tap.recv_from(&mut buf)).await {
            Ok(Ok((n, _))) => out.push(buf[..n].to_vec()),
            _ => break,
        }
    }
    out
}

/// Bytes of a frame's header with an IPv4 sender (before the payload).
const HEADER_V4: usize = frame::MIN_FRAME - frame::TAG_BYTES;

/// A forged delta without the key: a real delta's payload (keys travel in the clear), under a
/// header naming the real peer with a later epoch, sealed with a guessed key.
fn forged(delta: &[u8], sender: SocketAddr, guess: &MacKey) -> Vec<u8> {
    let payload = &delta[HEADER_V4..delta.len() - frame::TAG_BYTES];
    let header = Header {
        kind: Kind::IndexDelta,
        sender,
        epoch: u64::MAX,
        seq: 1,
        sent_ms: frame::now_ms(),
    };
    frame::seal(guess, &header, payload)
}

/// The same payload in the previous protocol's layout (`SHI1`, a sender id, the payload): what
/// moved a pick before datagrams were authenticated.
fn previous_protocol(delta: &[u8]) -> Vec<u8> {
    let mut bytes = b"SHI1".to_vec();
    bytes.extend_from_slice(&7u64.to_le_bytes());
    bytes.extend_from_slice(&delta[HEADER_V4..delta.len() - frame::TAG_BYTES]);
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_replayed_truncated_and_oversized_deltas_change_no_pick() {
    let servers = backends(3).await;
    let addrs = servers.addrs().to_vec();
    let client = reqwest::Client::new();
    let tap = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let tap_addr = tap.local_addr().unwrap();
    let (g_udp, r_udp) = (free_udp(), free_udp());

    // A real replica R whose pool is one server (its every pick is forced there). It routes
    // six prompts while the target G is not up yet: its deltas reach only the tap, which
    // records them.
    let forced = addrs[2];
    let r_config = replica_config(&[forced], r_udp, &[g_udp, tap_addr], true);
    let r = Process::gateway(&r_config, &[]).await;
    let prompts: Vec<String> = (0..6)
        .map(|i| format!("prompt {i} that only R has routed: ").repeat(64))
        .collect();
    for prompt in &prompts {
        route(&client, &r, prompt).await;
    }
    let recorded = capture(&tap, Duration::from_millis(300)).await;
    // (The previous protocol's deltas too, so the test can be run against an older build.)
    let deltas: Vec<&Vec<u8>> = recorded
        .iter()
        .filter(|d| d.starts_with(b"SHI1") || (d.len() > HEADER_V4 && d[4] == 2))
        .collect();
    assert!(!deltas.is_empty(), "R sent no index delta");

    // G: the three servers, R and the tap as its peers. It hears R's current datagrams.
    let g_config = replica_config(&addrs, g_udp, &[r_udp, tap_addr], true);
    let g = Process::gateway(&g_config, &[]).await;
    let admin = g.addr("admin");
    wait_metric(admin, "shepherd_replicas_live_peers", 1.0).await;
    // G knows nothing of the prompts: its prefix score for the forced server is 0 on each.
    let forced = forced.to_string();
    for prompt in &prompts {
        assert_eq!(pick(&client, &g, prompt, &forced).await.1, 0.0);
    }

    // The attacks, from the tap (a configured peer's address): R's recorded datagrams replayed;
    // its deltas under a forged header with a guessed key and with the `insecure` key, in the
    // previous protocol, with a byte changed, cut short, padded past the limit.
    let guess = MacKey::derive("a guess at the replicas' secret");
    let mut sent = std::collections::BTreeMap::<&str, usize>::new();
    let mut send = async |bytes: &[u8], kind: &'static str| {
        tap.send_to(bytes, g_udp).await.unwrap();
        let count = sent.entry(kind).or_default();
        *count += 1;
        // Paced, so the kernel's receive buffer drops none of them.
        if count.is_multiple_of(32) {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    for _ in 0..3 {
        for datagram in &recorded {
            send(datagram, "replayed").await;
        }
    }
    for delta in &deltas {
        send(&forged(delta, r_udp, &guess), "bad_mac").await;
        send(&forged(delta, r_udp, &MacKey::insecure()), "bad_mac").await;
        send(&previous_protocol(delta), "malformed").await;
        let mut tampered = delta.to_vec();
        let at = tampered.len() - frame::TAG_BYTES - 1;
        tampered[at] ^= 0x55;
        send(&tampered, "bad_mac").await;
        send(&delta[..30], "truncated").await;
        let mut padded = delta.to_vec();
        padded.resize(frame::MAX_DATAGRAM + 600, 0);
        send(&padded, "oversized").await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Every pick unchanged: G still believes the forced server holds none of the prompts; no
    // key recorded; every attack counted by its reason.
    for (i, prompt) in prompts.iter().enumerate() {
        let (_, score) = pick(&client, &g, prompt, &forced).await;
        assert_eq!(score, 0.0, "prompt {i}: G believes {forced} holds it");
    }
    let page = shepherd_hostile_tests::metrics_page(admin).await;
    for (reason, count) in &sent {
        let series = format!("{REJECTED}{{reason=\"{reason}\"}}");
        let seen = shepherd_hostile_tests::sample(&page, &series);
        println!("{reason}: sent {count}, counted {seen}");
        assert!(seen >= *count as f64, "{series}: {seen} < {count}");
    }
    assert_eq!(
        shepherd_hostile_tests::sample(&page, "shepherd_replicas_index_keys_received_total"),
        0.0
    );

    // The control: R routes one prompt again now; its genuine delta reaches G within an
    // interval or so, and G's pick follows it to the forced server (what the recorded delta
    // would have done had it been taken in).
    route(&client, &r, &prompts[0]).await;
    let mut seen = (String::new(), 0.0);
    for _ in 0..100 {
        seen = pick(&client, &g, &prompts[0], &forced).await;
        if seen.1 > 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "after R's genuine delta, G picks {} (prefix score {} on {forced})",
        seen.0, seen.1
    );
    assert!(seen.1 > 0.0, "a genuine delta did not reach G");
    assert_eq!(seen.0, forced);
}

/// A load report in the previous protocol's layout, naming `entries` fresh endpoint addresses
/// (each datagram new ones) under the same sequence number: what grew a replica without bound
/// before (a report's parts add to each other).
fn previous_protocol_report(sender: u64, entries: u32, salt: u32) -> Vec<u8> {
    let mut bytes = b"SHR1".to_vec();
    bytes.extend_from_slice(&sender.to_le_bytes());
    bytes.extend_from_slice(&1u64.to_le_bytes());
    bytes.extend_from_slice(&0u16.to_le_bytes());
    bytes.extend_from_slice(&1u16.to_le_bytes());
    bytes.extend_from_slice(&u16::try_from(entries).unwrap().to_le_bytes());
    for e in 0..entries {
        let n = salt * entries + e;
        let address = format!("10.{}.{}.{}:{}", n >> 16 & 255, n >> 8 & 255, n & 255, 8000);
        bytes.push(u8::try_from(address.len()).unwrap());
        bytes.extend_from_slice(address.as_bytes());
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        bytes.extend_from_slice(&u64::MAX.to_le_bytes());
        bytes.extend_from_slice(&0u64.to_le_bytes());
    }
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_from_many_sources_leaves_memory_flat_and_a_real_peer_heard() {
    let servers = backends(2).await;
    let addrs = servers.addrs().to_vec();
    let tap = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let tap_addr = tap.local_addr().unwrap();
    let (e_udp, r_udp) = (free_udp(), free_udp());
    let e_config = replica_config(&addrs, e_udp, &[r_udp, tap_addr], false);
    let e = Process::epp(&e_config, &[]).await;
    let admin = e.addr("admin");
    let r_config = replica_config(&addrs, r_udp, &[e_udp], false);
    let r = Process::epp(&r_config, &[]).await;
    wait_metric(admin, "shepherd_replicas_live_peers", 1.0).await;
    let rss_before = e.rss_kib();

    // 100,000 datagrams of about 1.3 KB: from the tap (a configured peer's address) and from
    // 200 other loopback addresses; the previous protocol's reports naming 35 new endpoints
    // each under 1,100 sender ids (more than the 1,024 senders the previous table held), and
    // frames naming the real peer under a guessed key.
    let strangers: Vec<std::net::UdpSocket> = (2..202)
        .map(|i| std::net::UdpSocket::bind(format!("127.0.0.{i}:0")).unwrap())
        .collect();
    let guess = MacKey::derive("a guess at the replicas' secret");
    let started = std::time::Instant::now();
    let total = 100_000u32;
    for i in 0..total {
        let report = previous_protocol_report(u64::from(i % 1_100), 35, i);
        let datagram = if i % 2 == 0 {
            report
        } else {
            let header = Header {
                kind: Kind::Report,
                sender: r_udp,
                epoch: u64::from(i),
                seq: u64::from(i),
                sent_ms: frame::now_ms(),
            };
            frame::seal(&guess, &header, &report)
        };
        let socket = if i % 4 < 2 {
            &tap
        } else {
            &strangers[i as usize % strangers.len()]
        };
        let _ = socket.send_to(&datagram, e_udp);
        if i.is_multiple_of(256) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let flood = started.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_after = e.rss_kib();
    let page = shepherd_hostile_tests::metrics_page(admin).await;
    let counted = shepherd_hostile_tests::sample(&page, REJECTED);
    let by_reason: Vec<String> = ["unknown_peer", "bad_mac", "malformed", "oversized"]
        .iter()
        .map(|r| {
            let series = format!("{REJECTED}{{reason=\"{r}\"}}");
            format!("{r} {}", shepherd_hostile_tests::sample(&page, &series))
        })
        .collect();
    println!(
        "flood of {total} datagrams in {flood:?}: RSS {rss_before} -> {rss_after} KiB (peak {} KiB); rejected {counted} ({})",
        e.peak_rss_kib(),
        by_reason.join(", ")
    );
    assert!(
        rss_after < rss_before + 16 * 1024,
        "RSS grew from {rss_before} to {rss_after} KiB"
    );
    // Most arrive (the kernel may drop some of a burst); all that arrive are refused.
    assert!(counted > f64::from(total) / 2.0, "{counted} counted");
    assert_eq!(
        shepherd_hostile_tests::sample(&page, "shepherd_replicas_live_peers"),
        1.0
    );

    // The real peer restarts (a new run): it is heard again at once, the only live peer.
    drop(r);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let received = metric(admin, "shepherd_replicas_reports_received_total").await;
    let r = Process::epp(&r_config, &[]).await;
    wait_metric(
        admin,
        "shepherd_replicas_reports_received_total",
        received + 20.0,
    )
    .await;
    assert_eq!(metric(admin, "shepherd_replicas_live_peers").await, 1.0);
    assert_eq!(
        metric(admin, &format!("{REJECTED}{{reason=\"replayed\"}}")).await,
        0.0
    );
    drop(r);
}
