//! How often the `/debug/*` views may be rendered: each costs milliseconds of CPU and up to
//! hundreds of KB, so a flood of them must not take the picker's cores. A token bucket:
//! [`DEBUG_RENDERS_PER_SECOND`] a second on average, bursts of as many; over it a view is
//! answered 429 with `Retry-After: 1`.

use parking_lot::Mutex;
use tokio::time::Instant;

/// Debug views rendered a second, on average (and the largest burst).
pub const DEBUG_RENDERS_PER_SECOND: f64 = 10.0;

/// A token bucket. See the [module docs](self).
#[derive(Debug)]
pub(crate) struct RenderBudget {
    state: Mutex<(f64, Instant)>,
}

impl RenderBudget {
    pub(crate) fn new() -> Self {
        RenderBudget {
            state: Mutex::new((DEBUG_RENDERS_PER_SECOND, Instant::now())),
        }
    }

    /// Takes one render, or says none is left now.
    pub(crate) fn try_take(&self) -> bool {
        let now = Instant::now();
        let mut state = self.state.lock();
        let (tokens, last) = &mut *state;
        let refill = now.duration_since(*last).as_secs_f64() * DEBUG_RENDERS_PER_SECOND;
        *tokens = (*tokens + refill).min(DEBUG_RENDERS_PER_SECOND);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn bursts_are_cut_and_the_budget_refills() {
        let budget = RenderBudget::new();
        let taken = (0..100).filter(|_| budget.try_take()).count();
        assert_eq!(taken, 10);
        tokio::time::advance(Duration::from_millis(500)).await;
        let taken = (0..100).filter(|_| budget.try_take()).count();
        assert_eq!(taken, 5);
    }
}
