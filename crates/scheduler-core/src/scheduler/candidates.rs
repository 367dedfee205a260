//! The candidates a profile starts from: pool members named by the subset hint, taking new
//! requests, and — while any candidate has fresh metrics — only those with fresh metrics.

use std::sync::Arc;
use std::time::Duration;

use ahash::AHashSet;

use super::ScheduleError;
use crate::clock::Timestamp;
use crate::endpoint::Endpoint;

/// A gateway's subset hint, indexed once per request: exact `ip:port` entries and bare hosts.
pub(super) struct Subset<'a> {
    exact: AHashSet<&'a str>,
    hosts: AHashSet<&'a str>,
}

impl<'a> Subset<'a> {
    /// Indexes `entries` (`ip:port`, `ip`, `[v6]:port`, `[v6]` or bare `v6`).
    pub(super) fn new(entries: &'a [String]) -> Self {
        let mut exact = AHashSet::with_capacity(entries.len());
        let mut hosts = AHashSet::new();
        for e in entries {
            let e = e.trim();
            if let Some(rest) = e.strip_prefix('[') {
                match rest.split_once(']') {
                    Some((host, "")) => {
                        hosts.insert(host);
                    }
                    Some(_) => {
                        exact.insert(e);
                    }
                    None => {}
                }
            } else if e.matches(':').count() == 1 {
                exact.insert(e);
            } else {
                // A bare IPv4 address or host name, or a bare IPv6 address.
                hosts.insert(e);
            }
        }
        Subset { exact, hosts }
    }

    /// Whether the endpoint at `address` (`ip:port` or `[v6]:port`) is named.
    pub(super) fn contains(&self, address: &str) -> bool {
        if self.exact.contains(address) {
            return true;
        }
        if self.hosts.is_empty() {
            return false;
        }
        address
            .rsplit_once(':')
            .is_some_and(|(host, _)| self.hosts.contains(host.trim_matches(['[', ']'])))
    }
}

/// Narrows `candidates` in place to endpoints taking new requests and, when
/// `avoid_stale` and some have fresh metrics at `now`, to those.
pub(super) fn healthy_and_fresh(
    candidates: &mut Vec<&Arc<Endpoint>>,
    now: Timestamp,
    staleness: Duration,
    avoid_stale: bool,
) -> Result<(), ScheduleError> {
    let before = candidates.len();
    let mut fresh = 0usize;
    candidates.retain(|e| {
        let keep = e.accepts_requests();
        if keep && avoid_stale && !e.load_metrics().is_stale(now, staleness) {
            fresh += 1;
        }
        keep
    });
    if candidates.is_empty() && before > 0 {
        return Err(ScheduleError::NoHealthyEndpoint);
    }
    if avoid_stale && fresh > 0 && fresh < candidates.len() {
        candidates.retain(|e| !e.load_metrics().is_stale(now, staleness));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subset(entries: &[&str]) -> Vec<String> {
        entries.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn subset_matches_ip_and_ip_port() {
        let entries = subset(&["10.0.0.1", "10.0.0.2:9000", "[::1]", "[fe80::2]:8000"]);
        let s = Subset::new(&entries);
        assert!(s.contains("10.0.0.1:8000"));
        assert!(s.contains("10.0.0.2:9000"));
        assert!(!s.contains("10.0.0.2:8000"));
        assert!(!s.contains("10.0.0.3:8000"));
        assert!(s.contains("[::1]:8000"));
        assert!(s.contains("[fe80::2]:8000"));
        assert!(!s.contains("[fe80::2]:8001"));
    }
}
