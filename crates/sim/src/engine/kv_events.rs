//! The engine's KV-cache event log (what the module docs' *KV-cache events* describe): the
//! `BlockStored` of newly cached blocks, the `BlockRemoved` of the pool's evictions, and
//! `AllBlocksCleared`.

use std::ops::Range;

use shepherd_scheduler_core::kv_events::{BlockRemoved, BlockStored, EngineBlockHash, KvEvent};

use super::{BlockPool, EngineRequest};

/// `medium` of the events: vLLM's `MEDIUM_GPU`.
const MEDIUM_GPU: &str = "GPU";

/// The events recorded since the last drain; records nothing until enabled.
#[derive(Debug, Default)]
pub(super) struct KvEventLog {
    /// `None` while recording is off.
    events: Option<Vec<KvEvent>>,
    /// Scratch for the pool's eviction log.
    evicted: Vec<u64>,
}

impl KvEventLog {
    /// Starts recording, and has `pool` log its evictions.
    pub(super) fn enable(&mut self, pool: &mut BlockPool) {
        self.events.get_or_insert_with(Vec::new);
        pool.record_evictions();
    }

    pub(super) fn enabled(&self) -> bool {
        self.events.is_some()
    }

    /// Appends the events recorded so far (the pool's pending evictions last) to `out`.
    pub(super) fn drain(&mut self, pool: &mut BlockPool, out: &mut Vec<KvEvent>) {
        self.flush_evictions(pool);
        if let Some(events) = &mut self.events {
            out.append(events);
        }
    }

    /// Records `AllBlocksCleared` (after the pool's pending evictions).
    pub(super) fn cleared(&mut self, pool: &mut BlockPool) {
        self.flush_evictions(pool);
        if let Some(events) = &mut self.events {
            events.push(KvEvent::AllBlocksCleared);
        }
    }

    /// Moves the pool's eviction log into one [`KvEvent::BlockRemoved`].
    pub(super) fn flush_evictions(&mut self, pool: &mut BlockPool) {
        let Some(events) = &mut self.events else {
            return;
        };
        pool.take_evicted(&mut self.evicted);
        if self.evicted.is_empty() {
            return;
        }
        events.push(KvEvent::BlockRemoved(BlockRemoved {
            block_hashes: self.evicted.drain(..).map(EngineBlockHash).collect(),
            medium: Some(MEDIUM_GPU.to_owned()),
            group_idx: None,
        }));
    }

    /// Caches `req`'s blocks `range` (held in `blocks`) under their hashes, recording one
    /// `BlockStored` per run of blocks whose hash was not cached already.
    pub(super) fn register(
        &mut self,
        pool: &mut BlockPool,
        req: &EngineRequest,
        blocks: &[u32],
        range: Range<usize>,
        block_size: u32,
    ) {
        // The evictions that made room for these blocks come before their stores.
        self.flush_evictions(pool);
        let Some(events) = &mut self.events else {
            for j in range {
                pool.register(blocks[j], req.block_hashes[j]);
            }
            return;
        };
        let end = range.end;
        let mut run: Option<usize> = None;
        for j in range {
            if pool.register(blocks[j], req.block_hashes[j]) {
                run.get_or_insert(j);
            } else if let Some(start) = run.take() {
                push_stored(events, req, start..j, block_size);
            }
        }
        if let Some(start) = run {
            push_stored(events, req, start..end, block_size);
        }
    }
}

/// Records the `BlockStored` of `req`'s blocks `blocks` (consecutive, newly cached), unless
/// the request lacks the tokens they hold.
fn push_stored(
    events: &mut Vec<KvEvent>,
    req: &EngineRequest,
    blocks: Range<usize>,
    block_size: u32,
) {
    let bs = block_size as usize;
    let Some(token_ids) = req
        .tokens
        .as_deref()
        .and_then(|t| t.get(blocks.start * bs..blocks.end * bs))
    else {
        return;
    };
    let parent_block_hash = blocks
        .start
        .checked_sub(1)
        .and_then(|p| req.block_hashes.get(p))
        .map(|&h| EngineBlockHash(h));
    events.push(KvEvent::BlockStored(BlockStored {
        block_hashes: req.block_hashes[blocks]
            .iter()
            .map(|&h| EngineBlockHash(h))
            .collect(),
        parent_block_hash,
        token_ids: token_ids.to_vec(),
        block_size,
        medium: Some(MEDIUM_GPU.to_owned()),
        ..BlockStored::default()
    }));
}
