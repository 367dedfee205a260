//! KV-cache event ingestion: how many engine blocks per second one core applies to a precise
//! index (issue 13 target: at least 2 million), from decoded batches and from wire bytes.
//!
//! Each batch is what a busy vLLM step publishes: one `BlockStored` of 16 new blocks
//! (mostly continuing a sequence stored by the batch before, so its parent must be found) and
//! one `BlockRemoved` of 16 old blocks, on endpoints whose caches are full (27,008 blocks, an
//! H100 with Llama-3-8B), 8 endpoints interleaved. A pass stores a second set of blocks while
//! removing the first, then the first again while removing the second, so every store is new,
//! every removal is of a block held, and passes repeat. Throughput counts stored and removed
//! blocks.
//!
//! ```text
//! cargo bench -p shepherd-benches --bench kv_events
//! ```

use std::hint::black_box;

use criterion::{Criterion, Throughput};
use shepherd_scheduler_core::endpoint::EndpointId;
use shepherd_scheduler_core::kv_events::wire::{
    DecodeLimits, Encoding, decode_batch, encode_batch,
};
use shepherd_scheduler_core::kv_events::{
    BlockRemoved, BlockStored, EngineBlockHash, KvEvent, KvEventBatch, PreciseIndex,
    PreciseIndexConfig,
};

const BLOCK: usize = 16;
const PER_EVENT: usize = 16;
const ENDPOINTS: u32 = 8;
const CAPACITY: usize = 27_008;

/// One sequence set: `CAPACITY` blocks as events of `PER_EVENT` blocks, each event continuing
/// the one before (sequences of 4 events), with their tokens.
struct Set {
    events: Vec<(Vec<u64>, Option<u64>, Vec<u32>)>,
}

fn set(endpoint: u32, which: u64) -> Set {
    let mut token = endpoint.wrapping_mul(1_000_003) ^ (which as u32);
    let first = (u64::from(endpoint) << 40) | (which << 32);
    let count = CAPACITY / PER_EVENT;
    let mut events = Vec::with_capacity(count);
    for k in 0..count {
        let hashes: Vec<u64> = (0..PER_EVENT as u64)
            .map(|i| first + (k * PER_EVENT) as u64 + i)
            .collect();
        let parent = (k % 4 != 0).then(|| first + (k * PER_EVENT) as u64 - 1);
        let tokens: Vec<u32> = (0..PER_EVENT * BLOCK)
            .map(|_| {
                token = token.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                token % 128_000
            })
            .collect();
        events.push((hashes, parent, tokens));
    }
    Set { events }
}

fn stored(event: &(Vec<u64>, Option<u64>, Vec<u32>)) -> KvEvent {
    KvEvent::BlockStored(BlockStored {
        block_hashes: event.0.iter().map(|&h| EngineBlockHash(h)).collect(),
        parent_block_hash: event.1.map(EngineBlockHash),
        token_ids: event.2.clone(),
        block_size: BLOCK as u32,
        medium: Some("GPU".into()),
        ..BlockStored::default()
    })
}

fn removed(event: &(Vec<u64>, Option<u64>, Vec<u32>)) -> KvEvent {
    KvEvent::BlockRemoved(BlockRemoved {
        block_hashes: event.0.iter().map(|&h| EngineBlockHash(h)).collect(),
        medium: Some("GPU".into()),
        group_idx: None,
    })
}

/// One endpoint's warm-up (set A stored) and a closed pass: set B stored while A is removed,
/// then A stored again while B is removed — every store is new, every removal known, and the
/// pass ends where it started, so it can be repeated.
fn stream(endpoint: u32) -> (Vec<KvEventBatch>, Vec<KvEventBatch>) {
    let (a, b) = (set(endpoint, 1), set(endpoint, 2));
    let batch = |events| KvEventBatch {
        ts: 0.0,
        events,
        data_parallel_rank: None,
    };
    let warmup = a.events.iter().map(|e| batch(vec![stored(e)])).collect();
    let mut pass = Vec::new();
    for (new, old) in [(&b, &a), (&a, &b)] {
        for (n, o) in new.events.iter().zip(&old.events) {
            pass.push(batch(vec![stored(n), removed(o)]));
        }
    }
    (warmup, pass)
}

fn blocks_in(batch: &KvEventBatch) -> u64 {
    batch
        .events
        .iter()
        .map(|e| match e {
            KvEvent::BlockStored(s) => s.block_hashes.len() as u64,
            KvEvent::BlockRemoved(r) => r.block_hashes.len() as u64,
            _ => 0,
        })
        .sum()
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    // Warm state: every endpoint's cache full; then closed passes of store + remove.
    let streams: Vec<(Vec<KvEventBatch>, Vec<KvEventBatch>)> = (0..ENDPOINTS).map(stream).collect();
    let index = PreciseIndex::new(PreciseIndexConfig::default());
    for (e, (warmup, _)) in streams.iter().enumerate() {
        index.set_capacity(EndpointId(e as u32), CAPACITY);
        for batch in warmup {
            index.apply(EndpointId(e as u32), batch);
        }
    }
    // Endpoints interleaved, as the subscriptions' tasks would be.
    let pass_len = streams[0].1.len();
    let steady_batches: Vec<(EndpointId, &KvEventBatch)> = (0..pass_len)
        .flat_map(|i| {
            streams
                .iter()
                .enumerate()
                .map(move |(e, (_, pass))| (EndpointId(e as u32), &pass[i]))
        })
        .collect();
    let blocks: u64 = steady_batches.iter().map(|(_, b)| blocks_in(b)).sum();
    let payloads: Vec<(EndpointId, Vec<u8>)> = steady_batches
        .iter()
        .map(|(e, b)| {
            let mut bytes = Vec::new();
            encode_batch(b, Encoding::ArrayLike, &mut bytes);
            (*e, bytes)
        })
        .collect();

    let mut group = criterion.benchmark_group("kv_events");
    group.throughput(Throughput::Elements(blocks));
    group.sample_size(10);
    group.bench_function("apply", |b| {
        b.iter(|| {
            for (endpoint, batch) in &steady_batches {
                black_box(index.apply(*endpoint, batch));
            }
        })
    });
    group.bench_function("decode+apply", |b| {
        let limits = DecodeLimits::default();
        b.iter(|| {
            for (endpoint, bytes) in &payloads {
                if let Ok(batch) = decode_batch(bytes, &limits) {
                    black_box(index.apply(*endpoint, &batch));
                }
            }
        })
    });
    group.bench_function("decode", |b| {
        let limits = DecodeLimits::default();
        b.iter(|| {
            for (_, bytes) in &payloads {
                black_box(decode_batch(bytes, &limits).ok());
            }
        })
    });
    group.finish();
    criterion.final_summary();
    let stats = index.stats();
    println!(
        "{} batches, {} blocks per pass; index holds {} entries; over all passes: {} stored, \
         {} removed, {} orphans, {} unknown removals",
        steady_batches.len(),
        blocks,
        index.index().entries(),
        stats.stored_blocks,
        stats.removed_blocks,
        stats.orphan_blocks,
        stats.unknown_removed_blocks
    );
}
