//! What both SGLang gateway rows share around their radix tree: the stable, arbitrary order of
//! a node's holders, and the periodic sweep of the tree's size bound.

use shepherd_scheduler_core::endpoint::EndpointId;
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// A node's holders in a stable, arbitrary order: `salt` is the node's, `seed` the run's.
pub(crate) fn holder_rank(seed: u64, salt: u64, holder: EndpointId) -> u64 {
    let mut bytes = [0u8; 12];
    bytes[..8].copy_from_slice(&salt.to_le_bytes());
    bytes[8..].copy_from_slice(&holder.0.to_le_bytes());
    xxh3_64_with_seed(&bytes, seed)
}

/// When the tree's size bound is next swept: every `interval` from the start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sweep {
    interval_ns: u64,
    next_ns: u64,
}

impl Sweep {
    /// Sweeps every `interval_ns` after `now_ns` (never when it is 0).
    pub(crate) fn new(now_ns: u64, interval_ns: u64) -> Self {
        Sweep {
            interval_ns,
            next_ns: now_ns.saturating_add(interval_ns),
        }
    }

    /// How many sweeps came due by `now_ns` since the last call (each to be run once).
    pub(crate) fn due(&mut self, now_ns: u64) -> usize {
        if self.interval_ns == 0 {
            return 0;
        }
        if now_ns < self.next_ns {
            return 0;
        }
        let due = (now_ns - self.next_ns) / self.interval_ns + 1;
        self.next_ns = self
            .next_ns
            .saturating_add(due.saturating_mul(self.interval_ns));
        usize::try_from(due).unwrap_or(usize::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps_come_due_once_each_and_never_at_interval_zero() {
        let mut sweep = Sweep::new(0, 60);
        assert_eq!(sweep.due(59), 0);
        assert_eq!(sweep.due(125), 2); // the sweeps at 60 and 120
        assert_eq!(sweep.due(130), 0);
        assert_eq!(sweep.due(180), 1);
        assert_eq!(Sweep::new(0, 0).due(u64::MAX), 0);
        // A long gap costs no loop.
        assert_eq!(Sweep::new(0, 1).due(1u64 << 40), 1usize << 40);
    }

    #[test]
    fn the_holder_order_is_stable_and_seeded() {
        let a = holder_rank(7, 1, EndpointId(3));
        assert_eq!(a, holder_rank(7, 1, EndpointId(3)));
        assert_ne!(a, holder_rank(8, 1, EndpointId(3)));
    }
}
