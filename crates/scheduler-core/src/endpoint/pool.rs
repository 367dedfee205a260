use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use ahash::AHashMap;
use arc_swap::ArcSwap;
use parking_lot::Mutex;

use super::{Endpoint, EndpointHealth, EndpointId};
use crate::clock::{Clock, SystemClock};

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
#[derive(Debug)]
#[repr(align(128))]
pub struct PoolSnapshot {
    endpoints: Vec<Arc<Endpoint>>,
    by_address: AHashMap<Arc<str>, usize>,
    by_id: AHashMap<EndpointId, usize>,
    generation: u64,
    all_enabled: bool,
}

impl Default for PoolSnapshot {
    fn default() -> Self {
        PoolSnapshot::build(Vec::new(), 0)
    }
}

impl PoolSnapshot {
    fn build(mut endpoints: Vec<Arc<Endpoint>>, generation: u64) -> Self {
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
        let all_enabled = endpoints.iter().all(|e| e.accepts_requests());
        PoolSnapshot {
            endpoints,
            by_address,
            by_id,
            generation,
            all_enabled,
        }
    }

    /// Which swap of its pool this snapshot is (0 for an empty new pool); every membership
    /// or health change makes a new one.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Requests in flight across the members (each member's
    /// [`in_flight_requests`](Endpoint::in_flight_requests), summed).
    pub fn in_flight_requests(&self) -> u64 {
        self.endpoints.iter().map(|e| e.in_flight_requests()).sum()
    }

    /// Whether every member takes new requests (none draining or disabled).
    pub fn all_enabled(&self) -> bool {
        self.all_enabled
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

/// The set of endpoints requests can be sent to, and the clock that stamps their metrics.
///
/// Readers take a [`PoolSnapshot`] without locking; membership changes build a new snapshot and
/// swap it in, keeping the existing [`Endpoint`] (and so its counters and metrics) for every
/// address that stays.
///
/// The pool owns the one [`Clock`] of everything scheduled over it: endpoints stamp their
/// metrics with it and schedulers built over the pool read the time from it, so timestamps of
/// two clocks with different origins can never be compared.
///
/// Membership listeners are held weakly: whoever registers one keeps it alive (a scheduler
/// keeps its plugins' listeners), and a listener whose owner is gone is dropped at the next
/// membership change, so rebuilding schedulers over one pool leaves nothing behind.
pub struct Pool {
    snapshot: ArcSwap<PoolSnapshot>,
    next_id: AtomicU32,
    write: Mutex<()>,
    listeners: Mutex<Vec<Weak<dyn MembershipListener>>>,
    clock: Arc<dyn Clock>,
    generation: AtomicU64,
}

impl Default for Pool {
    fn default() -> Self {
        Pool::with_clock(Arc::new(SystemClock::new()))
    }
}

impl Pool {
    /// An empty pool on the system's monotonic clock.
    pub fn new() -> Self {
        Pool::default()
    }

    /// An empty pool on `clock` (a simulator's or a test's clock).
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        Pool {
            snapshot: ArcSwap::default(),
            next_id: AtomicU32::new(0),
            write: Mutex::new(()),
            listeners: Mutex::new(Vec::new()),
            clock,
            generation: AtomicU64::new(0),
        }
    }

    /// The pool's clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The current members.
    pub fn snapshot(&self) -> Arc<PoolSnapshot> {
        self.snapshot.load_full()
    }

    /// A cheap, short-lived view of the current members (for the request path).
    pub fn load(&self) -> arc_swap::Guard<Arc<PoolSnapshot>> {
        self.snapshot.load()
    }

    /// Registers a listener told about endpoints that leave. The pool holds it weakly: it is
    /// told for as long as the caller keeps it alive. Registering the same listener twice has
    /// no effect.
    pub fn add_listener(&self, listener: &Arc<dyn MembershipListener>) {
        let weak = Arc::downgrade(listener);
        let mut listeners = self.listeners.lock();
        listeners.retain(|l| l.strong_count() > 0);
        if !listeners.iter().any(|l| Weak::ptr_eq(l, &weak)) {
            listeners.push(weak);
        }
    }

    /// Listeners still alive.
    pub fn listener_count(&self) -> usize {
        let mut listeners = self.listeners.lock();
        listeners.retain(|l| l.strong_count() > 0);
        listeners.len()
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
                None => next.push(Arc::new(self.new_endpoint(address))),
            }
        }
        let removed: Vec<EndpointId> = current
            .endpoints()
            .iter()
            .filter(|e| !seen.contains(e.address()))
            .map(|e| e.id())
            .collect();
        self.store(next);
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
        let endpoint = Arc::new(self.new_endpoint(address));
        let mut next = current.endpoints().to_vec();
        next.push(Arc::clone(&endpoint));
        self.store(next);
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
        self.store(next);
        drop(write);
        self.notify_removed(&[gone]);
        true
    }

    /// Sets the health of the member at `address` (see [`EndpointHealth`]); returns whether it
    /// is a member. Takes effect for the next pick.
    pub fn set_health(&self, address: &str, health: EndpointHealth) -> bool {
        let _write = self.write.lock();
        let current = self.snapshot.load_full();
        let Some(endpoint) = current.get_by_address(address) else {
            return false;
        };
        if endpoint.health() != health {
            endpoint.set_health(health);
            self.store(current.endpoints().to_vec());
        }
        true
    }

    /// Swaps in a snapshot of `members` (the write lock is held).
    fn store(&self, members: Vec<Arc<Endpoint>>) {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        self.snapshot
            .store(Arc::new(PoolSnapshot::build(members, generation)));
    }

    fn new_endpoint(&self, address: &str) -> Endpoint {
        let id = EndpointId(self.next_id.fetch_add(1, Ordering::Relaxed));
        Endpoint::new(id, address, Arc::clone(&self.clock))
    }

    fn notify_removed(&self, removed: &[EndpointId]) {
        if removed.is_empty() {
            return;
        }
        let listeners: Vec<Arc<dyn MembershipListener>> = {
            let mut listeners = self.listeners.lock();
            listeners.retain(|l| l.strong_count() > 0);
            listeners.iter().filter_map(Weak::upgrade).collect()
        };
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
