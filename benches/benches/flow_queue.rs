//! Flow queue cost per request: one enqueue plus one dispatch with 10,000 requests queued
//! (issue 11 target: at most 2 µs), in three shapes:
//!
//! - `one-flow`: a single band, a single flow (the default: no priorities, no fairness ids);
//! - `bands-flows`: 4 priority bands and 100 fairness ids, requests spread over both;
//! - `bands-flows-holdback`: as `bands-flows`, dispatched under a `priority-holdback-policy`
//!   (the ceiling of the highest band computed over the active levels at every dispatch);
//! - `with-cancel`: as `bands-flows`, plus a cancel of an older request and its replacement
//!   per iteration (the client-gone path).
//!
//! ```text
//! cargo bench -p shepherd-benches --bench flow_queue
//! ```

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion};
use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::flow::{
    BandLimits, FlowQueue, FlowSettings, HoldbackDomain, Ticket, UsageLimitPolicy,
};

const QUEUED: usize = 10_000;

struct Shape {
    bands: i32,
    flows: usize,
    /// Dispatch under a `priority-holdback-policy` (ceilings over the active levels, pool
    /// saturation 0.3: below every ceiling) instead of plain `dispatch_next`.
    holdback: bool,
}

fn filled(shape: &Shape, flow_ids: &[String]) -> (FlowQueue<u64>, Vec<Ticket>) {
    // Room for the whole backlog in one band (the per-band default is 5,000).
    let band = BandLimits {
        max_requests: 2 * QUEUED as u64,
        max_bytes: u64::MAX,
        ..BandLimits::default()
    };
    let usage_limit = if shape.holdback {
        UsageLimitPolicy::PriorityHoldback {
            domain: HoldbackDomain::Rank,
            min_ceiling: 0.4,
            max_ceiling: 1.0,
        }
    } else {
        UsageLimitPolicy::default()
    };
    let settings = FlowSettings {
        default_band: band,
        default_negative_band: band,
        usage_limit,
        ..FlowSettings::default()
    };
    let mut queue = FlowQueue::new(settings);
    let mut tickets = Vec::with_capacity(QUEUED);
    for i in 0..QUEUED {
        let priority = (i as i32 % shape.bands) - 1;
        let flow = &flow_ids[i % shape.flows];
        let ticket = queue
            .enqueue(i as u64, priority, flow, 2_000, Timestamp::ZERO)
            .unwrap_or_else(|_| panic!("room for {QUEUED} requests"));
        tickets.push(ticket);
    }
    (queue, tickets)
}

fn bench(c: &mut Criterion) {
    let flow_ids: Vec<String> = (0..100).map(|i| format!("tenant-{i:03}")).collect();
    let mut group = c.benchmark_group("flow_queue/enqueue+dispatch@10k");
    for (name, shape) in [
        (
            "one-flow",
            Shape {
                bands: 1,
                flows: 1,
                holdback: false,
            },
        ),
        (
            "bands-flows",
            Shape {
                bands: 4,
                flows: 100,
                holdback: false,
            },
        ),
        (
            "bands-flows-holdback",
            Shape {
                bands: 4,
                flows: 100,
                holdback: true,
            },
        ),
    ] {
        let (mut queue, _) = filled(&shape, &flow_ids);
        let mut i = QUEUED as u64;
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                i += 1;
                let now = Timestamp::from_nanos(i);
                let priority = (i as i32 % shape.bands) - 1;
                let flow = &flow_ids[i as usize % shape.flows];
                let ticket = queue.enqueue(i, priority, flow, 2_000, now);
                black_box(&ticket);
                if shape.holdback {
                    black_box(queue.dispatch_next_under(now, 0.3))
                } else {
                    black_box(queue.dispatch_next(now))
                }
            })
        });
        assert!(queue.len() >= QUEUED - 1, "the queue stayed full");
    }
    // Cancel an older request and enqueue its replacement, then enqueue + dispatch.
    let shape = Shape {
        bands: 4,
        flows: 100,
        holdback: false,
    };
    let (mut queue, mut tickets) = filled(&shape, &flow_ids);
    let mut i = QUEUED as u64;
    group.bench_function(BenchmarkId::from_parameter("with-cancel"), |b| {
        b.iter(|| {
            i += 1;
            let now = Timestamp::from_nanos(i);
            let slot = (i.wrapping_mul(7919) as usize) % tickets.len();
            black_box(queue.cancel(tickets[slot]));
            let flow = &flow_ids[i as usize % shape.flows];
            let priority = (i as i32 % shape.bands) - 1;
            if let Ok(t) = queue.enqueue(i, priority, flow, 2_000, now) {
                tickets[slot] = t;
            }
            let _ = queue.enqueue(i, priority, flow, 2_000, now);
            black_box(queue.dispatch_next(now))
        })
    });
    group.finish();
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    bench(&mut criterion);
    criterion.final_summary();
}
