//! A bounded memory of which endpoint served each session: least-recently-used eviction at a
//! fixed capacity, plus a time-to-live.

use std::collections::BTreeMap;
use std::time::Duration;

use ahash::AHashMap;
use parking_lot::RwLock;
use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::endpoint::EndpointId;

#[derive(Debug, Clone, Copy)]
struct Entry {
    endpoint: EndpointId,
    last_used: Timestamp,
    /// Position in the recency order (larger = more recent).
    tick: u64,
}

#[derive(Debug, Default)]
struct Inner {
    entries: AHashMap<u64, Entry>,
    /// tick → session hash, oldest first.
    recency: BTreeMap<u64, u64>,
    next_tick: u64,
}

impl Inner {
    fn remove(&mut self, session: u64) {
        if let Some(entry) = self.entries.remove(&session) {
            self.recency.remove(&entry.tick);
        }
    }
}

/// Session hash → endpoint (read-mostly: lookups share a read lock), holding at most `capacity` sessions, each forgotten `ttl` after its
/// last pick.
#[derive(Debug)]
pub(crate) struct SessionStore {
    capacity: usize,
    ttl: Duration,
    inner: RwLock<Inner>,
}

impl SessionStore {
    /// An empty store (`capacity` is at least 1).
    pub(crate) fn new(capacity: usize, ttl: Duration) -> Self {
        SessionStore {
            capacity: capacity.max(1),
            ttl,
            inner: RwLock::new(Inner::default()),
        }
    }

    /// The endpoint that last served `session`, unless it expired by `now`.
    pub(crate) fn get(&self, session: u64, now: Timestamp) -> Option<EndpointId> {
        let inner = self.inner.read();
        let entry = inner.entries.get(&session)?;
        (now.saturating_since(entry.last_used) <= self.ttl).then_some(entry.endpoint)
    }

    /// Remembers that `endpoint` served `session` at `now`, evicting expired sessions and then
    /// the least recently used ones beyond capacity.
    pub(crate) fn record(&self, session: u64, endpoint: EndpointId, now: Timestamp) {
        let mut inner = self.inner.write();
        inner.remove(session);
        let tick = inner.next_tick;
        inner.next_tick += 1;
        inner.entries.insert(
            session,
            Entry {
                endpoint,
                last_used: now,
                tick,
            },
        );
        inner.recency.insert(tick, session);
        // Oldest first: expired entries sit at the front while time only moves forward.
        while let Some((_, &oldest)) = inner.recency.first_key_value() {
            let expired = inner
                .entries
                .get(&oldest)
                .is_some_and(|e| now.saturating_since(e.last_used) > self.ttl);
            if inner.entries.len() <= self.capacity && !expired {
                break;
            }
            inner.remove(oldest);
        }
    }

    /// Forgets every session served by one of `removed`.
    pub(crate) fn forget_endpoints(&self, removed: &[EndpointId]) {
        let mut inner = self.inner.write();
        let gone: Vec<u64> = inner
            .entries
            .iter()
            .filter(|(_, e)| removed.contains(&e.endpoint))
            .map(|(&k, _)| k)
            .collect();
        for session in gone {
            inner.remove(session);
        }
    }

    /// Sessions remembered.
    pub(crate) fn len(&self) -> usize {
        self.inner.read().entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn remembers_and_updates() {
        let store = SessionStore::new(4, HOUR);
        store.record(1, EndpointId(7), Timestamp::ZERO);
        assert_eq!(store.get(1, Timestamp::ZERO), Some(EndpointId(7)));
        store.record(1, EndpointId(8), Timestamp::ZERO);
        assert_eq!(store.get(1, Timestamp::ZERO), Some(EndpointId(8)));
        assert_eq!(store.len(), 1);
        assert_eq!(store.get(2, Timestamp::ZERO), None);
    }

    #[test]
    fn evicts_least_recently_used_beyond_capacity() {
        let store = SessionStore::new(2, HOUR);
        store.record(1, EndpointId(1), Timestamp::ZERO);
        store.record(2, EndpointId(2), Timestamp::ZERO);
        store.record(1, EndpointId(1), Timestamp::ZERO); // 1 is now the most recent
        store.record(3, EndpointId(3), Timestamp::ZERO);
        assert_eq!(store.len(), 2);
        assert_eq!(store.get(2, Timestamp::ZERO), None);
        assert_eq!(store.get(1, Timestamp::ZERO), Some(EndpointId(1)));
        assert_eq!(store.get(3, Timestamp::ZERO), Some(EndpointId(3)));
    }

    #[test]
    fn expires_after_ttl() {
        let store = SessionStore::new(8, Duration::from_secs(10));
        store.record(1, EndpointId(1), Timestamp::ZERO);
        assert_eq!(
            store.get(1, Timestamp::from_millis(10_000)),
            Some(EndpointId(1))
        );
        assert_eq!(store.get(1, Timestamp::from_millis(10_001)), None);
        store.record(2, EndpointId(2), Timestamp::from_millis(20_000));
        assert_eq!(
            store.len(),
            1,
            "the expired session is dropped on the next write"
        );
    }

    #[test]
    fn forgets_removed_endpoints() {
        let store = SessionStore::new(8, HOUR);
        store.record(1, EndpointId(1), Timestamp::ZERO);
        store.record(2, EndpointId(2), Timestamp::ZERO);
        store.record(3, EndpointId(1), Timestamp::ZERO);
        store.forget_endpoints(&[EndpointId(1)]);
        assert_eq!(store.len(), 1);
        assert_eq!(store.get(2, Timestamp::ZERO), Some(EndpointId(2)));
    }
}
