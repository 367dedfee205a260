//! The `endpoints` section: the static list of model servers.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

/// One model server: its `ip:port` and optional labels.
///
/// In YAML an entry is either the bare address or a map with `address` and `labels`:
///
/// ```
/// use shepherd_runtime::config::EndpointSpec;
///
/// let list: Vec<EndpointSpec> = serde_norway::from_str(
///     "- 127.0.0.1:8000\n- address: 127.0.0.1:8001\n  labels: {llm-d.ai/engine-type: sglang}\n",
/// ).unwrap();
/// assert_eq!(list[0].address(), "127.0.0.1:8000");
/// assert_eq!(list[1].label("llm-d.ai/engine-type"), Some("sglang"));
/// assert!(serde_norway::from_str::<EndpointSpec>("localhost:8000").is_err()); // ip:port only
/// ```
///
/// Labels are free-form. The scraper reads the engine label (by default
/// `llm-d.ai/engine-type`, see [`CoreMetricsExtractorParams`](crate::mapping::CoreMetricsExtractorParams))
/// to pick the endpoint's metrics mapping; other labels are kept for discovery sources and
/// debug views.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EndpointSpec {
    /// Where the server listens.
    #[serde(rename = "address")]
    pub addr: SocketAddr,
    /// Its labels.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

impl EndpointSpec {
    /// An endpoint at `addr` without labels.
    pub fn new(addr: SocketAddr) -> Self {
        EndpointSpec {
            addr,
            labels: BTreeMap::new(),
        }
    }

    /// Adds a label.
    pub fn with_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// The address as the pool names it (`ip:port`, IPv6 in brackets).
    pub fn address(&self) -> String {
        self.addr.to_string()
    }

    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }
}

/// Reads `ip:port` or `{address, labels}`, so that an error points at the entry itself.
impl<'de> Deserialize<'de> for EndpointSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntryVisitor;

        impl<'de> Visitor<'de> for EntryVisitor {
            type Value = EndpointSpec;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an endpoint address `ip:port`, or a map with `address` and `labels`")
            }

            fn visit_str<E: de::Error>(self, address: &str) -> Result<EndpointSpec, E> {
                parse_addr(address)
                    .map(EndpointSpec::new)
                    .map_err(E::custom)
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<EndpointSpec, A::Error> {
                let mut addr = None;
                let mut labels = None;
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "address" if addr.is_none() => {
                            let text: String = map.next_value()?;
                            addr = Some(parse_addr(&text).map_err(de::Error::custom)?);
                        }
                        "labels" if labels.is_none() => labels = Some(map.next_value()?),
                        "address" | "labels" => {
                            return Err(de::Error::duplicate_field("address or labels"));
                        }
                        other => {
                            return Err(de::Error::unknown_field(other, &["address", "labels"]));
                        }
                    }
                }
                let addr = addr.ok_or_else(|| de::Error::missing_field("address"))?;
                Ok(EndpointSpec {
                    addr,
                    labels: labels.unwrap_or_default(),
                })
            }
        }

        deserializer.deserialize_any(EntryVisitor)
    }
}

fn parse_addr(address: &str) -> Result<SocketAddr, String> {
    address.trim().parse::<SocketAddr>().map_err(|_| {
        format!("endpoint address {address:?} is not `ip:port` (for example 10.0.0.7:8000)")
    })
}
