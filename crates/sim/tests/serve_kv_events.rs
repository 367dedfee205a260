//! `shepherd-sim serve` publishing KV-cache events over ZeroMQ, read back with zeromq SUB and
//! DEALER sockets and the core's codec: what is published, its numbering, replay, the test
//! hooks (dropped batches, restarts) and the prefix-cache reset.
#![cfg(feature = "serve")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};
use shepherd_scheduler_core::kv_events::wire::{
    DecodeLimits, REPLAY_END, decode_batch, decode_sequence, encode_sequence,
};
use shepherd_scheduler_core::kv_events::{BlockStored, EngineBlockHash, KvEvent, KvEventBatch};
use shepherd_sim::serve::{
    self, DEFAULT_MODEL, KvEventEndpoints, KvEventsConfig, ServeConfig, ServeHandle,
};
use shepherd_sim::workload::block_hashes;
use zeromq::prelude::*;
use zeromq::{DealerSocket, SubSocket, ZmqMessage};

/// Fast enough that a request takes a few milliseconds of wall time.
const FAST: f64 = 100.0;
/// Longest wait for a message that should come.
const PATIENCE: Duration = Duration::from_secs(5);
/// How long a message that should not come is waited for.
const QUIET: Duration = Duration::from_millis(150);

async fn pool(servers: usize, tune: impl FnOnce(&mut ServeConfig)) -> ServeHandle {
    let mut config = ServeConfig::ephemeral(servers);
    config.speed = FAST;
    config.kv_events = Some(KvEventsConfig::ephemeral());
    tune(&mut config);
    serve::spawn(config).await.expect("servers start")
}

/// Sends a completion and returns its body (the request is over when this returns).
async fn complete(client: &reqwest::Client, addr: SocketAddr, prompt: &str) -> Value {
    let response = client
        .post(format!("http://{addr}/v1/completions"))
        .json(&json!({"model": DEFAULT_MODEL, "prompt": prompt, "max_tokens": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

fn cached_tokens(body: &Value) -> u64 {
    body["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap()
}

/// The pseudo tokens the server makes of a text prompt: 4-byte little-endian words.
fn pseudo_tokens(text: &str) -> Vec<u32> {
    text.as_bytes()
        .chunks(4)
        .map(|c| {
            let mut word = [0u8; 4];
            word[..c.len()].copy_from_slice(c);
            u32::from_le_bytes(word)
        })
        .collect()
}

fn hashes(stored: &BlockStored) -> Vec<u64> {
    stored.block_hashes.iter().map(|h| h.0).collect()
}

/// The one `BlockStored` of `batch`.
fn only_store(batch: &KvEventBatch) -> &BlockStored {
    match batch.events.as_slice() {
        [KvEvent::BlockStored(stored)] => stored,
        other => panic!("expected one BlockStored, got {other:?}"),
    }
}

fn decode(payload: &[u8]) -> KvEventBatch {
    decode_batch(payload, &DecodeLimits::default()).expect("payload decodes")
}

/// One message off the PUB socket.
#[derive(Debug)]
struct Published {
    topic: String,
    seq: i64,
    payload: Vec<u8>,
    batch: KvEventBatch,
}

/// A SUB socket on one server's publisher.
struct Subscriber {
    socket: SubSocket,
}

impl Subscriber {
    async fn new(endpoints: &KvEventEndpoints) -> Self {
        let mut socket = SubSocket::new();
        socket.connect(&endpoints.publish_endpoint()).await.unwrap();
        socket.subscribe(&endpoints.topic).await.unwrap();
        // A PUB socket sends nothing to a subscriber before its subscription arrives.
        tokio::time::sleep(Duration::from_millis(200)).await;
        Subscriber { socket }
    }

    async fn next(&mut self) -> Published {
        let message = tokio::time::timeout(PATIENCE, self.socket.recv())
            .await
            .expect("a message within the patience")
            .unwrap();
        let frames = message.into_vec();
        assert_eq!(frames.len(), 3, "[topic, seq, payload]");
        Published {
            topic: String::from_utf8(frames[0].to_vec()).unwrap(),
            seq: decode_sequence(&frames[1]).unwrap(),
            payload: frames[2].to_vec(),
            batch: decode(&frames[2]),
        }
    }

    async fn assert_quiet(&mut self) {
        if let Ok(message) = tokio::time::timeout(QUIET, self.socket.recv()).await {
            panic!("unexpected message {message:?}");
        }
    }
}

/// Asks `endpoints`' replay socket for every batch from `start` on, as a REQ socket's request
/// looks at the ROUTER (an empty delimiter, then the start); returns `(seq, payload)` up to and
/// without the end marker.
async fn replay(endpoints: &KvEventEndpoints, start: i64) -> Vec<(i64, Vec<u8>)> {
    let mut dealer = DealerSocket::new();
    dealer.connect(&endpoints.replay_endpoint()).await.unwrap();
    let mut request = ZmqMessage::from(Vec::<u8>::new());
    request.push_back(encode_sequence(start).to_vec().into());
    dealer.send(request).await.unwrap();
    let mut out = Vec::new();
    loop {
        let reply = tokio::time::timeout(PATIENCE, dealer.recv())
            .await
            .expect("a replay message within the patience")
            .unwrap()
            .into_vec();
        let (seq, payload) = match reply.as_slice() {
            [empty, seq, payload] => {
                assert!(empty.is_empty());
                (seq, payload)
            }
            // The newest vLLM's shape: the topic before the sequence (empty in the end marker).
            [empty, topic, seq, payload] => {
                assert!(empty.is_empty());
                let expected: &[u8] = if decode_sequence(seq).unwrap() == REPLAY_END {
                    b""
                } else {
                    endpoints.topic.as_bytes()
                };
                assert_eq!(topic.as_ref(), expected);
                (seq, payload)
            }
            other => panic!("unexpected replay reply {other:?}"),
        };
        let seq = decode_sequence(seq).unwrap();
        if seq == REPLAY_END {
            assert!(payload.is_empty());
            return out;
        }
        out.push((seq, payload.to_vec()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_are_published_with_chained_parents_and_sequences_per_server() {
    let pool = pool(2, |_| {}).await;
    let client = reqwest::Client::new();
    let mut subs = Vec::new();
    for i in 0..2 {
        subs.push(Subscriber::new(pool.kv_events(i).unwrap()).await);
    }
    // 192 shared bytes (3 blocks of 16 pseudo tokens), then 64 of each request's own.
    let shared = "You are a helpful assistant. ".repeat(7)[..192].to_owned();
    let first = format!("{shared}{}", "A".repeat(64));
    let second = format!("{shared}{}", "B".repeat(64));

    complete(&client, pool.addrs()[0], &first).await;
    let p = subs[0].next().await;
    let topic = format!("kv@{}@{DEFAULT_MODEL}", pool.addrs()[0]);
    assert_eq!(p.topic, topic);
    assert_eq!(pool.kv_events(0).unwrap().topic, topic);
    assert_eq!(p.seq, 0);
    assert_eq!(p.batch.data_parallel_rank, Some(0));
    let stored = only_store(&p.batch);
    // The prefill cached the prompt's 4 blocks (the 2 output tokens fill none).
    let tokens = pseudo_tokens(&first);
    assert_eq!(tokens.len(), 64);
    assert_eq!(stored.token_ids, tokens);
    assert_eq!(hashes(stored), block_hashes(&tokens, 16));
    assert_eq!(stored.parent_block_hash, None);
    assert_eq!(stored.block_size, 16);
    assert_eq!(stored.medium.as_deref(), Some("GPU"));
    assert_eq!(stored.lora_id, None);
    let first_hashes = hashes(stored);

    // The second request hits the shared blocks and caches only its own, chained to them.
    let body = complete(&client, pool.addrs()[0], &second).await;
    assert_eq!(cached_tokens(&body), 48);
    let p = subs[0].next().await;
    assert_eq!(p.seq, 1);
    let stored = only_store(&p.batch);
    assert_eq!(
        stored.parent_block_hash,
        Some(EngineBlockHash(first_hashes[2]))
    );
    let tokens = pseudo_tokens(&second);
    assert_eq!(stored.token_ids, tokens[48..]);
    assert_eq!(hashes(stored), block_hashes(&tokens, 16)[3..]);

    // Server 1 numbers its own batches from 0, under its own topic.
    complete(&client, pool.addrs()[1], &first).await;
    let p = subs[1].next().await;
    assert_eq!(p.topic, format!("kv@{}@{DEFAULT_MODEL}", pool.addrs()[1]));
    assert_eq!(p.seq, 0);
    assert_eq!(hashes(only_store(&p.batch)), first_hashes);
    subs[0].assert_quiet().await;

    // The same prompt again is a hit that caches nothing: no batch.
    complete(&client, pool.addrs()[1], &first).await;
    subs[1].assert_quiet().await;
    let stats = pool.kv_event_stats(0).unwrap();
    assert_eq!((stats.published, stats.dropped_queue_full), (2, 0));

    // /metrics still answers.
    let metrics = client
        .get(format!("http://{}/metrics", pool.addrs()[0]))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("vllm:prefix_cache_hits_total"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_sends_the_buffered_batches_then_the_end_marker() {
    let pool = pool(1, |c| {
        if let Some(kv) = &mut c.kv_events {
            kv.buffer_steps = 3;
        }
    })
    .await;
    let endpoints = pool.kv_events(0).unwrap().clone();
    let client = reqwest::Client::new();
    let mut sub = Subscriber::new(&endpoints).await;
    // Nothing published yet: just the end marker.
    assert!(replay(&endpoints, 0).await.is_empty());
    let mut published = Vec::new();
    for i in 0..5 {
        complete(&client, pool.addrs()[0], &format!("{i}").repeat(64)).await;
        let p = sub.next().await;
        assert_eq!(p.seq, i);
        published.push((p.seq, p.payload));
    }
    // The buffer keeps the last 3 batches, byte for byte as published.
    assert_eq!(replay(&endpoints, 0).await, published[2..]);
    assert_eq!(replay(&endpoints, 3).await, published[3..]);
    assert_eq!(replay(&endpoints, 4).await, published[4..]);
    assert!(replay(&endpoints, 5).await.is_empty());
    assert_eq!(pool.kv_event_stats(0).unwrap().replays, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_replies_can_carry_the_topic_as_the_newest_vllm() {
    let pool = pool(1, |c| {
        if let Some(kv) = &mut c.kv_events {
            kv.replay_topic = true;
        }
    })
    .await;
    let endpoints = pool.kv_events(0).unwrap().clone();
    let client = reqwest::Client::new();
    let mut sub = Subscriber::new(&endpoints).await;
    complete(&client, pool.addrs()[0], &"t".repeat(64)).await;
    let p = sub.next().await;
    assert_eq!(replay(&endpoints, 0).await, [(0, p.payload)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_batches_leave_gaps_replay_fills_or_not() {
    let pool = pool(1, |_| {}).await;
    let endpoints = pool.kv_events(0).unwrap().clone();
    let client = reqwest::Client::new();
    let mut sub = Subscriber::new(&endpoints).await;
    let addr = pool.addrs()[0];

    complete(&client, addr, &"a".repeat(64)).await;
    assert_eq!(sub.next().await.seq, 0);

    // A lost message: not sent, but replayable.
    assert!(pool.drop_kv_batches(0, 1, true));
    complete(&client, addr, &"b".repeat(64)).await;
    complete(&client, addr, &"c".repeat(64)).await;
    let p = sub.next().await;
    assert_eq!(p.seq, 2, "batch 1 was not sent");
    let filled = replay(&endpoints, 1).await;
    let seqs: Vec<i64> = filled.iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs, [1, 2]);
    let lost = decode(&filled[0].1);
    assert_eq!(only_store(&lost).token_ids, pseudo_tokens(&"b".repeat(64)));

    // A gap: neither sent nor buffered.
    assert!(pool.drop_kv_batches(0, 1, false));
    complete(&client, addr, &"d".repeat(64)).await;
    complete(&client, addr, &"e".repeat(64)).await;
    assert_eq!(sub.next().await.seq, 4, "batch 3 was not sent");
    let seqs: Vec<i64> = replay(&endpoints, 3)
        .await
        .iter()
        .map(|(s, _)| *s)
        .collect();
    assert_eq!(seqs, [4], "batch 3 is gone for good");
    let seqs: Vec<i64> = replay(&endpoints, 0)
        .await
        .iter()
        .map(|(s, _)| *s)
        .collect();
    assert_eq!(seqs, [0, 1, 2, 4]);
    let stats = pool.kv_event_stats(0).unwrap();
    assert_eq!((stats.published, stats.dropped_on_purpose), (3, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_comes_back_on_the_same_ports_with_sequence_zero_and_an_empty_cache() {
    let mut pool = pool(2, |_| {}).await;
    let endpoints = pool.kv_events(0).unwrap().clone();
    let addr = pool.addrs()[0];
    let client = reqwest::Client::new();
    let mut sub = Subscriber::new(&endpoints).await;
    let prompt = "r".repeat(64);
    complete(&client, addr, &"q".repeat(64)).await;
    complete(&client, addr, &prompt).await;
    assert_eq!(sub.next().await.seq, 0);
    assert_eq!(sub.next().await.seq, 1);
    // A subscriber that keeps reading across the restart (the zeromq crate's SUB notices the
    // lost connection, and reconnects, only while it is read).
    let old = tokio::spawn(async move { sub.next().await });

    pool.restart(0).await.unwrap();
    assert!(pool.is_running(0));
    assert_eq!(pool.addrs()[0], addr);
    assert_eq!(pool.kv_events(0), Some(&endpoints));
    // The replay buffer is empty, the engine forgot the prompt.
    assert!(replay(&endpoints, 0).await.is_empty());
    let mut fresh = Subscriber::new(&endpoints).await;
    // Time for the older subscriber to reconnect (its first retry is after 100 ms).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let body = complete(&client, addr, &prompt).await;
    assert_eq!(cached_tokens(&body), 0);
    let p = fresh.next().await;
    assert_eq!(p.seq, 0, "a restarted publisher counts from 0 again");
    assert_eq!(p.topic, endpoints.topic);
    assert_eq!(only_store(&p.batch).parent_block_hash, None);
    assert_eq!(pool.kv_event_stats(0).unwrap().published, 1);
    // The subscriber from before the restart reconnected on its own.
    let p = old.await.unwrap();
    assert_eq!(p.seq, 0);
    // Server 1 was not touched.
    assert!(pool.is_running(1));
    assert!(pool.restart(2).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_prefix_cache_publishes_all_blocks_cleared() {
    let pool = pool(1, |_| {}).await;
    let endpoints = pool.kv_events(0).unwrap().clone();
    let addr = pool.addrs()[0];
    let client = reqwest::Client::new();
    let mut sub = Subscriber::new(&endpoints).await;
    let prompt = "z".repeat(256);
    complete(&client, addr, &prompt).await;
    assert_eq!(sub.next().await.seq, 0);
    assert_eq!(cached_tokens(&complete(&client, addr, &prompt).await), 48);

    // While a request runs, its blocks are in use: no reset. (Its output fills and caches a
    // block every 16 tokens: those batches come first.)
    let mut running = client
        .post(format!("http://{addr}/v1/completions"))
        .json(&json!({"model": DEFAULT_MODEL, "prompt": "y", "max_tokens": 4000, "stream": true}))
        .send()
        .await
        .unwrap();
    running.chunk().await.unwrap().expect("a first token");
    let reset = client
        .post(format!("http://{addr}/reset_prefix_cache"))
        .send()
        .await
        .unwrap();
    assert_eq!(reset.status(), 409);
    let error: Value = reset.json().await.unwrap();
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("in use")
    );
    drop(running);

    // Once idle, it resets and says so on the event stream.
    let mut status = 0;
    for _ in 0..50 {
        let reset = client
            .post(format!("http://{addr}/reset_prefix_cache"))
            .send()
            .await
            .unwrap();
        status = reset.status().as_u16();
        if status == 200 {
            break;
        }
        // The aborted stream's blocks are freed before the engine's next step.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, 200);
    let mut seq = 0;
    let cleared = loop {
        let p = sub.next().await;
        seq += 1;
        assert_eq!(p.seq, seq);
        if p.batch.events == [KvEvent::AllBlocksCleared] {
            break p.seq;
        }
        // The running request's stores, nothing else.
        only_store(&p.batch);
    };
    sub.assert_quiet().await;
    assert_eq!(cached_tokens(&complete(&client, addr, &prompt).await), 0);
    let p = sub.next().await;
    assert_eq!(p.seq, cleared + 1);
    assert_eq!(only_store(&p.batch).parent_block_hash, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_pressure_publishes_block_removed_for_evicted_hashes() {
    // 16 blocks of 16 tokens.
    let pool = pool(1, |c| c.engine.num_gpu_blocks = 16).await;
    let endpoints = pool.kv_events(0).unwrap().clone();
    let addr = pool.addrs()[0];
    let client = reqwest::Client::new();
    let mut sub = Subscriber::new(&endpoints).await;

    // 128 tokens + 2: 8 full blocks cached, 9 used.
    let first = "m".repeat(512);
    complete(&client, addr, &first).await;
    let first_hashes = hashes(only_store(&sub.next().await.batch));
    assert_eq!(first_hashes.len(), 8);

    // 200 tokens + 2 need 13 blocks: the 7 never used, the first request's partial block,
    // then its cached blocks from the tail, 5 of them.
    let second = "n".repeat(800);
    complete(&client, addr, &second).await;
    let p = sub.next().await;
    let [KvEvent::BlockRemoved(removed), KvEvent::BlockStored(stored)] = p.batch.events.as_slice()
    else {
        panic!("{:?}", p.batch.events);
    };
    let removed: Vec<u64> = removed.block_hashes.iter().map(|h| h.0).collect();
    let expected: Vec<u64> = first_hashes[3..].iter().rev().copied().collect();
    assert_eq!(removed, expected);
    assert_eq!(
        hashes(stored),
        block_hashes(&pseudo_tokens(&second), 16)[..12]
    );
    // What is left of the first prompt in the cache: its first 3 blocks.
    let body = complete(&client, addr, &first).await;
    assert_eq!(cached_tokens(&body), 48);
}
