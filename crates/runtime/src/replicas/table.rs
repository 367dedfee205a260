//! What the configured peers last reported, and the sums the endpoints carry. One slot per
//! configured peer, each holding at most one load per endpoint of the pool (the exchange drops
//! the other entries before they reach the table): nothing here grows with what arrives.

use std::collections::HashMap;
use std::time::Duration;

use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::endpoint::PeerLoad;

use super::wire::Report;

#[derive(Debug, Default)]
struct Slot {
    /// The run of the peer the loads are from.
    epoch: u64,
    /// The report the loads are from.
    seq: u64,
    /// When it was last heard; `None` when it never was, or fell silent.
    last_seen: Option<Timestamp>,
    loads: HashMap<String, PeerLoad>,
}

/// The configured peers' last reports, by their place in `replicas.peers`.
#[derive(Debug)]
pub(crate) struct PeerTable {
    slots: Vec<Slot>,
}

impl PeerTable {
    /// A table for `peers` configured peers.
    pub(crate) fn new(peers: usize) -> Self {
        PeerTable {
            slots: (0..peers).map(|_| Slot::default()).collect(),
        }
    }

    /// Takes in one authenticated report of peer `peer` in its run `epoch`, received at
    /// `now`: a report of a later run, or a newer report, replaces the peer's last one; a part
    /// of the current one adds to it; an older one is ignored (reordered).
    pub(crate) fn receive(&mut self, peer: usize, epoch: u64, report: Report, now: Timestamp) {
        let Some(slot) = self.slots.get_mut(peer) else {
            return;
        };
        // Never heard, or forgotten after falling silent: whatever report comes is the one.
        let fresh = slot.last_seen.is_none() && slot.loads.is_empty();
        if epoch < slot.epoch {
            return;
        }
        if epoch > slot.epoch || fresh {
            slot.epoch = epoch;
            slot.seq = report.seq;
            slot.loads.clear();
        } else if report.seq < slot.seq {
            return;
        } else if report.seq > slot.seq {
            slot.seq = report.seq;
            slot.loads.clear();
        }
        slot.last_seen = Some(now);
        for entry in report.entries {
            slot.loads.insert(entry.address, entry.load);
        }
    }

    /// Forgets the loads of the peers silent for `expiry` by `now`; returns how many.
    pub(crate) fn expire(&mut self, now: Timestamp, expiry: Duration) -> usize {
        let mut expired = 0;
        for slot in &mut self.slots {
            if slot
                .last_seen
                .is_some_and(|seen| now.saturating_since(seen) >= expiry)
            {
                slot.last_seen = None;
                slot.loads.clear();
                expired += 1;
            }
        }
        expired
    }

    /// Empties slot `peer` for another peer to take.
    pub(crate) fn reset(&mut self, peer: usize) {
        if let Some(slot) = self.slots.get_mut(peer) {
            *slot = Slot::default();
        }
    }

    /// Whether slot `peer` was heard within the expiry.
    pub(crate) fn is_live(&self, peer: usize) -> bool {
        self.slots.get(peer).is_some_and(|s| s.last_seen.is_some())
    }

    /// Peers heard within the expiry.
    pub(crate) fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.last_seen.is_some()).count()
    }

    /// The sum over the peers of what each has in flight at `address`.
    pub(crate) fn total(&self, address: &str) -> PeerLoad {
        let mut total = PeerLoad::default();
        for load in self.slots.iter().filter_map(|s| s.loads.get(address)) {
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

    fn report(seq: u64, part: u16, entries: &[(&str, u64)]) -> Report {
        Report {
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
        let mut t = PeerTable::new(2);
        let at = Timestamp::from_millis;
        t.receive(0, 1, report(5, 0, &[("a", 2), ("b", 1)]), at(0));
        t.receive(1, 1, report(9, 0, &[("a", 3)]), at(0));
        assert_eq!(t.total("a").requests, 5);
        // Peer 0's next report: "b" has nothing in flight any more.
        t.receive(0, 1, report(6, 0, &[("a", 1)]), at(10));
        t.receive(0, 1, report(6, 1, &[("c", 4)]), at(10));
        assert_eq!((t.total("a").requests, t.total("b").requests), (4, 0));
        assert_eq!(t.total("c").prefill_tokens, 20);
        // A late datagram of report 5 changes nothing.
        t.receive(0, 1, report(5, 1, &[("b", 9)]), at(11));
        assert_eq!(t.total("b").requests, 0);
        // Peer 1 falls silent: after the expiry only peer 0 counts.
        t.receive(0, 1, report(7, 0, &[("a", 1)]), at(900));
        assert_eq!(t.expire(at(1000), Duration::from_millis(1000)), 1);
        assert_eq!((t.len(), t.total("a").requests), (1, 1));
        // A peer number past the configured ones is no one.
        t.receive(7, 1, report(1, 0, &[("a", 50)]), at(1000));
        assert_eq!(t.total("a").requests, 1);
    }

    #[test]
    fn a_restarted_peer_replaces_its_previous_run_at_once() {
        let mut t = PeerTable::new(1);
        let at = Timestamp::from_millis;
        t.receive(0, 1, report(500, 0, &[("a", 4)]), at(0));
        // The new run starts its reports at 1: its first one counts, the old run's is gone.
        t.receive(0, 2, report(1, 0, &[("b", 1)]), at(5));
        assert_eq!((t.total("a").requests, t.total("b").requests), (0, 1));
        assert_eq!(t.len(), 1);
        // A straggler of the old run changes nothing.
        t.receive(0, 1, report(501, 0, &[("a", 4)]), at(6));
        assert_eq!(t.total("a").requests, 0);
    }
}
