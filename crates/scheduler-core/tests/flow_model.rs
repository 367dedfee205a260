//! Model-based test: the flow queue against a simple reference (vectors scanned in full).
//! Same dispatch order, same expiries (in both TTL regimes: pool with and without endpoints),
//! same rejections; no request lost or handed out twice.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::time::Duration;

use proptest::prelude::*;
use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::flow::{BandLimits, DropReason, FlowQueue, FlowSettings, Ticket};

#[derive(Debug, Clone)]
enum Op {
    Enqueue {
        priority: i32,
        flow: u8,
        bytes: u64,
        ttl_ms: Option<u64>,
    },
    Dispatch,
    Cancel(usize),
    Advance(u64),
    Expire,
    PoolEmpty(bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (-2i32..=2, 0u8..4, 0u64..120, prop::option::of(1u64..50)).prop_map(
            |(priority, flow, bytes, ttl_ms)| Op::Enqueue { priority, flow, bytes, ttl_ms }
        ),
        3 => Just(Op::Dispatch),
        1 => any::<usize>().prop_map(Op::Cancel),
        2 => (0u64..20).prop_map(Op::Advance),
        1 => Just(Op::Expire),
        1 => any::<bool>().prop_map(Op::PoolEmpty),
    ]
}

struct RefItem {
    id: u64,
    bytes: u64,
    enqueued_at: Timestamp,
    ttl: Option<Duration>,
    seq: u64,
}

#[derive(Default)]
struct RefBand {
    /// The ring: flows in service order, with their FCFS requests.
    ring: Vec<(u8, VecDeque<RefItem>)>,
    cursor: usize,
}

impl RefBand {
    fn len(&self) -> u64 {
        self.ring.iter().map(|(_, q)| q.len() as u64).sum()
    }
    fn bytes(&self) -> u64 {
        self.ring
            .iter()
            .flat_map(|(_, q)| q.iter())
            .map(|i| i.bytes)
            .sum()
    }
    fn remove_flow(&mut self, i: usize) {
        self.ring.remove(i);
        if i < self.cursor {
            self.cursor -= 1;
        }
        if self.cursor >= self.ring.len() {
            self.cursor = 0;
        }
    }
}

/// The reference: bands by priority, each a ring of flows, scanned linearly.
struct Reference {
    settings: FlowSettings,
    bands: BTreeMap<i32, RefBand>,
    expired: Vec<(u64, DropReason)>,
    seq: u64,
    pool_empty: bool,
    regime_since: Timestamp,
}

impl Reference {
    /// The definition: the current regime's budget from when the request entered it (its
    /// arrival or the regime's start), never past the longer budget from its arrival.
    fn deadline(&self, item: &RefItem) -> Option<Timestamp> {
        let no_endpoint = self.settings.no_endpoint_budget();
        let budget = if self.pool_empty {
            no_endpoint
        } else {
            item.ttl
        }?;
        let entered = if item.enqueued_at > self.regime_since {
            item.enqueued_at
        } else {
            self.regime_since
        };
        let mut deadline = entered.saturating_add(budget);
        if let (Some(a), Some(b)) = (item.ttl, no_endpoint) {
            let bound = item.enqueued_at.saturating_add(a.max(b));
            if bound < deadline {
                deadline = bound;
            }
        }
        Some(deadline)
    }

    fn set_pool_empty(&mut self, empty: bool, now: Timestamp) {
        if empty != self.pool_empty {
            self.pool_empty = empty;
            self.regime_since = now;
        }
    }

    fn len(&self) -> u64 {
        self.bands.values().map(RefBand::len).sum()
    }
    fn bytes(&self) -> u64 {
        self.bands.values().map(RefBand::bytes).sum()
    }

    fn enqueue(
        &mut self,
        id: u64,
        priority: i32,
        flow: u8,
        bytes: u64,
        now: Timestamp,
        ttl: Option<Duration>,
    ) -> bool {
        let limits = self.settings.band_limits(priority);
        let (blen, bbytes) = self
            .bands
            .get(&priority)
            .map_or((0, 0), |b| (b.len(), b.bytes()));
        let total = self.len() + self.expired.len() as u64;
        if total >= self.settings.max_requests.unwrap()
            || self.bytes() + bytes > self.settings.max_bytes.unwrap()
            || blen >= limits.max_requests
            || bbytes + bytes > limits.max_bytes
        {
            return false;
        }
        let band = self.bands.entry(priority).or_default();
        let item = RefItem {
            id,
            bytes,
            enqueued_at: now,
            ttl,
            seq: self.seq,
        };
        self.seq += 1;
        match band.ring.iter_mut().find(|(f, _)| *f == flow) {
            Some((_, q)) => q.push_back(item),
            None => {
                let at = band.cursor;
                band.ring.insert(at, (flow, VecDeque::from([item])));
                if band.ring.len() > 1 {
                    band.cursor += 1;
                }
            }
        }
        true
    }

    fn remove(&mut self, id: u64) -> bool {
        for (p, band) in self.bands.iter_mut() {
            for fi in 0..band.ring.len() {
                if let Some(pos) = band.ring[fi].1.iter().position(|i| i.id == id) {
                    band.ring[fi].1.remove(pos);
                    if band.ring[fi].1.is_empty() {
                        band.remove_flow(fi);
                    }
                    let p = *p;
                    if band.ring.is_empty() {
                        self.bands.remove(&p);
                    }
                    return true;
                }
            }
        }
        false
    }

    fn collect_expired(&mut self, now: Timestamp) {
        let mut due: Vec<(Timestamp, u64, u64)> = self
            .bands
            .values()
            .flat_map(|b| b.ring.iter().flat_map(|(_, q)| q.iter()))
            .filter_map(|i| {
                self.deadline(i)
                    .filter(|&d| d <= now)
                    .map(|d| (d, i.seq, i.id))
            })
            .collect();
        due.sort();
        for (_, _, id) in due {
            assert!(self.remove(id));
            self.expired.push((id, DropReason::TtlExpired));
        }
    }

    fn dispatch(&mut self, now: Timestamp) -> Option<u64> {
        self.collect_expired(now);
        let (&p, band) = self.bands.iter_mut().next_back()?;
        let f = band.cursor;
        let item = band.ring[f].1.pop_front().unwrap();
        band.cursor = (band.cursor + 1) % band.ring.len();
        if band.ring[f].1.is_empty() {
            band.remove_flow(f);
        }
        if band.ring.is_empty() {
            self.bands.remove(&p);
        }
        Some(item.id)
    }
}

fn model_settings() -> FlowSettings {
    FlowSettings {
        ttl: Some(Duration::from_millis(30)),
        no_endpoint_ttl: Some(Some(Duration::from_millis(45))),
        max_requests: Some(14),
        max_bytes: Some(900),
        bands: vec![(
            0,
            BandLimits {
                max_requests: 6,
                max_bytes: 400,
                ..BandLimits::default()
            },
        )],
        default_band: BandLimits {
            max_requests: 5,
            max_bytes: 300,
            ..BandLimits::default()
        },
        default_negative_band: BandLimits {
            max_requests: 4,
            max_bytes: 250,
            ..BandLimits::default()
        },
        ..FlowSettings::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn flow_queue_matches_the_reference(ops in prop::collection::vec(op(), 1..300)) {
        let settings = model_settings();
        let mut queue: FlowQueue<u64> = FlowQueue::new(settings.clone());
        let mut reference = Reference {
            settings,
            bands: BTreeMap::new(),
            expired: Vec::new(),
            seq: 0,
            pool_empty: false,
            regime_since: Timestamp::ZERO,
        };
        let mut now = Timestamp::ZERO;
        let mut tickets: Vec<(u64, Ticket)> = Vec::new();
        let mut accepted = HashSet::new();
        let mut out = HashSet::new();
        let mut next_id = 0u64;

        for op in ops {
            match op {
                Op::Enqueue { priority, flow, bytes, ttl_ms } => {
                    let id = next_id;
                    next_id += 1;
                    let ttl = ttl_ms.map(Duration::from_millis);
                    let ok_ref = reference.enqueue(id, priority, flow, bytes, now, ttl);
                    let key = format!("flow-{flow}");
                    match queue.enqueue_with_ttl(id, priority, &key, bytes, now, ttl) {
                        Ok(ticket) => {
                            prop_assert!(ok_ref, "queue accepted {} the reference refused", id);
                            tickets.push((id, ticket));
                            accepted.insert(id);
                        }
                        Err(rejected) => {
                            prop_assert!(!ok_ref, "queue refused {} the reference accepted", id);
                            prop_assert_eq!(rejected.item, id);
                            prop_assert_eq!(rejected.reason, DropReason::QueueFull);
                        }
                    }
                }
                Op::Dispatch => {
                    let got = queue.dispatch_next(now);
                    prop_assert_eq!(got, reference.dispatch(now));
                    if let Some(id) = got {
                        prop_assert!(out.insert(id), "{} handed out twice", id);
                    }
                }
                Op::Cancel(i) => {
                    if !tickets.is_empty() {
                        let (id, ticket) = tickets[i % tickets.len()];
                        let got = queue.cancel(ticket);
                        let in_ref = reference.remove(id);
                        prop_assert_eq!(got.is_some(), in_ref);
                        if let Some(got) = got {
                            prop_assert_eq!(got, id);
                            prop_assert!(out.insert(id), "{} handed out twice", id);
                        }
                    }
                }
                Op::Advance(ms) => now = now.saturating_add(Duration::from_millis(ms)),
                Op::PoolEmpty(empty) => {
                    queue.set_pool_empty(empty, now);
                    reference.set_pool_empty(empty, now);
                }
                Op::Expire => {
                    let got = queue.expire(now);
                    reference.collect_expired(now);
                    let want = std::mem::take(&mut reference.expired);
                    let ids: Vec<(u64, DropReason)> = got;
                    prop_assert_eq!(&ids, &want);
                    for (id, _) in ids {
                        prop_assert!(out.insert(id), "{} handed out twice", id);
                    }
                }
            }
            prop_assert_eq!(queue.len() as u64, reference.len());
            prop_assert_eq!(queue.bytes(), reference.bytes());
        }
        // Drain everything: every accepted request comes out exactly once.
        let end = now.saturating_add(Duration::from_secs(1));
        while let Some(id) = queue.dispatch_next(now) {
            prop_assert_eq!(Some(id), reference.dispatch(now));
            prop_assert!(out.insert(id), "{} handed out twice", id);
        }
        prop_assert_eq!(reference.dispatch(now), None);
        for (id, _) in queue.expire(end) {
            prop_assert!(out.insert(id), "{} handed out twice", id);
        }
        prop_assert_eq!(out, accepted);
        prop_assert!(queue.is_empty());
    }
}
