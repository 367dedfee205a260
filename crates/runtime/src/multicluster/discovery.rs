//! `multicluster-file-discovery`: peer clusters as endpoints, from `file-discovery`'s file.
//!
//! The file format is `file-discovery`'s ([`parse_endpoints_file`](crate::discovery::parse_endpoints_file)),
//! and it is read and watched the same way (`path`, `watchFile`); an entry differs in its
//! `address`, which is a cluster's gateway: an IPv4 or IPv6 literal, or a DNS-1123 hostname
//! (`gw.cluster-a.example.com`). Shepherd names endpoints by `ip:port`, so a hostname is
//! resolved when the file is read (at start and at every reload), to its first address; an
//! entry whose name does not resolve is skipped with a warning, as an invalid entry is. DNS
//! changes are seen at the next reload of the file, not before.
//!
//! A cluster may serve its pool metrics apart from its routable address: the labels
//! `metricsAddress` (and `metricsPort`, default the entry's port) name the scrape target
//! ([`metrics_target`]). A hostname entry without `metricsAddress` is scraped at the hostname
//! (upstream's metrics host is `host:port`).
//!
//! ```
//! use shepherd_runtime::multicluster::parse_clusters_file;
//!
//! let (clusters, skipped) = parse_clusters_file(br#"
//! endpoints:
//!   - {name: cluster-a, address: "gw.cluster-a.example.com", port: "443"}
//!   - {name: cluster-b, address: "fd00::7", port: "8443"}
//!   - {name: bad, address: "Not_A_Host", port: "443"}
//! "#).unwrap();
//! assert_eq!(clusters.len(), 2);
//! assert_eq!(clusters[0].host, "gw.cluster-a.example.com");
//! assert_eq!(clusters[0].labels["metricsAddress"], "gw.cluster-a.example.com");
//! assert!(skipped[0].contains("bad"));
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};

use serde::Deserialize;

use crate::config::EndpointSpec;
use crate::discovery::{EndpointSet, MAX_FILE_ENDPOINTS, read_entries};

/// The label naming a cluster's metrics host.
pub const METRICS_ADDRESS_LABEL: &str = "metricsAddress";

/// The label naming a cluster's metrics port (with [`METRICS_ADDRESS_LABEL`] only).
pub const METRICS_PORT_LABEL: &str = "metricsPort";

/// Longest DNS-1123 subdomain.
const MAX_HOST_LEN: usize = 253;

/// One cluster of the file, before its host is resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterEntry {
    /// The entry's name.
    pub name: String,
    /// The gateway's host: an IP literal or a hostname.
    pub host: String,
    /// The gateway's port.
    pub port: u16,
    /// The entry's labels (with `metricsAddress` set to a hostname `host` when absent).
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct Entry {
    #[serde(default)]
    name: String,
    #[serde(default)]
    address: String,
    #[serde(default)]
    port: serde_norway::Value,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

fn port_of(value: &serde_norway::Value) -> Option<u16> {
    let n = match value {
        serde_norway::Value::String(s) => s.trim().parse::<i64>().ok()?,
        serde_norway::Value::Number(n) => n.as_i64()?,
        _ => return None,
    };
    u16::try_from(n).ok().filter(|p| *p > 0)
}

/// Upstream's `validateHostOrIP`: an IP literal (v4 or v6) or a DNS-1123 subdomain.
pub fn is_host_or_ip(address: &str) -> bool {
    if address.parse::<IpAddr>().is_ok() {
        return true;
    }
    !address.is_empty()
        && address.len() <= MAX_HOST_LEN
        && address.split('.').all(|label| {
            let bytes = label.as_bytes();
            !bytes.is_empty()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
                && bytes[0] != b'-'
                && bytes[bytes.len() - 1] != b'-'
        })
}

/// Reads a clusters file: the clusters, and a message for each entry skipped.
///
/// # Errors
///
/// A file over [`MAX_FILE_BYTES`](crate::discovery::MAX_FILE_BYTES), or one that does not parse.
pub fn parse_clusters_file(bytes: &[u8]) -> Result<(Vec<ClusterEntry>, Vec<String>), String> {
    let entries: Vec<Entry> = read_entries(bytes)?;
    let mut skipped = Vec::new();
    let mut names = BTreeSet::new();
    let mut clusters = Vec::new();
    for (i, e) in entries.into_iter().enumerate() {
        if e.name.is_empty() {
            skipped.push(format!("endpoint endpoints[{i}]: `name` is required"));
            continue;
        }
        if !names.insert(e.name.clone()) {
            skipped.push(format!("endpoint {:?}: the name is listed twice", e.name));
            continue;
        }
        let host = e.address.trim();
        if !is_host_or_ip(host) {
            skipped.push(format!("endpoint {:?}: invalid host {host:?}", e.name));
            continue;
        }
        let Some(port) = port_of(&e.port) else {
            skipped.push(format!("endpoint {:?}: invalid port", e.name));
            continue;
        };
        if clusters.len() == MAX_FILE_ENDPOINTS {
            skipped.push(format!(
                "endpoint {:?}: over {MAX_FILE_ENDPOINTS} endpoints",
                e.name
            ));
            continue;
        }
        let mut labels = e.labels;
        if host.parse::<IpAddr>().is_err() {
            labels
                .entry(METRICS_ADDRESS_LABEL.to_string())
                .or_insert_with(|| host.to_string());
        }
        clusters.push(ClusterEntry {
            name: e.name,
            host: host.to_string(),
            port,
            labels,
        });
    }
    Ok((clusters, skipped))
}

/// The clusters as endpoints: IP literals as they are, hostnames resolved (their first
/// address); an entry that does not resolve, or resolves to an address already listed, is
/// skipped with a message.
pub async fn resolve(clusters: Vec<ClusterEntry>) -> (EndpointSet, Vec<String>) {
    let mut skipped = Vec::new();
    let mut seen = BTreeSet::new();
    let mut specs = Vec::with_capacity(clusters.len());
    for cluster in clusters {
        let addr = match cluster.host.parse::<IpAddr>() {
            Ok(ip) => Some(SocketAddr::new(ip, cluster.port)),
            Err(_) => match tokio::net::lookup_host((cluster.host.as_str(), cluster.port)).await {
                Ok(mut found) => found.next(),
                Err(error) => {
                    skipped.push(format!(
                        "endpoint {:?}: host {:?} does not resolve: {error}",
                        cluster.name, cluster.host
                    ));
                    continue;
                }
            },
        };
        let Some(addr) = addr else {
            skipped.push(format!(
                "endpoint {:?}: host {:?} has no address",
                cluster.name, cluster.host
            ));
            continue;
        };
        if !seen.insert(addr) {
            skipped.push(format!(
                "endpoint {:?}: {addr} is already listed",
                cluster.name
            ));
            continue;
        }
        let mut spec = EndpointSpec::new(addr);
        spec.labels = cluster.labels;
        specs.push(spec);
    }
    (EndpointSet::new(specs), skipped)
}

/// Where a cluster's metrics are scraped (`host:port`, IPv6 in brackets): its
/// `metricsAddress` label with `metricsPort` (default: `port_override`, else the endpoint's
/// port), else the endpoint's own address (with `port_override` when given).
///
/// ```
/// use shepherd_runtime::config::EndpointSpec;
/// use shepherd_runtime::multicluster::metrics_target;
///
/// let spec = EndpointSpec::new("10.0.0.12:8080".parse().unwrap());
/// assert_eq!(metrics_target(&spec, None), "10.0.0.12:8080");
/// let split = spec.clone().with_label("metricsAddress", "10.0.0.11").with_label("metricsPort", "9090");
/// assert_eq!(metrics_target(&split, None), "10.0.0.11:9090");
/// ```
pub fn metrics_target(spec: &EndpointSpec, port_override: Option<u16>) -> String {
    let port = port_override.unwrap_or(spec.addr.port());
    match spec.label(METRICS_ADDRESS_LABEL).filter(|a| !a.is_empty()) {
        Some(host) => {
            let port = spec
                .label(METRICS_PORT_LABEL)
                .filter(|p| !p.is_empty())
                .map_or_else(|| port.to_string(), str::to_string);
            match host.parse::<IpAddr>() {
                Ok(IpAddr::V6(v6)) => format!("[{v6}]:{port}"),
                _ => format!("{host}:{port}"),
            }
        }
        None => SocketAddr::new(spec.addr.ip(), port).to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    // discovery/file/multicluster_test.go, TestMetricsHostFromLabels.
    #[test]
    fn upstreams_metrics_host_cases() {
        let spec = || EndpointSpec::new("10.0.0.12:8080".parse().unwrap());
        let with =
            |labels: &[(&str, &str)]| labels.iter().fold(spec(), |s, (k, v)| s.with_label(*k, *v));
        assert_eq!(
            metrics_target(
                &with(&[("metricsAddress", "10.0.0.11"), ("metricsPort", "9090")]),
                None
            ),
            "10.0.0.11:9090"
        );
        assert_eq!(
            metrics_target(&with(&[("metricsAddress", "10.0.0.11")]), None),
            "10.0.0.11:8080"
        );
        assert_eq!(
            metrics_target(&with(&[("metricsPort", "9090")]), None),
            "10.0.0.12:8080",
            "metricsPort alone is ignored"
        );
        assert_eq!(metrics_target(&spec(), None), "10.0.0.12:8080");
        assert_eq!(
            metrics_target(
                &with(&[("metricsAddress", "gw.example.com"), ("metricsPort", "443")]),
                None
            ),
            "gw.example.com:443"
        );
    }

    // TestMultiClusterFactory_AcceptsHostname: the metrics host is host:port.
    #[test]
    fn a_hostname_is_accepted_and_scraped_by_name() {
        let (clusters, skipped) = parse_clusters_file(
            b"endpoints:\n  - name: cluster-a\n    address: \"gw.cluster-a.example.com\"\n    port: \"443\"\n",
        )
        .unwrap();
        assert!(skipped.is_empty());
        let spec = EndpointSpec {
            addr: "127.0.0.1:443".parse().unwrap(),
            labels: clusters[0].labels.clone(),
        };
        assert_eq!(metrics_target(&spec, None), "gw.cluster-a.example.com:443");
    }

    // TestMultiClusterFactory_MetricsHostFromLabels: labels win over the address.
    #[tokio::test]
    async fn labels_reach_the_endpoint() {
        let (clusters, _) = parse_clusters_file(
            b"endpoints:\n  - name: split\n    address: \"10.0.0.12\"\n    port: \"8080\"\n    labels: { metricsAddress: \"10.0.0.11\", metricsPort: \"9090\" }\n",
        )
        .unwrap();
        let (set, skipped) = resolve(clusters).await;
        assert!(skipped.is_empty());
        let spec = set.get("10.0.0.12:8080").unwrap();
        assert_eq!(metrics_target(spec, None), "10.0.0.11:9090");
    }

    #[tokio::test]
    async fn localhost_resolves_and_bad_hosts_are_skipped() {
        let (clusters, skipped) = parse_clusters_file(
            br#"{"endpoints": [
                {"name": "local", "address": "localhost", "port": "8443"},
                {"name": "v6", "address": "::1", "port": 9443},
                {"name": "upper", "address": "GW.example.com", "port": "443"},
                {"name": "dash", "address": "-gw.example.com", "port": "443"},
                {"name": "port", "address": "10.0.0.1", "port": "0"}
            ]}"#,
        )
        .unwrap();
        assert_eq!(clusters.len(), 2);
        assert_eq!(skipped.len(), 3, "{skipped:?}");
        let (set, skipped) = resolve(clusters).await;
        assert!(skipped.is_empty(), "{skipped:?}");
        assert_eq!(set.len(), 2);
        assert!(set.get("[::1]:9443").is_some());
    }

    #[test]
    fn host_validation_is_upstreams() {
        for ok in [
            "10.0.0.1",
            "fd00::1",
            "gw.cluster-a.example.com",
            "a",
            "a-b.c",
        ] {
            assert!(is_host_or_ip(ok), "{ok}");
        }
        for bad in [
            "",
            "Gw.example.com",
            "gw_a.example.com",
            "gw..example.com",
            "gw-.x",
            "[fd00::1]",
        ] {
            assert!(!is_host_or_ip(bad), "{bad}");
        }
        assert!(!is_host_or_ip(&"a".repeat(254)));
    }
}
