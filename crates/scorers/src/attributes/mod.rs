//! Request attributes: values a plugin derives from a request for other plugins to read, as
//! upstream's producers publish them on the request's attribute store.
//!
//! Upstream keys an attribute by its data type and the producer's name (`agent-identity`
//! with no producer, `SessionIDDataKey` from a `session-id-producer`). In Shepherd a producer
//! registers an [`AttributeProducer`] under that key in the shared [`RequestAttributes`]; a
//! reader (a session-affinity `attribute` source) asks for the key and gets the value
//! computed from the request, at the moment it needs it. Both upstream producers derive the
//! value from request headers alone, so computing it when read gives the same value as
//! storing it when the request arrives.
//!
//! The set holds at most [`MAX_ATTRIBUTE_PRODUCERS`] producers; a reload replaces a
//! producer registered under the same key, and one the new config no longer declares stays
//! (its attribute is still computed, as the headers it reads are still copied).
//!
//! ```
//! use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
//! use shepherd_scheduler_core::resources::Resources;
//! use shepherd_scorers::attributes::{AttributeKey, RequestAttributes};
//! use shepherd_scorers::attributes::agent_identity::AgentIdentity;
//! use std::sync::Arc;
//!
//! let resources = Resources::new();
//! let attributes = RequestAttributes::of(&resources);
//! attributes.register(AgentIdentity::key(), Arc::new(AgentIdentity::new(&[]))).unwrap();
//!
//! let mut request = InferenceRequest::new("r", "m", Prompt::Text("hi".into()));
//! request.headers.push(("x-session-affinity".into(), "opencode-7".into()));
//! let key = AttributeKey::new("agent-identity", "");
//! assert_eq!(attributes.value(&key, &request), Some("opencode-7"));
//! ```

pub mod agent_identity;
pub mod session_id;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use shepherd_scheduler_core::request::InferenceRequest;
use shepherd_scheduler_core::resources::Resources;

/// The [`Resources`] name of the [`RequestAttributes`].
pub const REQUEST_ATTRIBUTES: &str = "shepherd.request-attributes";

/// Most attribute producers registered.
pub const MAX_ATTRIBUTE_PRODUCERS: usize = 32;

/// An attribute's key: its data type and the producer's name (empty: any producer, as
/// upstream's `agent-identity` key).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AttributeKey {
    /// The data type (`agent-identity`, `SessionIDDataKey`).
    pub data_type: String,
    /// The producer's name.
    pub producer: String,
}

impl AttributeKey {
    /// The key of `data_type` from `producer`.
    pub fn new(data_type: impl Into<String>, producer: impl Into<String>) -> Self {
        AttributeKey {
            data_type: data_type.into(),
            producer: producer.into(),
        }
    }
}

impl fmt::Display for AttributeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.data_type, self.producer)
    }
}

/// Computes one attribute of a request.
pub trait AttributeProducer: Send + Sync + fmt::Debug {
    /// The attribute's value for `request`; `None` when the request has none.
    fn value<'r>(&self, request: &'r InferenceRequest) -> Option<&'r str>;
}

type Table = BTreeMap<AttributeKey, Arc<dyn AttributeProducer>>;

/// The attribute producers a config declares, by key (read at each request without a lock).
#[derive(Debug, Default)]
pub struct RequestAttributes {
    producers: ArcSwap<Table>,
    write: Mutex<()>,
}

/// Why a producer could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the config declares more than {MAX_ATTRIBUTE_PRODUCERS} request-attribute producers")]
pub struct TooManyProducers;

impl RequestAttributes {
    /// The set in `resources`, created when absent.
    pub fn of(resources: &Resources) -> Arc<RequestAttributes> {
        resources.get_or_insert_with(REQUEST_ATTRIBUTES, RequestAttributes::default)
    }

    /// Registers `producer` under `key`, replacing the one there.
    ///
    /// # Errors
    ///
    /// [`TooManyProducers`] when the set is full.
    pub fn register(
        &self,
        key: AttributeKey,
        producer: Arc<dyn AttributeProducer>,
    ) -> Result<(), TooManyProducers> {
        let _serial = self.write.lock();
        let current = self.producers.load();
        if !current.contains_key(&key) && current.len() >= MAX_ATTRIBUTE_PRODUCERS {
            return Err(TooManyProducers);
        }
        let mut next = Table::clone(&current);
        next.insert(key, producer);
        self.producers.store(Arc::new(next));
        Ok(())
    }

    /// The value of the attribute `key` for `request`: `None` when no producer registered
    /// `key` or the request has no such value.
    pub fn value<'r>(&self, key: &AttributeKey, request: &'r InferenceRequest) -> Option<&'r str> {
        let producers = self.producers.load();
        producers.get(key)?.value(request)
    }
}

/// The trimmed value of the header `name`, `None` when absent or blank. `x-session-id` is
/// read where the adapters put it, [`InferenceRequest::session_key`].
pub(crate) fn header_value<'r>(request: &'r InferenceRequest, name: &str) -> Option<&'r str> {
    let value = if name.eq_ignore_ascii_case(crate::scorers::session_source::SESSION_ID_HEADER) {
        request.session_key.as_deref()
    } else {
        request.header(name)
    };
    value.map(str::trim).filter(|v| !v.is_empty())
}
