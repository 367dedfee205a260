//! A completion hook that records how each request ended, for adapter tests.

use std::time::Duration;

use parking_lot::Mutex;
use shepherd_scheduler_core::completion::{
    CompletedRequest, Completion, CompletionHook, Outcome, Usage,
};

/// How one request ended, as a [`CompletionRecorder`] saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Ended {
    /// Request id.
    pub id: String,
    /// Address of the endpoint that served it.
    pub endpoint: String,
    /// How it ended.
    pub outcome: Outcome,
    /// Usage reported, if any.
    pub usage: Option<Usage>,
    /// Whether a first token was recorded.
    pub first_token: bool,
    /// Whether it was moved to a fallback.
    pub used_fallback: bool,
}

/// A completion hook that records every request that ended.
#[derive(Debug, Default)]
pub struct CompletionRecorder(Mutex<Vec<Ended>>);

impl CompletionHook for CompletionRecorder {
    fn on_complete(&self, request: &CompletedRequest<'_>, completion: &Completion) {
        self.0.lock().push(Ended {
            id: request.id.to_string(),
            endpoint: request.endpoint.address().to_string(),
            outcome: completion.outcome,
            usage: completion.usage,
            first_token: completion.first_token_at.is_some(),
            used_fallback: request.used_fallback,
        });
    }
}

impl CompletionRecorder {
    /// Every request that ended so far, in order.
    pub fn ended(&self) -> Vec<Ended> {
        self.0.lock().clone()
    }

    /// Waits (up to 5 s) until `id` has ended.
    pub async fn wait_for(&self, id: &str) -> Ended {
        for _ in 0..500 {
            if let Some(e) = self.0.lock().iter().find(|e| e.id == id) {
                return e.clone();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("request {id} never ended; ended: {:?}", self.ended());
    }
}
