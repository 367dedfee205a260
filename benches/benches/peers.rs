//! Shepherd's prefix index side by side with the published peers, on the same two workloads.
//!
//! Peers: SGLang model gateway's `kv-index` 2.0.0 (`TokenTree`, `ChainIndex`) and NVIDIA
//! Dynamo's `dynamo-kv-router` 1.6.1 (`RadixTree`, and `ConcurrentRadixTreeCompressed` behind its
//! `ThreadPoolIndexer`). Every contender gets the prompt text and does its own work: Shepherd
//! hashes lazily; the peers cut the text into 4-byte pseudo tokens and (the hash-based ones)
//! hash every 64-token block, all inside the timed region.
//!
//! Each (workload, contender) runs in its own process so resident-memory growth is its own:
//! bytes per (block, endpoint) entry = RSS growth while warming / logical entries warmed.
//!
//! `cargo bench -p shepherd-benches --features peers --bench peers`

#[path = "common/workload.rs"]
mod workload;

use std::process::Command;
use std::time::Instant;

use dynamo_kv_router::indexer::SyncIndexer;
use dynamo_kv_router::indexer::ThreadPoolIndexer;
use dynamo_kv_router::protocols::{
    BlockHashOptions, ExternalSequenceBlockHash, KvCacheEvent, KvCacheEventData, KvCacheStoreData,
    KvCacheStoredBlockData, LocalBlockHash, RouterEvent, compute_block_hash_for_seq,
    compute_seq_hash_for_block,
};
use dynamo_kv_router::{ConcurrentRadixTreeCompressed, radix_tree::RadixTree};
use kv_index::{ChainBlockMap, ChainIndex, StoredBlock, TokenTree};
use shepherd_benches::workload::pseudo_tokens;
use shepherd_scheduler_core::endpoint::EndpointId;
use shepherd_scheduler_core::prefix::{
    BlockLayout, PrefixIndex, PrefixIndexConfig, PrefixMatch, chain_seed,
};
use shepherd_scheduler_core::request::Prompt;
use workload::{BLOCK_TOKENS, Prompts, W1, W2, Workload};

const CONTENDERS: [&str; 5] = [
    "shepherd",
    "kv-index TokenTree",
    "kv-index ChainIndex",
    "dynamo RadixTree",
    "dynamo ConcurrentRadixTree",
];

/// One prefix index under test.
trait Contender {
    /// Records that `endpoint` now holds `prompt`.
    fn insert(&mut self, endpoint: usize, prompt: &Prompt);
    /// The longest match, in blocks, over all endpoints.
    fn lookup(&mut self, prompt: &Prompt) -> usize;
    /// Heap bytes the index's own accounting reports (0 when it keeps none).
    fn heap_bytes(&self) -> usize {
        0
    }
}

fn text(prompt: &Prompt) -> &str {
    match prompt {
        Prompt::Text(s) => s,
        Prompt::Tokens(_) => "",
    }
}

struct Shepherd {
    index: PrefixIndex,
    seed: u64,
    found: PrefixMatch,
}

impl Shepherd {
    fn new() -> Self {
        Shepherd {
            index: PrefixIndex::new(PrefixIndexConfig {
                layout: BlockLayout::new(BLOCK_TOKENS, 4096),
                // Large enough that no contender evicts during the runs.
                default_capacity: 1 << 22,
            }),
            seed: chain_seed("model", None, ""),
            found: PrefixMatch::new(),
        }
    }
}

impl Contender for Shepherd {
    fn insert(&mut self, endpoint: usize, prompt: &Prompt) {
        let mut chain = self.index.chain(self.seed, prompt);
        self.index
            .insert_chain(EndpointId(endpoint as u32), &mut chain, prompt, None);
    }
    fn lookup(&mut self, prompt: &Prompt) -> usize {
        let mut chain = self.index.chain(self.seed, prompt);
        self.index.match_into(&mut chain, prompt, &mut self.found);
        self.found.longest()
    }
    fn heap_bytes(&self) -> usize {
        self.index.heap_bytes()
    }
}

struct TokenTreePeer {
    tree: TokenTree,
    tenants: Vec<String>,
}

impl Contender for TokenTreePeer {
    fn insert(&mut self, endpoint: usize, prompt: &Prompt) {
        let tokens = pseudo_tokens(text(prompt));
        self.tree.insert_tokens(&tokens, &self.tenants[endpoint]);
    }
    fn lookup(&mut self, prompt: &Prompt) -> usize {
        let tokens = pseudo_tokens(text(prompt));
        self.tree
            .match_prefix_with_counts(&tokens)
            .matched_token_count
            / BLOCK_TOKENS
    }
}

struct ChainIndexPeer {
    index: ChainIndex,
    workers: Vec<u32>,
    maps: Vec<ChainBlockMap>,
}

impl Contender for ChainIndexPeer {
    fn insert(&mut self, endpoint: usize, prompt: &Prompt) {
        let tokens = pseudo_tokens(text(prompt));
        let content = kv_index::compute_request_content_hashes(&tokens, BLOCK_TOKENS);
        let seq = kv_index::request_prefix_hashes(&content);
        let blocks: Vec<StoredBlock> = content
            .iter()
            .zip(&seq)
            .map(|(&content_hash, &seq_hash)| StoredBlock {
                seq_hash,
                content_hash,
            })
            .collect();
        let result = self.index.apply_stored(
            self.workers[endpoint],
            &blocks,
            None,
            &mut self.maps[endpoint],
        );
        if let Err(e) = result {
            eprintln!("ChainIndex store failed: {e}");
        }
    }
    fn lookup(&mut self, prompt: &Prompt) -> usize {
        let tokens = pseudo_tokens(text(prompt));
        let content = kv_index::compute_request_content_hashes(&tokens, BLOCK_TOKENS);
        let scores = self.index.find_matches(&content, false);
        scores.scores.values().copied().max().unwrap_or(0) as usize
    }
}

fn dynamo_store_event(event_id: u64, endpoint: usize, local: &[LocalBlockHash]) -> RouterEvent {
    let seq = compute_seq_hash_for_block(local);
    let blocks = local
        .iter()
        .zip(&seq)
        .map(|(&tokens_hash, &s)| KvCacheStoredBlockData {
            block_hash: ExternalSequenceBlockHash(s),
            tokens_hash,
            mm_extra_info: None,
        })
        .collect();
    RouterEvent::new(
        endpoint as u64,
        KvCacheEvent {
            event_id,
            data: KvCacheEventData::Stored(KvCacheStoreData {
                parent_hash: None,
                start_position: None,
                blocks,
            }),
            dp_rank: 0,
        },
    )
}

fn dynamo_hashes(prompt: &Prompt) -> Vec<LocalBlockHash> {
    let tokens = pseudo_tokens(text(prompt));
    compute_block_hash_for_seq(&tokens, BLOCK_TOKENS as u32, BlockHashOptions::default())
}

struct DynamoRadix {
    tree: RadixTree,
    events: u64,
}

impl Contender for DynamoRadix {
    fn insert(&mut self, endpoint: usize, prompt: &Prompt) {
        let local = dynamo_hashes(prompt);
        self.events += 1;
        if let Err(e) = self
            .tree
            .apply_event(dynamo_store_event(self.events, endpoint, &local))
        {
            eprintln!("RadixTree store failed: {e:?}");
        }
    }
    fn lookup(&mut self, prompt: &Prompt) -> usize {
        let local = dynamo_hashes(prompt);
        let scores = self.tree.find_matches(local, false);
        scores.scores.values().copied().max().unwrap_or(0) as usize
    }
}

struct DynamoConcurrent {
    pool: ThreadPoolIndexer<ConcurrentRadixTreeCompressed>,
    runtime: tokio::runtime::Runtime,
    events: u64,
}

impl Contender for DynamoConcurrent {
    fn insert(&mut self, endpoint: usize, prompt: &Prompt) {
        let local = dynamo_hashes(prompt);
        self.events += 1;
        let event = dynamo_store_event(self.events, endpoint, &local);
        if let Err(e) = self.runtime.block_on(self.pool.apply_event_and_wait(event)) {
            eprintln!("concurrent tree store failed: {e:?}");
        }
    }
    fn lookup(&mut self, prompt: &Prompt) -> usize {
        let local = dynamo_hashes(prompt);
        let scores = self.pool.backend().find_matches(&local, false);
        scores.scores.values().copied().max().unwrap_or(0) as usize
    }
}

fn contender(name: &str, workload: &Workload) -> Box<dyn Contender> {
    match name {
        "kv-index TokenTree" => Box::new(TokenTreePeer {
            tree: TokenTree::new(),
            tenants: (0..workload.endpoints).map(|e| format!("ep-{e}")).collect(),
        }),
        "kv-index ChainIndex" => {
            let index = ChainIndex::new();
            let workers = (0..workload.endpoints)
                .map(|e| index.intern_worker(&format!("ep-{e}")).unwrap_or(0))
                .collect();
            Box::new(ChainIndexPeer {
                index,
                workers,
                maps: (0..workload.endpoints)
                    .map(|_| ChainBlockMap::new())
                    .collect(),
            })
        }
        "dynamo RadixTree" => Box::new(DynamoRadix {
            tree: RadixTree::new(),
            events: 0,
        }),
        "dynamo ConcurrentRadixTree" => Box::new(DynamoConcurrent {
            pool: ThreadPoolIndexer::new(
                ConcurrentRadixTreeCompressed::new(),
                1,
                BLOCK_TOKENS as u32,
            ),
            runtime: match tokio::runtime::Builder::new_current_thread().build() {
                Ok(rt) => rt,
                Err(e) => panic!("tokio runtime: {e}"),
            },
            events: 0,
        }),
        _ => Box::new(Shepherd::new()),
    }
}

fn rss_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<usize>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

/// Logical (block, endpoint) entries after warming.
fn warm_entries(prompts: &Prompts) -> usize {
    let w = prompts.workload;
    let shared_blocks = w.shared_bytes / 4 / BLOCK_TOKENS;
    let total_blocks = (w.shared_bytes + w.suffix_bytes) / 4 / BLOCK_TOKENS;
    let mut pairs = std::collections::HashSet::new();
    for k in 0..w.warm_requests {
        pairs.insert((k % w.shared_prompts, prompts.warm_endpoint(k)));
    }
    pairs.len() * shared_blocks + w.warm_requests * (total_blocks - shared_blocks)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn timed(samples: &mut Vec<f64>, f: impl FnOnce()) {
    let start = Instant::now();
    f();
    samples.push(start.elapsed().as_secs_f64() * 1e6);
}

/// Runs one contender on one workload and prints its `RESULT` line.
fn run_one(name: &str, workload: Workload) {
    let prompts = Prompts::new(workload);
    let (queries, rounds, inserts) = if workload.name == "W1" {
        (256, 8, 2000)
    } else {
        (32, 8, 200)
    };
    let (new, replayed) = prompts.query_prompts(queries);
    let mut scratch = String::new();
    let mut index = contender(name, &workload);

    let before = rss_bytes();
    for k in 0..workload.warm_requests {
        prompts.request_into(&mut scratch, k, k % workload.shared_prompts);
        let prompt = Prompt::Text(std::mem::take(&mut scratch));
        index.insert(prompts.warm_endpoint(k), &prompt);
        if let Prompt::Text(s) = prompt {
            scratch = s;
        }
    }
    let grown = rss_bytes().saturating_sub(before);
    let bytes_per_entry = grown as f64 / warm_entries(&prompts) as f64;

    let (mut new_t, mut rep_t) = (Vec::new(), Vec::new());
    let (mut new_match, mut rep_match) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        for q in &new {
            timed(&mut new_t, || new_match.push(index.lookup(q)));
        }
        for q in &replayed {
            timed(&mut rep_t, || rep_match.push(index.lookup(q)));
        }
    }
    let mut ins_t = Vec::new();
    // Each insert's time and the heap its index grew by, to see where the tail comes from.
    let explain = std::env::var_os("SHEPHERD_EXPLAIN_INSERTS").is_some();
    let mut rng = workload::Rng::new(0x1A5E);
    for i in 0..inserts {
        prompts.request_into(
            &mut scratch,
            2_000_000_000 + i,
            rng.below(workload.shared_prompts),
        );
        let prompt = Prompt::Text(std::mem::take(&mut scratch));
        let endpoint = rng.below(workload.endpoints);
        let heap_before = if explain { index.heap_bytes() } else { 0 };
        timed(&mut ins_t, || index.insert(endpoint, &prompt));
        if explain {
            let grown = index.heap_bytes().saturating_sub(heap_before);
            eprintln!(
                "INSERT\t{i}\t{:.1}\t{grown}",
                ins_t.last().copied().unwrap_or(0.0)
            );
        }
        if let Prompt::Text(s) = prompt {
            scratch = s;
        }
    }
    let mut new_match: Vec<f64> = new_match.iter().map(|&m| m as f64).collect();
    let mut rep_match: Vec<f64> = rep_match.iter().map(|&m| m as f64).collect();
    for v in [
        &mut new_t,
        &mut rep_t,
        &mut ins_t,
        &mut new_match,
        &mut rep_match,
    ] {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    }
    println!(
        "RESULT\t{}\t{}\t{:.2}\t{:.2}\t{:.2}\t{:.2}\t{:.2}\t{:.2}\t{:.1}\t{}\t{}",
        workload.name,
        name,
        percentile(&new_t, 0.5),
        percentile(&new_t, 0.99),
        percentile(&rep_t, 0.5),
        percentile(&rep_t, 0.99),
        percentile(&ins_t, 0.5),
        percentile(&ins_t, 0.99),
        bytes_per_entry,
        percentile(&new_match, 0.5),
        percentile(&rep_match, 0.5),
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--contender") {
        let name = args.get(i + 1).map_or("shepherd", String::as_str);
        let workload = match args.iter().position(|a| a == "--workload") {
            Some(j) if args.get(j + 1).is_some_and(|w| w == "W2") => W2,
            _ => W1,
        };
        run_one(name, workload);
        return;
    }
    let only: Option<&String> = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1));
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => panic!("cannot find own executable: {e}"),
    };
    let mut rows = Vec::new();
    for workload in [W1, W2] {
        for name in CONTENDERS {
            if only.is_some_and(|o| !name.contains(o.as_str())) {
                continue;
            }
            eprintln!("running {} / {name} ...", workload.name);
            let output = Command::new(&exe)
                .args(["--contender", name, "--workload", workload.name])
                .output();
            match output {
                Ok(out) => {
                    let stdout = String::from_utf8_lossy(&out.stdout);
                    match stdout.lines().find(|l| l.starts_with("RESULT")) {
                        Some(line) => rows.push(line.to_string()),
                        None => rows.push(format!(
                            "RESULT\t{}\t{name}\tfailed: {}",
                            workload.name,
                            String::from_utf8_lossy(&out.stderr)
                                .lines()
                                .last()
                                .unwrap_or("")
                        )),
                    }
                }
                Err(e) => rows.push(format!("RESULT\t{}\t{name}\tfailed: {e}", workload.name)),
            }
        }
    }
    println!();
    println!(
        "Prefix index lookup / insert, µs (median / p99); memory from RSS growth while warming."
    );
    println!("new = unseen request whose shared prefix is indexed; replay = a warmed request.");
    println!(
        "{:<4} {:<28} {:>17} {:>17} {:>17} {:>9} {:>13}",
        "", "index", "lookup new", "lookup replay", "insert", "B/entry", "match new/rep"
    );
    for row in rows {
        let f: Vec<&str> = row.split('\t').collect();
        if f.len() < 12 {
            println!(
                "{:<4} {:<28} {}",
                f.get(1).unwrap_or(&""),
                f.get(2).unwrap_or(&""),
                f[3..].join(" ")
            );
            continue;
        }
        println!(
            "{:<4} {:<28} {:>8}/{:>8} {:>8}/{:>8} {:>8}/{:>8} {:>9} {:>6}/{:<6}",
            f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10], f[11]
        );
    }
}
