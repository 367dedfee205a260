//! Response headers plugins ask the adapters to add to a response, once they know which
//! endpoint served it: upstream's `ResponseHeaderProcessor` plugins. Two kinds:
//!
//! - [`ResponseHeader::ServedEndpoint`] (the `destination-endpoint-served-verifier` of
//!   upstream's conformance tests): the served endpoint *as the gateway reports it* — ext_proc:
//!   the `envoy.lb` metadata key `x-gateway-destination-endpoint-served` — or, when the report
//!   is missing, upstream's failure text;
//! - [`ResponseHeader::EndpointLabel`] (a `disaggregatedset-rollout-screener`'s header
//!   selectors): a label of the endpoint that served, when it has it.
//!
//! A plugin's factory returns them with
//! [`PluginInstance::with_response_headers`](crate::plugin::PluginInstance::with_response_headers);
//! the scheduler keeps those of its config ([`Scheduler::response_headers`](crate::scheduler::Scheduler::response_headers)),
//! and the adapters call [`stamp`].
//!
//! ```
//! use shepherd_scheduler_core::response_headers::{stamp, ResponseHeader, ServedReport};
//!
//! let rules = [
//!     ResponseHeader::served_endpoint(),
//!     ResponseHeader::endpoint_label("x-disagg-revision", "disaggregatedset.x-k8s.io/revision"),
//! ];
//! let labels = |key: &str| (key == "disaggregatedset.x-k8s.io/revision").then(|| "rev-b".to_string());
//! assert_eq!(
//!     stamp(&rules, ServedReport::Address("10.0.0.1:8080"), labels),
//!     [
//!         ("x-conformance-test-served-endpoint".to_string(), "10.0.0.1:8080".to_string()),
//!         ("x-disagg-revision".to_string(), "rev-b".to_string()),
//!     ]
//! );
//! assert_eq!(
//!     stamp(&rules[..1], ServedReport::NoNamespace, |_| None)[0].1,
//!     "fail: missing envoy lb metadata"
//! );
//! ```

use std::sync::Arc;

/// The header upstream's conformance verifier writes.
pub const CONFORMANCE_SERVED_HEADER: &str = "x-conformance-test-served-endpoint";

/// Its value when the gateway sent no `envoy.lb` metadata.
pub const MISSING_NAMESPACE: &str = "fail: missing envoy lb metadata";

/// Its value when the `envoy.lb` metadata has no served endpoint.
pub const MISSING_SERVED_KEY: &str = "fail: missing destination endpoint served metadata";

/// One header to add to responses (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseHeader {
    /// The served endpoint the gateway reported, under `header`.
    ServedEndpoint {
        /// The header written.
        header: Arc<str>,
    },
    /// The serving endpoint's label `label_key`, under `header` (nothing when it has none).
    EndpointLabel {
        /// The header written.
        header: Arc<str>,
        /// The endpoint label read.
        label_key: Arc<str>,
    },
}

impl ResponseHeader {
    /// The conformance verifier's header.
    pub fn served_endpoint() -> Self {
        ResponseHeader::ServedEndpoint {
            header: CONFORMANCE_SERVED_HEADER.into(),
        }
    }

    /// A label of the serving endpoint under `header` (lower-cased).
    pub fn endpoint_label(header: &str, label_key: &str) -> Self {
        ResponseHeader::EndpointLabel {
            header: header.to_ascii_lowercase().into(),
            label_key: label_key.into(),
        }
    }
}

/// What the gateway reported of the endpoint that served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServedReport<'a> {
    /// No `envoy.lb` metadata at all.
    NoNamespace,
    /// The metadata, without the served endpoint.
    NoServedKey,
    /// The served endpoint (`ip:port`).
    Address(&'a str),
}

/// The headers `rules` add, in order, given the gateway's report and the serving endpoint's
/// labels (`label`).
pub fn stamp(
    rules: &[ResponseHeader],
    report: ServedReport<'_>,
    label: impl Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    rules
        .iter()
        .filter_map(|rule| match rule {
            ResponseHeader::ServedEndpoint { header } => {
                let value = match report {
                    ServedReport::NoNamespace => MISSING_NAMESPACE.to_string(),
                    ServedReport::NoServedKey => MISSING_SERVED_KEY.to_string(),
                    ServedReport::Address(address) => address.to_string(),
                };
                Some((header.to_string(), value))
            }
            ResponseHeader::EndpointLabel { header, label_key } => label(label_key)
                .filter(|v| !v.is_empty())
                .map(|v| (header.to_string(), v)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    // destination_endpoint_served_verifier_test.go: every case.
    #[test]
    fn upstreams_verifier_cases() {
        let rules = [ResponseHeader::served_endpoint()];
        let value = |report| stamp(&rules, report, |_| None)[0].1.clone();
        assert_eq!(
            value(ServedReport::Address("10.0.0.1:8080")),
            "10.0.0.1:8080"
        );
        assert_eq!(value(ServedReport::NoNamespace), MISSING_NAMESPACE);
        assert_eq!(value(ServedReport::NoServedKey), MISSING_SERVED_KEY);
    }

    // plugin.go ResponseHeader: only non-empty labels are stamped.
    #[test]
    fn labels_are_stamped_when_present() {
        let rules = [ResponseHeader::endpoint_label("X-Disagg-Slice", "slice")];
        assert!(stamp(&rules, ServedReport::NoNamespace, |_| None).is_empty());
        assert!(stamp(&rules, ServedReport::NoNamespace, |_| Some(String::new())).is_empty());
        assert_eq!(
            stamp(&rules, ServedReport::NoNamespace, |_| Some("s1".into())),
            [("x-disagg-slice".to_string(), "s1".to_string())]
        );
    }
}
