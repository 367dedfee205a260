//! What an admitted request holds until it is scheduled.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::lease::EvictionLease;

/// Load the flow controller let through that the pool cannot show yet.
#[derive(Debug, Default)]
pub(crate) struct PendingLoad {
    pub(crate) requests: AtomicU64,
    pub(crate) prompt_tokens: AtomicU64,
}

/// Proof that flow control let a request through. Hold it until the request is scheduled
/// (the scheduler then counts it in flight); until it is dropped the controller counts the
/// request as pending load, so it does not let more through than the pool can take.
pub struct FlowPermit {
    load: Arc<PendingLoad>,
    prompt_tokens: u64,
    lease: Option<EvictionLease>,
}

impl FlowPermit {
    pub(crate) fn new(
        load: &Arc<PendingLoad>,
        prompt_tokens: u64,
        lease: Option<EvictionLease>,
    ) -> Self {
        load.requests.fetch_add(1, Ordering::Relaxed);
        load.prompt_tokens
            .fetch_add(prompt_tokens, Ordering::Relaxed);
        FlowPermit {
            load: Arc::clone(load),
            prompt_tokens,
            lease,
        }
    }

    /// The request's eviction lease, when `enableEviction` is on: keep it until the response
    /// is over (see [`EvictionLease`]). Left in the permit, it ends with the permit, and the
    /// request is then no longer a candidate for eviction.
    pub fn take_lease(&mut self) -> Option<EvictionLease> {
        self.lease.take()
    }
}

impl Drop for FlowPermit {
    fn drop(&mut self) {
        self.load.requests.fetch_sub(1, Ordering::Relaxed);
        self.load
            .prompt_tokens
            .fetch_sub(self.prompt_tokens, Ordering::Relaxed);
    }
}

impl fmt::Debug for FlowPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlowPermit")
            .field("prompt_tokens", &self.prompt_tokens)
            .field("lease", &self.lease)
            .finish()
    }
}
