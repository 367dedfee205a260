//! Time as the scheduling core sees it.
//!
//! The core never reads a wall clock by itself: it is handed a [`Clock`], so the same code runs
//! in production ([`SystemClock`]), under a simulator (a clock that jumps from event to event),
//! and in tests ([`ManualClock`]). A [`Timestamp`] is the time elapsed since the clock's origin.
//!
//! ```
//! use shepherd_scheduler_core::clock::{Clock, ManualClock, Timestamp};
//! use std::time::Duration;
//!
//! let clock = ManualClock::default();
//! assert_eq!(clock.now(), Timestamp::ZERO);
//! clock.advance(Duration::from_millis(50));
//! assert_eq!(clock.now(), Timestamp::from_millis(50));
//! ```

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A point in time, as nanoseconds since the origin of the [`Clock`] that produced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The clock's origin.
    pub const ZERO: Timestamp = Timestamp(0);

    /// A timestamp `nanos` nanoseconds after the origin.
    pub const fn from_nanos(nanos: u64) -> Self {
        Timestamp(nanos)
    }

    /// A timestamp `micros` microseconds after the origin.
    pub const fn from_micros(micros: u64) -> Self {
        Timestamp(micros.saturating_mul(1_000))
    }

    /// A timestamp `millis` milliseconds after the origin.
    pub const fn from_millis(millis: u64) -> Self {
        Timestamp(millis.saturating_mul(1_000_000))
    }

    /// A timestamp `secs` seconds (fractional) after the origin; negative or NaN gives the origin.
    pub fn from_secs_f64(secs: f64) -> Self {
        if secs.is_nan() || secs <= 0.0 {
            return Timestamp::ZERO;
        }
        Timestamp((secs * 1e9).min(u64::MAX as f64) as u64)
    }

    /// Nanoseconds since the origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Seconds since the origin.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// Time elapsed from `earlier` to `self`, zero if `earlier` is later.
    #[inline]
    pub fn saturating_since(self, earlier: Timestamp) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// This timestamp moved forward by `d`, saturating.
    pub fn saturating_add(self, d: Duration) -> Timestamp {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Timestamp(self.0.saturating_add(nanos))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}s", self.as_secs_f64())
    }
}

/// A monotonic source of [`Timestamp`]s.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// The process's monotonic clock, with its origin at construction.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        SystemClock {
            origin: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let nanos = u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
        Timestamp(nanos)
    }
}

/// A clock that only moves when told to: for tests and simulators.
#[derive(Debug, Default)]
pub struct ManualClock {
    nanos: AtomicU64,
}

impl ManualClock {
    /// A clock standing at `t`.
    pub fn at(t: Timestamp) -> Self {
        ManualClock {
            nanos: AtomicU64::new(t.0),
        }
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Sets the clock to `t` (it may move backwards; callers that need monotonicity keep it).
    pub fn set(&self, t: Timestamp) {
        self.nanos.store(t.0, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.nanos.load(Ordering::Relaxed))
    }
}
