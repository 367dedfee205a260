//! What the peers last reported, and the sums the endpoints carry.

use std::collections::HashMap;
use std::time::Duration;

use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::endpoint::PeerLoad;

use super::wire::Report;

/// Most peers remembered at once: each restart of a replica is a new sender, and the old one
/// lingers until it expires.
pub(crate) const MAX_PEERS: usize = 1024;

#[derive(Debug)]
struct Peer {
    seq: u64,
    last_seen: Timestamp,
    loads: HashMap<String, PeerLoad>,
}

/// The peers' last reports, by sender.
#[derive(Debug, Default)]
pub(crate) struct PeerTable {
    peers: HashMap<u64, Peer>,
}

impl PeerTable {
    /// Takes in one datagram received at `now`: a newer report replaces the sender's last
    /// one, a part of the current one adds to it, an older one is ignored (reordered).
    pub(crate) fn receive(&mut self, report: Report, now: Timestamp) {
        if !self.peers.contains_key(&report.sender) && self.peers.len() >= MAX_PEERS {
            return;
        }
        let peer = self.peers.entry(report.sender).or_insert_with(|| Peer {
            seq: report.seq,
            last_seen: now,
            loads: HashMap::new(),
        });
        if report.seq < peer.seq {
            return;
        }
        if report.seq > peer.seq {
            peer.seq = report.seq;
            peer.loads.clear();
        }
        peer.last_seen = now;
        for entry in report.entries {
            peer.loads.insert(entry.address, entry.load);
        }
    }

    /// Forgets the peers silent for `expiry` by `now`; returns how many.
    pub(crate) fn expire(&mut self, now: Timestamp, expiry: Duration) -> usize {
        let before = self.peers.len();
        self.peers
            .retain(|_, p| now.saturating_since(p.last_seen) < expiry);
        before - self.peers.len()
    }

    /// Peers remembered.
    pub(crate) fn len(&self) -> usize {
        self.peers.len()
    }

    /// The sum over the peers of what each has in flight at `address`.
    pub(crate) fn total(&self, address: &str) -> PeerLoad {
        let mut total = PeerLoad::default();
        for load in self.peers.values().filter_map(|p| p.loads.get(address)) {
            total.requests = total.requests.saturating_add(load.requests);
            total.prompt_tokens = total.prompt_tokens.saturating_add(load.prompt_tokens);
            total.prefill_tokens = total.prefill_tokens.saturating_add(load.prefill_tokens);
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replicas::wire::Entry;

    fn report(sender: u64, seq: u64, part: u16, entries: &[(&str, u64)]) -> Report {
        Report {
            sender,
            seq,
            part,
            parts: 2,
            entries: entries
                .iter()
                .map(|(a, r)| Entry {
                    address: (*a).to_string(),
                    load: PeerLoad {
                        requests: *r,
                        prompt_tokens: r * 10,
                        prefill_tokens: r * 5,
                    },
                })
                .collect(),
        }
    }

    #[test]
    fn newer_reports_replace_parts_add_older_are_ignored_and_silence_expires() {
        let mut t = PeerTable::default();
        let at = Timestamp::from_millis;
        t.receive(report(1, 5, 0, &[("a", 2), ("b", 1)]), at(0));
        t.receive(report(2, 9, 0, &[("a", 3)]), at(0));
        assert_eq!(t.total("a").requests, 5);
        // Sender 1's next report: "b" has nothing in flight any more.
        t.receive(report(1, 6, 0, &[("a", 1)]), at(10));
        t.receive(report(1, 6, 1, &[("c", 4)]), at(10));
        assert_eq!((t.total("a").requests, t.total("b").requests), (4, 0));
        assert_eq!(t.total("c").prefill_tokens, 20);
        // A late datagram of report 5 changes nothing.
        t.receive(report(1, 5, 1, &[("b", 9)]), at(11));
        assert_eq!(t.total("b").requests, 0);
        // Sender 2 falls silent: after the expiry only sender 1 counts.
        t.receive(report(1, 7, 0, &[("a", 1)]), at(900));
        assert_eq!(t.expire(at(1000), Duration::from_millis(1000)), 1);
        assert_eq!((t.len(), t.total("a").requests), (1, 1));
    }
}
