//! The replicas' Redis (or Valkey) backend, `replicas.backend: redis`.
//!
//! Every replica writes to two **streams** on one Redis server and reads both:
//!
//! - `PREFIX:loads`: each interval, this replica's in-flight counts per endpoint (a
//!   [`wire`](super::wire) report, the whole count, never a change), trimmed to a few entries
//!   per replica (`MAXLEN ~`);
//! - `PREFIX:index`: each interval, the block keys this replica's picks recorded in its
//!   approximate prefix indexes ([`index_wire`](super::index_wire) deltas), trimmed to
//!   `historyEntries` entries: the recent past a starting replica reads back to rebuild its
//!   index (the **warm start**).
//!
//! Each entry names its writer and run ([`entry`]); a reader skips its own run's (nothing
//! echoes), records the others' index keys for the endpoints of its pool, and keeps the others'
//! loads in a table of at most `maxPeers` replicas, forgotten after `expireMs` of silence.
//! Every replica so learns every replica's picks about one interval late, as with the direct
//! exchange.
//!
//! Streams rather than pub/sub: a stream keeps a bounded past, so a replica that starts reads
//! what the others recorded recently (pub/sub has no past), and a reader that lost its
//! connection resumes from the last entry it read instead of losing what was said meanwhile;
//! a blocking `XREAD` hears an entry as soon as it is written, as a subscriber would.
//!
//! **Redis is never on the request path**: a pick reads local memory; two background tasks
//! (a writer and a reader) talk to Redis, each command bounded by `timeoutMs`. When Redis is
//! down or slow the replica routes on its own knowledge: the outage is counted and logged once
//! ([`stats`]); the index keys picked meanwhile wait in a bounded backlog, written when Redis
//! returns; a reader that finds Redis came back without its streams (restarted empty) reads
//! them from the start again.

pub mod connect;
pub mod entry;
mod link;
mod peers;
mod reader;
pub mod stats;
mod warm;
mod writer;

use std::sync::Arc;

use parking_lot::Mutex;
use shepherd_scheduler_core::endpoint::Pool;

pub use connect::RedisStartError;
pub use stats::RedisStats;

use self::link::Link;
use self::peers::NamedPeers;
use super::IndexSync;
use super::stats::ReplicaStats;
use crate::config::{RedisReplicasConfig, ReplicasConfig};
use crate::shutdown::ShutdownSignal;

/// Largest payload of one stream entry: 16 KiB (an interval's keys beyond it take more
/// entries).
pub const MAX_PAYLOAD: usize = 16 * 1024;
/// Load-stream entries kept per possible replica (`maxPeers`).
const LOAD_ENTRIES_PER_PEER: u64 = 16;
/// How long one blocking read waits for new entries, in milliseconds.
const BLOCK_MS: u64 = 100;

/// This replica's side of the Redis backend.
#[derive(Debug)]
pub(crate) struct RedisExchange {
    config: ReplicasConfig,
    redis: RedisReplicasConfig,
    client: redis::Client,
    name: String,
    epoch: u64,
    pool: Arc<Pool>,
    stats: Arc<ReplicaStats>,
    redis_stats: Arc<RedisStats>,
    index: Option<Arc<IndexSync>>,
}

impl RedisExchange {
    /// Builds the client and checks the credentials: `Err` when a secret cannot be read or
    /// Redis refuses this replica; an unreachable Redis is not an error.
    pub(crate) async fn start(
        config: ReplicasConfig,
        pool: Arc<Pool>,
        index: Option<IndexSync>,
        stats: Arc<ReplicaStats>,
        redis_stats: Arc<RedisStats>,
    ) -> Result<RedisExchange, RedisStartError> {
        let redis = config
            .redis
            .clone()
            .ok_or_else(|| RedisStartError::Url("no replicas.redis section".into()))?;
        let client = connect::client(&redis)?;
        let name = redis.replica_name();
        let epoch = super::exchange::epoch();
        let exchange = RedisExchange {
            config,
            redis,
            client,
            name,
            epoch,
            pool,
            stats,
            redis_stats,
            index: index.map(Arc::new),
        };
        // The commands the replica needs, one of each: an empty load report (true at start)
        // and reads of both streams.
        let mut probe = redis::pipe();
        probe.add_command(exchange.load_entry(0, &[]));
        probe
            .cmd("XREVRANGE")
            .arg(exchange.redis.index_key())
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1);
        probe
            .cmd("XRANGE")
            .arg(exchange.redis.loads_key())
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(1);
        if !connect::check(&exchange.client, &exchange.redis, &probe).await? {
            exchange.redis_stats.failed(
                "start",
                &"unreachable at start",
                tokio::time::Instant::now(),
            );
        }
        Ok(exchange)
    }

    /// The load report `seq` of `entries`, in one payload (an endpoint's entry is at most
    /// 276 bytes: a payload of 16 KiB holds 59 endpoints at the least, so a larger pool's
    /// report goes in a larger payload rather than in parts).
    fn load_payload(&self, seq: u64, entries: &[super::wire::Entry]) -> Vec<u8> {
        let mut payloads = Vec::new();
        let room = MAX_PAYLOAD.max(16 + entries.len() * 280);
        super::wire::encode(seq, entries, room, &mut payloads);
        payloads.into_iter().next().unwrap_or_default()
    }

    /// The `XADD` of one load report.
    fn load_entry(&self, seq: u64, entries: &[super::wire::Entry]) -> redis::Cmd {
        let payload = self.load_payload(seq, entries);
        self.xadd(&self.redis.loads_key(), self.load_entries(), &payload)
    }

    fn load_entries(&self) -> u64 {
        (self.redis.max_peers as u64)
            .saturating_mul(LOAD_ENTRIES_PER_PEER)
            .max(64)
    }

    /// `XADD key MAXLEN ~ max * r NAME e EPOCH p PAYLOAD`.
    fn xadd(&self, key: &str, max: u64, payload: &[u8]) -> redis::Cmd {
        let mut cmd = redis::cmd("XADD");
        cmd.arg(key)
            .arg("MAXLEN")
            .arg("~")
            .arg(max)
            .arg("*")
            .arg(entry::FIELD_NAME)
            .arg(&self.name)
            .arg(entry::FIELD_EPOCH)
            .arg(self.epoch)
            .arg(entry::FIELD_PAYLOAD)
            .arg(payload);
        cmd
    }

    /// Runs the reader and the writer until `stop`; on the way out, tells the others this
    /// replica has nothing in flight.
    pub(crate) async fn run(self, stop: ShutdownSignal) {
        tracing::info!(
            address = %connect::address(&self.client),
            name = %self.name,
            prefix = %self.redis.prefix,
            tls = self.redis.uses_tls(),
            user = self.redis.username.as_deref().unwrap_or("default"),
            interval_ms = self.config.interval_ms,
            "sharing in-flight load and index inserts with the other replicas through Redis"
        );
        let this = Arc::new(self);
        let peers = Arc::new(Mutex::new(NamedPeers::new(this.redis.max_peers)));
        let timeout = this.redis.timeout();
        let reader_link = Link::new(
            this.client.clone(),
            timeout,
            timeout + std::time::Duration::from_millis(BLOCK_MS),
            Arc::clone(&this.redis_stats),
            "read",
        );
        let writer_link = Link::new(
            this.client.clone(),
            timeout,
            timeout,
            Arc::clone(&this.redis_stats),
            "write",
        );
        let reader = reader::Reader::new(Arc::clone(&this), Arc::clone(&peers), reader_link);
        let writer = writer::Writer::new(Arc::clone(&this), peers, writer_link);
        let read_stop = stop.clone();
        let reading = tokio::spawn(reader.run(read_stop));
        writer.run(stop).await;
        let _ = reading.await;
    }
}
