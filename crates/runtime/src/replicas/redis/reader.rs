//! The reading half: a blocking `XREAD` on both streams, from the last entry read. The first
//! read starts at the streams' ends (after the [`warm`](super::warm) start has read the index
//! stream back); after an outage it resumes where it stopped, unless Redis came back without
//! the entries it had read (restarted empty), when it reads both streams from their start.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use parking_lot::Mutex;
use redis::Value;
use redis::streams::{StreamId as RedisEntry, StreamRangeReply, StreamReadReply};

use super::entry::{Entry, StreamId};
use super::link::Link;
use super::peers::{NamedPeers, Received};
use super::stats::RedisStats;
use super::{BLOCK_MS, RedisExchange, warm};
use crate::replicas::index_sync::Refusal;
use crate::replicas::stats::ReplicaStats;
use crate::replicas::{index_wire, wire};
use crate::shutdown::ShutdownSignal;

/// Most entries one read takes.
const READ_COUNT: usize = 512;
/// The pause before trying again when Redis cannot be reached.
const IDLE: Duration = Duration::from_millis(50);

pub(super) struct Reader {
    pub(super) exchange: Arc<RedisExchange>,
    peers: Arc<Mutex<NamedPeers>>,
    pub(super) link: Link,
    /// The last entry read of each stream (`None` until the first read positions it).
    loads: Option<StreamId>,
    index: Option<StreamId>,
    /// A command failed since the last read: check the streams before resuming.
    broken: bool,
}

impl Reader {
    pub(super) fn new(
        exchange: Arc<RedisExchange>,
        peers: Arc<Mutex<NamedPeers>>,
        link: Link,
    ) -> Self {
        Reader {
            exchange,
            peers,
            link,
            loads: None,
            index: None,
            broken: false,
        }
    }

    pub(super) async fn run(mut self, stop: ShutdownSignal) {
        loop {
            tokio::select! {
                () = stop.wait() => break,
                ok = self.step() => {
                    if !ok {
                        self.broken = true;
                        tokio::select! {
                            () = stop.wait() => break,
                            () = tokio::time::sleep(IDLE) => {}
                        }
                    }
                }
            }
        }
    }

    /// One read (positioning or resynchronising first when needed); false when Redis could
    /// not be reached.
    async fn step(&mut self) -> bool {
        if !self.link.ready() {
            return false;
        }
        if self.loads.is_none() {
            let Some(loads) = self.last_id(&self.exchange.redis.loads_key()).await else {
                return false;
            };
            self.loads = Some(loads);
        }
        if self.index.is_none() {
            let index = if self.exchange.redis.warm_start && self.exchange.index.is_some() {
                warm::read_back(self).await
            } else {
                self.last_id(&self.exchange.redis.index_key()).await
            };
            let Some(index) = index else {
                return false;
            };
            self.index = Some(index);
        }
        if self.broken {
            if !self.resync().await {
                return false;
            }
            self.broken = false;
        }
        let (Some(loads), Some(index)) = (self.loads, self.index) else {
            return false;
        };
        let (loads_key, index_key) = (
            self.exchange.redis.loads_key(),
            self.exchange.redis.index_key(),
        );
        let mut cmd = redis::cmd("XREAD");
        cmd.arg("COUNT")
            .arg(READ_COUNT)
            .arg("BLOCK")
            .arg(BLOCK_MS)
            .arg("STREAMS")
            .arg(&loads_key)
            .arg(&index_key)
            .arg(loads.to_string())
            .arg(index.to_string());
        let Some(reply) = self.link.run::<Option<StreamReadReply>>(&cmd).await else {
            return false;
        };
        for stream in reply.map(|r| r.keys).unwrap_or_default() {
            let is_loads = stream.key == loads_key;
            for entry in &stream.ids {
                let Some(id) = StreamId::parse(&entry.id) else {
                    continue;
                };
                if is_loads {
                    self.loads = Some(id.max(loads));
                    self.take_in_load(entry);
                } else {
                    self.index = Some(id.max(index));
                    self.take_in_delta(entry, false);
                }
            }
        }
        true
    }

    /// The id of a stream's last entry (`0-0` for an empty or missing stream).
    pub(super) async fn last_id(&mut self, key: &str) -> Option<StreamId> {
        let mut cmd = redis::cmd("XREVRANGE");
        cmd.arg(key).arg("+").arg("-").arg("COUNT").arg(1);
        let reply = self.link.run::<StreamRangeReply>(&cmd).await?;
        Some(
            reply
                .ids
                .first()
                .and_then(|e| StreamId::parse(&e.id))
                .unwrap_or_default(),
        )
    }

    /// After an outage: a stream whose last entry is older than the last one read was lost
    /// (Redis restarted empty, or the key was deleted); it is read from its start.
    async fn resync(&mut self) -> bool {
        let loads_key = self.exchange.redis.loads_key();
        let index_key = self.exchange.redis.index_key();
        let Some(loads) = self.last_id(&loads_key).await else {
            return false;
        };
        let Some(index) = self.last_id(&index_key).await else {
            return false;
        };
        let mut lost = false;
        if self.loads.is_some_and(|read| loads < read) {
            self.loads = Some(StreamId::default());
            lost = true;
        }
        if self.index.is_some_and(|read| index < read) {
            self.index = Some(StreamId::default());
            lost = true;
        }
        if lost {
            RedisStats::add(&self.exchange.redis_stats.resyncs, 1);
            tracing::info!("Redis came back without the replicas' streams; reading them anew");
        }
        true
    }

    /// Decodes an entry's fields; `None` (counted) when it is not one of the replicas', and
    /// for this replica's own.
    fn entry(&self, raw: &RedisEntry, loads: bool) -> Option<Entry> {
        let fields = raw.map.iter().filter_map(|(k, v)| match v {
            Value::BulkString(bytes) => Some((k.as_str(), bytes.as_slice())),
            Value::SimpleString(text) => Some((k.as_str(), text.as_bytes())),
            _ => None,
        });
        let entry = match Entry::from_fields(fields) {
            Ok(entry) => entry,
            Err(error) => {
                let count = &self.exchange.redis_stats.malformed;
                if count.fetch_add(1, Ordering::Relaxed) == 0 {
                    tracing::warn!(%error, id = %raw.id, "a stream entry that is not a replica's (logged once)");
                }
                return None;
            }
        };
        let own = entry.name == self.exchange.name;
        // Nothing echoes: this run's entries are skipped, and so are a previous run's load
        // reports under the same name (its index keys are this replica's past, kept).
        if own && (loads || entry.epoch == self.exchange.epoch) {
            return None;
        }
        let rs = &self.exchange.redis_stats;
        RedisStats::add(&rs.entries_read, 1);
        RedisStats::add(&rs.bytes_read, entry.payload.len() as u64);
        Some(entry)
    }

    fn take_in_load(&self, raw: &RedisEntry) {
        let Some(entry) = self.entry(raw, true) else {
            return;
        };
        let stats = &self.exchange.stats;
        let mut report = match wire::decode(&entry.payload) {
            Ok(report) => report,
            Err(error) => {
                RedisStats::add(&self.exchange.redis_stats.malformed, 1);
                tracing::debug!(%error, name = %entry.name, "not a load report");
                return;
            }
        };
        ReplicaStats::add(&stats.received, 1);
        let snapshot = self.exchange.pool.snapshot();
        let before = report.entries.len();
        report
            .entries
            .retain(|e| snapshot.get_by_address(&e.address).is_some());
        ReplicaStats::add(
            &stats.unknown_endpoints,
            (before - report.entries.len()) as u64,
        );
        let now = self.exchange.pool.clock().now();
        let received = self
            .peers
            .lock()
            .receive(&entry.name, entry.epoch, report, now);
        if received == Received::Full {
            let refused = &self.exchange.redis_stats.peers_refused;
            if refused.fetch_add(1, Ordering::Relaxed) == 0 {
                tracing::warn!(name = %entry.name, max_peers = self.exchange.redis.max_peers, "more replicas report than replicas.redis.maxPeers; this one's load is not counted until a place frees (logged once)");
            }
        }
    }

    /// Records an index delta; returns the keys recorded.
    pub(super) fn take_in_delta(&self, raw: &RedisEntry, warm: bool) -> u64 {
        let Some(entry) = self.entry(raw, false) else {
            return 0;
        };
        let Some(index) = &self.exchange.index else {
            ReplicaStats::add(&self.exchange.stats.deltas_ignored, 1);
            return 0;
        };
        let delta = match index_wire::decode(&entry.payload) {
            Ok(delta) => delta,
            Err(error) => {
                RedisStats::add(&self.exchange.redis_stats.malformed, 1);
                tracing::debug!(%error, name = %entry.name, "not an index delta");
                return 0;
            }
        };
        let stats = &self.exchange.stats;
        match index.apply(&delta) {
            Ok(applied) => {
                if !warm {
                    ReplicaStats::add(&stats.deltas_received, 1);
                    ReplicaStats::add(&stats.keys_received, applied.keys);
                }
                ReplicaStats::add(&stats.unknown_endpoints, applied.unknown_endpoints);
                applied.keys
            }
            Err(refusal) => {
                let counter = match refusal {
                    Refusal::UnknownIndex => &stats.deltas_unknown_index,
                    Refusal::OtherBlocks => &stats.deltas_other_blocks,
                };
                if counter.fetch_add(1, Ordering::Relaxed) == 0 {
                    tracing::warn!(name = %entry.name, index = delta.index, block_tokens = delta.block_tokens, ?refusal, "another replica's index delta does not fit this replica's policy; ignored (do the replicas run one config?)");
                }
                0
            }
        }
    }
}
