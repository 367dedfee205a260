//! Endpoint discovery: where the pool's members come from.
//!
//! A [`Discovery`] source publishes [`EndpointSet`]s through a tokio `watch` channel: the
//! runtime applies every new set to the pool (`Pool::set_members`, which keeps the live
//! counters of endpoints that stay) and the scraper follows the same sets. Adapters never see
//! the source, so DNS or Kubernetes discovery can be added later as one more implementation.
//!
//! [`StaticDiscovery`] is the list from the config file's `endpoints` section;
//! [`EndpointsFileDiscovery`] the endpoints of a file of their own (upstream's
//! `file-discovery`);
//! [`kubernetes::KubernetesDiscovery`] (the `kubernetes` cargo feature) the ready pods of an
//! InferencePool or of a label selector, watched through the API server. The runtime
//! watches that file with a [`FileWatcher`] (polling modification time, length and a content
//! hash on tokio time) and, on an edit, publishes the new list and reloads the policy if it
//! changed.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_runtime::config::EndpointSpec;
//! use shepherd_runtime::discovery::{Discovery, EndpointSet, StaticDiscovery};
//!
//! /// A source of its own: one fixed endpoint (a DNS source would re-resolve on a timer
//! /// and publish through the same kind of channel).
//! #[derive(Debug)]
//! struct One(StaticDiscovery);
//!
//! impl Discovery for One {
//!     fn name(&self) -> &str { "one" }
//!     fn subscribe(&self) -> tokio::sync::watch::Receiver<Arc<EndpointSet>> { self.0.subscribe() }
//! }
//!
//! let one = One(StaticDiscovery::new(EndpointSet::new([
//!     EndpointSpec::new("127.0.0.1:8000".parse().unwrap()),
//! ])));
//! assert_eq!(one.subscribe().borrow().len(), 1);
//! ```

mod endpoints_file;
mod file;
#[cfg(feature = "kubernetes")]
pub mod kubernetes;
pub(crate) mod membership;
mod selector;
mod set;
mod static_list;

use std::fmt;
use std::sync::Arc;

use shepherd_scheduler_core::metrics::MetricsSource;
use tokio::sync::watch;

pub(crate) use endpoints_file::read_entries;
pub use endpoints_file::{
    EndpointsFileDiscovery, MAX_FILE_BYTES, MAX_FILE_ENDPOINTS, parse_endpoints_file,
};
pub use file::{DEFAULT_POLL_INTERVAL, FileWatcher, Fingerprint};
pub use selector::{
    LabelSelector, MAX_SELECTOR_LABELS, SelectorError, is_label_key, is_label_value,
};
pub use set::EndpointSet;
pub use static_list::StaticDiscovery;

/// A source of endpoint sets.
///
/// The receiver's current value is the set in force; the source sends a new set whenever
/// membership changes. A source that will never change again may drop its sender: the last
/// set stays in force.
pub trait Discovery: Send + Sync + fmt::Debug {
    /// A short name for logs (`static`, `dns`, `kubernetes`).
    fn name(&self) -> &str;

    /// A receiver of the current set and every later one.
    fn subscribe(&self) -> watch::Receiver<Arc<EndpointSet>>;

    /// The source's own figures for the admin port's `/metrics` (default none).
    fn metrics(&self) -> Option<Arc<dyn MetricsSource>> {
        None
    }

    /// The request policies (objective priorities, model rewrites) the source keeps with the
    /// pool, which the adapters apply to every request (default none; Kubernetes discovery
    /// keeps the pool's `InferenceObjective`s and `InferenceModelRewrite`s).
    fn request_policies(&self) -> Option<Arc<crate::policies::RequestPolicies>> {
        None
    }
}
