//! The wait between two tries while the API server fails: doubling from an initial wait up
//! to a ceiling, back to the initial wait after any success (kube's `StreamBackoff` resets it
//! on every good event). Shorter than kube's default (0.8 s to 30 s, reset only after 120 s
//! without error), so a restarted API server is seen within seconds.

use std::time::Duration;

use kube::runtime::utils::Backoff;

/// Doubling waits between `initial` and `max`, without jitter (deterministic).
///
/// ```
/// use std::time::Duration;
/// use kube::runtime::utils::Backoff;
/// use shepherd_runtime::discovery::kubernetes::WatchBackoff;
///
/// let mut backoff = WatchBackoff::new(Duration::from_millis(100), Duration::from_millis(300));
/// let waits: Vec<u128> = backoff.by_ref().take(4).map(|d| d.as_millis()).collect();
/// assert_eq!(waits, [100, 200, 300, 300]);
/// backoff.reset();
/// assert_eq!(backoff.next(), Some(Duration::from_millis(100)));
/// ```
#[derive(Debug, Clone)]
pub struct WatchBackoff {
    initial: Duration,
    max: Duration,
    next: Duration,
}

impl WatchBackoff {
    /// Waits from `initial` (at least 1 ms) doubling up to `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        let initial = initial.max(Duration::from_millis(1));
        WatchBackoff {
            initial,
            max: max.max(initial),
            next: initial,
        }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let wait = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        Some(wait)
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = self.initial;
    }
}
