//! The task that sends this replica's load (and its approximate-index inserts) to its peers and
//! takes in theirs.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use shepherd_scheduler_core::endpoint::{PeerLoad, Pool};
use tokio::net::UdpSocket;

use super::discovered::DiscoveredPeers;
use super::frame::{Kind, MAX_DATAGRAM, Sealer, now_ms};
use super::gate::{Gate, Rejection};
use super::index_sync::{IndexSync, Refusal};
use super::index_wire;
use super::key::MacKey;
use super::peer_slots::{Change, PeerSlots};
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
    /// The peers found on Kubernetes (`None` with a written-out list).
    pub(crate) discovered: Option<DiscoveredPeers>,
}

/// The peers heard and their tables.
struct Peers {
    slots: PeerSlots,
    gate: Gate,
    table: PeerTable,
    /// The discovery's last list, applied again when a slot frees.
    last: Arc<Vec<SocketAddr>>,
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
        let fixed = self.config.peers.fixed();
        let mut discovered = self.discovered.as_ref().map(|d| d.rx.clone());
        let slots = match &self.discovered {
            Some(d) => PeerSlots::vacant(d.max),
            None => PeerSlots::fixed(fixed),
        };
        let gate = match &self.discovered {
            Some(d) => Gate::vacant(self.key.clone(), d.max),
            None => Gate::new(self.key.clone(), fixed.to_vec()),
        };
        let mut peers = Peers {
            table: PeerTable::new(slots.len()),
            slots,
            gate,
            last: Arc::new(Vec::new()),
        };
        if let Some(rx) = &mut discovered {
            self.stats.discovering.store(true, Ordering::Relaxed);
            let first = Arc::clone(&rx.borrow_and_update());
            self.follow(&mut peers, first);
        }
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
            peers = peers.slots.active().len(),
            discovered = self.discovered.is_some(),
            interval_ms = self.config.interval_ms,
            authenticated = !self.config.insecure,
            "exchanging in-flight load with peer replicas"
        );
        loop {
            tokio::select! {
                received = self.socket.recv_from(&mut buf) => match received {
                    Ok((len, from)) => {
                        self.take_in(&buf[..len], from, &mut peers.gate, &mut peers.table);
                    }
                    Err(error) => tracing::debug!(%error, "load exchange receive failed"),
                },
                changed = next_list(&mut discovered) => match changed {
                    Some(list) => self.follow(&mut peers, list),
                    // The discovery ended (only at shutdown): the last peers stay.
                    None => discovered = None,
                },
                _ = tick.tick() => {
                    let now = self.pool.clock().now();
                    let expired = peers.table.expire(now, self.config.expiry());
                    if expired > 0 {
                        ReplicaStats::add(&self.stats.expired, expired as u64);
                        tracing::warn!(expired, "peer replicas fell silent; their load no longer counts");
                    }
                    self.free_departed(&mut peers);
                    self.stats.peers.store(peers.table.len() as i64, Ordering::Relaxed);
                    self.apply(&peers.table);
                    seq += 1;
                    let to = peers.slots.active();
                    self.send(&mut sealer, seq, &self.own_loads(), to).await;
                    self.send_index_deltas(&mut sealer, to).await;
                }
                () = stop.wait() => break,
            }
        }
        // Peers forget this replica's load at once rather than after the expiry.
        self.send(&mut sealer, seq + 1, &[], peers.slots.active())
            .await;
    }

    /// Makes the discovery's `list` the peers heard (as far as `maxPeers` allows).
    fn follow(&self, peers: &mut Peers, list: Arc<Vec<SocketAddr>>) {
        let before = peers.slots.refused();
        for change in peers.slots.update(&list) {
            match change {
                Change::Assigned(slot, address) => {
                    peers.gate.assign(slot, address);
                    tracing::info!(peer = %address, "peer replica discovered");
                }
                Change::Retired(slot) => {
                    peers.gate.retire(slot);
                    let address = peers.gate.peers().get(slot).copied();
                    tracing::info!(peer = ?address, "peer replica gone from the discovery; its last load counts until it expires");
                }
            }
        }
        let refused = peers.slots.refused();
        if refused > before {
            tracing::warn!(
                refused,
                max_peers = peers.slots.len(),
                "more peer replicas discovered than replicas.peers.kubernetes.maxPeers; the others are not heard until a slot frees"
            );
        }
        self.stats
            .discovered
            .store(list.len() as i64, Ordering::Relaxed);
        self.stats
            .over_limit
            .store(refused as i64, Ordering::Relaxed);
        peers.last = list;
    }

    /// Frees the slots of departed peers whose load expired, and gives them to discovered
    /// peers that were waiting for one.
    fn free_departed(&self, peers: &mut Peers) {
        if self.discovered.is_none() {
            return;
        }
        let table = &peers.table;
        let freed = peers.slots.free_expired(|slot| table.is_live(slot));
        if freed.is_empty() {
            return;
        }
        for slot in freed {
            peers.table.reset(slot);
        }
        if peers.slots.refused() > 0 {
            let last = Arc::clone(&peers.last);
            self.follow(peers, last);
        }
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

    async fn send_index_deltas(&self, sealer: &mut Sealer, to: &[SocketAddr]) {
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
        ReplicaStats::add(&self.stats.keys_sent, sent.keys * to.len() as u64);
        let stats = &self.stats;
        self.send_to_peers(to, &datagrams, &stats.deltas_sent, &stats.delta_bytes_sent)
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

    async fn send(&self, sealer: &mut Sealer, seq: u64, entries: &[Entry], to: &[SocketAddr]) {
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
        self.send_to_peers(to, &datagrams, &stats.reports_sent, &stats.bytes_sent)
            .await;
    }

    /// Sends every datagram to every peer of `to`, counting datagrams and bytes sent in
    /// `sent` and `bytes`.
    async fn send_to_peers(
        &self,
        to: &[SocketAddr],
        datagrams: &[Vec<u8>],
        sent: &AtomicU64,
        bytes: &AtomicU64,
    ) {
        for peer in to {
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

/// The discovery's next list; pending forever without a discovery.
async fn next_list(
    rx: &mut Option<tokio::sync::watch::Receiver<Arc<Vec<SocketAddr>>>>,
) -> Option<Arc<Vec<SocketAddr>>> {
    match rx {
        Some(rx) => match rx.changed().await {
            Ok(()) => Some(Arc::clone(&rx.borrow_and_update())),
            Err(_) => None,
        },
        None => std::future::pending().await,
    }
}
