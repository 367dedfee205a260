//! Prefix-index benchmarks: chained block hashing alone, lookup and insert on the W1 and W2
//! workloads, memory per (block, endpoint) entry (counting allocator), and lookup+insert
//! throughput with one and two threads sharing one index.
//!
//! `cargo bench -p shepherd-benches --bench prefix_index`

#[path = "common/workload.rs"]
mod workload;

use std::alloc::System;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, Throughput};
use shepherd_scheduler_core::endpoint::EndpointId;
use shepherd_scheduler_core::prefix::{
    BlockLayout, PrefixIndex, PrefixIndexConfig, PrefixMatch, chain_seed,
};
use shepherd_scheduler_core::request::Prompt;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use workload::{BLOCK_TOKENS, Prompts, Rng, W1, W2, Workload};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn config() -> PrefixIndexConfig {
    PrefixIndexConfig {
        layout: BlockLayout::new(BLOCK_TOKENS, 2048),
        default_capacity: 31_250,
    }
}

fn seed() -> u64 {
    chain_seed("model", None, "")
}

/// Builds a warmed index; returns it with the net heap bytes its warming allocated.
fn warmed(prompts: &Prompts) -> (PrefixIndex, i64) {
    let w = prompts.workload;
    let mut scratch = String::new();
    let region = Region::new(GLOBAL);
    let index = PrefixIndex::new(config());
    for k in 0..w.warm_requests {
        prompts.request_into(&mut scratch, k, k % w.shared_prompts);
        let prompt = Prompt::Text(std::mem::take(&mut scratch));
        let mut chain = index.chain(seed(), &prompt);
        index.insert_chain(
            EndpointId(prompts.warm_endpoint(k) as u32),
            &mut chain,
            &prompt,
            None,
        );
        drop(chain);
        if let Prompt::Text(s) = prompt {
            scratch = s;
        }
    }
    let change = region.change();
    // Reallocations are already folded into the allocated / deallocated byte counts.
    let net = change.bytes_allocated as i64 - change.bytes_deallocated as i64;
    // The scratch buffer is the only allocation outside the index that survives the loop.
    let net = net - scratch.capacity() as i64;
    (index, net)
}

fn lookup(index: &PrefixIndex, prompt: &Prompt, found: &mut PrefixMatch) -> usize {
    let mut chain = index.chain(seed(), prompt);
    index.match_into(&mut chain, prompt, found);
    found.longest()
}

fn bench_hashing(c: &mut Criterion) {
    let mut group = c.benchmark_group("hash_chain");
    for (label, bytes) in [("1KB", 1024), ("16KB", 16 * 1024), ("400KB", 400 * 1024)] {
        let mut text = String::new();
        Rng::new(7).fill_text(&mut text, bytes);
        let prompt = Prompt::Text(text);
        let layout = config().layout;
        group.throughput(Throughput::Bytes(bytes as u64));
        group.bench_function(label, |b| {
            b.iter(|| {
                let mut chain =
                    shepherd_scheduler_core::prefix::BlockChain::new(&layout, seed(), &prompt);
                black_box(chain.complete(black_box(&prompt)).len())
            })
        });
    }
    group.finish();
}

fn bench_workload(c: &mut Criterion, workload: Workload, queries: usize) {
    let prompts = Prompts::new(workload);
    let (index, net) = warmed(&prompts);
    let entries = index.entries();
    println!(
        "{}: {} (block, endpoint) entries, {} distinct blocks, {:.1} MB net heap -> {:.1} bytes per entry \
         (index's own accounting: {:.1})",
        workload.name,
        entries,
        index.blocks(),
        net as f64 / 1e6,
        net as f64 / entries as f64,
        index.heap_bytes() as f64 / entries as f64,
    );
    let (new, replayed) = prompts.query_prompts(queries);
    let mut found = PrefixMatch::new();
    println!(
        "{}: sample matches (blocks): new {} of {}, replay {} of {}",
        workload.name,
        lookup(&index, &new[0], &mut found),
        found.total_blocks(),
        lookup(&index, &replayed[0], &mut found),
        found.total_blocks()
    );

    let mut group = c.benchmark_group(format!("index_{}", workload.name));
    let (mut i, mut j) = (0, 0);
    group.bench_function("lookup_new", |b| {
        b.iter(|| {
            i = (i + 1) % new.len();
            black_box(lookup(&index, &new[i], &mut found))
        })
    });
    group.bench_function("lookup_replay", |b| {
        b.iter(|| {
            j = (j + 1) % replayed.len();
            black_box(lookup(&index, &replayed[j], &mut found))
        })
    });
    let mut rng = Rng::new(99);
    let mut n = 0usize;
    group.bench_function("insert_new", |b| {
        b.iter_batched(
            || {
                n += 1;
                let mut s = String::new();
                prompts.request_into(
                    &mut s,
                    3_000_000_000 + n,
                    rng.below(workload.shared_prompts),
                );
                (Prompt::Text(s), rng.below(workload.endpoints) as u32)
            },
            |(prompt, endpoint)| {
                let mut chain = index.chain(seed(), &prompt);
                index.insert_chain(EndpointId(endpoint), &mut chain, &prompt, None);
                prompt
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

/// Pick-like work (lookup, then insert for a chosen endpoint) with 1 and 2 threads.
fn concurrent_throughput() {
    let prompts = Prompts::new(W1);
    let (index, _) = warmed(&prompts);
    let index = Arc::new(index);
    let requests: Arc<Vec<Prompt>> = Arc::new(
        prompts
            .new_requests(4096)
            .into_iter()
            .map(Prompt::Text)
            .collect(),
    );
    let per_thread = 40_000;
    let run = |threads: usize| -> f64 {
        let start = Instant::now();
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let index = Arc::clone(&index);
                let requests = Arc::clone(&requests);
                std::thread::spawn(move || {
                    let mut found = PrefixMatch::new();
                    for i in 0..per_thread {
                        let prompt = &requests[(i * 7 + t * 2048) % requests.len()];
                        let mut chain = index.chain(seed(), prompt);
                        index.match_into(&mut chain, prompt, &mut found);
                        let endpoint = found.matches().first().map_or(i as u32 % 64, |m| m.0.0);
                        index.insert_chain(EndpointId(endpoint), &mut chain, prompt, None);
                    }
                })
            })
            .collect();
        for h in handles {
            let _ = h.join();
        }
        (threads * per_thread) as f64 / start.elapsed().as_secs_f64()
    };
    let one = run(1);
    let two = run(2);
    println!(
        "W1 lookup+insert throughput: 1 thread {:.0}/s, 2 threads {:.0}/s, ratio {:.2}x",
        one,
        two,
        two / one
    );
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    bench_hashing(&mut c);
    bench_workload(&mut c, W1, 512);
    bench_workload(&mut c, W2, 48);
    concurrent_throughput();
    c.final_summary();
}
