//! The engines' KV-cache events, delivered to the policy's precise prefix indexes.
//!
//! When a policy has a `precise-prefix-cache-producer` (or `precise-prefix-cache-scorer`),
//! the engines record vLLM's events (`BlockStored` with the blocks' tokens, `BlockRemoved`),
//! and after every engine step its events become one batch, as vLLM publishes one per step.
//! The batch reaches every replica's precise indexes [`KvDelivery::delay_ns`] later (the
//! transport: ZeroMQ, decoding), through the same [`PreciseIndex::apply`] the runtime calls.
//! With a delay of 0 (the policy's `simulation: {kvEventDelayMs: 0}`, the `@oracle` rows) the
//! index is the engines' caches at every pick: an upper bound on what events can tell.
//!
//! [`PreciseIndex::apply`]: shepherd_scheduler_core::kv_events::PreciseIndex::apply

use ahash::AHashMap;
use shepherd_scheduler_core::kv_events::{KvEvent, KvEventBatch};

use super::events::Event;
use super::{NS, Sim};

/// Batches on their way to the router.
#[derive(Debug, Default)]
pub(super) struct KvDelivery {
    /// Whether the engines publish events (the policy has a precise index).
    pub(super) on: bool,
    /// Transport delay, ns.
    pub(super) delay_ns: u64,
    pending: AHashMap<u64, (u32, KvEventBatch)>,
    next: u64,
    scratch: Vec<KvEvent>,
}

impl KvDelivery {
    /// Delivery for a policy (`on` when it has a precise index) after `delay_ns`.
    pub(super) fn new(on: bool, delay_ns: u64) -> Self {
        KvDelivery {
            on,
            delay_ns,
            ..KvDelivery::default()
        }
    }
}

impl Sim<'_> {
    /// Takes server `s`'s events of the step just run and sends them on their way.
    pub(super) fn publish_kv_events(&mut self, s: u32, now: u64) {
        if !self.kv.on {
            return;
        }
        let mut events = std::mem::take(&mut self.kv.scratch);
        self.engines[s as usize].drain_kv_events(&mut events);
        if events.is_empty() {
            self.kv.scratch = events;
            return;
        }
        let batch = KvEventBatch {
            ts: now as f64 / NS,
            events,
            data_parallel_rank: None,
        };
        if self.kv.delay_ns == 0 {
            self.apply_kv_batch(s, &batch);
            self.kv.scratch = batch.events;
            self.kv.scratch.clear();
        } else {
            let id = self.kv.next;
            self.kv.next += 1;
            self.kv.pending.insert(id, (s, batch));
            self.queue.push(now + self.kv.delay_ns, Event::KvBatch(id));
        }
    }

    /// Batch `id` reaches the router.
    pub(super) fn on_kv_batch(&mut self, id: u64) {
        if let Some((s, batch)) = self.kv.pending.remove(&id) {
            self.apply_kv_batch(s, &batch);
        }
    }

    fn apply_kv_batch(&self, s: u32, batch: &KvEventBatch) {
        for replica in &self.replicas {
            let endpoint = replica.endpoints[s as usize].id();
            for feed in &replica.precise {
                feed.index.apply(endpoint, batch);
            }
        }
    }
}
