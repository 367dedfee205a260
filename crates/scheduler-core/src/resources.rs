//! Named, typed state that plugins share and embedders reach: the prefix index a scorer
//! built, the session table, anything a KV-event feed or a debug view needs after the
//! scheduler is built.
//!
//! The embedder creates the [`Resources`] first and hands it to the build (pingora's "build
//! shared state first, pass it in"). A plugin factory gets or creates its state there under
//! its instance name; the embedder asks for it by name and type. The type is checked inside:
//! no one downcasts a plugin. Because the resources outlive any one scheduler, a config reload
//! that keeps a plugin (same name, compatible settings) keeps its state — the prefix index
//! does not start cold after every reload.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::resources::Resources;
//!
//! struct Sessions(Vec<String>);
//!
//! let resources = Resources::new();
//! let created = resources.get_or_insert_with("session-affinity", || Sessions(Vec::new()));
//! let again: Arc<Sessions> = resources.get("session-affinity").unwrap();
//! assert!(Arc::ptr_eq(&created, &again));
//! assert!(resources.get::<String>("session-affinity").is_none()); // wrong type: none
//! ```

use std::any::{Any, type_name};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;

struct Entry {
    value: Arc<dyn Any + Send + Sync>,
    type_name: &'static str,
}

/// Named, typed shared state. See the [module docs](self).
#[derive(Default)]
pub struct Resources {
    items: Mutex<BTreeMap<String, Entry>>,
}

impl Resources {
    /// No resources.
    pub fn new() -> Self {
        Resources::default()
    }

    /// The resource `name`, if there is one of type `T`.
    pub fn get<T: Any + Send + Sync>(&self, name: &str) -> Option<Arc<T>> {
        let items = self.items.lock();
        let entry = items.get(name)?;
        Arc::clone(&entry.value).downcast::<T>().ok()
    }

    /// Stores `value` as `name`, replacing whatever was there.
    pub fn insert<T: Any + Send + Sync>(&self, name: impl Into<String>, value: Arc<T>) {
        self.items.lock().insert(
            name.into(),
            Entry {
                value,
                type_name: type_name::<T>(),
            },
        );
    }

    /// The resource `name` of type `T`, created by `make` when absent (or of another type).
    pub fn get_or_insert_with<T: Any + Send + Sync>(
        &self,
        name: &str,
        make: impl FnOnce() -> T,
    ) -> Arc<T> {
        self.get_or_replace_with(name, |_| true, make)
    }

    /// The resource `name` of type `T` when `keep` accepts it; otherwise a new one from `make`
    /// replaces it (a reload that changed a plugin's settings so much that its old state
    /// cannot be reused, say).
    pub fn get_or_replace_with<T: Any + Send + Sync>(
        &self,
        name: &str,
        keep: impl FnOnce(&T) -> bool,
        make: impl FnOnce() -> T,
    ) -> Arc<T> {
        let mut items = self.items.lock();
        if let Some(entry) = items.get(name)
            && let Ok(existing) = Arc::clone(&entry.value).downcast::<T>()
            && keep(&existing)
        {
            return existing;
        }
        let value = Arc::new(make());
        items.insert(
            name.to_string(),
            Entry {
                value: Arc::clone(&value) as Arc<dyn Any + Send + Sync>,
                type_name: type_name::<T>(),
            },
        );
        value
    }

    /// Every resource of type `T`, by name.
    pub fn all<T: Any + Send + Sync>(&self) -> Vec<(String, Arc<T>)> {
        self.items
            .lock()
            .iter()
            .filter_map(|(name, e)| {
                Arc::clone(&e.value)
                    .downcast::<T>()
                    .ok()
                    .map(|v| (name.clone(), v))
            })
            .collect()
    }

    /// Removes `name`; returns whether it was there.
    pub fn remove(&self, name: &str) -> bool {
        self.items.lock().remove(name).is_some()
    }

    /// The names held, sorted.
    pub fn names(&self) -> Vec<String> {
        self.items.lock().keys().cloned().collect()
    }
}

impl fmt::Debug for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let items = self.items.lock();
        f.debug_map()
            .entries(items.iter().map(|(k, e)| (k, e.type_name)))
            .finish()
    }
}
