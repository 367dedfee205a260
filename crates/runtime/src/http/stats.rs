//! What one listener counts: connections open, refused, and closed by each limit.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use shepherd_scheduler_core::metrics::{MetricDesc, MetricsSource, MetricsVisitor};

use crate::throttle::Throttle;

const OPEN: MetricDesc<'static> = MetricDesc::new(
    "shepherd_http_connections_open",
    "HTTP connections open, by listener.",
);
const ACCEPTED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_http_connections_accepted_total",
    "HTTP connections accepted, by listener.",
);
const CLOSED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_http_connections_closed_total",
    "HTTP connections the server closed or refused because of a limit, by listener and reason.",
);

/// Why the server ended a connection itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// Over `maxConnections`: refused with a 503 as it arrived.
    Refused,
    /// Its request head did not arrive within `headerReadTimeoutMs`.
    HeaderTimeout,
    /// Silent for `idleTimeoutMs` with no request open.
    Idle,
}

impl Closed {
    /// Every reason, in metric order.
    pub const ALL: [Closed; 3] = [Closed::Refused, Closed::HeaderTimeout, Closed::Idle];

    /// The `reason` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Closed::Refused => "connection_limit",
            Closed::HeaderTimeout => "header_timeout",
            Closed::Idle => "idle_timeout",
        }
    }
}

/// One listener's connection counters, exported on `/metrics` with `port="<name>"`.
#[derive(Debug)]
pub struct ConnectionStats {
    port: &'static str,
    open: AtomicU64,
    accepted: AtomicU64,
    closed: [AtomicU64; 3],
    /// One log line a second per reason (a flood is counted, not logged line by line).
    logs: [Throttle; 3],
}

impl ConnectionStats {
    /// Counters for the listener named `port` (`http`, `admin`).
    pub fn new(port: &'static str) -> Self {
        ConnectionStats {
            port,
            open: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            closed: Default::default(),
            logs: std::array::from_fn(|_| Throttle::new(Duration::from_secs(1))),
        }
    }

    /// Connections open now.
    pub fn open(&self) -> u64 {
        self.open.load(Ordering::Relaxed)
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Connections ended for `why` so far.
    pub fn closed(&self, why: Closed) -> u64 {
        self.closed[why as usize].load(Ordering::Relaxed)
    }

    pub(crate) fn opened(&self) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
        self.open.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn ended(&self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }

    /// Counts `why`, and logs it unless it was logged less than a second ago.
    pub(crate) fn close(&self, why: Closed) {
        let total = self.closed[why as usize].fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(held_back) = self.logs[why as usize].allow() {
            tracing::warn!(
                port = self.port,
                reason = why.as_str(),
                total,
                held_back,
                open = self.open(),
                "closed an HTTP connection at a limit (logged at most once a second)"
            );
        }
    }
}

impl MetricsSource for ConnectionStats {
    fn visit_metrics(&self, v: &mut dyn MetricsVisitor) {
        let port = [("port", self.port)];
        v.gauge(OPEN, &port, self.open() as f64);
        v.counter(ACCEPTED, &port, self.accepted());
        for why in Closed::ALL {
            v.counter(
                CLOSED,
                &[("port", self.port), ("reason", why.as_str())],
                self.closed(why),
            );
        }
    }
}
