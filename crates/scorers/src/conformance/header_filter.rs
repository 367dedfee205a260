//! `header-based-testing-filter` (a conformance-test plugin upstream): keeps only the endpoints
//! the request header `test-epp-endpoint-selection` names, in the header's order.
//!
//! The header is a comma-separated list; an entry is an `IP` (the endpoint with that address,
//! whatever its port) or an `IP:port` (that endpoint exactly); IPv6 with or without brackets
//! (`fd00::1`, `[fd00::1]:3002`). Entries naming no candidate are skipped, and a second entry
//! naming an IP already kept is a duplicate (upstream de-duplicates by IP). Without the header,
//! or with a blank one, nothing is kept and the request fails with no endpoint (HTTP 503), as
//! upstream. The filter takes no parameters; the adapters copy the header into the request.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::builtin_registry;
//!
//! let config = EndpointPickerConfig::from_yaml("
//! plugins:
//! - type: header-based-testing-filter
//! - type: max-score-picker
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - pluginRef: header-based-testing-filter
//!   - pluginRef: max-score-picker
//! ").unwrap();
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["127.0.0.1:3000", "127.0.0.2:3000"]);
//! let scheduler = build_scheduler(&config, &builtin_registry(), pool).unwrap();
//! let mut request = InferenceRequest::new("r", "m", Prompt::Text("hi".into()));
//! request.headers.push(("test-epp-endpoint-selection".into(), "127.0.0.2".into()));
//! assert_eq!(scheduler.schedule(&request).unwrap().primary().address(), "127.0.0.2:3000");
//! ```

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::plugin::{CycleState, Filter, PluginInstance};
use shepherd_scheduler_core::request::ConfiguredHeaders;

use crate::params::NoParameters;

/// Registry type name.
pub const TYPE_NAME: &str = "header-based-testing-filter";

/// The request header naming the endpoints to keep.
pub const SELECTION_HEADER: &str = "test-epp-endpoint-selection";

/// Most entries of the header read (the rest are ignored).
pub const MAX_ENTRIES: usize = 256;

/// The filter (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct HeaderBasedTestingFilter;

/// One header entry: an IP, with a port when one was given.
fn entry(item: &str) -> Option<(IpAddr, Option<u16>)> {
    if let Ok(addr) = item.parse::<SocketAddr>() {
        return Some((addr.ip(), Some(addr.port())));
    }
    let host = item.trim_start_matches('[').trim_end_matches(']');
    host.parse::<IpAddr>().ok().map(|ip| (ip, None))
}

/// The endpoint's IP and port, from its `ip:port` address.
fn address_of(endpoint: &Endpoint) -> Option<SocketAddr> {
    endpoint.address().parse().ok()
}

/// The candidates the header names, in its order (see the module docs).
pub fn select<'a>(
    header: Option<&str>,
    candidates: &[&'a Arc<Endpoint>],
) -> Vec<&'a Arc<Endpoint>> {
    let Some(header) = header.filter(|h| !h.trim().is_empty()) else {
        return Vec::new();
    };
    let addresses: Vec<Option<SocketAddr>> = candidates.iter().map(|e| address_of(e)).collect();
    let mut kept: Vec<&'a Arc<Endpoint>> = Vec::new();
    let mut kept_ips: Vec<IpAddr> = Vec::new();
    for item in header.split(',').take(MAX_ENTRIES) {
        let Some((ip, port)) = entry(item.trim()) else {
            continue;
        };
        // IP only: upstream's map keeps the last endpoint listed with that IP.
        let found = match port {
            Some(port) => addresses
                .iter()
                .position(|a| *a == Some(SocketAddr::new(ip, port))),
            None => addresses
                .iter()
                .rposition(|a| a.is_some_and(|a| a.ip() == ip)),
        };
        if let Some(i) = found
            && !kept_ips.contains(&ip)
        {
            kept_ips.push(ip);
            kept.push(candidates[i]);
        }
    }
    kept
}

impl Filter for HeaderBasedTestingFilter {
    fn filter(&self, cycle: &mut CycleState<'_>, candidates: &mut Vec<&Arc<Endpoint>>) {
        let kept = select(cycle.request.header(SELECTION_HEADER), candidates);
        *candidates = kept;
    }
}

/// Builds a `header-based-testing-filter` (no parameters) and asks the adapters to copy its
/// header.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    args.parse::<NoParameters>()?;
    if !ConfiguredHeaders::of(args.resources).add(SELECTION_HEADER) {
        return Err(PluginError::invalid(
            "headerName",
            "too many request headers are read by the config's plugins",
        ));
    }
    Ok(PluginInstance::filter(Arc::new(HeaderBasedTestingFilter)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use shepherd_scheduler_core::prelude::*;

    /// The addresses kept from `members` for `header`.
    fn kept(header: Option<&str>, members: &[&str]) -> Vec<String> {
        let pool = Pool::new();
        pool.set_members(members.iter().copied());
        let snapshot = pool.snapshot();
        let eps: Vec<Arc<Endpoint>> = members
            .iter()
            .map(|m| Arc::clone(snapshot.get_by_address(m).unwrap()))
            .collect();
        let candidates: Vec<&Arc<Endpoint>> = eps.iter().collect();
        select(header, &candidates)
            .iter()
            .map(|e| e.address().to_string())
            .collect()
    }

    // filter_test.go, TestFilter, every case.
    #[test]
    fn upstreams_cases() {
        assert!(kept(None, &["10.0.0.1:3000"]).is_empty(), "header unset");
        assert!(
            kept(Some("10.0.0.99"), &["10.0.0.1:3000"]).is_empty(),
            "no IP match"
        );
        assert_eq!(
            kept(Some("10.0.0.1"), &["10.0.0.1:3002"]),
            ["10.0.0.1:3002"]
        );
        assert_eq!(
            kept(
                Some("10.0.0.1:3002"),
                &["10.0.0.1:3000", "10.0.0.1:3002", "10.0.0.2:3002"]
            ),
            ["10.0.0.1:3002"]
        );
        assert!(kept(Some("10.0.0.1:9999"), &["10.0.0.1:3002"]).is_empty());
        assert_eq!(
            kept(
                Some("10.0.0.3:3004, 10.0.0.2, 10.0.0.3"),
                &["10.0.0.1:3000", "10.0.0.2:3002", "10.0.0.3:3004"]
            ),
            ["10.0.0.3:3004", "10.0.0.2:3002"]
        );
        assert_eq!(
            kept(
                Some("[fd00::1]:3002"),
                &["[fd00::1]:3002", "[fd00::2]:3002"]
            ),
            ["[fd00::1]:3002"]
        );
        assert_eq!(
            kept(Some("fd00::2"), &["[fd00::1]:3002", "[fd00::2]:3004"]),
            ["[fd00::2]:3004"]
        );
    }

    #[test]
    fn blank_and_garbage_headers_keep_nothing_or_what_parses() {
        assert!(kept(Some("  "), &["10.0.0.1:3000"]).is_empty());
        assert_eq!(
            kept(Some("not-an-ip,,10.0.0.1"), &["10.0.0.1:3000"]),
            ["10.0.0.1:3000"]
        );
    }

    #[test]
    fn the_factory_takes_no_parameters_and_registers_the_header() {
        let shared = shepherd_scheduler_core::shared::SharedState::new(Arc::new(Pool::new()));
        let none = serde_json::Value::Null;
        factory(&PluginArgs::new("f", TYPE_NAME, &none, &shared, 1)).unwrap();
        assert!(
            ConfiguredHeaders::of(&shared.resources)
                .names()
                .iter()
                .any(|n| n.as_str() == SELECTION_HEADER)
        );
        let bad = serde_json::json!({"header": "x"});
        assert!(factory(&PluginArgs::new("f", TYPE_NAME, &bad, &shared, 1)).is_err());
    }
}
