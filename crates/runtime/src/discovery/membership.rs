//! Applying a discovery source's endpoint sets to the pool.

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::Mutex;
use shepherd_scheduler_core::endpoint::{Endpoint, Pool};
use tokio::sync::watch;

use super::EndpointSet;
use crate::shutdown::ShutdownSignal;

/// Addresses named in one "endpoint set changed" line, of those added and of those removed.
const LOGGED_ADDRESSES: usize = 16;

/// The pool's membership, as discovery sets it, and the endpoints that left it while
/// requests were still in flight there (they count until those requests end, so a graceful
/// shutdown waits for them too).
#[derive(Debug)]
pub(crate) struct Membership {
    pool: Arc<Pool>,
    departed: Mutex<Vec<Arc<Endpoint>>>,
}

impl Membership {
    pub(crate) fn new(pool: Arc<Pool>) -> Self {
        Membership {
            pool,
            departed: Mutex::new(Vec::new()),
        }
    }

    /// Makes the pool's members exactly `set`'s addresses, each with its labels (what label
    /// and role filters read). Endpoints that stay keep their live counters and metrics; the
    /// ones that leave are forgotten by the pool's listeners (the prefix index), and requests
    /// in flight there finish normally.
    pub(crate) fn apply(&self, set: &EndpointSet) {
        let current = self.pool.snapshot();
        let before: Vec<&str> = current.endpoints().iter().map(|e| e.address()).collect();
        let after = set.address_list();
        if before != after {
            self.pool.set_members(after);
            self.log_change(&current, &before, after);
        }
        let members = self.pool.snapshot();
        for (spec, address) in set.endpoints().iter().zip(after) {
            if let Some(endpoint) = members.get_by_address(address)
                && **endpoint.labels() != spec.labels
            {
                endpoint.set_labels(spec.labels.clone());
            }
        }
    }

    fn log_change(
        &self,
        current: &shepherd_scheduler_core::endpoint::PoolSnapshot,
        before: &[&str],
        after: &[String],
    ) {
        // Sets, not scans: a pool of thousands changes often.
        let before_set: HashSet<&str> = before.iter().copied().collect();
        let after_set: HashSet<&str> = after.iter().map(String::as_str).collect();
        let added: Vec<&String> = after
            .iter()
            .filter(|a| !before_set.contains(a.as_str()))
            .collect();
        let removed: Vec<&Arc<Endpoint>> = current
            .endpoints()
            .iter()
            .filter(|e| !after_set.contains(e.address()))
            .collect();
        let mut departed = self.departed.lock();
        departed.retain(|e| e.in_flight_requests() > 0);
        departed.extend(
            removed
                .iter()
                .filter(|e| e.in_flight_requests() > 0)
                .map(|e| Arc::clone(e)),
        );
        drop(departed);
        let removed: Vec<&str> = removed.iter().map(|e| e.address()).collect();
        // Bounded log lines: a large pool's first list names thousands of endpoints.
        tracing::info!(
            added = added.len(),
            removed = removed.len(),
            added_first = ?&added[..added.len().min(LOGGED_ADDRESSES)],
            removed_first = ?&removed[..removed.len().min(LOGGED_ADDRESSES)],
            members = after.len(),
            "endpoint set changed"
        );
    }

    /// Requests in flight on the pool's endpoints and on endpoints that left it.
    pub(crate) fn in_flight(&self) -> u64 {
        let members = self.pool.load().in_flight_requests();
        let mut departed = self.departed.lock();
        departed.retain(|e| e.in_flight_requests() > 0);
        members + departed.iter().map(|e| e.in_flight_requests()).sum::<u64>()
    }

    /// Follows `sets` until shutdown, applying each new set.
    pub(crate) async fn follow(
        self: Arc<Self>,
        mut sets: watch::Receiver<Arc<EndpointSet>>,
        stop: ShutdownSignal,
    ) {
        loop {
            let set = Arc::clone(&sets.borrow_and_update());
            self.apply(&set);
            tokio::select! {
                changed = sets.changed() => {
                    if changed.is_err() {
                        // The source is gone: the last set stays.
                        stop.wait().await;
                        return;
                    }
                }
                () = stop.wait() => return,
            }
        }
    }
}
