//! The registry of endpoints the index knows, and forgetting one.

use std::sync::Arc;

use ahash::{AHashMap, AHashSet};
use parking_lot::Mutex;

use super::{PrefixIndex, ShardGuard};
use crate::endpoint::EndpointId;
use crate::prefix::BlockKey;
use crate::prefix::endpoint_blocks::EndpointBlocks;
use crate::prefix::locking;
use crate::prefix::table::tag_of;

pub(super) type EndpointState = Arc<Mutex<EndpointBlocks>>;

#[derive(Debug, Clone, Default)]
pub(super) struct Endpoints {
    pub(super) live: AHashMap<EndpointId, EndpointState>,
    /// Endpoints that left the pool: ids are never reused, so late inserts for them are dropped.
    retired: AHashSet<EndpointId>,
}

impl PrefixIndex {
    /// Forgets `endpoint` entirely; later inserts for it are ignored (ids are never reused).
    pub fn remove_endpoint(&self, endpoint: EndpointId) {
        let state = {
            let _write = locking::lock(&self.endpoints_write);
            let mut next = Endpoints::clone(&self.endpoints.load());
            let state = next.live.remove(&endpoint);
            next.retired.insert(endpoint);
            self.endpoints.store(Arc::new(next));
            state
        };
        let Some(state) = state else {
            return;
        };
        let mut ep = locking::lock(&state);
        ep.retired = true;
        let tag = tag_of(endpoint.0);
        let mut guard: ShardGuard<'_> = None;
        for key in std::mem::take(&mut ep.queue) {
            self.lock_shard(&mut guard, BlockKey::from_raw(key).shard())
                .remove(key, tag);
        }
        ep.live = 0;
        ep.deficit = 0;
    }

    pub(super) fn endpoint_state(&self, endpoint: EndpointId) -> Option<EndpointState> {
        locking::switch_point();
        {
            let endpoints = self.endpoints.load();
            if let Some(state) = endpoints.live.get(&endpoint) {
                return Some(Arc::clone(state));
            }
            if endpoints.retired.contains(&endpoint) {
                return None;
            }
        }
        let _write = locking::lock(&self.endpoints_write);
        let current = self.endpoints.load_full();
        if let Some(state) = current.live.get(&endpoint) {
            return Some(Arc::clone(state));
        }
        if current.retired.contains(&endpoint) {
            return None;
        }
        let state = Arc::new(Mutex::new(EndpointBlocks::new(
            self.config.default_capacity,
        )));
        let mut next = Endpoints::clone(&current);
        next.live.insert(endpoint, Arc::clone(&state));
        self.endpoints.store(Arc::new(next));
        Some(state)
    }
}
