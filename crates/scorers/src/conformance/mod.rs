//! Plugins upstream registers for its conformance tests only. They make a pick predictable
//! from the outside, so a test suite can check the gateway's routing without load or caches
//! deciding; they have no place in a production config.
//!
//! - `header-based-testing-filter` ([`header_filter`]): keeps the endpoints the request's
//!   `test-epp-endpoint-selection` header names;
//! - `destination-endpoint-served-verifier` ([`served_verifier`]): answers with the endpoint
//!   that served, as the gateway reported it.

pub mod header_filter;
pub mod served_verifier;
