//! Ordering policies: which request of a flow goes first (upstream's `orderingPolicyRef`).
//!
//! | type | the request served first | no deadline |
//! |---|---|---|
//! | `fcfs-ordering-policy` (default) | the oldest | — |
//! | `edf-ordering-policy` | the earliest `enqueue time + its TTL` | TTL of zero (none): after every deadline-bound request |
//! | `slo-deadline-ordering-policy` | the earliest `arrival + x-llm-d-slo-ttft-ms` (the deprecated `x-slo-ttft-ms` also read) | header missing, empty, not a whole non-negative number of milliseconds, or out of range: after every request with a valid one |
//!
//! Equal deadlines (and requests without one) go in arrival order. Neither policy has
//! parameters. Each request's place is fixed when it is queued ([`OrderingPolicy::rank`]), so
//! a flow is kept sorted: queueing walks back from the flow's tail past the requests ranked
//! after the new one, O(1) when deadlines grow with arrival (EDF with one TTL), at worst
//! O(flow length), which the band's `maxRequests` bounds. Under `global-strict-fairness-policy`
//! the band serves the flow whose head ranks first, as upstream compares the heads with the
//! ordering policy.
//!
//! ```
//! use std::time::Duration;
//! use shepherd_scheduler_core::clock::Timestamp;
//! use shepherd_scheduler_core::flow::ordering::{NO_DEADLINE, OrderingPolicy, slo_ttft_of};
//!
//! let t = Timestamp::from_millis(1_000);
//! // EDF: enqueue time + TTL; no TTL ranks last.
//! assert_eq!(OrderingPolicy::Edf.rank(t, Some(Duration::from_secs(5)), None), Timestamp::from_millis(6_000));
//! assert_eq!(OrderingPolicy::Edf.rank(t, None, None), NO_DEADLINE);
//! // SLO deadline: arrival + the request's TTFT objective.
//! assert_eq!(slo_ttft_of([Some("250"), None]), Some(Duration::from_millis(250)));
//! assert_eq!(slo_ttft_of([Some(" -1 "), None]), None);
//! assert_eq!(
//!     OrderingPolicy::SloDeadline.rank(t, None, Some(Duration::from_millis(250))),
//!     Timestamp::from_millis(1_250),
//! );
//! ```

use std::time::Duration;

use crate::clock::Timestamp;

/// Upstream's first-come-first-served ordering policy (the default).
pub const FCFS_ORDERING_POLICY: &str = "fcfs-ordering-policy";
/// Upstream's earliest-deadline-first ordering policy.
pub const EDF_ORDERING_POLICY: &str = "edf-ordering-policy";
/// Upstream's SLO-deadline ordering policy.
pub const SLO_DEADLINE_ORDERING_POLICY: &str = "slo-deadline-ordering-policy";

/// The request header upstream's SLO-deadline policy reads (milliseconds).
pub const SLO_TTFT_HEADER: &str = "x-llm-d-slo-ttft-ms";
/// Its deprecated alias, still accepted (read when the new one is absent).
pub const OLD_SLO_TTFT_HEADER: &str = "x-slo-ttft-ms";

/// The rank of a request without a deadline: after every request with one.
pub const NO_DEADLINE: Timestamp = Timestamp::from_nanos(u64::MAX);

/// Which request of a flow goes first (see the [module docs](self)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OrderingPolicy {
    /// Arrival order (`fcfs-ordering-policy`).
    #[default]
    Fcfs,
    /// Earliest `enqueue time + TTL` first (`edf-ordering-policy`).
    Edf,
    /// Earliest `arrival + TTFT objective` first (`slo-deadline-ordering-policy`).
    SloDeadline,
}

impl OrderingPolicy {
    /// The policy of an upstream type name, if it is one.
    pub fn from_type(plugin_type: &str) -> Option<Self> {
        match plugin_type {
            FCFS_ORDERING_POLICY => Some(OrderingPolicy::Fcfs),
            EDF_ORDERING_POLICY => Some(OrderingPolicy::Edf),
            SLO_DEADLINE_ORDERING_POLICY => Some(OrderingPolicy::SloDeadline),
            _ => None,
        }
    }

    /// The upstream type name.
    pub fn type_name(self) -> &'static str {
        match self {
            OrderingPolicy::Fcfs => FCFS_ORDERING_POLICY,
            OrderingPolicy::Edf => EDF_ORDERING_POLICY,
            OrderingPolicy::SloDeadline => SLO_DEADLINE_ORDERING_POLICY,
        }
    }

    /// A request's deadline under this policy, the key it is served by (earliest first; equal
    /// keys in arrival order): for FCFS always [`Timestamp::ZERO`] (arrival order alone);
    /// for EDF `enqueued_at + ttl` (`None` or zero: [`NO_DEADLINE`]); for the SLO deadline
    /// `enqueued_at + slo_ttft` (`None`: [`NO_DEADLINE`]).
    pub fn rank(
        self,
        enqueued_at: Timestamp,
        ttl: Option<Duration>,
        slo_ttft: Option<Duration>,
    ) -> Timestamp {
        let deadline = |d: Option<Duration>| match d {
            Some(d) if !d.is_zero() => enqueued_at.saturating_add(d),
            _ => NO_DEADLINE,
        };
        match self {
            OrderingPolicy::Fcfs => Timestamp::ZERO,
            OrderingPolicy::Edf => deadline(ttl),
            // A zero objective is valid upstream: the deadline is the arrival itself.
            OrderingPolicy::SloDeadline => {
                slo_ttft.map_or(NO_DEADLINE, |d| enqueued_at.saturating_add(d))
            }
        }
    }
}

/// The TTFT objective from the values of [`SLO_TTFT_HEADER`] and [`OLD_SLO_TTFT_HEADER`] (in
/// that order; the first present one counts, as upstream): a whole number of milliseconds,
/// surrounding spaces allowed; missing, empty, negative, not a number or beyond what a
/// duration in nanoseconds holds: `None`.
pub fn slo_ttft_of(values: [Option<&str>; 2]) -> Option<Duration> {
    let value = values.into_iter().flatten().next()?;
    let ms: i64 = value.trim().parse().ok()?;
    // Upstream bounds the value before scaling to nanoseconds (an int64).
    if !(0..=i64::MAX / 1_000_000).contains(&ms) {
        return None;
    }
    Some(Duration::from_millis(ms as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn at(secs: i64) -> Timestamp {
        // An origin far from zero, so the negative offsets of upstream's cases fit.
        Timestamp::from_nanos((100 + secs) as u64 * 1_000_000_000)
    }

    /// `a` goes before `b` (rank, then arrival), as upstream's `Less`.
    fn less(a: (Timestamp, u64), b: (Timestamp, u64)) -> bool {
        a < b
    }

    /// Upstream's edf_test.go `TestEDF_Less` cases (a TTL of 0 or below: none).
    #[test]
    fn edf_orders_by_enqueue_plus_ttl_then_arrival() {
        let edf = OrderingPolicy::Edf;
        // Arrival order is enqueue-time order: E (-10 s), C (-5 s), D (-1 s), A (0), B (+1 s).
        let a = (edf.rank(at(0), Some(10 * S), None), 3);
        let b = (edf.rank(at(1), Some(5 * S), None), 4);
        let c = (edf.rank(at(-5), None, None), 1);
        let d = (edf.rank(at(-1), Some(6 * S), None), 2);
        let e = (edf.rank(at(-10), Some(Duration::ZERO), None), 0);
        assert!(less(b, a) && !less(a, b), "earlier deadline first");
        assert!(less(a, c) && !less(c, a), "deadline-bound before none");
        assert!(
            less(d, b) && !less(b, d),
            "same deadline: earlier enqueue first"
        );
        assert!(less(e, c) && !less(c, e), "no deadline: FCFS");
        assert_eq!(edf.rank(at(0), Some(5 * S), None), at(5));
        assert_eq!(edf.rank(at(0), Some(Duration::ZERO), None), NO_DEADLINE);
    }

    /// Upstream's slo_deadline_test.go cases: the header, its deprecated alias, invalid values.
    #[test]
    fn slo_deadline_reads_the_ttft_objective() {
        assert_eq!(
            slo_ttft_of([Some("100"), None]),
            Some(Duration::from_millis(100))
        );
        assert_eq!(
            slo_ttft_of([None, Some("200")]),
            Some(Duration::from_millis(200))
        );
        assert_eq!(
            slo_ttft_of([Some("100"), Some("5")]),
            Some(Duration::from_millis(100)),
            "the new header wins"
        );
        assert_eq!(
            slo_ttft_of([Some(" 50 "), None]),
            Some(Duration::from_millis(50))
        );
        assert_eq!(slo_ttft_of([Some("0"), None]), Some(Duration::ZERO));
        for bad in [
            "",
            "abc",
            "-5",
            "1.5",
            "9223372036855",
            "9223372036854775807",
        ] {
            assert_eq!(slo_ttft_of([Some(bad), None]), None, "{bad:?}");
        }
        assert_eq!(slo_ttft_of([None, None]), None);
        // The largest value upstream accepts.
        assert!(slo_ttft_of([Some("9223372036854"), None]).is_some());

        let slo = OrderingPolicy::SloDeadline;
        let tight = (
            slo.rank(at(1), None, Some(100 * Duration::from_millis(1))),
            1,
        );
        let loose = (slo.rank(at(0), None, Some(5 * S)), 0);
        let none = (slo.rank(at(-3), None, None), 0);
        assert!(
            less(tight, loose),
            "the tighter objective first, though later"
        );
        assert!(less(loose, none), "with an objective before without");
        let none_later = (slo.rank(at(2), None, None), 5);
        assert!(less(none, none_later), "without: arrival order");
        // The TTL plays no part.
        assert_eq!(slo.rank(at(0), Some(S), None), NO_DEADLINE);
    }

    #[test]
    fn type_names_round_trip() {
        for p in [
            OrderingPolicy::Fcfs,
            OrderingPolicy::Edf,
            OrderingPolicy::SloDeadline,
        ] {
            assert_eq!(OrderingPolicy::from_type(p.type_name()), Some(p));
        }
        assert_eq!(OrderingPolicy::from_type("lifo"), None);
        assert_eq!(
            OrderingPolicy::Fcfs.rank(at(0), Some(S), Some(S)),
            Timestamp::ZERO
        );
    }
}
