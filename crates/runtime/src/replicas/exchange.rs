//! The task that sends this replica's load (and its approximate-index inserts) to its peers and
//! takes in theirs.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use shepherd_scheduler_core::endpoint::{PeerLoad, Pool};
use tokio::net::UdpSocket;

use super::index_sync::{IndexSync, Refusal};
use super::index_wire;
use super::stats::ReplicaStats;
use super::table::PeerTable;
use super::wire::{self, Entry};
use crate::config::ReplicasConfig;
use crate::shutdown::ShutdownSignal;

/// Largest datagram sent: below the common 1,500-byte MTU's payload, so reports are not
/// fragmented (a large pool's report is split into parts).
const MAX_DATAGRAM: usize = 1_400;

/// The load exchange of one replica.
#[derive(Debug)]
pub(crate) struct LoadExchange {
    pub(crate) config: ReplicasConfig,
    pub(crate) socket: UdpSocket,
    pub(crate) pool: Arc<Pool>,
    pub(crate) stats: Arc<ReplicaStats>,
    /// The index deltas (`None` with `indexDeltas: false`).
    pub(crate) index: Option<IndexSync>,
}

/// A sender id for this process: different for every start, so peers tell a restarted
/// replica from the one before it.
fn sender_id() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut bytes = nanos.to_le_bytes().to_vec();
    bytes.extend_from_slice(&std::process::id().to_le_bytes());
    bytes.extend_from_slice(&(&bytes as *const Vec<u8> as usize).to_le_bytes());
    xxhash_rust::xxh3::xxh3_64(&bytes)
}

impl LoadExchange {
    /// Runs until `stop`; on the way out, tells the peers this replica has nothing in flight.
    pub(crate) async fn run(self, stop: ShutdownSignal) {
        let sender = sender_id();
        let mut seq = 0u64;
        let mut table = PeerTable::default();
        let mut tick = tokio::time::interval(self.config.interval());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut buf = vec![0u8; 64 * 1024];
        tracing::info!(
            listen = %self.config.listen,
            peers = self.config.peers.len(),
            interval_ms = self.config.interval_ms,
            "exchanging in-flight load with peer replicas"
        );
        loop {
            tokio::select! {
                received = self.socket.recv_from(&mut buf) => match received {
                    Ok((len, from)) => self.take_in(&buf[..len], from, &mut table),
                    Err(error) => tracing::debug!(%error, "load exchange receive failed"),
                },
                _ = tick.tick() => {
                    let now = self.pool.clock().now();
                    let expired = table.expire(now, self.config.expiry());
                    if expired > 0 {
                        ReplicaStats::add(&self.stats.expired, expired as u64);
                        tracing::warn!(expired, "peer replicas fell silent; their load no longer counts");
                    }
                    self.stats.peers.store(table.len() as i64, Ordering::Relaxed);
                    self.apply(&table);
                    seq += 1;
                    self.send(sender, seq, &self.own_loads()).await;
                    self.send_index_deltas(sender).await;
                }
                () = stop.wait() => break,
            }
        }
        // Peers forget this replica's load at once rather than after the expiry.
        self.send(sender, seq + 1, &[]).await;
    }

    fn take_in(&self, bytes: &[u8], from: SocketAddr, table: &mut PeerTable) {
        if !self.config.peers.contains(&from) {
            ReplicaStats::add(&self.stats.unknown_sender, 1);
            return;
        }
        if bytes.starts_with(index_wire::MAGIC) {
            self.take_in_delta(bytes, from);
            return;
        }
        match wire::decode(bytes) {
            Ok(report) => {
                ReplicaStats::add(&self.stats.received, 1);
                table.receive(report, self.pool.clock().now());
            }
            Err(error) => {
                ReplicaStats::add(&self.stats.malformed, 1);
                tracing::debug!(%from, %error, "not a load report");
            }
        }
    }

    fn take_in_delta(&self, bytes: &[u8], from: SocketAddr) {
        let Some(index) = &self.index else {
            ReplicaStats::add(&self.stats.deltas_ignored, 1);
            return;
        };
        let delta = match index_wire::decode(bytes) {
            Ok(delta) => delta,
            Err(error) => {
                ReplicaStats::add(&self.stats.malformed, 1);
                tracing::debug!(%from, %error, "not an index delta");
                return;
            }
        };
        match index.apply(&delta) {
            Ok(keys) => {
                ReplicaStats::add(&self.stats.deltas_received, 1);
                ReplicaStats::add(&self.stats.keys_received, keys);
            }
            Err(refusal) => {
                let counter = match refusal {
                    Refusal::UnknownIndex => &self.stats.deltas_unknown_index,
                    Refusal::OtherBlocks => &self.stats.deltas_other_blocks,
                };
                if counter.fetch_add(1, Ordering::Relaxed) == 0 {
                    tracing::warn!(%from, index = delta.index, block_tokens = delta.block_tokens, ?refusal, "a peer's index delta does not fit this replica's policy; ignored (do the replicas run one config?)");
                }
            }
        }
    }

    async fn send_index_deltas(&self, sender: u64) {
        let Some(index) = &self.index else {
            return;
        };
        let mut datagrams = Vec::new();
        let sent = index.outgoing(sender, MAX_DATAGRAM, &mut datagrams);
        ReplicaStats::add(&self.stats.keys_dropped, sent.dropped);
        if datagrams.is_empty() {
            return;
        }
        ReplicaStats::add(
            &self.stats.keys_sent,
            sent.keys * self.config.peers.len() as u64,
        );
        let stats = &self.stats;
        self.send_to_peers(&datagrams, &stats.deltas_sent, &stats.delta_bytes_sent)
            .await;
    }

    /// Stores the peers' sums on the endpoints (zero where no peer has anything in flight).
    fn apply(&self, table: &PeerTable) {
        for endpoint in self.pool.snapshot().endpoints() {
            endpoint.set_peer_load(table.total(endpoint.address()));
        }
    }

    /// This replica's own counts, for the endpoints where it has something in flight.
    fn own_loads(&self) -> Vec<Entry> {
        self.pool
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

    async fn send(&self, sender: u64, seq: u64, entries: &[Entry]) {
        let mut datagrams = Vec::new();
        wire::encode(sender, seq, entries, MAX_DATAGRAM, &mut datagrams);
        let stats = &self.stats;
        self.send_to_peers(&datagrams, &stats.reports_sent, &stats.bytes_sent)
            .await;
    }

    /// Sends every datagram to every peer, counting datagrams and bytes sent in `sent` and
    /// `bytes`.
    async fn send_to_peers(&self, datagrams: &[Vec<u8>], sent: &AtomicU64, bytes: &AtomicU64) {
        for peer in &self.config.peers {
            for datagram in datagrams {
                match self.socket.send_to(datagram, peer).await {
                    Ok(n) => {
                        ReplicaStats::add(sent, 1);
                        ReplicaStats::add(bytes, n as u64);
                    }
                    // A peer that is down refuses (ICMP) or drops; what it misses is resent
                    // (a report) or only stays this replica's own (a delta).
                    Err(_) => ReplicaStats::add(&self.stats.send_errors, 1),
                }
            }
        }
    }
}
