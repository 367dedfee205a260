//! A bounded journal of the chains picks record, for picker replicas that share their index
//! inserts (off until [`PrefixIndex::journal_inserts`] turns it on).
//!
//! Each [`PrefixIndex::insert_chain`] (a pick's record) adds its keys for the endpoint; the same
//! key for the same endpoint is kept once until the next [`PrefixIndex::take_journal`], so a hot
//! prefix picked a hundred times between two takes travels once. Keys fed by
//! [`PrefixIndex::insert_blocks`] (KV events, or a peer's journal) are not journaled: nothing
//! echoes back. Past the bound, further keys are dropped and counted.
//!
//! ```
//! use shepherd_scheduler_core::endpoint::EndpointId;
//! use shepherd_scheduler_core::prefix::{PrefixIndex, PrefixIndexConfig};
//! use shepherd_scheduler_core::request::Prompt;
//!
//! let index = PrefixIndex::new(PrefixIndexConfig::default());
//! index.journal_inserts(10_000);
//! let prompt = Prompt::Text("x".repeat(1024)); // 4 blocks of 64 pseudo tokens
//! let endpoint = EndpointId(1);
//! for _ in 0..3 {
//!     let mut chain = index.chain(0, &prompt);
//!     index.insert_chain(endpoint, &mut chain, &prompt, None);
//! }
//! let journal = index.take_journal();
//! assert_eq!(journal.inserts.len(), 1);
//! assert_eq!(journal.inserts[0].1.len(), 4); // three picks of one prompt: its 4 keys once
//! assert!(index.take_journal().inserts.is_empty());
//!
//! // A peer applies them as plain inserts: its own journal stays empty.
//! let peer = PrefixIndex::new(PrefixIndexConfig::default());
//! peer.journal_inserts(10_000);
//! peer.insert_blocks(endpoint, &journal.inserts[0].1, None);
//! let mut chain = peer.chain(0, &prompt);
//! assert_eq!(peer.match_prefix(&mut chain, &prompt).matched_blocks(endpoint), 4);
//! assert!(peer.take_journal().inserts.is_empty());
//! ```

use std::sync::atomic::{AtomicBool, Ordering};

use ahash::AHashSet;
use parking_lot::Mutex;

use super::PrefixIndex;
use crate::endpoint::EndpointId;
use crate::prefix::BlockKey;

/// What picks recorded since the last take.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Journal {
    /// Per endpoint, the keys recorded for it, in the order they were first recorded.
    pub inserts: Vec<(EndpointId, Vec<BlockKey>)>,
    /// Keys left out because the journal was full.
    pub dropped: u64,
}

#[derive(Debug, Default)]
struct State {
    limit: usize,
    keys: usize,
    journal: Journal,
    seen: AHashSet<(EndpointId, BlockKey)>,
}

/// The journal inside a [`PrefixIndex`].
#[derive(Debug, Default)]
pub(super) struct InsertJournal {
    on: AtomicBool,
    state: Mutex<State>,
}

impl InsertJournal {
    /// Adds `keys` recorded for `endpoint` (nothing when the journal is off).
    pub(super) fn note(&self, endpoint: EndpointId, keys: &[BlockKey]) {
        if !self.on.load(Ordering::Relaxed) || keys.is_empty() {
            return;
        }
        let mut state = self.state.lock();
        let State {
            limit,
            keys: count,
            journal,
            seen,
        } = &mut *state;
        let at = match journal.inserts.iter().position(|(e, _)| *e == endpoint) {
            Some(at) => at,
            None => {
                journal.inserts.push((endpoint, Vec::new()));
                journal.inserts.len() - 1
            }
        };
        // What this endpoint already has in the journal is a prefix of `keys`: a chain's keys
        // are noted in order from its first block, and each key hashes every block before it,
        // so a key seen means every key before it was seen. A prompt picked again (the common
        // case) costs a bisection instead of a set insert per block.
        let fresh = keys.partition_point(|&key| seen.contains(&(endpoint, key)));
        for &key in &keys[fresh..] {
            if *count >= *limit {
                journal.dropped += 1;
                continue;
            }
            if seen.insert((endpoint, key)) {
                journal.inserts[at].1.push(key);
                *count += 1;
            }
        }
    }
}

impl PrefixIndex {
    /// Turns the insert journal on (the chains picks record, kept for peer replicas), keeping
    /// at most `max_keys` keys between two [`take_journal`](Self::take_journal)s; calling it
    /// again changes the bound.
    pub fn journal_inserts(&self, max_keys: usize) {
        self.journal.state.lock().limit = max_keys;
        self.journal.on.store(true, Ordering::Relaxed);
    }

    /// What picks recorded since the last take (empty while the journal is off), and a fresh
    /// journal.
    pub fn take_journal(&self) -> Journal {
        let mut state = self.journal.state.lock();
        state.keys = 0;
        state.seen.clear();
        let mut journal = std::mem::take(&mut state.journal);
        journal.inserts.retain(|(_, keys)| !keys.is_empty());
        journal
    }
}
