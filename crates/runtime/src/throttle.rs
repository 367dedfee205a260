//! Rate-limited logging: a hostile peer that repeats its offence, or a dead server that fails
//! every request sent to it, must not turn every occurrence into a log line.
//!
//! ```
//! use std::time::Duration;
//! use shepherd_runtime::throttle::Throttle;
//!
//! let throttle = Throttle::new(Duration::from_secs(10));
//! if let Some(held_back) = throttle.allow() {
//!     eprintln!("a server failed ({held_back} more since the last line)");
//! }
//! assert_eq!(throttle.allow(), None); // within the period: held back, and counted
//! ```

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// How often a throttled message may be logged by default.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// Lets one log line through per period, and says how many were held back meanwhile.
#[derive(Debug)]
pub struct Throttle {
    every: Duration,
    state: Mutex<(Option<Instant>, u64)>,
}

impl Throttle {
    /// One line per `every`.
    pub fn new(every: Duration) -> Throttle {
        Throttle {
            every,
            state: Mutex::new((None, 0)),
        }
    }

    /// `Some(suppressed)` when a line may be logged now (with how many were held back since
    /// the last), else `None` (and this one is counted as held back).
    pub fn allow(&self) -> Option<u64> {
        let now = Instant::now();
        let mut state = self.state.lock();
        let (last, suppressed) = &mut *state;
        match last {
            Some(at) if now.duration_since(*at) < self.every => {
                *suppressed += 1;
                None
            }
            _ => {
                *last = Some(now);
                Some(std::mem::take(suppressed))
            }
        }
    }
}

impl Default for Throttle {
    fn default() -> Self {
        Throttle::new(LOG_EVERY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_period_with_the_count_held_back() {
        let throttle = Throttle::new(Duration::from_millis(50));
        assert_eq!(throttle.allow(), Some(0));
        assert_eq!(throttle.allow(), None);
        assert_eq!(throttle.allow(), None);
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(throttle.allow(), Some(2));
    }
}
