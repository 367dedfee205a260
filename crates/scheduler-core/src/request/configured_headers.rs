//! Request headers a config's plugins read beyond [`PLUGIN_HEADERS`](super::PLUGIN_HEADERS):
//! the `headerName` of a `header-label-affinity-scorer`, say. A plugin's factory names them in
//! the shared [`Resources`](crate::resources::Resources) under [`CONFIGURED_HEADERS`]; the
//! adapters copy each one the client sent (trimmed, at most
//! [`MAX_PLUGIN_HEADER_LEN`](super::MAX_PLUGIN_HEADER_LEN) bytes) into
//! [`InferenceRequest::headers`](super::InferenceRequest::headers) beside the latency
//! objectives.
//!
//! The set only grows while the shared state lives (a reload that drops such a plugin leaves
//! its header copied, unused), and holds at most [`MAX_CONFIGURED_HEADERS`] names.
//!
//! ```
//! use shepherd_scheduler_core::request::{ConfiguredHeaders, CONFIGURED_HEADERS};
//! use shepherd_scheduler_core::resources::Resources;
//!
//! let resources = Resources::new();
//! ConfiguredHeaders::of(&resources).add("X-Preferred-Zone");
//! ConfiguredHeaders::of(&resources).add("x-preferred-zone");
//! let names = resources.get::<ConfiguredHeaders>(CONFIGURED_HEADERS).unwrap().names();
//! assert_eq!(&names[..], ["x-preferred-zone".to_string()]);
//! ```

use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use crate::resources::Resources;

/// The [`Resources`] name of the [`ConfiguredHeaders`].
pub const CONFIGURED_HEADERS: &str = "shepherd.configured-headers";

/// Most configured header names kept: [`ConfiguredHeaders::add`] refuses more, and the
/// plugin that asked fails to build.
pub const MAX_CONFIGURED_HEADERS: usize = 32;

/// The header names plugins of the config read (lower-case, no duplicates).
#[derive(Debug, Default)]
pub struct ConfiguredHeaders {
    names: ArcSwap<Vec<String>>,
    write: Mutex<()>,
}

impl ConfiguredHeaders {
    /// The set in `resources`, created when absent.
    pub fn of(resources: &Resources) -> Arc<ConfiguredHeaders> {
        resources.get_or_insert_with(CONFIGURED_HEADERS, ConfiguredHeaders::default)
    }

    /// Adds `name` (any case); `false` when the set is full.
    pub fn add(&self, name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        let _serial = self.write.lock();
        let current = self.names.load();
        if current.contains(&name) {
            return true;
        }
        if current.len() >= MAX_CONFIGURED_HEADERS {
            return false;
        }
        let mut next = Vec::clone(&current);
        next.push(name);
        self.names.store(Arc::new(next));
        true
    }

    /// The names, as one shared list (read at each request without a lock).
    pub fn names(&self) -> Arc<Vec<String>> {
        self.names.load_full()
    }
}
