//! Why a request left the flow controller without being dispatched.

use std::fmt;

/// Why a request was not dispatched: the value of the `x-shepherd-dropped-reason` header, the
/// HTTP status the adapters answer with, and the label of the drop counter.
///
/// ```
/// use shepherd_scheduler_core::flow::DropReason;
///
/// assert_eq!(DropReason::Shed.as_str(), "shed");
/// assert_eq!(DropReason::QueueFull.http_status(), 429);
/// assert_eq!(DropReason::TtlExpired.http_status(), 503);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, thiserror::Error)]
pub enum DropReason {
    /// A sheddable request (negative priority) arrived while the pool was saturated.
    #[error("shed: sheddable request while the pool is saturated")]
    Shed,
    /// The request's priority band (or the whole controller) had no room left, by count or by
    /// bytes.
    #[error("queue_full: the priority band has no room left")]
    QueueFull,
    /// The request waited its whole time-to-live without being dispatched.
    #[error("ttl_expired: the request waited its whole time-to-live in the queue")]
    TtlExpired,
    /// The picker is shutting down: requests still queued are answered rather than left
    /// hanging ([`FlowQueue::drain`](super::FlowQueue::drain)).
    #[error("shutting_down: the picker is shutting down")]
    ShuttingDown,
    /// A sheddable request in flight was ended to make room for a blocked higher band
    /// (`enableEviction`; [`eviction`](super::eviction)).
    #[error("evicted: request evicted by flow control")]
    Evicted,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [DropReason; 5] = [
        DropReason::Shed,
        DropReason::QueueFull,
        DropReason::TtlExpired,
        DropReason::ShuttingDown,
        DropReason::Evicted,
    ];

    /// The header value and counter label: `shed`, `queue_full`, `ttl_expired`,
    /// `shutting_down` or `evicted`.
    pub const fn as_str(self) -> &'static str {
        match self {
            DropReason::Shed => "shed",
            DropReason::QueueFull => "queue_full",
            DropReason::TtlExpired => "ttl_expired",
            DropReason::ShuttingDown => "shutting_down",
            DropReason::Evicted => "evicted",
        }
    }

    /// The HTTP status to answer with: 429 for `shed`, `queue_full` and `evicted` (retry
    /// later; upstream answers an evicted request 429), 503 for `ttl_expired` and
    /// `shutting_down`.
    pub const fn http_status(self) -> u16 {
        match self {
            DropReason::Shed | DropReason::QueueFull | DropReason::Evicted => 429,
            DropReason::TtlExpired | DropReason::ShuttingDown => 503,
        }
    }

    /// Position in [`DropReason::ALL`].
    pub(crate) const fn index(self) -> usize {
        match self {
            DropReason::Shed => 0,
            DropReason::QueueFull => 1,
            DropReason::TtlExpired => 2,
            DropReason::ShuttingDown => 3,
            DropReason::Evicted => 4,
        }
    }
}

/// A request the flow controller gave back, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected<T> {
    /// The request, handed back so the adapter can answer it.
    pub item: T,
    /// Why.
    pub reason: DropReason,
}

impl<T> fmt::Display for Rejected<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.reason, f)
    }
}

impl<T: fmt::Debug> std::error::Error for Rejected<T> {}
