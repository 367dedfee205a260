//! The warm start: a starting replica reads the index stream back, oldest entry first, and
//! records every delta in its approximate index (its own previous run's included), so its
//! first requests route on what the replicas recorded recently rather than on nothing. The
//! stream holds at most `historyEntries` entries, so this reads a bounded amount. It waits
//! (at most [`POOL_WAIT`]) for the pool to have endpoints: keys are recorded only for
//! endpoints the pool has.

use std::time::Duration;

use redis::streams::StreamRangeReply;

use super::entry::StreamId;
use super::reader::Reader;
use super::stats::RedisStats;

/// Longest wait for a first endpoint before reading the history anyway.
pub(crate) const POOL_WAIT: Duration = Duration::from_secs(10);
/// Entries one `XRANGE` takes.
const PAGE: usize = 256;

/// Reads the index stream back into the index; the id of the last entry read (`0-0` for an
/// empty stream), or `None` when Redis could not be reached (the caller tries again).
pub(super) async fn read_back(reader: &mut Reader) -> Option<StreamId> {
    let waited = tokio::time::Instant::now();
    while reader.exchange.pool.snapshot().endpoints().is_empty() && waited.elapsed() < POOL_WAIT {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let key = reader.exchange.redis.index_key();
    let started = std::time::Instant::now();
    let mut last: Option<StreamId> = None;
    let (mut entries, mut keys) = (0u64, 0u64);
    loop {
        let from = match last {
            Some(id) => format!("({id}"),
            None => "-".to_owned(),
        };
        let mut cmd = redis::cmd("XRANGE");
        cmd.arg(&key).arg(from).arg("+").arg("COUNT").arg(PAGE);
        let page = reader.link.run::<StreamRangeReply>(&cmd).await?;
        let n = page.ids.len();
        for raw in &page.ids {
            if let Some(id) = StreamId::parse(&raw.id) {
                last = Some(last.map_or(id, |l| l.max(id)));
            }
            keys += reader.take_in_delta(raw, true);
            entries += 1;
        }
        if n < PAGE {
            break;
        }
    }
    let stats = &reader.exchange.redis_stats;
    RedisStats::add(&stats.warm_entries, entries);
    RedisStats::add(&stats.warm_keys, keys);
    tracing::info!(
        entries,
        keys,
        took_ms = started.elapsed().as_millis() as u64,
        "warm start: the approximate index holds what the replicas recorded recently"
    );
    Some(last.unwrap_or_default())
}
