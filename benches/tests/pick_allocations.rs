//! A steady-state pick allocates nothing: the default profile and the adaptive preset, 64
//! endpoints, 16 KB prompts, counted by an instrumented global allocator (this test binary's
//! alone, so it counts nobody else's allocations).
//!
//! Steady state: the index warmed, the thread's spare buffers filled by earlier picks. Counted
//! for each pick: scheduling it, reading its decision, and dropping the decision (the buffers
//! go back to the thread's spares), both dry runs of fresh prompts (lookup, scores, pick) and
//! picks that record their blocks (the insert) of prompts the index has seen.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::alloc::System;
use std::hint::black_box;

use shepherd_adaptive::preset::build_adaptive_scheduler;
use shepherd_benches::workload::{grouped_prompt, pool, request};
use shepherd_scheduler_core::request::InferenceRequest;
use shepherd_scheduler_core::scheduler::{ScheduleOptions, Scheduler};
use shepherd_scorers::build_default_scheduler;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const ENDPOINTS: usize = 64;
const BYTES: usize = 16 * 1024;

const DRY: ScheduleOptions<'static> = ScheduleOptions {
    subset: None,
    profile: None,
    dry_run: true,
};

/// Requests of `BYTES` bytes, half shared by one of 16 groups, half unique to `id`.
fn requests(ids: std::ops::Range<u64>) -> Vec<InferenceRequest> {
    ids.map(|id| request(id, grouped_prompt(id % 16, id, BYTES / 2, BYTES / 2)))
        .collect()
}

/// Allocations (and reallocations) made by `picks` picks of `requests`, after one untimed
/// round of each.
fn allocations(
    scheduler: &Scheduler,
    requests: &[InferenceRequest],
    options: ScheduleOptions<'_>,
) -> (u64, u64) {
    for r in requests {
        drop(scheduler.schedule_with(r, options).unwrap());
    }
    let region = Region::new(GLOBAL);
    let mut picked = 0usize;
    for r in requests {
        let decision = scheduler.schedule_with(r, options).unwrap();
        picked += black_box(decision.primary().id().0 as usize);
        drop(decision);
    }
    black_box(picked);
    let change = region.change();
    (change.allocations as u64, change.reallocations as u64)
}

fn check(name: &str, scheduler: &Scheduler) {
    // Warm: the index learns 256 prompts, and every later prompt's shared half.
    let seen = requests(0..256);
    for r in &seen {
        drop(scheduler.schedule(r).unwrap());
    }
    // Picks that record prompts the index has seen (repeated until their picks are stable).
    let replay = &seen[..64];
    for _ in 0..4 {
        allocations(scheduler, replay, ScheduleOptions::default());
    }
    let (allocs, reallocs) = allocations(scheduler, replay, ScheduleOptions::default());
    assert_eq!(
        (allocs, reallocs),
        (0, 0),
        "{name}: {allocs} allocations and {reallocs} reallocations in {} picks with inserts",
        replay.len()
    );
    // Dry runs of prompts never seen (each one's unique half is new).
    let fresh = requests(10_000..10_064);
    let (allocs, reallocs) = allocations(scheduler, &fresh, DRY);
    assert_eq!(
        (allocs, reallocs),
        (0, 0),
        "{name}: {allocs} allocations and {reallocs} reallocations in {} dry-run picks",
        fresh.len()
    );
}

#[test]
fn steady_state_picks_allocate_nothing() {
    let (pool_default, _clock) = pool(ENDPOINTS);
    let default = build_default_scheduler(pool_default).unwrap();
    check("default profile", &default);

    let (pool_adaptive, _clock) = pool(ENDPOINTS);
    let (adaptive, _controller) = build_adaptive_scheduler(pool_adaptive).unwrap();
    check("adaptive preset", &adaptive);
}
