//! `shepherd-epp`'s ZeroMQ ports tried as a hostile peer: a publisher (or anyone who can reach
//! the bound `zmqEndpoint`) that completes the ZMTP handshake and then declares a 2^40-byte
//! frame, a replay socket that answers with an endless reply, and a crowd of connections that
//! never finish their handshake. Each time the process stays up with a small resident memory,
//! counts the peer on `/metrics`, and a legitimate publisher's events are still applied.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use shepherd_hostile_tests::{Process, config_file, metrics_page, sample};
use shepherd_scheduler_core::kv_events::KvEventBatch;
use shepherd_scheduler_core::kv_events::wire::{Encoding, encode_batch, encode_sequence};
use shepherd_sim::serve::{self, KvEventsConfig, ServeConfig, ServeHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";
const WAIT: Duration = Duration::from_secs(15);
/// How much the resident memory may grow under an attack (the attacks declare or send
/// hundreds of MiB to TiB).
const RSS_MARGIN_KIB: u64 = 96 * 1024;

/// The 64-byte ZMTP 3.0 greeting of a NULL-mechanism peer.
fn greeting() -> [u8; 64] {
    let mut g = [0u8; 64];
    g[0] = 0xff;
    g[9] = 0x7f;
    g[10] = 3;
    g[11] = 0;
    g[12..16].copy_from_slice(b"NULL");
    g
}

/// A READY command frame naming `socket_type`.
fn ready(socket_type: &str) -> Vec<u8> {
    let mut body = vec![5u8];
    body.extend_from_slice(b"READY");
    body.push(11);
    body.extend_from_slice(b"Socket-Type");
    body.extend_from_slice(&u32::try_from(socket_type.len()).unwrap().to_be_bytes());
    body.extend_from_slice(socket_type.as_bytes());
    let mut frame = vec![0x04, u8::try_from(body.len()).unwrap()];
    frame.extend_from_slice(&body);
    frame
}

/// The attack: one 75-byte frame, a long-size header declaring 2^40 bytes and 66 of them.
fn oversized_frame() -> Vec<u8> {
    let mut frame = vec![0x02];
    frame.extend_from_slice(&(1u64 << 40).to_be_bytes());
    frame.extend_from_slice(&[b'x'; 66]);
    assert_eq!(frame.len(), 75);
    frame
}

/// One data frame (`more`: another follows).
fn data_frame(body: &[u8], more: bool) -> Vec<u8> {
    let more = u8::from(more);
    let mut frame = Vec::with_capacity(body.len() + 9);
    if body.len() < 256 {
        frame.extend_from_slice(&[more, u8::try_from(body.len()).unwrap()]);
    } else {
        frame.push(more | 0x02);
        frame.extend_from_slice(&(body.len() as u64).to_be_bytes());
    }
    frame.extend_from_slice(body);
    frame
}

/// Plays the ZMTP handshake as `socket_type` on `stream`: sends the greeting and READY, reads
/// the peer's greeting and whatever it sends next for a moment.
async fn handshake(stream: &mut TcpStream, socket_type: &str) {
    let mut hello = greeting().to_vec();
    hello.extend_from_slice(&ready(socket_type));
    stream.write_all(&hello).await.unwrap();
    let mut peer = [0u8; 64];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut peer))
        .await
        .expect("no greeting from shepherd-epp")
        .unwrap();
    assert_eq!((peer[0], peer[9]), (0xff, 0x7f), "not a ZMTP greeting");
    let mut rest = [0u8; 512];
    let _ = tokio::time::timeout(Duration::from_millis(200), stream.read(&mut rest)).await;
}

/// Reads until the peer closes the connection, for at most `wait`; whether it did.
async fn closed_within(stream: &mut TcpStream, wait: Duration) -> bool {
    let mut sink = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut sink)).await {
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
            Err(_) => return false,
        }
    }
}

/// A publisher that completes the handshake with every subscriber connecting to it and then
/// sends the oversized frame. Counts the attacks, and the connections the subscriber closed.
struct OversizedPublisher {
    addr: SocketAddr,
    attacks: Arc<AtomicU64>,
    cut_off: Arc<AtomicU64>,
}

impl OversizedPublisher {
    async fn start() -> OversizedPublisher {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let attacks = Arc::new(AtomicU64::new(0));
        let cut_off = Arc::new(AtomicU64::new(0));
        let (a, c) = (Arc::clone(&attacks), Arc::clone(&cut_off));
        tokio::spawn(async move {
            for _ in 0..1000 {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let (a, c) = (Arc::clone(&a), Arc::clone(&c));
                tokio::spawn(async move {
                    handshake(&mut stream, "PUB").await;
                    if stream.write_all(&oversized_frame()).await.is_err() {
                        return;
                    }
                    a.fetch_add(1, Ordering::Relaxed);
                    if closed_within(&mut stream, Duration::from_secs(5)).await {
                        c.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
        OversizedPublisher {
            addr,
            attacks,
            cut_off,
        }
    }
}

/// Simulated servers publishing KV events.
async fn servers(n: usize) -> ServeHandle {
    let mut config = ServeConfig::ephemeral(n);
    config.speed = 50.0;
    config.kv_events = Some(KvEventsConfig::ephemeral());
    serve::spawn(config).await.unwrap()
}

/// A precise-prefix policy; `kv_events_config` is the producer's `kvEventsConfig` (flow YAML).
fn policy(kv_events_config: &str) -> String {
    format!(
        "plugins:
- type: precise-prefix-cache-producer
  parameters:
    kvEventsConfig: {kv_events_config}
- type: prefix-cache-scorer
  parameters: {{prefixMatchInfoProducerName: precise-prefix-cache-producer}}
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
  - pluginRef: max-score-picker
"
    )
}

/// An `endpoints:` item with its KV-event sockets named by labels.
fn endpoint(addr: SocketAddr, publisher: &str, replay: Option<&str>) -> String {
    let mut item = format!(
        "  - address: {addr}\n    labels:\n      shepherd.dev/kv-events-endpoint: {publisher}\n"
    );
    if let Some(replay) = replay {
        item.push_str(&format!(
            "      shepherd.dev/kv-events-replay-endpoint: {replay}\n"
        ));
    }
    item
}

/// The admin `/metrics` page.
async fn metrics(epp: &Process) -> String {
    metrics_page(epp.addr("admin")).await
}

/// Waits until `name` reaches `at_least`; its last value.
async fn wait_for(epp: &Process, name: &str, at_least: f64) -> f64 {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let value = sample(&metrics(epp).await, name);
        if value >= at_least || tokio::time::Instant::now() > deadline {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sends `prompt` straight to server `i` so its engine stores blocks and publishes them.
/// A request on server 0 stores blocks, and its batch reaches `epp` from the live stream.
async fn live_batches_applied(epp: &Process, servers: &ServeHandle, when: &str) {
    let applied = sample(&metrics(epp).await, "shepherd_kv_events_batches_total");
    complete(
        servers,
        0,
        &"all work and no play makes a dull model. ".repeat(40),
    )
    .await;
    let after = wait_for(epp, "shepherd_kv_events_batches_total", applied + 1.0).await;
    assert!(after > applied, "no live batch applied {when}");
}

async fn complete(servers: &ServeHandle, i: usize, prompt: &str) {
    let body = serde_json::json!({"model": MODEL, "prompt": prompt, "max_tokens": 2});
    let response = reqwest::Client::new()
        .post(format!(
            "http://{}/v1/completions",
            servers.addr(i).unwrap()
        ))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    response.bytes().await.unwrap();
}

/// A free loopback port (bound and released: another process could take it meanwhile, which
/// the test would notice as a bind failure).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publisher_declaring_a_huge_frame_is_cut_off_and_the_others_still_apply() {
    let servers = servers(2).await;
    let attacker = OversizedPublisher::start().await;
    let kv0 = servers.kv_events(0).unwrap();
    let mut endpoints = endpoint(
        servers.addr(0).unwrap(),
        &kv0.publish_endpoint(),
        Some(&kv0.replay_endpoint()),
    );
    // Server 1's publisher is the attacker.
    endpoints.push_str(&endpoint(
        servers.addr(1).unwrap(),
        &format!("tcp://{}", attacker.addr),
        None,
    ));
    let config = config_file(&format!("endpoints:\n{endpoints}{}", policy("{}")));
    let mut epp = Process::epp(&config, &[]).await;
    let before = epp.rss_kib();

    // The subscriber connects, completes the handshake and gets the 2^40-byte header.
    let deadline = tokio::time::Instant::now() + WAIT;
    while attacker.attacks.load(Ordering::Relaxed) < 2 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        epp.is_running(),
        "shepherd-epp died of one 75-byte frame (attacks sent: {})",
        attacker.attacks.load(Ordering::Relaxed)
    );
    let attacks = attacker.attacks.load(Ordering::Relaxed);
    assert!(attacks >= 1, "the subscriber never completed a handshake");
    let oversized = wait_for(&epp, "shepherd_kv_events_oversized_total", 1.0).await;
    assert!(oversized >= 1.0, "the oversized peer was not counted");
    assert!(
        attacker.cut_off.load(Ordering::Relaxed) >= 1,
        "the oversized peer was not disconnected"
    );
    let rss = epp.rss_kib();
    assert!(
        rss < before + RSS_MARGIN_KIB,
        "RSS grew from {before} KiB to {rss} KiB"
    );
    // Reconnections to the attacker back off: a handful, not a busy loop.
    assert!(attacks < 50, "{attacks} attacks in a few seconds");
    println!(
        "RSS before {before} KiB, after {attacks} attacks {rss} KiB (peak {} KiB); counted {oversized}",
        epp.peak_rss_kib()
    );

    // The legitimate publisher's events are still applied.
    live_batches_applied(&epp, &servers, "after the attack").await;
    assert!(epp.is_running());
    servers.shutdown().await;
}

/// A legitimate publisher connecting to a bound SUB socket: a `zeromq` PUB (as a vLLM with
/// `endpoint: tcp://<shepherd>:port` connects), publishing empty batches under `topic`.
async fn publish_until_applied(epp: &Process, bind: &str, topic: &str) -> f64 {
    use zeromq::prelude::*;
    let applied = sample(&metrics(epp).await, "shepherd_kv_events_batches_total");
    let mut publisher = zeromq::PubSocket::new();
    publisher.connect(bind).await.unwrap();
    let mut payload = Vec::new();
    encode_batch(
        &KvEventBatch {
            ts: 0.0,
            events: Vec::new(),
            data_parallel_rank: None,
        },
        Encoding::ArrayLike,
        &mut payload,
    );
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut seq = 0i64;
    loop {
        let mut message = zeromq::ZmqMessage::from(topic.to_string());
        message.push_back(encode_sequence(seq).to_vec().into());
        message.push_back(payload.clone().into());
        publisher.send(message).await.unwrap();
        seq += 1;
        let now = sample(&metrics(epp).await, "shepherd_kv_events_batches_total");
        if now > applied || tokio::time::Instant::now() > deadline {
            return now - applied;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_declaring_a_huge_frame_on_the_bound_socket_is_cut_off() {
    let servers = servers(1).await;
    let port = free_port();
    let bind = format!("tcp://127.0.0.1:{port}");
    let addr = servers.addr(0).unwrap();
    let config = config_file(&format!(
        "endpoints:\n  - address: {addr}\n{}",
        policy(&format!("{{zmqEndpoint: \"{bind}\", discoverPods: false}}"))
    ));
    let mut epp = Process::epp(&config, &[]).await;
    let before = epp.rss_kib();

    // Anyone may connect to the bound socket: the attacker does, twice.
    let mut cut_off = 0;
    for _ in 0..2 {
        let deadline = tokio::time::Instant::now() + WAIT;
        let mut stream = loop {
            match TcpStream::connect(("127.0.0.1", port)).await {
                Ok(stream) => break stream,
                Err(_) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(error) => panic!(
                    "the bound socket never listened: {error}; log: {:?}",
                    epp.log_lines("KV")
                ),
            }
        };
        handshake(&mut stream, "PUB").await;
        if stream.write_all(&oversized_frame()).await.is_ok()
            && closed_within(&mut stream, Duration::from_secs(5)).await
        {
            cut_off += 1;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(epp.is_running(), "shepherd-epp died of one 75-byte frame");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(epp.is_running(), "shepherd-epp died of one 75-byte frame");
    assert_eq!(cut_off, 2, "the oversized peer was not disconnected");
    let oversized = wait_for(&epp, "shepherd_kv_events_oversized_total", 2.0).await;
    assert!(oversized >= 2.0, "the oversized peers were not counted");
    let rss = epp.rss_kib();
    assert!(
        rss < before + RSS_MARGIN_KIB,
        "RSS grew from {before} KiB to {rss} KiB"
    );
    println!("RSS before {before} KiB, after the attacks {rss} KiB; counted {oversized}");

    // A legitimate publisher connecting afterwards is still heard.
    let applied = publish_until_applied(&epp, &bind, &format!("kv@{addr}@{MODEL}")).await;
    assert!(
        applied >= 1.0,
        "no batch applied from the legitimate publisher"
    );
    assert!(epp.is_running());
    servers.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_of_the_bound_socket_are_refused() {
    let servers = servers(1).await;
    let port = free_port();
    let bind = format!("tcp://127.0.0.1:{port}");
    let addr = servers.addr(0).unwrap();
    let config = config_file(&format!(
        "endpoints:\n  - address: {addr}\n{}",
        policy(&format!("{{zmqEndpoint: \"{bind}\", discoverPods: false}}"))
    ));
    let epp = Process::epp(&config, &[]).await;
    let files = epp.open_files();
    // 200 connections that never say a word, against the default cap of 64.
    let mut idle = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    while idle.len() < 200 {
        match TcpStream::connect(("127.0.0.1", port)).await {
            Ok(stream) => idle.push(stream),
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(error) => panic!("the bound socket never listened: {error}"),
        }
    }
    let refused = wait_for(&epp, "shepherd_kv_events_refused_connections_total", 100.0).await;
    assert!(refused >= 100.0, "only {refused} connections refused");
    let open = epp.open_files();
    assert!(
        open <= files + 64 + 8,
        "{open} files open (were {files}) with 200 idle peers and a cap of 64"
    );
    println!("200 idle peers: {refused} refused, {open} files open (were {files})");
    drop(idle);
    // The handshake timeout frees the slots the silent peers held; a publisher gets in.
    let applied = publish_until_applied(&epp, &bind, &format!("kv@{addr}@{MODEL}")).await;
    assert!(
        applied >= 1.0,
        "no batch applied from the legitimate publisher"
    );
    servers.shutdown().await;
}

/// A replay socket (ROUTER) that answers any request with 1 MiB batches without end, until
/// the asker hangs up or `limit` bytes went out. Reports the bytes sent on each connection.
async fn endless_replay(limit: u64) -> (SocketAddr, tokio::sync::mpsc::UnboundedReceiver<u64>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        for _ in 0..20 {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let tx = tx.clone();
            tokio::spawn(async move {
                handshake(&mut stream, "ROUTER").await;
                let payload = vec![0x90u8; 1 << 20];
                let mut sent = 0u64;
                let mut seq = 0i64;
                let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
                while sent < limit && tokio::time::Instant::now() < deadline {
                    let mut message = data_frame(&[], true);
                    message.extend_from_slice(&data_frame(&encode_sequence(seq), true));
                    message.extend_from_slice(&data_frame(&payload, false));
                    if stream.write_all(&message).await.is_err() {
                        break;
                    }
                    sent += message.len() as u64;
                    seq += 1;
                }
                let _ = tx.send(sent);
            });
        }
    });
    (addr, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_answer_over_the_cap_is_abandoned_without_being_held() {
    let servers = servers(1).await;
    let limit = 1536u64 << 20;
    let (replay, mut sent) = endless_replay(limit).await;
    let kv0 = servers.kv_events(0).unwrap();
    let config = config_file(&format!(
        "endpoints:\n{}{}",
        endpoint(
            servers.addr(0).unwrap(),
            &kv0.publish_endpoint(),
            Some(&format!("tcp://{replay}"))
        ),
        policy("{}")
    ));
    let mut epp = Process::epp(&config, &[]).await;
    let before = epp.rss_kib();
    // The subscriber connects and asks for the replay; the answer never ends.
    let mut peak = 0;
    let bytes = loop {
        peak = peak.max(epp.rss_kib());
        match tokio::time::timeout(Duration::from_millis(50), sent.recv()).await {
            Ok(Some(bytes)) => break bytes,
            Ok(None) => panic!("the replay socket stopped"),
            Err(_) => {}
        }
        assert!(epp.is_running(), "shepherd-epp died during the replay");
    };
    let peak = peak.max(epp.peak_rss_kib());
    println!(
        "replay cut off after {} MiB; RSS before {before} KiB, peak {peak} KiB",
        bytes >> 20
    );
    assert!(epp.is_running());
    assert!(
        bytes < limit,
        "the endless replay was read to the test's own limit"
    );
    assert!(
        peak < before + RSS_MARGIN_KIB,
        "RSS grew from {before} KiB to {peak} KiB: the replay answer was held"
    );
    let abandoned = wait_for(&epp, "shepherd_kv_events_replays_abandoned_total", 1.0).await;
    assert!(abandoned >= 1.0, "the abandoned replay was not counted");
    // The subscription falls back to the live stream.
    live_batches_applied(&epp, &servers, "after the abandoned replay").await;
    servers.shutdown().await;
}
