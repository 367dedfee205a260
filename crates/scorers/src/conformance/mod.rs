//! Plugins upstream registers for its conformance tests only. They make a pick predictable
//! from the outside, so a test suite can check the gateway's routing without load or caches
//! deciding; they have no place in a production config.
//!
//! - `header-based-testing-filter` ([`header_filter`]): keeps the endpoints the request's
//!   `test-epp-endpoint-selection` header names.

pub mod header_filter;
