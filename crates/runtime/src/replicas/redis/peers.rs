//! The other replicas' last load reports under the Redis backend: one slot per replica name,
//! at most `maxPeers` of them. A silent replica's slot is freed when its load expires; a
//! replica that arrives while every slot is taken is counted and not heard until one frees.

use std::collections::HashMap;
use std::time::Duration;

use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::endpoint::PeerLoad;

use crate::replicas::table::PeerTable;
use crate::replicas::wire::Report;

/// The named peers' last reports, bounded by configuration.
#[derive(Debug)]
pub(crate) struct NamedPeers {
    slots: HashMap<String, usize>,
    free: Vec<usize>,
    table: PeerTable,
}

/// What [`NamedPeers::receive`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Received {
    /// The report counts.
    Taken,
    /// Every slot is taken by another replica: not heard.
    Full,
}

impl NamedPeers {
    /// A table of at most `max` peers.
    pub(crate) fn new(max: usize) -> Self {
        NamedPeers {
            slots: HashMap::new(),
            free: (0..max).rev().collect(),
            table: PeerTable::new(max),
        }
    }

    /// Takes in a report of `name`'s run `epoch`, received at `now`.
    pub(crate) fn receive(
        &mut self,
        name: &str,
        epoch: u64,
        report: Report,
        now: Timestamp,
    ) -> Received {
        let slot = match self.slots.get(name) {
            Some(slot) => *slot,
            None => {
                let Some(slot) = self.free.pop() else {
                    return Received::Full;
                };
                self.slots.insert(name.to_owned(), slot);
                slot
            }
        };
        self.table.receive(slot, epoch, report, now);
        Received::Taken
    }

    /// Forgets the peers silent for `expiry` by `now` (their slots freed); returns how many.
    pub(crate) fn expire(&mut self, now: Timestamp, expiry: Duration) -> usize {
        let expired = self.table.expire(now, expiry);
        if expired > 0 {
            let table = &mut self.table;
            let free = &mut self.free;
            self.slots.retain(|_, slot| {
                let live = table.is_live(*slot);
                if !live {
                    table.reset(*slot);
                    free.push(*slot);
                }
                live
            });
        }
        expired
    }

    /// Peers heard within the expiry.
    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// The sum over the peers of what each has in flight at `address`.
    pub(crate) fn total(&self, address: &str) -> PeerLoad {
        self.table.total(address)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replicas::wire::Entry;

    fn report(seq: u64, requests: u64) -> Report {
        Report {
            seq,
            part: 0,
            parts: 1,
            entries: vec![Entry {
                address: "a".into(),
                load: PeerLoad {
                    requests,
                    prompt_tokens: 0,
                    prefill_tokens: 0,
                },
            }],
        }
    }

    #[test]
    fn bounded_by_configuration_and_freed_by_silence() {
        let at = Timestamp::from_millis;
        let mut peers = NamedPeers::new(2);
        assert_eq!(peers.receive("x", 5, report(1, 1), at(0)), Received::Taken);
        assert_eq!(peers.receive("y", 1, report(1, 2), at(0)), Received::Taken);
        assert_eq!(peers.receive("z", 1, report(1, 50), at(0)), Received::Full);
        assert_eq!(peers.total("a").requests, 3);
        // y keeps reporting, x falls silent: its slot goes to z, whose run is older than
        // x's was (the freed slot keeps nothing of x's).
        peers.receive("y", 1, report(2, 2), at(900));
        assert_eq!(peers.expire(at(1000), Duration::from_millis(1000)), 1);
        assert_eq!(
            peers.receive("z", 1, report(1, 4), at(1000)),
            Received::Taken
        );
        assert_eq!((peers.len(), peers.total("a").requests), (2, 6));
    }
}
