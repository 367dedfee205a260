use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::Endpoint;

/// Counts one request in flight on an endpoint for as long as it lives.
///
/// Created by [`Endpoint::start_request`]; dropping it releases the request and its prompt
/// tokens from the endpoint's live counters, however the request ended.
#[derive(Debug)]
#[must_use = "dropping the guard immediately releases the in-flight count"]
pub struct InFlightGuard {
    endpoint: Arc<Endpoint>,
    prompt_tokens: u64,
}

impl InFlightGuard {
    pub(super) fn new(endpoint: Arc<Endpoint>, prompt_tokens: u64) -> Self {
        endpoint.counters.requests.fetch_add(1, Ordering::Relaxed);
        endpoint
            .counters
            .prompt_tokens
            .fetch_add(prompt_tokens, Ordering::Relaxed);
        InFlightGuard {
            endpoint,
            prompt_tokens,
        }
    }

    /// The endpoint this guard counts on.
    pub fn endpoint(&self) -> &Arc<Endpoint> {
        &self.endpoint
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.endpoint
            .counters
            .requests
            .fetch_sub(1, Ordering::Relaxed);
        self.endpoint
            .counters
            .prompt_tokens
            .fetch_sub(self.prompt_tokens, Ordering::Relaxed);
    }
}
