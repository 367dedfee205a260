use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use ahash::AHashMap;
use arc_swap::ArcSwap;
use parking_lot::Mutex;

use super::{Endpoint, EndpointId};

/// Told when endpoints leave the pool, so that per-endpoint state (such as the prefix index)
/// can forget them.
pub trait MembershipListener: Send + Sync {
    /// `removed` have left the pool.
    fn on_removed(&self, removed: &[EndpointId]);
}

/// An immutable view of the pool's members, in a stable order (by address).
///
/// Aligned to 128 bytes so that, behind an `Arc`, the reference counts that every pick touches
/// sit on their own cache lines and do not evict the member list that every pick reads.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct PoolSnapshot {
    endpoints: Vec<Arc<Endpoint>>,
    by_address: AHashMap<Arc<str>, usize>,
    by_id: AHashMap<EndpointId, usize>,
}

impl PoolSnapshot {
    fn build(mut endpoints: Vec<Arc<Endpoint>>) -> Self {
        endpoints.sort_by(|a, b| a.address().cmp(b.address()));
        let by_address = endpoints
            .iter()
            .enumerate()
            .map(|(i, e)| (Arc::clone(e.address_arc()), i))
            .collect();
        let by_id = endpoints
            .iter()
            .enumerate()
            .map(|(i, e)| (e.id(), i))
            .collect();
        PoolSnapshot {
            endpoints,
            by_address,
            by_id,
        }
    }

    /// The members, sorted by address.
    pub fn endpoints(&self) -> &[Arc<Endpoint>] {
        &self.endpoints
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.endpoints.len()
    }

    /// Whether the pool is empty.
    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }

    /// The member with `id`, when present.
    pub fn get(&self, id: EndpointId) -> Option<&Arc<Endpoint>> {
        self.by_id.get(&id).map(|&i| &self.endpoints[i])
    }

    /// The member at `address`, when present.
    pub fn get_by_address(&self, address: &str) -> Option<&Arc<Endpoint>> {
        self.by_address.get(address).map(|&i| &self.endpoints[i])
    }
}

/// The set of endpoints requests can be sent to.
///
/// Readers take a [`PoolSnapshot`] without locking; membership changes build a new snapshot and
/// swap it in, keeping the existing [`Endpoint`] (and so its counters and metrics) for every
/// address that stays.
#[derive(Default)]
pub struct Pool {
    snapshot: ArcSwap<PoolSnapshot>,
    next_id: AtomicU32,
    write: Mutex<()>,
    listeners: Mutex<Vec<Arc<dyn MembershipListener>>>,
}

impl Pool {
    /// An empty pool.
    pub fn new() -> Self {
        Pool::default()
    }

    /// The current members.
    pub fn snapshot(&self) -> Arc<PoolSnapshot> {
        self.snapshot.load_full()
    }

    /// A cheap, short-lived view of the current members (for the request path).
    pub fn load(&self) -> arc_swap::Guard<Arc<PoolSnapshot>> {
        self.snapshot.load()
    }

    /// Registers a listener told about endpoints that leave.
    pub fn add_listener(&self, listener: Arc<dyn MembershipListener>) {
        self.listeners.lock().push(listener);
    }

    /// Makes the pool exactly `addresses` (duplicates ignored). Returns the ids removed.
    pub fn set_members<I, S>(&self, addresses: I) -> Vec<EndpointId>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let _write = self.write.lock();
        let current = self.snapshot.load_full();
        let mut next: Vec<Arc<Endpoint>> = Vec::new();
        let mut seen = ahash::AHashSet::new();
        for address in addresses {
            let address = address.as_ref();
            if !seen.insert(address.to_string()) {
                continue;
            }
            match current.get_by_address(address) {
                Some(existing) => next.push(Arc::clone(existing)),
                None => next.push(Arc::new(Endpoint::new(self.fresh_id(), address))),
            }
        }
        let removed: Vec<EndpointId> = current
            .endpoints()
            .iter()
            .filter(|e| !seen.contains(e.address()))
            .map(|e| e.id())
            .collect();
        self.snapshot.store(Arc::new(PoolSnapshot::build(next)));
        drop(_write);
        self.notify_removed(&removed);
        removed
    }

    /// Adds one endpoint (no-op when present) and returns it.
    pub fn add(&self, address: &str) -> Arc<Endpoint> {
        let _write = self.write.lock();
        let current = self.snapshot.load_full();
        if let Some(existing) = current.get_by_address(address) {
            return Arc::clone(existing);
        }
        let endpoint = Arc::new(Endpoint::new(self.fresh_id(), address));
        let mut next = current.endpoints().to_vec();
        next.push(Arc::clone(&endpoint));
        self.snapshot.store(Arc::new(PoolSnapshot::build(next)));
        endpoint
    }

    /// Removes one endpoint; returns whether it was present.
    pub fn remove(&self, address: &str) -> bool {
        let write = self.write.lock();
        let current = self.snapshot.load_full();
        let Some(gone) = current.get_by_address(address).map(|e| e.id()) else {
            return false;
        };
        let next = current
            .endpoints()
            .iter()
            .filter(|e| e.id() != gone)
            .cloned()
            .collect();
        self.snapshot.store(Arc::new(PoolSnapshot::build(next)));
        drop(write);
        self.notify_removed(&[gone]);
        true
    }

    fn fresh_id(&self) -> EndpointId {
        EndpointId(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    fn notify_removed(&self, removed: &[EndpointId]) {
        if removed.is_empty() {
            return;
        }
        let listeners = self.listeners.lock().clone();
        for listener in listeners {
            listener.on_removed(removed);
        }
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("members", &self.snapshot.load().len())
            .finish()
    }
}
