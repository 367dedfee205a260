//! Helpers shared by the integration tests (the workspace's test utilities, plus a pool
//! returned as a pair).
#![allow(dead_code, unreachable_pub, unused_imports)]

use std::sync::Arc;

use shepherd_scheduler_core::prelude::*;
pub use shepherd_test_util::{STALENESS, endpoint, endpoint_scraped_at, fresh, score, score_at};

/// A text request.
pub fn request(id: &str) -> InferenceRequest {
    shepherd_test_util::text_request(id)
}

/// A pool of `n` loopback endpoints `127.0.0.1:8000..` on a manual clock at zero, with its
/// members.
pub fn pool(n: u16) -> (Arc<Pool>, Vec<Arc<Endpoint>>) {
    let t = shepherd_test_util::TestPool::loopback(n);
    (t.pool, t.endpoints)
}
