//! The candidates a profile starts from: pool members named by the subset hint, taking new
//! requests, and — while any candidate has fresh metrics — only those with fresh metrics.

use std::sync::Arc;
use std::time::Duration;

use std::sync::atomic::{AtomicU64, Ordering};

use ahash::AHashSet;

use super::ScheduleError;
use crate::clock::Timestamp;
use crate::endpoint::{Endpoint, PoolSnapshot};

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

/// Whether the members' metrics were all fresh, all stale, or mixed, as of a recent check:
/// the staleness of a whole pool changes on the scale of the staleness bound, not of a pick, so
/// a pick reuses a check made less than [`FreshnessCache::recheck`] ago over the same snapshot
/// instead of reading every member's scrape time.
///
/// One atomic word: the snapshot's generation (low 22 bits), the check time in milliseconds
/// (40 bits) and the verdict (2 bits).
#[derive(Debug, Default)]
pub(super) struct FreshnessCache(AtomicU64);

const UNIFORM: u64 = 1;
const MIXED: u64 = 2;
const GEN_BITS: u32 = 22;

impl FreshnessCache {
    /// How long a check stays good: an eighth of the staleness bound, between 1 and 25 ms. An
    /// endpoint whose metrics go stale is avoided at most this much later.
    pub(super) fn recheck(staleness: Duration) -> u64 {
        (u64::try_from(staleness.as_millis()).unwrap_or(u64::MAX) / 8).clamp(1, 25)
    }

    fn get(&self, generation: u64, now_ms: u64, recheck_ms: u64) -> Option<u64> {
        let word = self.0.load(Ordering::Relaxed);
        let verdict = word & 3;
        let at = (word >> 2) & ((1 << 40) - 1);
        let cached_gen = word >> 42;
        (verdict != 0
            && cached_gen == generation & ((1 << GEN_BITS) - 1)
            && now_ms.saturating_sub(at) < recheck_ms)
            .then_some(verdict)
    }

    fn put(&self, generation: u64, now_ms: u64, verdict: u64) {
        let word = ((generation & ((1 << GEN_BITS) - 1)) << 42)
            | ((now_ms & ((1 << 40) - 1)) << 2)
            | verdict;
        self.0.store(word, Ordering::Relaxed);
    }
}

/// How the scheduler narrows the pool before a profile runs.
#[derive(Debug, Clone, Copy)]
pub(super) struct Narrowing {
    pub(super) staleness: Duration,
    pub(super) avoid_stale: bool,
}

/// The candidates a profile starts from: members named by `subset` (all when `None`) that take
/// new requests and, when `avoid_stale` and some have fresh metrics at `now`, only those.
///
/// The common case — no subset, every member enabled (a flag of the snapshot), and the members
/// all fresh or all stale (a recent check, see [`FreshnessCache`]) — copies the member list
/// and reads nothing else. The candidates are collected in `candidates` (given empty, to reuse
/// its allocation).
pub(super) fn initial<'s>(
    snapshot: &'s PoolSnapshot,
    subset: Option<&Subset<'_>>,
    now: Timestamp,
    narrowing: Narrowing,
    cache: &FreshnessCache,
    mut candidates: Vec<&'s Arc<Endpoint>>,
) -> Result<Vec<&'s Arc<Endpoint>>, ScheduleError> {
    candidates.clear();
    let members = snapshot.endpoints();
    let now_ns = now.as_nanos();
    let now_ms = now_ns / 1_000_000;
    let recheck = FreshnessCache::recheck(narrowing.staleness);
    let fast = subset.is_none()
        && snapshot.all_enabled()
        && (!narrowing.avoid_stale
            || cache.get(snapshot.generation(), now_ms, recheck) == Some(UNIFORM));
    if fast {
        candidates.extend(members.iter());
        return Ok(candidates);
    }
    match subset {
        None => candidates.extend(members.iter()),
        Some(s) => candidates.extend(members.iter().filter(|e| s.contains(e.address()))),
    }
    if candidates.is_empty() {
        return Err(ScheduleError::EmptySubset);
    }
    candidates.retain(|e| e.accepts_requests());
    if candidates.is_empty() {
        return Err(ScheduleError::NoHealthyEndpoint);
    }
    if narrowing.avoid_stale {
        let bound = u64::try_from(narrowing.staleness.as_nanos()).unwrap_or(u64::MAX);
        let fresh = candidates
            .iter()
            .filter(|e| e.is_fresh_at(now_ns, bound))
            .count();
        let mixed = fresh > 0 && fresh < candidates.len();
        if subset.is_none() && snapshot.all_enabled() {
            cache.put(
                snapshot.generation(),
                now_ms,
                if mixed { MIXED } else { UNIFORM },
            );
        }
        if mixed {
            candidates.retain(|e| e.is_fresh_at(now_ns, bound));
        }
    }
    Ok(candidates)
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
