//! The task that sends this replica's load (and its approximate-index inserts) to its peers and
//! takes in theirs.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use shepherd_scheduler_core::endpoint::{PeerLoad, Pool};
use tokio::net::UdpSocket;

use super::frame::{Kind, MAX_DATAGRAM, Sealer, now_ms};
use super::gate::{Gate, Rejection};
use super::index_sync::{IndexSync, Refusal};
use super::index_wire;
use super::key::MacKey;
use super::stats::ReplicaStats;
use super::table::PeerTable;
use super::wire::{self, Entry};
use crate::config::ReplicasConfig;
use crate::shutdown::ShutdownSignal;

/// The load exchange of one replica.
#[derive(Debug)]
pub(crate) struct LoadExchange {
    pub(crate) config: ReplicasConfig,
    /// What every datagram is sealed and checked with.
    pub(crate) key: MacKey,
    pub(crate) socket: UdpSocket,
    pub(crate) pool: Arc<Pool>,
    pub(crate) stats: Arc<ReplicaStats>,
    /// The index deltas (`None` with `indexDeltas: false`).
    pub(crate) index: Option<IndexSync>,
}

/// This run's epoch: when it started, in nanoseconds since the UNIX epoch. A restarted
/// replica's is later, so its peers open a new replay window for it, and refuse a replay of
/// its earlier runs' datagrams.
pub(crate) fn epoch() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

impl LoadExchange {
    /// Runs until `stop`; on the way out, tells the peers this replica has nothing in flight.
    pub(crate) async fn run(self, stop: ShutdownSignal) {
        let mut sealer = Sealer::new(self.key.clone(), self.config.identity(), epoch());
        let mut gate = Gate::new(self.key.clone(), self.config.peers.clone());
        let mut table = PeerTable::new(self.config.peers.len());
        let mut seq = 0u64;
        let mut tick = tokio::time::interval(self.config.interval());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // One byte more than the largest datagram: a longer one arrives cut, and is refused.
        let mut buf = vec![0u8; MAX_DATAGRAM + 1];
        if self.config.insecure {
            tracing::warn!(
                listen = %self.config.listen_addr(),
                "replicas.insecure: the replica exchange runs WITHOUT a key; anyone who can reach this port can write load figures and index entries into this replica"
            );
        }
        tracing::info!(
            listen = %self.config.listen_addr(),
            identity = %self.config.identity(),
            peers = self.config.peers.len(),
            interval_ms = self.config.interval_ms,
            authenticated = !self.config.insecure,
            "exchanging in-flight load with peer replicas"
        );
        loop {
            tokio::select! {
                received = self.socket.recv_from(&mut buf) => match received {
                    Ok((len, from)) => self.take_in(&buf[..len], from, &mut gate, &mut table),
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
                    self.send(&mut sealer, seq, &self.own_loads()).await;
                    self.send_index_deltas(&mut sealer).await;
                }
                () = stop.wait() => break,
            }
        }
        // Peers forget this replica's load at once rather than after the expiry.
        self.send(&mut sealer, seq + 1, &[]).await;
    }

    fn take_in(&self, bytes: &[u8], from: SocketAddr, gate: &mut Gate, table: &mut PeerTable) {
        let admitted = match gate.admit(from, bytes, now_ms()) {
            Ok(admitted) => admitted,
            Err(why) => {
                self.stats.reject(why, from);
                return;
            }
        };
        if admitted.header.kind == Kind::IndexDelta {
            self.take_in_delta(admitted.payload, from);
            return;
        }
        match wire::decode(admitted.payload) {
            Ok(mut report) => {
                ReplicaStats::add(&self.stats.received, 1);
                // Only this replica's endpoints: no entry of a stranger's naming is kept.
                let snapshot = self.pool.snapshot();
                let before = report.entries.len();
                report
                    .entries
                    .retain(|e| snapshot.get_by_address(&e.address).is_some());
                ReplicaStats::add(
                    &self.stats.unknown_endpoints,
                    (before - report.entries.len()) as u64,
                );
                let now = self.pool.clock().now();
                table.receive(admitted.peer, admitted.header.epoch, report, now);
            }
            Err(error) => {
                self.stats.reject(Rejection::Malformed, from);
                tracing::debug!(%from, %error, "not a load report");
            }
        }
    }

    fn take_in_delta(&self, payload: &[u8], from: SocketAddr) {
        let Some(index) = &self.index else {
            ReplicaStats::add(&self.stats.deltas_ignored, 1);
            return;
        };
        let delta = match index_wire::decode(payload) {
            Ok(delta) => delta,
            Err(error) => {
                self.stats.reject(Rejection::Malformed, from);
                tracing::debug!(%from, %error, "not an index delta");
                return;
            }
        };
        match index.apply(&delta) {
            Ok(applied) => {
                ReplicaStats::add(&self.stats.deltas_received, 1);
                ReplicaStats::add(&self.stats.keys_received, applied.keys);
                ReplicaStats::add(&self.stats.unknown_endpoints, applied.unknown_endpoints);
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

    async fn send_index_deltas(&self, sealer: &mut Sealer) {
        let Some(index) = &self.index else {
            return;
        };
        let mut payloads = Vec::new();
        let sent = index.outgoing(sealer.payload_room(MAX_DATAGRAM), &mut payloads);
        ReplicaStats::add(&self.stats.keys_dropped, sent.dropped);
        if payloads.is_empty() {
            return;
        }
        let datagrams: Vec<Vec<u8>> = payloads
            .iter()
            .map(|p| sealer.seal(Kind::IndexDelta, p))
            .collect();
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

    async fn send(&self, sealer: &mut Sealer, seq: u64, entries: &[Entry]) {
        let mut payloads = Vec::new();
        wire::encode(
            seq,
            entries,
            sealer.payload_room(MAX_DATAGRAM),
            &mut payloads,
        );
        let datagrams: Vec<Vec<u8>> = payloads
            .iter()
            .map(|p| sealer.seal(Kind::Report, p))
            .collect();
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
