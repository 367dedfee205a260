//! In-flight eviction (upstream's `flowControl.enableEviction`): when a band with queued
//! requests is held back by saturation, sheddable requests already being served are ended to
//! make room for it.
//!
//! What upstream does, and this module with it:
//!
//! - **Who may be evicted** (`sheddable-eviction-filter`, upstream's fixed filter): requests
//!   in flight (dispatched, their response not finished) with a negative priority. Queued
//!   requests are never evicted (they are shed or expire instead), and a request whose
//!   priority is 0 or more never is.
//! - **In which order** (`priority-then-time-eviction-order-policy`, upstream's fixed order):
//!   the lowest priority first; among equals the most recently dispatched first (the least
//!   KV-cache work lost).
//! - **When**: a band with queued requests is blocked (the saturation is at or above its
//!   ceiling, and its ceiling is above 0) and its priority is strictly above the next
//!   victim's. Victims are taken only while their priority is strictly below that band's.
//! - **How many**: `credit = saturation / requests in flight` (a request's mean share of the
//!   saturation), `n = max(1, ceil((saturation − ceiling − pending) / credit))`, at most
//!   [`EvictionSettings::max_revocations_per_decision`] (upstream: 2) and at most the evictable
//!   ones.
//! - **Pacing** (stop and wait): no new decision while an evicted request's stream has not
//!   ended ([`Evictor::untrack`]; after [`EvictionSettings::confirmation_timeout`], 10 s, it
//!   counts as ended), nor for [`EvictionSettings::confirmation_grace`] after it ended (the
//!   freed capacity must reach the saturation figures: 10 ms with the concurrency detector,
//!   whose counts drop at once; the scrape interval + staleness + 250 ms with a scraped one).
//!
//! The client of an evicted request is answered 429 `request evicted by flow control`
//! (upstream's ext_proc immediate response). The declared `sheddable-eviction-filter` and
//! `priority-then-time-eviction-order-policy` plugins take no parameters; upstream's eviction
//! uses those two whether or not they are declared, and so does Shepherd.
//!
//! [`Evictor`] is a plain state machine (no clock, no threads), bounded by the requests in
//! flight: the adapter's driver calls [`Evictor::track`] when a request is dispatched,
//! [`Evictor::untrack`] when its response ends, and [`Evictor::reclaim`] when a band is
//! blocked.
//!
//! ```
//! use std::time::Duration;
//! use shepherd_scheduler_core::clock::Timestamp;
//! use shepherd_scheduler_core::flow::eviction::{Demand, EvictionSettings, Evictor};
//!
//! let mut evictor = Evictor::new(EvictionSettings::default());
//! let t = Timestamp::from_millis(1);
//! let _standard = evictor.track(0, t);
//! let old_batch = evictor.track(-1, t);
//! let new_batch = evictor.track(-1, Timestamp::from_millis(2));
//! // Saturation 1.2, a band of priority 0 blocked at ceiling 1.0 with requests waiting.
//! let demand = [Demand { priority: 0, ceiling: 1.0, queued: true }];
//! let now = Timestamp::from_millis(3);
//! assert_eq!(evictor.reclaim(now, 1.2, &demand), vec![new_batch]); // newest sheddable first
//! // Stop and wait: nothing more until that stream ended and the grace passed.
//! assert!(evictor.reclaim(now, 1.2, &demand).is_empty());
//! evictor.untrack(new_batch, now);
//! let later = now.saturating_add(EvictionSettings::default().confirmation_grace);
//! assert_eq!(evictor.reclaim(later, 1.2, &demand), vec![old_batch]);
//! ```

use std::cmp::Reverse;
use std::collections::BTreeSet;
use std::time::Duration;

use hashbrown::HashMap;

use crate::clock::Timestamp;

/// Upstream's eviction filter: only sheddable requests (priority < 0) may be evicted.
pub const SHEDDABLE_EVICTION_FILTER: &str = "sheddable-eviction-filter";
/// Upstream's eviction order: lowest priority first, then the most recently dispatched.
pub const PRIORITY_THEN_TIME_EVICTION_ORDER_POLICY: &str =
    "priority-then-time-eviction-order-policy";

/// The pacing and sizing of eviction (upstream derives them; none is configurable).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EvictionSettings {
    /// Most requests evicted by one decision (upstream: 2).
    pub max_revocations_per_decision: usize,
    /// How long after an evicted request's stream ended before the next decision.
    pub confirmation_grace: Duration,
    /// How long an evicted request's stream may take to end before it counts as ended.
    pub confirmation_timeout: Duration,
}

impl EvictionSettings {
    /// Upstream's cap on evictions per decision.
    pub const DEFAULT_MAX_REVOCATIONS_PER_DECISION: usize = 2;
    /// Upstream's confirmation timeout.
    pub const DEFAULT_CONFIRMATION_TIMEOUT: Duration = Duration::from_secs(10);
    /// The grace with a detector whose figures drop when a stream ends (the concurrency
    /// detector).
    pub const LEADING_SENSOR_GRACE: Duration = Duration::from_millis(10);
    /// The model server's abort and KV-cache release time, added to a scraped detector's lag.
    pub const ENGINE_RECLAIM_BUDGET: Duration = Duration::from_millis(250);

    /// The settings for a detector whose figures lag the pool by `sensor_lag` (for a scraped
    /// detector: the scrape interval plus the staleness bound; `None`: the figures drop as
    /// soon as a stream ends), as upstream derives them.
    pub fn for_sensor(sensor_lag: Option<Duration>) -> Self {
        EvictionSettings {
            confirmation_grace: match sensor_lag {
                None => Self::LEADING_SENSOR_GRACE,
                Some(lag) => lag.saturating_add(Self::ENGINE_RECLAIM_BUDGET),
            },
            ..Self::default()
        }
    }
}

impl Default for EvictionSettings {
    fn default() -> Self {
        EvictionSettings {
            max_revocations_per_decision: Self::DEFAULT_MAX_REVOCATIONS_PER_DECISION,
            confirmation_grace: Self::LEADING_SENSOR_GRACE,
            confirmation_timeout: Self::DEFAULT_CONFIRMATION_TIMEOUT,
        }
    }
}

/// A band that may need room: its priority, its ceiling (the saturation at which it is held
/// back), whether it has requests queued. [`Evictor::reclaim`] takes them highest first.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Demand {
    /// The band's priority.
    pub priority: i32,
    /// Its ceiling under the usage-limit policy.
    pub ceiling: f64,
    /// Whether requests wait in it.
    pub queued: bool,
}

/// What eviction has counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EvictionCounters {
    /// Requests evicted.
    pub evicted: u64,
    /// Evicted requests whose stream ended.
    pub confirmed: u64,
    /// Evicted requests whose stream did not end within the confirmation timeout.
    pub timed_out: u64,
}

/// In-flight requests and the eviction decisions over them: see the [module docs](self).
#[derive(Debug, Default)]
pub struct Evictor {
    settings: EvictionSettings,
    /// Tracked request → its priority and dispatch time.
    in_flight: HashMap<u64, (i32, Timestamp), ahash::RandomState>,
    /// The evictable ones, in eviction order.
    victims: BTreeSet<(i32, Reverse<Timestamp>, Reverse<u64>)>,
    /// Evicted, stream not ended yet: credit and when.
    outstanding: HashMap<u64, (f64, Timestamp), ahash::RandomState>,
    /// Evicted and ended: credit until when it stops holding decisions back.
    cooling: Vec<(f64, Timestamp)>,
    pending_reclaim: f64,
    next_id: u64,
    counters: EvictionCounters,
}

impl Evictor {
    /// No request in flight.
    pub fn new(settings: EvictionSettings) -> Self {
        Evictor {
            settings,
            ..Evictor::default()
        }
    }

    /// The settings it runs with.
    pub fn settings(&self) -> &EvictionSettings {
        &self.settings
    }

    /// What it has counted.
    pub fn counters(&self) -> EvictionCounters {
        self.counters
    }

    /// Requests in flight, and how many of them may be evicted.
    pub fn stats(&self) -> (usize, usize) {
        (self.in_flight.len(), self.victims.len())
    }

    /// A request of `priority` was dispatched at `now`: tracked until
    /// [`Evictor::untrack`]. Returns its id.
    pub fn track(&mut self, priority: i32, now: Timestamp) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.in_flight.insert(id, (priority, now));
        // The sheddable filter.
        if priority < 0 {
            self.victims.insert((priority, Reverse(now), Reverse(id)));
        }
        id
    }

    /// Request `id`'s response ended at `now` (served, failed, abandoned or evicted). For an
    /// evicted one this confirms the eviction.
    pub fn untrack(&mut self, id: u64, now: Timestamp) {
        if let Some((priority, at)) = self.in_flight.remove(&id) {
            self.victims.remove(&(priority, Reverse(at), Reverse(id)));
        }
        if let Some((credit, _)) = self.outstanding.remove(&id) {
            self.counters.confirmed += 1;
            self.cool(credit, now);
        }
    }

    /// Whether a decision may run at `now`: every eviction confirmed (or timed out) and past
    /// its grace.
    pub fn gate_open(&mut self, now: Timestamp) -> bool {
        let timeout = self.settings.confirmation_timeout;
        let timed_out: Vec<(u64, f64)> = self
            .outstanding
            .iter()
            .filter(|(_, (_, issued))| now.saturating_since(*issued) >= timeout)
            .map(|(id, (credit, _))| (*id, *credit))
            .collect();
        for (id, credit) in timed_out {
            self.outstanding.remove(&id);
            self.counters.timed_out += 1;
            self.cool(credit, now);
        }
        let before = self.cooling.len();
        let mut released = 0.0;
        self.cooling.retain(|(credit, until)| {
            let keep = now < *until;
            if !keep {
                released += credit;
            }
            keep
        });
        if self.cooling.len() != before {
            self.pending_reclaim = (self.pending_reclaim - released).max(0.0);
        }
        self.outstanding.is_empty() && self.cooling.is_empty()
    }

    /// The priority of the next victim, if any request may be evicted.
    pub fn victim_priority(&self) -> Option<i32> {
        self.victims.first().map(|(p, _, _)| *p)
    }

    /// One eviction decision at `now`, saturation `saturation`, over the bands `demand`
    /// (highest priority first): the first blocked band with queued requests whose priority
    /// is above the next victim's gets room. Returns the requests to evict (already no
    /// longer tracked as in flight; each stays awaited until [`Evictor::untrack`]).
    pub fn reclaim(&mut self, now: Timestamp, saturation: f64, demand: &[Demand]) -> Vec<u64> {
        if !self.gate_open(now) {
            return Vec::new();
        }
        let Some(victim) = self.victim_priority() else {
            return Vec::new();
        };
        for band in demand {
            if band.priority <= victim {
                return Vec::new();
            }
            // A zero ceiling holds the band back whatever the load: eviction cannot help.
            if band.ceiling <= 0.0 || saturation < band.ceiling || !band.queued {
                continue;
            }
            return self.evict(now, saturation, band.ceiling, band.priority);
        }
        Vec::new()
    }

    fn evict(&mut self, now: Timestamp, saturation: f64, ceiling: f64, bound: i32) -> Vec<u64> {
        let (in_flight, evictable) = self.stats();
        if in_flight == 0 || evictable == 0 {
            return Vec::new();
        }
        let credit = saturation / in_flight as f64;
        if !credit.is_finite() || credit <= 0.0 {
            return Vec::new();
        }
        let net = saturation - ceiling - self.pending_reclaim;
        if net < 0.0 || (net == 0.0 && self.pending_reclaim > 0.0) {
            return Vec::new();
        }
        let n = ((net / credit).ceil() as usize)
            .max(1)
            .min(self.settings.max_revocations_per_decision)
            .min(evictable);
        let mut evicted = Vec::with_capacity(n);
        while evicted.len() < n {
            let Some(&(priority, Reverse(at), Reverse(id))) = self.victims.first() else {
                break;
            };
            if priority >= bound {
                break;
            }
            self.victims.remove(&(priority, Reverse(at), Reverse(id)));
            self.in_flight.remove(&id);
            self.outstanding.insert(id, (credit, now));
            self.pending_reclaim += credit;
            self.counters.evicted += 1;
            evicted.push(id);
        }
        evicted
    }

    fn cool(&mut self, credit: f64, now: Timestamp) {
        self.cooling
            .push((credit, now.saturating_add(self.settings.confirmation_grace)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    fn blocked(priority: i32) -> [Demand; 1] {
        [Demand {
            priority,
            ceiling: 1.0,
            queued: true,
        }]
    }

    /// Upstream's priority_time_test.go: lower priority first; equal priority, the newest
    /// dispatch first. sheddable_test.go: only priority < 0 is accepted.
    #[test]
    fn victims_are_sheddable_lowest_priority_then_newest() {
        let mut e = Evictor::new(EvictionSettings {
            max_revocations_per_decision: 10,
            ..EvictionSettings::default()
        });
        let zero = e.track(0, t(0));
        let minus1_old = e.track(-1, t(1));
        let minus2 = e.track(-2, t(2));
        let minus1_new = e.track(-1, t(3));
        let _ = zero;
        assert_eq!(e.stats(), (4, 3), "priority 0 is not evictable");
        assert_eq!(e.victim_priority(), Some(-2));
        // Saturation 100 over 4 in flight: credit 25, deficit 99 → as many as allowed.
        let out = e.reclaim(t(4), 100.0, &blocked(0));
        assert_eq!(out, vec![minus2, minus1_new, minus1_old]);
        assert_eq!(e.stats(), (1, 0));
    }

    /// The sizing: `ceil((saturation − ceiling) / (saturation / in flight))`, at least one,
    /// at most the cap.
    #[test]
    fn sizing_follows_the_deficit_and_the_cap() {
        let mut e = Evictor::new(EvictionSettings::default());
        for i in 0..10 {
            e.track(-1, t(i));
        }
        // Saturation 1.0 at ceiling 1.0: the boundary, one eviction.
        assert_eq!(e.reclaim(t(20), 1.0, &blocked(0)).len(), 1);
        let mut e = Evictor::new(EvictionSettings::default());
        for i in 0..10 {
            e.track(-1, t(i));
        }
        // Saturation 2.0 over 10 (credit 0.2), deficit 1.0 → 5, capped at 2.
        assert_eq!(e.reclaim(t(20), 2.0, &blocked(0)).len(), 2);
    }

    /// No eviction for a band not blocked, without queued requests, with a zero ceiling, or
    /// not strictly above the victim; victims stop at the demand's priority.
    #[test]
    fn only_blocked_higher_demand_evicts() {
        let mut e = Evictor::new(EvictionSettings::default());
        e.track(-5, t(0));
        let d = |priority, ceiling, queued| Demand {
            priority,
            ceiling,
            queued,
        };
        assert!(
            e.reclaim(t(1), 0.5, &[d(0, 1.0, true)]).is_empty(),
            "not blocked"
        );
        assert!(
            e.reclaim(t(1), 1.5, &[d(0, 1.0, false)]).is_empty(),
            "nothing queued"
        );
        assert!(
            e.reclaim(t(1), 1.5, &[d(0, 0.0, true)]).is_empty(),
            "zero ceiling"
        );
        assert!(
            e.reclaim(t(1), 1.5, &[d(-5, 1.0, true)]).is_empty(),
            "same band"
        );
        assert!(
            e.reclaim(t(1), 1.5, &[d(-7, 1.0, true)]).is_empty(),
            "lower band"
        );
        // The first band that qualifies, after skipping an unblocked one.
        assert_eq!(
            e.reclaim(t(1), 1.5, &[d(3, 2.0, true), d(-1, 1.0, true)])
                .len(),
            1
        );
        // A victim at or above the demand band stays.
        let mut e = Evictor::new(EvictionSettings::default());
        e.track(-3, t(0));
        e.track(-1, t(0));
        assert_eq!(e.reclaim(t(1), 5.0, &blocked(-2)).len(), 1);
        assert_eq!(e.victim_priority(), Some(-1));
        // Nothing in flight, nothing to do.
        assert!(
            Evictor::default()
                .reclaim(t(1), 5.0, &blocked(0))
                .is_empty()
        );
    }

    /// Stop and wait: a decision waits for the evicted stream's end plus the grace; an end
    /// that never comes counts after the confirmation timeout.
    #[test]
    fn pacing_waits_for_confirmation_and_grace() {
        let settings = EvictionSettings::for_sensor(Some(Duration::from_millis(200)));
        assert_eq!(settings.confirmation_grace, Duration::from_millis(450));
        let mut e = Evictor::new(settings);
        let a = e.track(-1, t(0));
        let b = e.track(-1, t(1));
        assert_eq!(e.reclaim(t(10), 1.0, &blocked(0)), vec![b]);
        assert!(e.reclaim(t(11), 1.0, &blocked(0)).is_empty(), "awaiting b");
        e.untrack(b, t(20));
        assert!(e.reclaim(t(469), 1.0, &blocked(0)).is_empty(), "in grace");
        assert_eq!(e.reclaim(t(470), 1.0, &blocked(0)), vec![a]);
        // a's stream never ends: after 10 s it counts as ended, then the grace.
        let c = e.track(-1, t(500));
        assert!(e.reclaim(t(10_469), 1.0, &blocked(0)).is_empty());
        assert!(
            e.reclaim(t(10_470), 1.0, &blocked(0)).is_empty(),
            "grace after timeout"
        );
        assert_eq!(e.reclaim(t(10_920), 1.0, &blocked(0)), vec![c]);
        assert_eq!(
            e.counters(),
            EvictionCounters {
                evicted: 3,
                confirmed: 1,
                timed_out: 1
            }
        );
        // Untracking an unknown or finished request is harmless.
        e.untrack(999, t(11_000));
        e.untrack(a, t(11_000));
    }
}
