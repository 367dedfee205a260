//! The pool's clock on tokio time.
//!
//! The core stamps every endpoint's metrics with the pool's [`Clock`] and judges staleness
//! on it. The runtime's loops sleep on tokio time, so the pool it builds reads tokio time
//! too: under `tokio::time::pause` (tests) metrics age exactly as fast as the loops run, and in
//! production tokio time is the monotonic clock.
//!
//! ```
//! use std::time::Duration;
//! use shepherd_runtime::TokioClock;
//! use shepherd_scheduler_core::clock::Clock;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let clock = TokioClock::new();
//! tokio::time::sleep(Duration::from_millis(250)).await;
//! assert_eq!(clock.now().as_nanos(), 250_000_000); // paused time moved exactly 250 ms
//! # }
//! ```

use shepherd_scheduler_core::clock::{Clock, Timestamp};
use tokio::time::Instant;

/// A [`Clock`] reading tokio's [`Instant`], with its origin at construction.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    origin: Instant,
}

impl TokioClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        TokioClock {
            origin: Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        TokioClock::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        let nanos = u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
        Timestamp::from_nanos(nanos)
    }
}
