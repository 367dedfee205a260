//! The writing half: every interval, forgets the silent replicas and stores the others' load
//! on the endpoints, then writes this replica's load report and index deltas (one pipeline).
//! During an outage the deltas wait in a backlog of at most [`BACKLOG_BYTES`] (the oldest
//! dropped first, counted), written when Redis returns; load reports are not kept (the next
//! one replaces them).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use parking_lot::Mutex;
use shepherd_scheduler_core::endpoint::PeerLoad;

use super::link::Link;
use super::peers::NamedPeers;
use super::stats::RedisStats;
use super::{MAX_PAYLOAD, RedisExchange};
use crate::replicas::stats::ReplicaStats;
use crate::replicas::wire::Entry;
use crate::shutdown::ShutdownSignal;

/// Most bytes of index deltas kept for Redis's return: 4 MiB.
pub(crate) const BACKLOG_BYTES: usize = 4 * 1024 * 1024;

pub(super) struct Writer {
    exchange: Arc<RedisExchange>,
    peers: Arc<Mutex<NamedPeers>>,
    link: Link,
    backlog: VecDeque<Vec<u8>>,
    backlog_bytes: usize,
    seq: u64,
}

impl Writer {
    pub(super) fn new(
        exchange: Arc<RedisExchange>,
        peers: Arc<Mutex<NamedPeers>>,
        link: Link,
    ) -> Self {
        Writer {
            exchange,
            peers,
            link,
            backlog: VecDeque::new(),
            backlog_bytes: 0,
            seq: 0,
        }
    }

    pub(super) async fn run(mut self, stop: ShutdownSignal) {
        let mut tick = tokio::time::interval(self.exchange.config.interval());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => self.interval().await,
                () = stop.wait() => break,
            }
        }
        // The others forget this replica's load at once rather than after the expiry.
        self.seq += 1;
        let last = self.exchange.load_entry(self.seq, &[]);
        if self.link.run::<redis::Value>(&last).await.is_some() {
            ReplicaStats::add(&self.exchange.stats.reports_sent, 1);
        }
    }

    async fn interval(&mut self) {
        let exchange = Arc::clone(&self.exchange);
        let stats = &exchange.stats;
        let now = exchange.pool.clock().now();
        {
            let mut peers = self.peers.lock();
            let expired = peers.expire(now, exchange.config.expiry());
            if expired > 0 {
                ReplicaStats::add(&stats.expired, expired as u64);
                tracing::warn!(
                    expired,
                    "peer replicas fell silent; their load no longer counts"
                );
            }
            stats.peers.store(peers.len() as i64, Ordering::Relaxed);
            for endpoint in exchange.pool.snapshot().endpoints() {
                endpoint.set_peer_load(peers.total(endpoint.address()));
            }
        }

        let mut deltas = Vec::new();
        if let Some(index) = &exchange.index {
            let sent = index.outgoing(MAX_PAYLOAD, &mut deltas);
            ReplicaStats::add(&stats.keys_dropped, sent.dropped);
            ReplicaStats::add(&stats.keys_sent, sent.keys);
        }
        for delta in deltas {
            self.keep(delta);
        }
        if !self.link.ready() {
            return;
        }
        self.seq += 1;
        let own = own_loads(&exchange);
        let mut pipe = redis::pipe();
        let load = exchange.load_payload(self.seq, &own);
        let loads_key = exchange.redis.loads_key();
        pipe.add_command(exchange.xadd(&loads_key, exchange.load_entries(), &load))
            .ignore();
        let history = exchange.redis.history_entries.max(1);
        let key = exchange.redis.index_key();
        let mut delta_bytes = 0;
        for delta in &self.backlog {
            delta_bytes += delta.len();
            pipe.add_command(exchange.xadd(&key, history, delta))
                .ignore();
        }
        if self.link.run::<redis::Value>(&pipe).await.is_some() {
            let deltas = self.backlog.len() as u64;
            ReplicaStats::add(&stats.reports_sent, 1);
            ReplicaStats::add(&stats.bytes_sent, load.len() as u64);
            ReplicaStats::add(&stats.deltas_sent, deltas);
            ReplicaStats::add(&stats.delta_bytes_sent, delta_bytes as u64);
            let rs = &exchange.redis_stats;
            RedisStats::add(&rs.entries_written, 1 + deltas);
            RedisStats::add(&rs.bytes_written, (load.len() + delta_bytes) as u64);
            self.backlog.clear();
            self.backlog_bytes = 0;
        } else {
            ReplicaStats::add(&stats.send_errors, 1);
        }
    }

    /// Keeps one delta for the next write, dropping the oldest beyond the backlog's bound.
    fn keep(&mut self, delta: Vec<u8>) {
        self.backlog_bytes += delta.len();
        self.backlog.push_back(delta);
        while self.backlog_bytes > BACKLOG_BYTES {
            let Some(old) = self.backlog.pop_front() else {
                break;
            };
            self.backlog_bytes -= old.len();
            RedisStats::add(&self.exchange.redis_stats.backlog_dropped, 1);
        }
    }
}

/// This replica's own counts, for the endpoints where it has something in flight.
fn own_loads(exchange: &RedisExchange) -> Vec<Entry> {
    exchange
        .pool
        .snapshot()
        .endpoints()
        .iter()
        .filter_map(|e| {
            let load = PeerLoad {
                requests: e.in_flight_requests(),
                prompt_tokens: e.in_flight_prompt_tokens(),
                prefill_tokens: e.pending_prefill_tokens(),
            };
            (load != PeerLoad::default()).then(|| Entry {
                address: e.address().to_string(),
                load,
            })
        })
        .collect()
}
