//! The registry of endpoints the index knows, and forgetting the ones that leave.

use std::sync::Arc;

use ahash::AHashMap;
use arc_swap::ArcSwap;
use parking_lot::Mutex;

use super::{PrefixIndex, ShardGuard};
use crate::endpoint::EndpointId;
use crate::prefix::BlockKey;
use crate::prefix::endpoint_blocks::EndpointBlocks;
use crate::prefix::locking;
use crate::prefix::retired::RetiredIds;
use crate::prefix::table::tag_of;

/// One endpoint's bookkeeping, shared by the calls working on it.
pub(super) type EndpointState = Arc<Mutex<EndpointBlocks>>;

/// The live endpoints by id.
type LiveMap = AHashMap<EndpointId, EndpointState>;

/// The endpoints the index knows: a map read without locking by every insert, swapped whole
/// when an endpoint arrives (on its first insert) or leaves; and the ids that left, so that
/// late inserts for them are dropped (ids are never reused).
#[derive(Debug, Default)]
pub(super) struct Registry {
    live: ArcSwap<LiveMap>,
    /// Serializes changes of `live`, and holds the retired ids (only the slow paths read them:
    /// an id missing from `live`).
    write: Mutex<RetiredIds>,
}

impl Registry {
    /// `endpoint`'s state when it is live (no lock taken).
    pub(super) fn get(&self, endpoint: EndpointId) -> Option<EndpointState> {
        locking::switch_point();
        self.live.load().get(&endpoint).cloned()
    }

    /// Calls `f` with every live endpoint's id and state.
    pub(super) fn for_each(&self, mut f: impl FnMut(EndpointId, &EndpointState)) {
        self.live
            .load()
            .iter()
            .for_each(|(&id, state)| f(id, state));
    }

    /// Live endpoints.
    pub(super) fn len(&self) -> usize {
        self.live.load().len()
    }

    /// Space the retired ids take, in ranges (for tests).
    #[cfg(test)]
    pub(super) fn retired_ranges(&self) -> usize {
        locking::lock(&self.write).ranges()
    }
}

impl PrefixIndex {
    /// Forgets `endpoint` entirely; later inserts for it are ignored (ids are never reused).
    pub fn remove_endpoint(&self, endpoint: EndpointId) {
        self.remove_endpoints(&[endpoint]);
    }

    /// Whether `endpoint` left the pool (was removed): inserts for it are ignored for good.
    pub fn has_left(&self, endpoint: EndpointId) -> bool {
        if self.endpoints.get(endpoint).is_some() {
            return false;
        }
        locking::lock(&self.endpoints.write).contains(endpoint.0)
    }

    /// Forgets `endpoints`, swapping the registry once for all of them.
    pub(super) fn remove_endpoints(&self, endpoints: &[EndpointId]) {
        let removed: Vec<(EndpointId, EndpointState)> = {
            let mut retired = locking::lock(&self.endpoints.write);
            for endpoint in endpoints {
                retired.insert(endpoint.0);
            }
            let current = self.endpoints.live.load_full();
            if !endpoints.iter().any(|e| current.contains_key(e)) {
                return;
            }
            let mut next = LiveMap::clone(&current);
            let removed = endpoints
                .iter()
                .filter_map(|&e| next.remove(&e).map(|state| (e, state)))
                .collect();
            self.endpoints.live.store(Arc::new(next));
            removed
        };
        self.counters.removed_endpoints(removed.len());
        for (endpoint, state) in removed {
            self.forget(endpoint, &state);
        }
    }

    /// Retires `endpoint`'s state (already out of the registry) and removes its entries.
    fn forget(&self, endpoint: EndpointId, state: &EndpointState) {
        let mut ep = locking::lock(state);
        ep.retired = true;
        let tag = tag_of(endpoint.0);
        let mut guard: ShardGuard<'_> = None;
        for key in ep.queue.take_all() {
            self.lock_shard(&mut guard, BlockKey::from_raw(key).shard())
                .remove(key, tag);
        }
        self.counters.held(ep.live, 0);
        ep.live = 0;
        ep.deficit = 0;
    }

    /// `endpoint`'s state, made on its first insert; `None` once it left the pool.
    pub(super) fn endpoint_state(&self, endpoint: EndpointId) -> Option<EndpointState> {
        if let Some(state) = self.endpoints.get(endpoint) {
            return Some(state);
        }
        let retired = locking::lock(&self.endpoints.write);
        let current = self.endpoints.live.load_full();
        if let Some(state) = current.get(&endpoint) {
            return Some(Arc::clone(state));
        }
        if retired.contains(endpoint.0) {
            return None;
        }
        let state = Arc::new(Mutex::new(EndpointBlocks::new(
            self.config.default_capacity,
        )));
        let mut next = LiveMap::clone(&current);
        next.insert(endpoint, Arc::clone(&state));
        self.endpoints.live.store(Arc::new(next));
        Some(state)
    }
}
