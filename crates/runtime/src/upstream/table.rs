//! A map from label sets to live series that request paths read without a lock.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

/// Label set → series, copied on write: a lookup loads an `Arc` of the map (no lock); a new
/// label set copies the map under a mutex. At most `max` label sets get a series of their
/// own; later ones share the `overflow` key's, so memory is bounded whatever clients send.
#[derive(Debug)]
pub(crate) struct SeriesMap<K, V> {
    map: ArcSwap<HashMap<K, Arc<V>>>,
    insert: Mutex<()>,
    max: usize,
}

impl<K: Hash + Eq + Clone, V: Default> SeriesMap<K, V> {
    pub(crate) fn new(max: usize) -> Self {
        SeriesMap {
            map: ArcSwap::from_pointee(HashMap::new()),
            insert: Mutex::new(()),
            max: max.max(1),
        }
    }

    /// The series of `key`, created when there is room, else the series of `overflow`.
    pub(crate) fn get(&self, key: K, overflow: impl FnOnce() -> K) -> Arc<V> {
        if let Some(v) = self.map.load().get(&key) {
            return Arc::clone(v);
        }
        let _guard = self.insert.lock();
        let current = self.map.load_full();
        if let Some(v) = current.get(&key) {
            return Arc::clone(v);
        }
        let key = if current.len() >= self.max {
            let overflow = overflow();
            if let Some(v) = current.get(&overflow) {
                return Arc::clone(v);
            }
            overflow
        } else {
            key
        };
        let v = Arc::new(V::default());
        let mut next = (*current).clone();
        next.insert(key, Arc::clone(&v));
        self.map.store(Arc::new(next));
        v
    }

    /// Every series now.
    pub(crate) fn snapshot(&self) -> Arc<HashMap<K, Arc<V>>> {
        self.map.load_full()
    }
}
