//! What the gateway tells the picker through metadata: the *subset hint* on the request path
//! (only these endpoints may be picked) and the *served endpoint* on the response path (which
//! endpoint of the list actually answered).
//!
//! Both arrive in `ProcessingRequest.metadata_context.filter_metadata`, a map from namespace to
//! a `google.protobuf.Struct`:
//!
//! ```text
//! envoy.lb.subset_hint:                       (or envoy.lb)
//!   x-gateway-destination-endpoint-subset: ["10.0.0.1:8000", "10.0.0.2"]
//! envoy.lb:
//!   x-gateway-destination-endpoint-served: "10.0.0.2:8000"
//! ```
//!
//! A subset entry is `ip:port` or a bare `ip` (any port of that host). A list may also come as
//! one comma-separated string. A hint that is present but names nothing is not "no hint": it
//! means no endpoint may be picked, and the request is answered 503.
//!
//! ```
//! use envoy_types::pb::envoy::config::core::v3::Metadata;
//! use envoy_types::pb::google::protobuf::{value::Kind, ListValue, Struct, Value};
//! use shepherd_adapters_extproc::hint::subset_hint;
//! use shepherd_adapters_extproc::MetadataKeys;
//!
//! let string = |s: &str| Value { kind: Some(Kind::StringValue(s.into())) };
//! let list = Value { kind: Some(Kind::ListValue(ListValue { values: vec![string("127.0.0.1:8001")] })) };
//! let mut metadata = Metadata::default();
//! metadata.filter_metadata.insert(
//!     "envoy.lb.subset_hint".into(),
//!     Struct { fields: [("x-gateway-destination-endpoint-subset".to_string(), list)].into() },
//! );
//! let keys = MetadataKeys::default();
//! assert_eq!(subset_hint(Some(&metadata), &keys), Some(vec!["127.0.0.1:8001".to_string()]));
//! assert_eq!(subset_hint(None, &keys), None);
//! ```

use envoy_types::pb::envoy::config::core::v3::Metadata;
use envoy_types::pb::google::protobuf::Value;
use envoy_types::pb::google::protobuf::value::Kind;

use crate::options::MetadataKeys;

/// The subset hint, when the gateway sent one: `Some(empty)` means "no endpoint may be
/// picked". Searched in each of `keys.subset_namespaces` in order.
pub fn subset_hint(metadata: Option<&Metadata>, keys: &MetadataKeys) -> Option<Vec<String>> {
    let metadata = metadata?;
    for namespace in &keys.subset_namespaces {
        let Some(value) = metadata
            .filter_metadata
            .get(namespace)
            .and_then(|s| s.fields.get(&keys.subset))
        else {
            continue;
        };
        let mut entries = Vec::new();
        collect_entries(value, &mut entries, 0);
        return Some(entries);
    }
    None
}

/// The endpoint that served the response, from metadata `keys.namespace` →
/// `keys.served`, when reported.
pub fn served_endpoint(metadata: Option<&Metadata>, keys: &MetadataKeys) -> Option<String> {
    let value = metadata?
        .filter_metadata
        .get(&keys.namespace)?
        .fields
        .get(&keys.served)?;
    let mut entries = Vec::new();
    collect_entries(value, &mut entries, 0);
    entries.into_iter().next()
}

/// What the gateway's metadata says of the served endpoint, in the terms of upstream's
/// conformance verifier: no `envoy.lb` namespace, the namespace without the served key, or
/// the first endpoint it names.
pub fn served_report(metadata: Option<&Metadata>, keys: &MetadataKeys) -> ServedReport<String> {
    let Some(namespace) = metadata.and_then(|m| m.filter_metadata.get(&keys.namespace)) else {
        return ServedReport::NoNamespace;
    };
    let Some(value) = namespace.fields.get(&keys.served) else {
        return ServedReport::NoServedKey;
    };
    let mut entries = Vec::new();
    collect_entries(value, &mut entries, 0);
    match entries.into_iter().next() {
        Some(address) => ServedReport::Address(address),
        None => ServedReport::NoServedKey,
    }
}

/// [`served_report`]'s answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServedReport<T> {
    /// No `envoy.lb` metadata.
    NoNamespace,
    /// The metadata without a served endpoint.
    NoServedKey,
    /// The served endpoint.
    Address(T),
}

/// Pushes every non-empty `ip[:port]` named by `value`: strings (split at commas) and lists
/// of them, nested at most a few levels.
fn collect_entries(value: &Value, out: &mut Vec<String>, depth: usize) {
    match &value.kind {
        Some(Kind::StringValue(s)) => out.extend(
            s.split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(str::to_string),
        ),
        Some(Kind::ListValue(list)) if depth < 4 => {
            for v in &list.values {
                collect_entries(v, out, depth + 1);
            }
        }
        _ => {}
    }
}
