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
}

impl EndpointSet {
    /// A set of `endpoints`; for an address given twice, the first entry wins.
    pub fn new(endpoints: impl IntoIterator<Item = EndpointSpec>) -> Self {
        let mut list: Vec<EndpointSpec> = Vec::new();
        for endpoint in endpoints {
            if !list.iter().any(|e| e.addr == endpoint.addr) {
                list.push(endpoint);
            }
        }
        list.sort_by_key(EndpointSpec::address);
        EndpointSet { endpoints: list }
    }

    /// The endpoints, sorted by address.
    pub fn endpoints(&self) -> &[EndpointSpec] {
        &self.endpoints
    }

    /// Their addresses as the pool names them.
    pub fn addresses(&self) -> Vec<String> {
        self.endpoints.iter().map(EndpointSpec::address).collect()
    }

    /// The endpoint at `address`.
    pub fn get(&self, address: &str) -> Option<&EndpointSpec> {
        self.endpoints.iter().find(|e| e.address() == address)
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
