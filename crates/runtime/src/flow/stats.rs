//! The flow controller's figures.

use shepherd_scheduler_core::flow::{DropReason, FlowCounters};

/// What the flow controller has counted, read at one moment.
///
/// Every admitted request is either `admitted_immediately` or `enqueued`; every enqueued one
/// ends `dispatched`, `cancelled` (its client went away) or dropped (`ttl_expired`,
/// `shutting_down`), or is still `queued`. `shed` and `queue_full` drops were never enqueued.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowStats {
    /// Requests let through at once (nothing queued, pool not saturated).
    pub admitted_immediately: u64,
    /// The queue's own counts: enqueued, dispatched, cancelled, dropped by reason.
    pub counters: FlowCounters,
    /// Requests queued now.
    pub queued: u64,
    /// Bytes queued now.
    pub queued_bytes: u64,
}

impl FlowStats {
    /// Requests dropped for `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.counters.dropped(reason)
    }
}

/// Upper bounds of the queue-wait histogram, in seconds.
pub(crate) const WAIT_BOUNDS_SECONDS: [f64; 12] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 15.0, 60.0,
];

/// How long dispatched requests waited in the queue.
#[derive(Debug, Clone, Default)]
pub(crate) struct WaitHistogram {
    buckets: [u64; WAIT_BOUNDS_SECONDS.len()],
    count: u64,
    sum: f64,
}

impl WaitHistogram {
    pub(crate) fn observe(&mut self, seconds: f64) {
        self.count += 1;
        self.sum += seconds;
        if let Some(i) = WAIT_BOUNDS_SECONDS.iter().position(|&b| seconds <= b) {
            self.buckets[i] += 1;
        }
    }

    pub(crate) fn snapshot(&self) -> shepherd_scheduler_core::metrics::HistogramSnapshot {
        let mut cumulative = 0;
        let buckets = WAIT_BOUNDS_SECONDS
            .iter()
            .zip(self.buckets)
            .map(|(&bound, n)| {
                cumulative += n;
                (bound, cumulative)
            })
            .collect();
        shepherd_scheduler_core::metrics::HistogramSnapshot {
            buckets,
            sum: self.sum,
            count: self.count,
        }
    }
}
