//! A set of discovered endpoints.

use crate::config::EndpointSpec;

/// The endpoints a [`Discovery`](super::Discovery) source currently knows, sorted by address,
/// each address once.
///
/// ```
/// use shepherd_runtime::config::EndpointSpec;
/// use shepherd_runtime::discovery::EndpointSet;
///
/// let set = EndpointSet::new([
///     EndpointSpec::new("127.0.0.1:8001".parse().unwrap()),
///     EndpointSpec::new("127.0.0.1:8000".parse().unwrap()).with_label("zone", "a"),
///     EndpointSpec::new("127.0.0.1:8001".parse().unwrap()),
/// ]);
/// assert_eq!(set.addresses(), ["127.0.0.1:8000", "127.0.0.1:8001"]);
/// assert_eq!(set.get("127.0.0.1:8000").unwrap().label("zone"), Some("a"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointSet {
    endpoints: Vec<EndpointSpec>,
    /// Each endpoint's address as the pool names it, aligned with `endpoints` (formatted
    /// once: the pool, the scraper and the KV-event manager look endpoints up by it).
    addresses: Vec<String>,
}

impl EndpointSet {
    /// A set of `endpoints`; for an address given twice, the first entry wins.
    pub fn new(endpoints: impl IntoIterator<Item = EndpointSpec>) -> Self {
        // A stable sort keeps the given order among equal addresses, so the dedup below
        // keeps the first entry of each; O(n log n) for the thousands of a large pool.
        let mut keyed: Vec<(String, EndpointSpec)> =
            endpoints.into_iter().map(|e| (e.address(), e)).collect();
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        keyed.dedup_by(|later, first| later.1.addr == first.1.addr);
        let (addresses, endpoints) = keyed.into_iter().unzip();
        EndpointSet {
            endpoints,
            addresses,
        }
    }

    /// The endpoints, sorted by address.
    pub fn endpoints(&self) -> &[EndpointSpec] {
        &self.endpoints
    }

    /// Their addresses as the pool names them.
    pub fn addresses(&self) -> Vec<String> {
        self.addresses.clone()
    }

    /// Their addresses, borrowed.
    pub fn address_list(&self) -> &[String] {
        &self.addresses
    }

    /// The endpoint at `address`.
    pub fn get(&self, address: &str) -> Option<&EndpointSpec> {
        // Sorted by address: a binary search (the scraper asks once per endpoint per change).
        self.addresses
            .binary_search_by(|a| a.as_str().cmp(address))
            .ok()
            .map(|i| &self.endpoints[i])
    }

    /// Number of endpoints.
    pub fn len(&self) -> usize {
        self.endpoints.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }
}
