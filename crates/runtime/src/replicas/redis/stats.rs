//! The Redis backend's own counters (beside the exchange's [`ReplicaStats`]), on `/metrics`,
//! and the one place that says whether Redis is reachable: an outage is counted and logged
//! once when it starts, and once when it ends.
//!
//! The reader and the writer report here, each on its own connection, so an answer can arrive
//! after the other task has already seen the outage end or begin: only a command *sent* after
//! the last change can change it again. A command sent during a partition that fails once the
//! other task has seen Redis back (its bytes lost on the way, its timeout running out after
//! the heal) belongs to the outage that ended; it does not start a second one.
//!
//! [`ReplicaStats`]: crate::replicas::ReplicaStats

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use shepherd_scheduler_core::metrics::{MetricDesc, MetricsSource, MetricsVisitor};
use tokio::time::Instant;

/// What the Redis backend did.
#[derive(Debug)]
pub struct RedisStats {
    up: AtomicBool,
    /// When the current outage began (while down), or the last one ended (while up).
    changed_at: Mutex<Option<Instant>>,
    outages: AtomicU64,
    errors: AtomicU64,
    pub(crate) entries_written: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
    pub(crate) entries_read: AtomicU64,
    pub(crate) bytes_read: AtomicU64,
    pub(crate) malformed: AtomicU64,
    pub(crate) peers_refused: AtomicU64,
    pub(crate) warm_keys: AtomicU64,
    pub(crate) warm_entries: AtomicU64,
    pub(crate) backlog_dropped: AtomicU64,
    pub(crate) resyncs: AtomicU64,
}

impl Default for RedisStats {
    fn default() -> Self {
        RedisStats {
            up: AtomicBool::new(true),
            changed_at: Mutex::new(None),
            outages: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            entries_written: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            entries_read: AtomicU64::new(0),
            bytes_read: AtomicU64::new(0),
            malformed: AtomicU64::new(0),
            peers_refused: AtomicU64::new(0),
            warm_keys: AtomicU64::new(0),
            warm_entries: AtomicU64::new(0),
            backlog_dropped: AtomicU64::new(0),
            resyncs: AtomicU64::new(0),
        }
    }
}

impl RedisStats {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Whether the last command reached Redis.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// Outages seen (each counted once, however many commands failed in it).
    pub fn outages(&self) -> u64 {
        self.outages.load(Ordering::Relaxed)
    }

    /// Commands or connection attempts that failed.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Stream entries of other replicas taken in.
    pub fn entries_read(&self) -> u64 {
        self.entries_read.load(Ordering::Relaxed)
    }

    /// Bytes of stream entries written.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written.load(Ordering::Relaxed)
    }

    /// Index keys recorded by the warm start.
    pub fn warm_keys(&self) -> u64 {
        self.warm_keys.load(Ordering::Relaxed)
    }

    /// Times a reader found Redis had lost its streams (restarted empty) and read them anew.
    pub fn resyncs(&self) -> u64 {
        self.resyncs.load(Ordering::Relaxed)
    }

    /// A command or connection attempt begun at `sent` failed: counted; the first failure of
    /// an outage is logged, the others are not. A failure of something begun before Redis
    /// was last seen back is the end of the outage that ended, not a new one.
    pub(crate) fn failed(&self, what: &str, error: &dyn std::fmt::Display, sent: Instant) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut changed_at = self.changed_at.lock();
        if !self.is_up() || changed_at.is_some_and(|back| sent < back) {
            return;
        }
        self.up.store(false, Ordering::Relaxed);
        self.outages.fetch_add(1, Ordering::Relaxed);
        *changed_at = Some(Instant::now());
        drop(changed_at);
        tracing::warn!(
            %error,
            what,
            "Redis is unreachable: the replicas route on their own knowledge until it returns (logged once per outage)"
        );
    }

    /// A command sent at `sent` reached Redis: an outage, if one was going on, ends (logged),
    /// unless it started after the command was sent (the other task's command failed
    /// meanwhile: the outage is newer than this answer).
    pub(crate) fn succeeded(&self, sent: Instant) {
        if self.is_up() {
            return;
        }
        let mut changed_at = self.changed_at.lock();
        if self.is_up() || changed_at.is_some_and(|down| sent < down) {
            return;
        }
        self.up.store(true, Ordering::Relaxed);
        let lasted = changed_at.replace(Instant::now()).map(|at| at.elapsed());
        drop(changed_at);
        tracing::info!(
            lasted_ms = lasted.map_or(0, |d| d.as_millis() as u64),
            "Redis is back: the replicas share their load and index again"
        );
    }
}

const UP: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_redis_up",
    "1 when the replica's last Redis command succeeded, 0 during an outage.",
);
const OUTAGES: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_redis_outages_total",
    "Redis outages seen (each counted once); routing goes on on local knowledge meanwhile.",
);
const ERRORS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_redis_errors_total",
    "Redis commands and connection attempts that failed.",
);
const WRITTEN: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_redis_entries_written_total",
    "Stream entries (load reports and index deltas) written to Redis.",
);
const WRITTEN_BYTES: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_redis_written_bytes_total",
    "Payload bytes of the stream entries written to Redis.",
);
const READ: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_redis_entries_read_total",
    "Other replicas' stream entries read from Redis.",
);
const READ_BYTES: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_redis_read_bytes_total",
    "Payload bytes of the stream entries read from Redis.",
);
const MALFORMED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_redis_malformed_entries_total",
    "Stream entries refused: missing fields, or a payload that is not a load report or an index delta.",
);
const PEERS_REFUSED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_redis_peers_refused_total",
    "Load reports of a replica not heard because replicas.redis.maxPeers others are live.",
);
const WARM_KEYS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_redis_warm_start_keys_total",
    "Index keys recorded at start from the index stream (the warm start).",
);
const WARM_ENTRIES: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_redis_warm_start_entries_total",
    "Index stream entries read at start (the warm start).",
);
const BACKLOG_DROPPED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_redis_backlog_dropped_total",
    "Index delta entries dropped during an outage because the backlog kept for Redis's return was full.",
);
const RESYNCS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_replicas_redis_resyncs_total",
    "Times Redis came back without the streams this replica had read (restarted empty) and they were read anew.",
);

impl MetricsSource for RedisStats {
    fn visit_metrics(&self, v: &mut dyn MetricsVisitor) {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        v.gauge(UP, &[], if self.is_up() { 1.0 } else { 0.0 });
        v.counter(OUTAGES, &[], get(&self.outages));
        v.counter(ERRORS, &[], get(&self.errors));
        v.counter(WRITTEN, &[], get(&self.entries_written));
        v.counter(WRITTEN_BYTES, &[], get(&self.bytes_written));
        v.counter(READ, &[], get(&self.entries_read));
        v.counter(READ_BYTES, &[], get(&self.bytes_read));
        v.counter(MALFORMED, &[], get(&self.malformed));
        v.counter(PEERS_REFUSED, &[], get(&self.peers_refused));
        v.counter(WARM_KEYS, &[], get(&self.warm_keys));
        v.counter(WARM_ENTRIES, &[], get(&self.warm_entries));
        v.counter(BACKLOG_DROPPED, &[], get(&self.backlog_dropped));
        v.counter(RESYNCS, &[], get(&self.resyncs));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_counted_once_and_a_late_failure_after_it_ends_starts_none() {
        let stats = RedisStats::default();
        let before = Instant::now();
        stats.failed("read", &"connection reset", before);
        stats.failed("write", &"command timed out", Instant::now());
        assert_eq!(
            (stats.is_up(), stats.outages(), stats.errors()),
            (false, 1, 2)
        );
        // An answer to a command sent before the outage began does not end it.
        stats.succeeded(before);
        assert!(!stats.is_up());
        stats.succeeded(Instant::now());
        assert!(stats.is_up());
        // The writer's command sent during the outage times out after the reader saw Redis
        // back: counted as an error, not as a second outage.
        stats.failed("write", &"command timed out", before);
        assert_eq!(
            (stats.is_up(), stats.outages(), stats.errors()),
            (true, 1, 3)
        );
        // A command sent now that fails is a new outage.
        stats.failed("write", &"connection refused", Instant::now());
        assert_eq!((stats.is_up(), stats.outages()), (false, 2));
    }
}
