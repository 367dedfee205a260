//! The router's book of active requests per worker, as Dynamo's `ActiveSequences`
//! (`lib/kv-router/src/sequences/`, `dynamo-kv-router` 1.6.1) keeps it with its launch
//! defaults (`router_track_active_blocks` on, `router_assume_kv_reuse` on,
//! `router_track_prefill_tokens` on, `router_track_output_blocks` off):
//!
//! - **active blocks**: the full prompt blocks of a worker's active requests, each distinct
//!   block counted once however many requests share it (a reference count per block hash);
//! - **pending prefill**: per request, its prompt tokens minus those the worker cached when it
//!   was routed, released when its first token comes back (or when it ends);
//! - **active requests**: routed there and not finished.
//!
//! Output tokens add no blocks (upstream adds them only with `router_track_output_blocks`).

use ahash::AHashMap;
use shepherd_scheduler_core::endpoint::EndpointId;

/// One worker's share of the book.
#[derive(Debug, Default)]
struct Worker {
    /// Active prompt block hash → active requests holding it.
    blocks: AHashMap<u64, u32>,
    prefill_tokens: u64,
    requests: u64,
}

#[derive(Debug)]
struct Active {
    worker: EndpointId,
    blocks: Vec<u64>,
    /// Pending prefill tokens not yet released (0 once the first token came back).
    pending_prefill: u64,
}

/// A worker's load as the cost formula reads it, for one incoming request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Projection {
    /// Pending prefill tokens.
    pub(crate) active_prefill_tokens: u64,
    /// Distinct active blocks plus the request's full prompt blocks not among them.
    pub(crate) potential_decode_blocks: u64,
    /// Active requests.
    pub(crate) active_requests: u64,
}

/// Active requests per worker. See the [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct ActiveSequences {
    workers: AHashMap<EndpointId, Worker>,
    requests: AHashMap<String, Active>,
}

impl ActiveSequences {
    /// `worker`'s load if the request with full prompt block hashes `blocks` joined it.
    pub(crate) fn project(&self, worker: EndpointId, blocks: &[u64]) -> Projection {
        let Some(w) = self.workers.get(&worker) else {
            return Projection {
                potential_decode_blocks: blocks.len() as u64,
                ..Projection::default()
            };
        };
        // Hashes are chained: the blocks already active are a leading run of the prompt.
        let shared = blocks
            .iter()
            .take_while(|b| w.blocks.contains_key(b))
            .count();
        Projection {
            active_prefill_tokens: w.prefill_tokens,
            potential_decode_blocks: (w.blocks.len() + blocks.len() - shared) as u64,
            active_requests: w.requests,
        }
    }

    /// Books request `id` on `worker` with its full prompt blocks and the prompt tokens it
    /// leaves to prefill there. A request already booked is left as it is.
    pub(crate) fn add(
        &mut self,
        id: &str,
        worker: EndpointId,
        blocks: Vec<u64>,
        pending_prefill: u64,
    ) {
        if self.requests.contains_key(id) {
            return;
        }
        let w = self.workers.entry(worker).or_default();
        for &b in &blocks {
            *w.blocks.entry(b).or_default() += 1;
        }
        w.prefill_tokens += pending_prefill;
        w.requests += 1;
        self.requests.insert(
            id.to_string(),
            Active {
                worker,
                blocks,
                pending_prefill,
            },
        );
    }

    /// The first token of request `id` came back: its pending prefill leaves the count.
    pub(crate) fn prefill_done(&mut self, id: &str) {
        let Some(active) = self.requests.get_mut(id) else {
            return;
        };
        let pending = std::mem::take(&mut active.pending_prefill);
        if let Some(w) = self.workers.get_mut(&active.worker) {
            w.prefill_tokens = w.prefill_tokens.saturating_sub(pending);
        }
    }

    /// Request `id` ended, however: everything it held is released.
    pub(crate) fn free(&mut self, id: &str) {
        self.prefill_done(id);
        let Some(active) = self.requests.remove(id) else {
            return;
        };
        let Some(w) = self.workers.get_mut(&active.worker) else {
            return;
        };
        for b in &active.blocks {
            if let Some(count) = w.blocks.get_mut(b) {
                *count -= 1;
                if *count == 0 {
                    w.blocks.remove(b);
                }
            }
        }
        w.requests = w.requests.saturating_sub(1);
    }

    /// Distinct active blocks on `worker`.
    #[cfg(test)]
    pub(crate) fn active_blocks(&self, worker: EndpointId) -> usize {
        self.workers.get(&worker).map_or(0, |w| w.blocks.len())
    }
}
