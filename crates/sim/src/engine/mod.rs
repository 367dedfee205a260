//! One simulated vLLM-like model server (the V1 engine's scheduler and KV cache).
//!
//! Each step serves the running requests first (a decode computes one token; an unfinished
//! prefill computes its next chunk within the step's token budget), then, unless someone had
//! to be preempted, admits waiting requests first come first served while under
//! `max_num_seqs`, the step token budget `max_num_batched_tokens`, and the free KV blocks.
//! Admission reuses cached blocks of the request's prefix (at least one prompt token is always
//! recomputed). When a running request needs a block and none is free, the most recently
//! admitted request is preempted: its blocks are freed and it goes back to the front of the
//! queue, to be recomputed later.
//!
//! The engine never reads a clock: the driver calls [`Engine::begin_step`] at a time of its
//! choosing, waits the returned duration (simulated or real), then calls
//! [`Engine::finish_step`], and drains the [`EngineEvent`]s.
//!
//! ```
//! use shepherd_sim::engine::{Engine, EngineConfig, EngineEvent, EngineRequest};
//!
//! let mut engine = Engine::new(EngineConfig::h100_llama8b());
//! let request = EngineRequest {
//!     id: 1,
//!     prompt_len: 100,
//!     output_len: 2,
//!     block_hashes: vec![11, 12, 13, 14, 15, 16],
//!     tokens: None,
//! };
//! engine.add_request(request, 0).unwrap();
//! let mut now = 0;
//! while let Some(d) = engine.begin_step(now) {
//!     now += d;
//!     engine.finish_step(now);
//! }
//! let events = engine.drain_events();
//! assert!(matches!(events.last(), Some(EngineEvent::Finished { id: 1, .. })));
//! ```
//!
//! # KV-cache events
//!
//! With [`Engine::enable_kv_events`] the engine also records the KV-cache events vLLM's block
//! pool publishes (`vllm/v1/core/block_pool.py`), for [`Engine::drain_kv_events`]:
//!
//! - [`KvEvent::BlockStored`] when blocks of a request become cached under their hash (only
//!   hashes not cached already). As in vLLM V1 (`KVCacheManager::allocate_slots`), blocks are
//!   cached when the step that fills them is scheduled, so a request admitted later in the
//!   same step already reuses them: one event per request and step with its consecutive newly
//!   cached blocks (should a block whose hash another block already caches interrupt them,
//!   one event per run), `parent_block_hash` the hash of the block before the first one in the
//!   request's list (`None` for its first block), `token_ids` exactly those blocks' tokens,
//!   `medium` `"GPU"`. A request without [`EngineRequest::tokens`] (or with fewer tokens than
//!   its hashes cover) produces no `BlockStored`: its blocks are cached all the same, so
//!   their later `BlockRemoved` names hashes a subscriber never saw stored.
//! - [`KvEvent::BlockRemoved`] when a cached block is reused for other content and its hash
//!   leaves the cache; the evictions made while allocating a request's blocks come in one
//!   event, in eviction order, before that request's stores.
//! - [`KvEvent::AllBlocksCleared`] when [`Engine::reset_prefix_cache`] succeeds.
//!
//! Replaying the events in order into a set gives exactly the hashes the engine holds.
//! Recording is off by default and costs nothing then; when on, a step that changes nothing
//! in the cache allocates nothing.
//!
//! ```
//! use std::sync::Arc;
//!
//! use shepherd_scheduler_core::kv_events::KvEvent;
//! use shepherd_sim::engine::{Engine, EngineConfig, EngineRequest};
//! use shepherd_sim::workload::block_hashes;
//!
//! let mut engine = Engine::new(EngineConfig::h100_llama8b());
//! engine.enable_kv_events();
//! // 40 prompt tokens and 10 output tokens: three full 16-token blocks.
//! let tokens: Vec<u32> = (0..50).collect();
//! let request = EngineRequest {
//!     id: 1,
//!     prompt_len: 40,
//!     output_len: 10,
//!     block_hashes: block_hashes(&tokens, 16),
//!     tokens: Some(Arc::from(tokens)),
//! };
//! let hashes = request.block_hashes.clone();
//! engine.add_request(request, 0).unwrap();
//! let mut now = 0;
//! while let Some(d) = engine.begin_step(now) {
//!     now += d;
//!     engine.finish_step(now);
//! }
//! let mut events = Vec::new();
//! engine.drain_kv_events(&mut events);
//! // The prefill caches the two blocks inside the prompt; the third fills up while decoding.
//! let KvEvent::BlockStored(first) = &events[0] else { panic!() };
//! assert_eq!(first.block_hashes.len(), 2);
//! assert_eq!(first.parent_block_hash, None);
//! assert_eq!(first.token_ids, (0..32).collect::<Vec<u32>>());
//! let KvEvent::BlockStored(last) = &events[1] else { panic!() };
//! assert_eq!(last.parent_block_hash.map(|h| h.0), Some(hashes[1]));
//! assert_eq!(engine.cached_prefix_blocks(&hashes), 3);
//!
//! // Nothing is in use once the request finished: the cache can be reset.
//! assert!(engine.reset_prefix_cache());
//! engine.drain_kv_events(&mut events);
//! assert_eq!(events.last(), Some(&KvEvent::AllBlocksCleared));
//! assert_eq!(engine.cached_prefix_blocks(&hashes), 0);
//! ```

mod config;
mod cost;
mod kv;
mod kv_events;
mod reports;
mod request;
mod transfer;

use std::collections::VecDeque;

use ahash::AHashMap;
use shepherd_scheduler_core::kv_events::KvEvent;

pub use config::EngineConfig;
pub use cost::{BatchShape, CostModel};
pub use kv::BlockPool;
pub use reports::{EngineEvent, EngineSnapshot, EngineStats};
pub use request::{EngineError, EngineRequest};
pub use transfer::{KvTransfer, KvTransferSpec, ModelShape};

use kv_events::KvEventLog;

#[derive(Debug)]
struct Seq {
    req: EngineRequest,
    num_computed: u32,
    num_generated: u32,
    blocks: Vec<u32>,
    registered: usize,
    admitted_once: bool,
    produced_first: bool,
    cached_tokens: u32,
    preemptions: u32,
    /// Leading prompt tokens whose KV arrived from another server (a disaggregated prefill):
    /// the first admission takes them as computed; a preemption loses them.
    transferred: u32,
}

impl Seq {
    fn num_tokens(&self) -> u32 {
        self.req.prompt_len + self.num_generated
    }
}

/// One simulated model server.
#[derive(Debug)]
pub struct Engine {
    config: EngineConfig,
    pool: BlockPool,
    seqs: AHashMap<u64, Seq>,
    running: Vec<u64>,
    waiting: VecDeque<u64>,
    batch: Vec<(u64, u32)>,
    in_step: bool,
    events: Vec<EngineEvent>,
    stats: EngineStats,
    kv_events: KvEventLog,
}

impl Engine {
    /// An idle engine.
    pub fn new(config: EngineConfig) -> Self {
        let config = EngineConfig {
            block_size: config.block_size.max(1),
            max_num_seqs: config.max_num_seqs.max(1),
            max_num_batched_tokens: config.max_num_batched_tokens.max(1),
            ..config
        };
        Engine {
            pool: BlockPool::new(config.num_gpu_blocks),
            config,
            seqs: AHashMap::new(),
            running: Vec::new(),
            waiting: VecDeque::new(),
            batch: Vec::new(),
            in_step: false,
            events: Vec::new(),
            stats: EngineStats::default(),
            kv_events: KvEventLog::default(),
        }
    }

    /// Starts recording KV-cache events (see [the module docs](self#kv-cache-events)). The
    /// blocks cached before the call are never announced.
    pub fn enable_kv_events(&mut self) {
        self.kv_events.enable(&mut self.pool);
    }

    /// Whether [`Engine::enable_kv_events`] was called.
    pub fn kv_events_enabled(&self) -> bool {
        self.kv_events.enabled()
    }

    /// Appends the KV-cache events recorded since the last call to `out`, in order (nothing
    /// while recording is off).
    pub fn drain_kv_events(&mut self, out: &mut Vec<KvEvent>) {
        self.kv_events.drain(&mut self.pool, out);
    }

    /// Drops every cached block hash, as vLLM's `reset_prefix_cache`: only when no block is in
    /// use (no request is running); records [`KvEvent::AllBlocksCleared`] and returns `true`
    /// when it reset, `false` otherwise.
    pub fn reset_prefix_cache(&mut self) -> bool {
        self.kv_events.flush_evictions(&mut self.pool);
        if !self.pool.reset_prefix_cache() {
            return false;
        }
        self.kv_events.cleared(&mut self.pool);
        true
    }

    /// How many leading hashes of `block_hashes` are in the prefix cache right now (what an
    /// oracle router would read from the engine).
    pub fn cached_prefix_blocks(&self, block_hashes: &[u64]) -> usize {
        block_hashes
            .iter()
            .take_while(|&&h| self.pool.lookup(h).is_some())
            .count()
    }

    /// Prompt tokens of the waiting requests that their next admission would compute: each
    /// one's tokens beyond what it already computed or finds in the prefix cache now (what
    /// SGLang's load report calls `num_waiting_uncached_tokens`).
    pub fn waiting_uncached_tokens(&self) -> u64 {
        let bs = self.config.block_size.max(1);
        self.waiting
            .iter()
            .filter_map(|id| self.seqs.get(id))
            .map(|seq| {
                let prompt_blocks = (seq.req.prompt_len / bs) as usize;
                let hashes = &seq.req.block_hashes[..prompt_blocks.min(seq.req.block_hashes.len())];
                let cached = self.cached_prefix_blocks(hashes) as u32 * bs;
                let done = seq.num_computed.max(cached).min(seq.num_tokens());
                u64::from(seq.num_tokens() - done)
            })
            .sum()
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The KV block pool (for invariant checks).
    pub fn block_pool(&self) -> &BlockPool {
        &self.pool
    }

    /// Lifetime counters.
    pub fn stats(&self) -> EngineStats {
        self.stats
    }

    /// Whether a step has begun and not finished.
    pub fn in_step(&self) -> bool {
        self.in_step
    }

    /// Whether any request is waiting or running.
    pub fn has_work(&self) -> bool {
        !self.running.is_empty() || !self.waiting.is_empty()
    }

    /// Queues `req` (time is only used by callers; the engine is clockless).
    pub fn add_request(&mut self, req: EngineRequest, now: u64) -> Result<(), EngineError> {
        self.add(req, now, 0)
    }

    /// Queues `req` whose prompt was prefilled elsewhere and whose KV cache arrived with it
    /// (the decode side of prefill/decode disaggregation): at its first admission every prompt
    /// token but the last counts as computed, so only that token is run before the first
    /// output token, with the KV of the whole prompt held in this engine's blocks (and cached
    /// under the prompt's block hashes). Blocks are still needed for the whole prompt; a
    /// preempted request recomputes its prompt as any other.
    pub fn add_transferred(&mut self, req: EngineRequest, now: u64) -> Result<(), EngineError> {
        let transferred = req.prompt_len.saturating_sub(1);
        self.add(req, now, transferred)
    }

    fn add(&mut self, req: EngineRequest, _now: u64, transferred: u32) -> Result<(), EngineError> {
        if req.prompt_len == 0 || req.output_len == 0 {
            return Err(EngineError::Empty(req.id));
        }
        let needed = (u64::from(req.prompt_len) + u64::from(req.output_len))
            .div_ceil(u64::from(self.config.block_size));
        if needed > u64::from(self.config.num_gpu_blocks) {
            return Err(EngineError::TooLong {
                id: req.id,
                needed,
                capacity: self.config.num_gpu_blocks,
            });
        }
        if self.seqs.contains_key(&req.id) {
            return Err(EngineError::DuplicateId(req.id));
        }
        let id = req.id;
        self.seqs.insert(
            id,
            Seq {
                req,
                num_computed: 0,
                num_generated: 0,
                blocks: Vec::new(),
                registered: 0,
                admitted_once: false,
                produced_first: false,
                cached_tokens: 0,
                preemptions: 0,
                transferred,
            },
        );
        self.waiting.push_back(id);
        Ok(())
    }

    /// Removes request `id` wherever it is (a client gave up); returns whether it was here.
    pub fn abort(&mut self, id: u64) -> bool {
        let Some(seq) = self.seqs.remove(&id) else {
            return false;
        };
        self.running.retain(|&r| r != id);
        self.waiting.retain(|&r| r != id);
        let tail_first: Vec<u32> = seq.blocks.iter().rev().copied().collect();
        self.pool.release(&tail_first);
        true
    }

    /// Output tokens request `id` has produced so far, while it is in the engine (a
    /// preempted request keeps the tokens it already produced).
    pub fn generated_tokens(&self, id: u64) -> Option<u32> {
        self.seqs.get(&id).map(|seq| seq.num_generated)
    }

    /// What the server's metrics endpoint reports now.
    pub fn snapshot(&self) -> EngineSnapshot {
        let total = self.pool.total_blocks().max(1) as f64;
        EngineSnapshot {
            waiting: self.waiting.len() as u32,
            running: self.running.len() as u32,
            kv_utilization: self.pool.used_blocks() as f64 / total,
            block_size: self.config.block_size,
            num_gpu_blocks: self.config.num_gpu_blocks,
        }
    }

    /// Takes the events produced since the last call.
    pub fn drain_events(&mut self) -> Vec<EngineEvent> {
        std::mem::take(&mut self.events)
    }

    /// Forms the next batch and returns how long the step takes in nanoseconds, or `None`
    /// when there is nothing to run (or a step is already in progress).
    pub fn begin_step(&mut self, _now: u64) -> Option<u64> {
        if self.in_step {
            return None;
        }
        let bs = self.config.block_size;
        let mut budget = self.config.max_num_batched_tokens;
        let mut shape = BatchShape::default();
        self.batch.clear();
        let mut preempted = false;

        let mut i = 0;
        while i < self.running.len() && budget > 0 {
            let id = self.running[i];
            let Some(seq) = self.seqs.get(&id) else {
                self.running.remove(i);
                continue;
            };
            let n = (seq.num_tokens() - seq.num_computed).min(budget);
            let target = (seq.num_computed + n).div_ceil(bs) as usize;
            let mut scheduled = true;
            loop {
                let have = self.seqs.get(&id).map_or(0, |s| s.blocks.len());
                let need = target.saturating_sub(have);
                if need <= self.pool.free_blocks() {
                    break;
                }
                let Some(victim) = self.running.pop() else {
                    scheduled = false;
                    break;
                };
                self.preempt(victim);
                preempted = true;
                if victim == id {
                    scheduled = false;
                    break;
                }
            }
            if !scheduled {
                break;
            }
            self.grow(id, target);
            self.cache_scheduled(id, n);
            if let Some(seq) = self.seqs.get(&id) {
                add_to_shape(&mut shape, seq, n);
            }
            self.batch.push((id, n));
            budget -= n;
            i += 1;
        }

        while !preempted
            && budget > 0
            && self.running.len() < self.config.max_num_seqs as usize
            && let Some(&id) = self.waiting.front()
        {
            let Some(seq) = self.seqs.get(&id) else {
                self.waiting.pop_front();
                continue;
            };
            let max_hit_blocks = ((seq.num_tokens() - 1) / bs) as usize;
            let mut hits: Vec<u32> = Vec::new();
            for &h in seq.req.block_hashes.iter().take(max_hit_blocks) {
                match self.pool.lookup(h) {
                    Some(b) => hits.push(b),
                    None => break,
                }
            }
            let hit_tokens = hits.len() as u32 * bs;
            // Tokens whose KV is here already: cached, or arrived from a prefill server.
            let present = hit_tokens.max(seq.transferred);
            let n = (seq.num_tokens() - present).min(budget);
            let target = (present + n).div_ceil(bs) as usize;
            let need = target - hits.len();
            let pinned_free = hits.iter().filter(|&&b| self.pool.is_free(b)).count();
            if need > self.pool.free_blocks() - pinned_free {
                break;
            }
            for &b in &hits {
                self.pool.touch(b);
            }
            self.waiting.pop_front();
            let Some(seq) = self.seqs.get_mut(&id) else {
                continue;
            };
            seq.registered = hits.len();
            seq.blocks = hits;
            seq.num_computed = present;
            if !seq.admitted_once {
                seq.admitted_once = true;
                seq.cached_tokens = hit_tokens;
                self.stats.prompt_tokens += u64::from(seq.req.prompt_len);
                self.stats.cached_tokens += u64::from(hit_tokens);
                self.stats.transferred_tokens += u64::from(present - hit_tokens);
                self.events.push(EngineEvent::Scheduled { id });
            }
            seq.transferred = 0;
            self.grow(id, target);
            self.cache_scheduled(id, n);
            if let Some(seq) = self.seqs.get(&id) {
                add_to_shape(&mut shape, seq, n);
            }
            self.running.push(id);
            self.batch.push((id, n));
            budget -= n;
        }

        if self.batch.is_empty() {
            return None;
        }
        shape.requests = self.batch.len() as u32;
        self.in_step = true;
        self.stats.steps += 1;
        Some(self.config.cost.step_nanos(&shape))
    }

    /// Applies the step begun by [`Engine::begin_step`]: computed tokens, cached blocks,
    /// sampled tokens, finished requests.
    pub fn finish_step(&mut self, _now: u64) {
        if !self.in_step {
            return;
        }
        self.in_step = false;
        let mut finished = Vec::new();
        for &(id, n) in &self.batch {
            let Some(seq) = self.seqs.get_mut(&id) else {
                continue;
            };
            seq.num_computed += n;
            if seq.num_computed == seq.num_tokens() {
                seq.num_generated += 1;
                self.stats.generated_tokens += 1;
                if !seq.produced_first {
                    seq.produced_first = true;
                    self.events.push(EngineEvent::FirstToken { id });
                }
                if seq.num_generated >= seq.req.output_len {
                    finished.push(id);
                }
            }
        }
        if finished.is_empty() {
            return;
        }
        for id in &finished {
            if let Some(seq) = self.seqs.remove(id) {
                let tail_first: Vec<u32> = seq.blocks.iter().rev().copied().collect();
                self.pool.release(&tail_first);
                self.events.push(EngineEvent::Finished {
                    id: *id,
                    cached_tokens: seq.cached_tokens,
                    preemptions: seq.preemptions,
                });
            }
        }
        self.running.retain(|r| !finished.contains(r));
    }

    /// Caches the full blocks request `id` will hold once this step computes its next `n`
    /// tokens, as vLLM V1's `allocate_slots` does when it schedules them: a request admitted
    /// later in the same step (or in any later one) reuses them at once.
    fn cache_scheduled(&mut self, id: u64, n: u32) {
        let bs = self.config.block_size;
        let Some(seq) = self.seqs.get_mut(&id) else {
            return;
        };
        let full = (((seq.num_computed + n) / bs) as usize)
            .min(seq.req.block_hashes.len())
            .min(seq.blocks.len());
        if full <= seq.registered {
            return;
        }
        let range = seq.registered..full;
        self.kv_events
            .register(&mut self.pool, &seq.req, &seq.blocks, range, bs);
        seq.registered = full;
    }

    fn grow(&mut self, id: u64, target: usize) {
        let Some(seq) = self.seqs.get_mut(&id) else {
            return;
        };
        while seq.blocks.len() < target {
            match self.pool.allocate() {
                Some(b) => seq.blocks.push(b),
                None => break,
            }
        }
    }

    fn preempt(&mut self, id: u64) {
        let Some(seq) = self.seqs.get_mut(&id) else {
            return;
        };
        let tail_first: Vec<u32> = seq.blocks.iter().rev().copied().collect();
        seq.blocks.clear();
        seq.registered = 0;
        seq.num_computed = 0;
        seq.preemptions += 1;
        self.pool.release(&tail_first);
        self.stats.preemptions += 1;
        self.waiting.push_front(id);
    }
}

fn add_to_shape(shape: &mut BatchShape, seq: &Seq, n: u32) {
    let decode = n == 1 && seq.num_generated > 0 && seq.num_computed + 1 == seq.num_tokens();
    if decode {
        shape.decode_tokens += 1;
        shape.decode_context += u64::from(seq.num_computed);
    } else {
        shape.prefill_tokens += u64::from(n);
        shape.prefill_pairs += f64::from(n) * (f64::from(seq.num_computed) + f64::from(n) / 2.0);
    }
}

#[cfg(test)]
mod tests;
