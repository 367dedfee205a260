//! The gateway's concurrency cap (`gateway.maxConcurrentRequests`): requests over it are
//! answered 429 with `Retry-After` at once, never queued.
//!
//! This is a plain cap on the gateway's own concurrency, not flow control: flow control (the
//! config's `flowControl` section, [`shepherd_runtime::flow`]) holds requests while the *model
//! servers* are saturated, by priority and fairness, and sheds sheddable ones. The two
//! compose: the cap is checked first, when the headers arrive. Each admitted request holds an
//! [`Admitted`] from the moment its headers are read until its response ends, fails or is
//! abandoned.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_adapters_http::GatewayStats;
//! use shepherd_adapters_http::limit::ConcurrencyLimit;
//!
//! let stats = Arc::new(GatewayStats::default());
//! let limit = ConcurrencyLimit::new(Some(1));
//! let first = limit.try_admit(&stats).unwrap();
//! assert!(limit.try_admit(&stats).is_none()); // → 429
//! assert_eq!(stats.in_flight(), 1);
//! drop(first); // the response ended
//! assert!(limit.try_admit(&stats).is_some());
//! ```

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::GatewayStats;

/// Admits at most `max` requests at once, or any number. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct ConcurrencyLimit {
    semaphore: Option<Arc<Semaphore>>,
    max: usize,
}

impl ConcurrencyLimit {
    /// At most `max` requests at once (`None`: no limit).
    pub fn new(max: Option<usize>) -> Self {
        ConcurrencyLimit {
            semaphore: max.map(|n| Arc::new(Semaphore::new(n.min(Semaphore::MAX_PERMITS)))),
            max: max.unwrap_or(usize::MAX),
        }
    }

    /// The limit (`usize::MAX` when there is none).
    pub fn max(&self) -> usize {
        self.max
    }

    /// Admits one more request, or `None` when the limit is reached.
    pub fn try_admit(&self, stats: &Arc<GatewayStats>) -> Option<Admitted> {
        let permit = match &self.semaphore {
            Some(semaphore) => Some(Arc::clone(semaphore).try_acquire_owned().ok()?),
            None => None,
        };
        stats.admitted();
        Some(Admitted {
            _permit: permit,
            stats: Arc::clone(stats),
        })
    }
}

/// One admitted request: its place under the cap and in the in-flight gauge, given back
/// when dropped.
#[derive(Debug)]
pub struct Admitted {
    _permit: Option<OwnedSemaphorePermit>,
    stats: Arc<GatewayStats>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.stats.ended();
    }
}
