//! Sharing the approximate prefix indexes' inserts with peer replicas: each interval, what
//! this replica's picks recorded (the index's journal) goes to every peer as [`index_wire`]
//! deltas, and a peer's deltas are recorded in the index of the same name, as inserts of the
//! endpoints they name. Indexes are looked up in the shared resources at every interval, so a
//! policy reload that replaces one is followed.
//!
//! [`index_wire`]: super::index_wire

use std::collections::HashMap;
use std::sync::Arc;

use shepherd_scheduler_core::endpoint::Pool;
use shepherd_scheduler_core::prefix::PrefixIndex;
use shepherd_scheduler_core::resources::Resources;
use shepherd_scorers::producers::approximate_indexes;

use super::index_wire::{self, Delta};

/// Most keys one index journals between two intervals (512 KiB of keys); a busier replica's
/// further inserts that interval stay its own (counted).
pub(crate) const MAX_JOURNAL_KEYS: usize = 65_536;

/// Why a peer's delta was not applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No approximate index of that name here (another policy).
    UnknownIndex,
    /// The index cuts prompts into other blocks (another policy).
    OtherBlocks,
}

/// The index side of one replica's exchange.
#[derive(Debug)]
pub(crate) struct IndexSync {
    resources: Arc<Resources>,
    pool: Arc<Pool>,
}

/// What a peer's delta recorded.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Applied {
    /// Keys recorded.
    pub(crate) keys: u64,
    /// Endpoints named that are not in this replica's pool (their keys ignored).
    pub(crate) unknown_endpoints: u64,
}

/// What one interval's outgoing deltas held.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outgoing {
    pub(crate) keys: u64,
    pub(crate) dropped: u64,
}

impl IndexSync {
    /// The index side over the scheduler's resources and pool; the journals of the indexes
    /// already built start at once, so no pick made before the first interval is missed.
    pub(crate) fn new(resources: Arc<Resources>, pool: Arc<Pool>) -> Self {
        let sync = IndexSync { resources, pool };
        sync.journaled();
        sync
    }

    /// The indexes, with their journals on (an index a reload built since the last call starts
    /// journaling here).
    fn journaled(&self) -> Vec<(String, Arc<PrefixIndex>)> {
        let indexes = approximate_indexes(&self.resources);
        for (_, index) in &indexes {
            index.journal_inserts(MAX_JOURNAL_KEYS);
        }
        indexes
    }

    /// Appends the datagrams of every index's inserts since the last call to `out`.
    pub(crate) fn outgoing(&self, max_bytes: usize, out: &mut Vec<Vec<u8>>) -> Outgoing {
        let mut sent = Outgoing::default();
        let mut addresses: Option<HashMap<_, String>> = None;
        for (name, index) in self.journaled() {
            let journal = index.take_journal();
            sent.dropped += journal.dropped;
            if journal.inserts.is_empty() {
                continue;
            }
            let addresses = addresses.get_or_insert_with(|| {
                self.pool
                    .snapshot()
                    .endpoints()
                    .iter()
                    .map(|e| (e.id(), e.address().to_string()))
                    .collect()
            });
            let inserts: Vec<(String, Vec<_>)> = journal
                .inserts
                .into_iter()
                .filter_map(|(id, keys)| addresses.get(&id).map(|a| (a.clone(), keys)))
                .collect();
            sent.keys += inserts.iter().map(|(_, k)| k.len() as u64).sum::<u64>();
            let block_tokens = index.config().layout.block_tokens() as u32;
            index_wire::encode(&name, block_tokens, &inserts, max_bytes, out);
        }
        sent
    }

    /// Records a peer's delta, for the endpoints this replica's pool has (the others are
    /// counted, never stored).
    pub(crate) fn apply(&self, delta: &Delta) -> Result<Applied, Refusal> {
        let indexes = approximate_indexes(&self.resources);
        let (_, index) = indexes
            .iter()
            .find(|(name, _)| *name == delta.index)
            .ok_or(Refusal::UnknownIndex)?;
        if index.config().layout.block_tokens() as u64 != u64::from(delta.block_tokens) {
            return Err(Refusal::OtherBlocks);
        }
        let snapshot = self.pool.snapshot();
        let mut applied = Applied::default();
        for (address, keys) in &delta.inserts {
            match snapshot.get_by_address(address) {
                Some(endpoint) => {
                    index.insert_blocks(endpoint.id(), keys, None);
                    applied.keys += keys.len() as u64;
                }
                None => applied.unknown_endpoints += 1,
            }
        }
        Ok(applied)
    }
}
