//! The flow controller's queue: priority bands, round-robin fairness across flows, FCFS within
//! a flow, per-band and global limits, a time-to-live per request.
//!
//! [`FlowQueue`] is a plain state machine (`&mut self`, no clock, no threads): the adapter's
//! driver hands it requests with the current [`Timestamp`], asks it for the next request to
//! dispatch when the pool has room, and drains the requests whose time ran out.
//!
//! - **Bands**: an integer priority, higher first; strict priority (a band is served only when
//!   every higher band is empty). Negative priorities are sheddable: see [`FlowQueue::admit`].
//! - **Flows**: within a band, requests are grouped by a fairness id (`""` is the default
//!   flow); the band serves its non-empty flows in turn, one request each (round robin), and a
//!   flow's requests in the order of the band's ordering policy ([`OrderingPolicy`]: arrival
//!   order by default, or earliest deadline first). A flow that appears joins the end of the
//!   round.
//! - **Limits**: per band, queued requests and bytes ([`BandLimits`](super::BandLimits)); over all bands, the
//!   global limits of [`FlowSettings`]. A request over a limit is refused with
//!   [`DropReason::QueueFull`].
//! - **Time-to-live**: a request enqueued at `t` with TTL `d` expires at `t + d`: at that
//!   instant and after, it is never dispatched and comes back from [`FlowQueue::expire`] with
//!   [`DropReason::TtlExpired`]. While the pool has no endpoint
//!   ([`FlowQueue::set_pool_empty`]) the budget is the settings' no-endpoint TTL instead; each
//!   change of regime grants a fresh budget, and the whole wait stays within the longer of the
//!   two (upstream's `defaultRequestTTL` / `noEndpointRequestTTL`).
//! - **Cancel**: [`FlowQueue::cancel`] removes a request whose client went away; it is not
//!   counted as a drop.
//!
//! Every operation is O(log n) (the expiry index and the band lookup are ordered maps; flows
//! and requests are intrusive lists in slabs), except that queueing under a deadline ordering
//! walks back past the flow's requests ranked after the new one
//! ([`ordering`](super::ordering)); memory is bounded by the limits: requests
//! and flows live in slabs whose free slots are reused, and empty flows and bands are removed.
//!
//! ```
//! use std::time::Duration;
//! use shepherd_scheduler_core::clock::Timestamp;
//! use shepherd_scheduler_core::flow::{DropReason, FlowQueue, FlowSettings};
//!
//! let mut queue = FlowQueue::new(FlowSettings::default()); // TTL 60 s
//! let t0 = Timestamp::ZERO;
//! queue.enqueue("batch-1", -1, "tenant-a", 100, t0).unwrap();
//! queue.enqueue("chat-1", 0, "tenant-a", 100, t0).unwrap();
//! queue.enqueue("chat-2", 0, "tenant-b", 100, t0).unwrap();
//! queue.enqueue("chat-3", 0, "tenant-a", 100, t0).unwrap();
//!
//! // Band 0 first, alternating between the tenants; band -1 last.
//! let now = Timestamp::from_millis(10);
//! assert_eq!(queue.dispatch_next(now), Some("chat-1"));
//! assert_eq!(queue.dispatch_next(now), Some("chat-2"));
//! assert_eq!(queue.dispatch_next(now), Some("chat-3"));
//!
//! // The sheddable request waits its whole TTL, then expires.
//! let late = t0.saturating_add(Duration::from_secs(60));
//! assert_eq!(queue.dispatch_next(late), None);
//! assert_eq!(queue.expire(late), vec![("batch-1", DropReason::TtlExpired)]);
//! assert_eq!(queue.counters().dropped(DropReason::TtlExpired), 1);
//!
//! // Under saturation a sheddable request is refused before it is queued.
//! assert_eq!(queue.admit(-1, true), Err(DropReason::Shed));
//! assert_eq!(queue.admit(0, true), Ok(()));
//! ```

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use super::config::{Fairness, FlowSettings};
#[cfg(doc)]
use super::ordering::OrderingPolicy;
use super::program_aware::{ProgramLedger, las_pick};
use super::reason::{DropReason, Rejected};
use super::soft_ceiling::SoftCeilingTick;
use super::usage_limit::UsageLimitPolicy;
use crate::clock::Timestamp;

mod band;

use band::Band;

/// The empty link of the intrusive lists (flows in a band's ring, requests in a flow).
const NIL: u32 = u32::MAX;

/// Identifies a queued request, to [`FlowQueue::cancel`] it. A ticket is never reused for
/// another request (slots carry a generation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ticket {
    slot: u32,
    generation: u32,
}

/// A request as the queue files it: [`FlowQueue::enqueue_arrival`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Arrival<'a> {
    /// Its band: higher first; negative is sheddable.
    pub priority: i32,
    /// Its flow within the band (`""`: the default flow).
    pub flow_id: &'a str,
    /// Its size, counted against the limits.
    pub bytes: u64,
    /// Its time-to-live while the pool has endpoints (`None`: none); the
    /// `edf-ordering-policy` orders by it.
    pub ttl: Option<Duration>,
    /// Its time-to-first-token objective (`x-llm-d-slo-ttft-ms`), which the
    /// `slo-deadline-ordering-policy` orders by.
    pub slo_ttft: Option<Duration>,
}

/// What the queue has counted since it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowCounters {
    /// Requests accepted into the queue.
    pub enqueued: u64,
    /// Requests handed out by [`FlowQueue::dispatch_next`].
    pub dispatched: u64,
    /// Requests removed by [`FlowQueue::cancel`] (not drops: the client left).
    pub cancelled: u64,
    dropped: [u64; DropReason::ALL.len()],
}

impl FlowCounters {
    /// Requests dropped for `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.dropped[reason.index()]
    }

    /// Counts `n` more drops for `reason` (for the drops decided outside the queue: the
    /// evictions of requests in flight).
    pub fn add_dropped(&mut self, reason: DropReason, n: u64) {
        self.dropped[reason.index()] += n;
    }
}

struct Entry<T> {
    item: T,
    bytes: u64,
    priority: i32,
    flow: u32,
    seq: u64,
    /// Its place in its flow under the band's ordering policy (then `seq`).
    rank: Timestamp,
    enqueued_at: Timestamp,
    /// Its budget while the pool has endpoints.
    own_ttl: Option<Duration>,
    deadline: Option<Timestamp>,
    prev: u32,
    next: u32,
}

struct Slot<T> {
    generation: u32,
    entry: Option<Entry<T>>,
}

/// Priority bands of fair FCFS queues with limits and a TTL: see the [module docs](self).
pub struct FlowQueue<T> {
    settings: FlowSettings,
    global_max_requests: u64,
    slots: Vec<Slot<T>>,
    free_slots: Vec<u32>,
    /// Non-empty bands, highest priority first.
    bands: BTreeMap<Reverse<i32>, Band>,
    /// `(deadline, seq, slot)` of every queued request that has a deadline.
    deadlines: BTreeSet<(Timestamp, u64, u32)>,
    /// Requests found expired by `dispatch_next`, handed out by the next `expire`.
    expired: Vec<(T, DropReason)>,
    len: u64,
    bytes: u64,
    seq: u64,
    counters: FlowCounters,
    /// Whether the pool has no endpoint (the no-endpoint budget applies), since when.
    pool_empty: bool,
    regime_since: Timestamp,
    /// Priority levels seen lately that have no configured band, with when: active levels
    /// for the usage-limit policy until idle for [`FlowQueue::LEVEL_IDLE_TIMEOUT`].
    seen_levels: BTreeMap<i32, Timestamp>,
    /// The soft-reflective policy's shared tick (advanced by dispatch calls).
    soft_tick: SoftCeilingTick,
    /// Each program's attained service, for `program-aware-fairness` bands (charged at
    /// completion, through the ledger's completion hook).
    ledger: Arc<ProgramLedger>,
}

impl<T> std::fmt::Debug for FlowQueue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowQueue")
            .field("len", &self.len)
            .field("bytes", &self.bytes)
            .field("bands", &self.bands.len())
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl<T> FlowQueue<T> {
    /// The cap on queued requests when the settings have no global `maxRequests`: the queue's
    /// memory stays bounded even if requests come with many distinct priorities.
    pub const DEFAULT_GLOBAL_MAX_REQUESTS: u64 = 100_000;
    /// How long a priority level without a configured band stays active after its last
    /// request (upstream's default band garbage-collection timeout, 10 minutes).
    pub const LEVEL_IDLE_TIMEOUT: Duration = Duration::from_secs(600);
    /// Most priority levels without a configured band kept active at once.
    pub const MAX_SEEN_LEVELS: usize = 1024;

    /// An empty queue with these settings.
    pub fn new(settings: FlowSettings) -> Self {
        let ledger = Arc::new(ProgramLedger::new(settings.program_aware.clone()));
        Self::with_ledger(settings, ledger)
    }

    /// An empty queue whose `program-aware-fairness` bands read each program's attained
    /// service from `ledger` (which the schedulers charge at completion; see
    /// [`ProgramLedger::install`]).
    pub fn with_ledger(settings: FlowSettings, ledger: Arc<ProgramLedger>) -> Self {
        FlowQueue {
            global_max_requests: settings
                .max_requests
                .unwrap_or(Self::DEFAULT_GLOBAL_MAX_REQUESTS),
            settings,
            slots: Vec::new(),
            free_slots: Vec::new(),
            bands: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            expired: Vec::new(),
            len: 0,
            bytes: 0,
            seq: 0,
            counters: FlowCounters::default(),
            pool_empty: false,
            regime_since: Timestamp::ZERO,
            seen_levels: BTreeMap::new(),
            soft_tick: SoftCeilingTick::default(),
            ledger,
        }
    }

    /// Notes that a request of `priority` arrived at `now`: a level without a configured band
    /// stays active for the usage-limit policy until idle for
    /// [`FlowQueue::LEVEL_IDLE_TIMEOUT`] (upstream's band garbage collection). At most
    /// [`FlowQueue::MAX_SEEN_LEVELS`] are kept, the longest idle dropped first. Only the
    /// non-uniform policies need it; with the default policy it does nothing.
    pub fn note_level(&mut self, priority: i32, now: Timestamp) {
        if self.settings.usage_limit.is_uniform()
            || self.settings.bands.iter().any(|(p, _)| *p == priority)
        {
            return;
        }
        if self.seen_levels.insert(priority, now).is_none() {
            let timeout = duration_nanos(Self::LEVEL_IDLE_TIMEOUT);
            self.seen_levels
                .retain(|_, at| now.as_nanos().saturating_sub(at.as_nanos()) < timeout);
            while self.seen_levels.len() > Self::MAX_SEEN_LEVELS {
                let oldest = self
                    .seen_levels
                    .iter()
                    .min_by_key(|(_, at)| **at)
                    .map(|(p, _)| *p);
                match oldest {
                    Some(p) => self.seen_levels.remove(&p),
                    None => break,
                };
            }
        }
    }

    /// Tells the queue whether the pool has any endpoint at all: while it has none, queued
    /// requests wait under the no-endpoint budget; each change (at `now`) grants every queued
    /// request a fresh budget of the new regime, within the longer of the two budgets since it
    /// arrived. O(n log n) on a change, nothing otherwise.
    pub fn set_pool_empty(&mut self, empty: bool, now: Timestamp) {
        if empty == self.pool_empty {
            return;
        }
        self.pool_empty = empty;
        self.regime_since = now;
        self.deadlines.clear();
        for index in 0..self.slots.len() {
            let Some((enqueued_at, own_ttl)) = self.slots[index]
                .entry
                .as_ref()
                .map(|e| (e.enqueued_at, e.own_ttl))
            else {
                continue;
            };
            let deadline = self.deadline_for(enqueued_at, own_ttl);
            if let Some(entry) = self.slots[index].entry.as_mut() {
                entry.deadline = deadline;
                if let Some(d) = deadline {
                    self.deadlines.insert((d, entry.seq, index as u32));
                }
            }
        }
    }

    /// Whether the queue was last told the pool has no endpoint.
    pub fn pool_is_empty(&self) -> bool {
        self.pool_empty
    }

    /// When a request that arrived at `enqueued_at` with budget `own_ttl` expires, in the
    /// current regime.
    fn deadline_for(&self, enqueued_at: Timestamp, own_ttl: Option<Duration>) -> Option<Timestamp> {
        let no_endpoint = self.settings.no_endpoint_budget();
        let budget = if self.pool_empty {
            no_endpoint
        } else {
            own_ttl
        };
        let start = enqueued_at.max(self.regime_since);
        let regime_deadline = start.saturating_add(budget?);
        let bound = match (own_ttl, no_endpoint) {
            (Some(a), Some(b)) => Some(enqueued_at.saturating_add(a.max(b))),
            _ => None,
        };
        Some(bound.map_or(regime_deadline, |b| b.min(regime_deadline)))
    }

    /// The settings the queue runs with.
    pub fn settings(&self) -> &FlowSettings {
        &self.settings
    }

    /// Requests queued (not counting expired ones waiting to be drained by
    /// [`FlowQueue::expire`]).
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes queued.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Requests queued in the band of `priority`.
    pub fn band_len(&self, priority: i32) -> usize {
        self.bands
            .get(&Reverse(priority))
            .map_or(0, |b| b.len as usize)
    }

    /// The priorities of the bands with requests queued, highest first.
    pub fn queued_priorities(&self) -> impl Iterator<Item = i32> + '_ {
        self.bands.keys().map(|k| k.0)
    }

    /// Bytes queued in the band of `priority`.
    pub fn band_bytes(&self, priority: i32) -> u64 {
        self.bands.get(&Reverse(priority)).map_or(0, |b| b.bytes)
    }

    /// What the queue has counted.
    pub fn counters(&self) -> FlowCounters {
        self.counters
    }

    /// The shedding decision before a request is queued: a sheddable request (negative
    /// priority) is refused with [`DropReason::Shed`] while the pool is `saturated`, and
    /// counted. Anything else may be enqueued.
    pub fn admit(&mut self, priority: i32, saturated: bool) -> Result<(), DropReason> {
        if saturated && priority < 0 {
            self.counters.dropped[DropReason::Shed.index()] += 1;
            return Err(DropReason::Shed);
        }
        Ok(())
    }

    /// Queues `item` in the band of `priority`, flow `flow_id`, with the default TTL.
    pub fn enqueue(
        &mut self,
        item: T,
        priority: i32,
        flow_id: &str,
        bytes: u64,
        now: Timestamp,
    ) -> Result<Ticket, Rejected<T>> {
        let ttl = self.settings.ttl;
        self.enqueue_with_ttl(item, priority, flow_id, bytes, now, ttl)
    }

    /// Queues `item` with its own time-to-live (`None`: none). Refused with
    /// [`DropReason::QueueFull`] (and counted) if its band or the whole queue has no room.
    pub fn enqueue_with_ttl(
        &mut self,
        item: T,
        priority: i32,
        flow_id: &str,
        bytes: u64,
        now: Timestamp,
        ttl: Option<Duration>,
    ) -> Result<Ticket, Rejected<T>> {
        let arrival = Arrival {
            priority,
            flow_id,
            bytes,
            ttl,
            slo_ttft: None,
        };
        self.enqueue_arrival(item, arrival, now)
    }

    /// Queues `item` as `arrival` describes it (its band, flow, size, time-to-live and TTFT
    /// objective, which the `slo-deadline-ordering-policy` orders by). Refused with
    /// [`DropReason::QueueFull`] (and counted) if its band or the whole queue has no room.
    pub fn enqueue_arrival(
        &mut self,
        item: T,
        arrival: Arrival<'_>,
        now: Timestamp,
    ) -> Result<Ticket, Rejected<T>> {
        let Arrival {
            priority,
            flow_id,
            bytes,
            ttl,
            slo_ttft,
        } = arrival;
        let total = self.len + self.expired.len() as u64;
        let global_bytes_ok = self
            .bytes
            .checked_add(bytes)
            .is_some_and(|sum| self.settings.max_bytes.is_none_or(|max| sum <= max));
        let band_ok = match self.bands.get(&Reverse(priority)) {
            Some(b) => {
                b.len < b.limits.max_requests && b.bytes.saturating_add(bytes) <= b.limits.max_bytes
            }
            None => {
                let limits = self.settings.band_limits(priority);
                limits.max_requests > 0 && bytes <= limits.max_bytes
            }
        };
        if total >= self.global_max_requests || !global_bytes_ok || !band_ok {
            self.counters.dropped[DropReason::QueueFull.index()] += 1;
            return Err(Rejected {
                item,
                reason: DropReason::QueueFull,
            });
        }

        let deadline = self.deadline_for(now, ttl);
        self.note_level(priority, now);
        let settings = &self.settings;
        let band = self
            .bands
            .entry(Reverse(priority))
            .or_insert_with(|| Band::new(settings.band_limits(priority)));
        let flow_index = band.flow_for(flow_id);
        let seq = self.seq;
        self.seq += 1;
        let slot = match self.free_slots.pop() {
            Some(s) => s,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    entry: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        // Into the flow's list, after every request ranked at or before it (at the tail under
        // FCFS, where every rank is equal).
        let rank = band.limits.ordering.rank(now, ttl, slo_ttft);
        let flow = band.flow(flow_index);
        let mut prev = flow.tail;
        while prev != NIL {
            match self.slots[prev as usize].entry.as_ref() {
                Some(e) if e.rank > rank => prev = e.prev,
                _ => break,
            }
        }
        let next = if prev == NIL {
            std::mem::replace(&mut flow.head, slot)
        } else {
            match self.slots[prev as usize].entry.as_mut() {
                Some(e) => std::mem::replace(&mut e.next, slot),
                None => NIL,
            }
        };
        if next == NIL {
            flow.tail = slot;
        } else if let Some(e) = self.slots[next as usize].entry.as_mut() {
            e.prev = slot;
        }
        band.len += 1;
        band.bytes += bytes;
        let cell = &mut self.slots[slot as usize];
        cell.entry = Some(Entry {
            item,
            bytes,
            priority,
            flow: flow_index,
            seq,
            rank,
            enqueued_at: now,
            own_ttl: ttl,
            deadline,
            prev,
            next,
        });
        if let Some(d) = deadline {
            self.deadlines.insert((d, seq, slot));
        }
        self.len += 1;
        self.bytes += bytes;
        self.counters.enqueued += 1;
        Ok(Ticket {
            slot,
            generation: cell.generation,
        })
    }

    /// The next request to send: from the highest non-empty band, the flow whose turn it is,
    /// that flow's oldest request. Requests whose TTL has run out at `now` are never returned:
    /// they are moved aside for the next [`FlowQueue::expire`].
    pub fn dispatch_next(&mut self, now: Timestamp) -> Option<T> {
        self.collect_expired(now);
        let entry = self.pop_next(now)?;
        self.counters.dispatched += 1;
        Some(entry.item)
    }

    /// The next request to send if the pool's saturation `level` allows it: the usage-limit
    /// policy gives the highest non-empty band a ceiling, and while `level` is at or above it
    /// nothing is dispatched (lower bands never overtake a held-back higher one). With the
    /// default policy the ceiling is 1: dispatch while the pool is not saturated.
    pub fn dispatch_next_under(&mut self, now: Timestamp, level: f64) -> Option<T> {
        self.collect_expired(now);
        let top = self.bands.keys().next()?.0;
        let ceiling = if self.settings.usage_limit == UsageLimitPolicy::SoftReflectiveCeiling {
            // One policy call per dispatch call, as upstream's once per dispatch cycle.
            let open = self.soft_tick.advance(level);
            let levels = self.active_levels(Some(top));
            self.settings
                .usage_limit
                .ceiling_at(&levels, top, level, open)
        } else {
            self.ceiling(top)
        };
        if level.is_nan() || level >= ceiling {
            return None;
        }
        let entry = self.pop_next(now)?;
        self.counters.dispatched += 1;
        Some(entry.item)
    }

    /// The saturation level at which `priority`'s traffic is held back: the usage-limit
    /// policy's ceiling among the active levels (the configured bands, the non-empty ones and
    /// `priority` itself).
    pub fn ceiling(&self, priority: i32) -> f64 {
        let policy = &self.settings.usage_limit;
        if policy.is_uniform() {
            return policy.ceiling(&[], priority);
        }
        policy.ceiling(&self.active_levels(Some(priority)), priority)
    }

    /// Whether a request of `priority` may go straight through (skip the queue) at saturation
    /// `level`: `level` is below its ceiling. Under the soft-reflective policy a band past its
    /// reflective ceiling waits in the queue (its alternation is the dispatcher's).
    pub fn admits_now(&self, priority: i32, level: f64) -> bool {
        let policy = &self.settings.usage_limit;
        let ceiling = if *policy == UsageLimitPolicy::SoftReflectiveCeiling {
            policy.ceiling_at(&self.active_levels(Some(priority)), priority, level, false)
        } else {
            self.ceiling(priority)
        };
        level < ceiling
    }

    /// The active priority levels, highest first: the configured bands, the non-empty bands,
    /// the levels seen lately ([`FlowQueue::note_level`]) and `extra`.
    pub fn active_levels(&self, extra: Option<i32>) -> Vec<i32> {
        let mut levels: Vec<i32> = self
            .settings
            .bands
            .iter()
            .map(|(p, _)| *p)
            .chain(self.bands.keys().map(|k| k.0))
            .chain(self.seen_levels.keys().copied())
            .chain(extra)
            .collect();
        levels.sort_unstable_by(|a, b| b.cmp(a));
        levels.dedup();
        levels
    }

    /// Removes the request whose turn it is: highest band, the flow at the cursor (or, under
    /// global-strict fairness, the flow whose head arrived first), its head.
    fn pop_next(&mut self, now: Timestamp) -> Option<Entry<T>> {
        let band = self.bands.values_mut().next()?;
        if band.limits.fairness == Fairness::ProgramAware {
            return self.pop_least_served(now);
        }
        if band.limits.fairness == Fairness::GlobalStrict {
            // The head that the band's ordering policy puts first (under FCFS: the oldest).
            let mut oldest: Option<((Timestamp, u64), u32)> = None;
            let mut flow = band.cursor;
            loop {
                let f = band.flow(flow);
                let (head, next) = (f.head, f.ring_next);
                let key = self
                    .slots
                    .get(head as usize)
                    .and_then(|s| s.entry.as_ref())
                    .map_or((Timestamp::from_nanos(u64::MAX), u64::MAX), |e| {
                        (e.rank, e.seq)
                    });
                if oldest.is_none_or(|(best, _)| key < best) {
                    oldest = Some((key, head));
                }
                flow = next;
                if flow == band.cursor {
                    break;
                }
            }
            let (_, head) = oldest?;
            return Some(self.remove_slot(head));
        }
        let flow_index = band.cursor;
        let head = band.flow(flow_index).head;
        // Advance the round before removing: the flow, if it still has requests, goes last.
        let next = band.flow(flow_index).ring_next;
        band.cursor = next;
        Some(self.remove_slot(head))
    }

    /// Removes the head of the top band's flow with the least attained service
    /// (`program-aware-fairness`; the service is charged at completion, not here).
    fn pop_least_served(&mut self, now: Timestamp) -> Option<Entry<T>> {
        let settings = self.ledger.settings();
        let band = self.bands.values_mut().next()?;
        let mut heads: Vec<u32> = Vec::new();
        let mut scores: Vec<(f64, f64)> = Vec::new();
        let mut flow = band.cursor;
        loop {
            let f = band.flow(flow);
            let (head, next) = (f.head, f.ring_next);
            let waited = self
                .slots
                .get(head as usize)
                .and_then(|s| s.entry.as_ref())
                .map_or(0.0, |e| {
                    Duration::from_nanos(now.as_nanos().saturating_sub(e.enqueued_at.as_nanos()))
                        .as_secs_f64()
                });
            let service = self.ledger.service(&band.flow(flow).key, now);
            heads.push(flow);
            scores.push((service, waited));
            flow = next;
            if flow == band.cursor {
                break;
            }
        }
        let best = las_pick(&scores, settings)?;
        let flow = *heads.get(best)?;
        let head = band.flow(flow).head;
        if band.cursor == flow {
            band.cursor = band.flow(flow).ring_next;
        }
        Some(self.remove_slot(head))
    }

    /// The ledger of the programs' attained service.
    pub fn ledger(&self) -> &Arc<ProgramLedger> {
        &self.ledger
    }

    /// Removes and returns every request whose TTL has run out at `now` (deadline `<= now`),
    /// with [`DropReason::TtlExpired`], in deadline order (then arrival order).
    pub fn expire(&mut self, now: Timestamp) -> Vec<(T, DropReason)> {
        self.collect_expired(now);
        std::mem::take(&mut self.expired)
    }

    /// The earliest deadline among queued requests: when the driver should next call
    /// [`FlowQueue::expire`].
    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.deadlines.first().map(|&(d, _, _)| d)
    }

    /// Removes a queued request (its client went away) and returns it; `None` if it already
    /// left the queue. Not a drop: no reason, no drop counter.
    pub fn cancel(&mut self, ticket: Ticket) -> Option<T> {
        let cell = self.slots.get(ticket.slot as usize)?;
        if cell.generation != ticket.generation || cell.entry.is_none() {
            return None;
        }
        let entry = self.remove_slot(ticket.slot);
        self.counters.cancelled += 1;
        Some(entry.item)
    }

    /// Removes every request, queued or expired and not yet drained, in dispatch order
    /// (expired ones first), each counted as dropped for `reason`: for a picker that shuts
    /// down and must answer what it holds.
    pub fn drain(&mut self, reason: DropReason, now: Timestamp) -> Vec<(T, DropReason)> {
        let mut out: Vec<(T, DropReason)> = self.expire(now);
        while let Some(entry) = self.pop_next(now) {
            self.counters.dropped[reason.index()] += 1;
            out.push((entry.item, reason));
        }
        out
    }

    /// Whether the request behind `ticket` is still queued.
    pub fn contains(&self, ticket: Ticket) -> bool {
        self.slots
            .get(ticket.slot as usize)
            .is_some_and(|c| c.generation == ticket.generation && c.entry.is_some())
    }

    fn collect_expired(&mut self, now: Timestamp) {
        while let Some(&(deadline, _, slot)) = self.deadlines.first() {
            if deadline > now {
                break;
            }
            let entry = self.remove_slot(slot);
            self.counters.dropped[DropReason::TtlExpired.index()] += 1;
            self.expired.push((entry.item, DropReason::TtlExpired));
        }
    }

    /// Unlinks a live slot from its flow, band and the deadline index, and frees it.
    fn remove_slot(&mut self, slot: u32) -> Entry<T> {
        let cell = &mut self.slots[slot as usize];
        let Some(entry) = cell.entry.take() else {
            unreachable!("slot {slot} is live")
        };
        cell.generation = cell.generation.wrapping_add(1);
        self.free_slots.push(slot);
        if let Some(d) = entry.deadline {
            self.deadlines.remove(&(d, entry.seq, slot));
        }
        if entry.prev != NIL
            && let Some(e) = self.slots[entry.prev as usize].entry.as_mut()
        {
            e.next = entry.next;
        }
        if entry.next != NIL
            && let Some(e) = self.slots[entry.next as usize].entry.as_mut()
        {
            e.prev = entry.prev;
        }
        let key = Reverse(entry.priority);
        let Some(band) = self.bands.get_mut(&key) else {
            unreachable!("band {} of a live slot exists", entry.priority)
        };
        let flow = band.flow(entry.flow);
        if flow.head == slot {
            flow.head = entry.next;
        }
        if flow.tail == slot {
            flow.tail = entry.prev;
        }
        let flow_empty = flow.head == NIL;
        band.len -= 1;
        band.bytes -= entry.bytes;
        if flow_empty {
            band.drop_flow(entry.flow);
        }
        if band.len == 0 {
            self.bands.remove(&key);
        }
        self.len -= 1;
        self.bytes -= entry.bytes;
        entry
    }
}

fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
