//! Adaptive weights: the cost of one tick, and whether weight updates slow the request path.
//!
//! - `adaptive/tick/{8,64,512}`: one `AdaptiveController::tick` (sample the pool, detect,
//!   smooth, configure, publish, record) at 8, 64 and 512 endpoints.
//! - `adaptive/pick/static-64`: one `Scheduler::schedule` at 64 endpoints with a profile of
//!   three scorers defined here (one Affinity, two Distribution, all reading endpoint metrics)
//!   and a trivial max picker.
//! - then, in the same run, the *update ratio*: pick latency while another thread stores a new
//!   weight table every 10 µs, divided by pick latency with static weights. The two phases are
//!   interleaved (ABBA) in batches; the updater thread runs the same 10 µs pacing loop in both
//!   phases and only stores in the "updating" phase, so the ratio isolates the effect of the
//!   stores. Target: ≤ 1.05. The updater sleeps 10 µs between stores (timer slack makes that
//!   roughly 80 µs, about 12k stores/s, on Linux); `ADAPTIVE_BENCH_SPIN_UPDATER=1` makes it spin
//!   for an exact 10 µs period (100k stores/s) at the price of a busy core.
//!
//! The pick reads its weights through `Profile::weights().load()`, the same lock-free
//! `Weights` cell every profile has, including the built-in one: the scorers here differ but the
//! weight-load path is identical.
//!
//! ```text
//! cargo bench -p shepherd-benches --bench adaptive
//! ADAPTIVE_BENCH_SPIN_UPDATER=1 cargo bench -p shepherd-benches --bench adaptive -- update
//! ```

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion};
use shepherd_adaptive::{AdaptiveConfig, AdaptiveController};
use shepherd_scheduler_core::clock::{ManualClock, Timestamp};
use shepherd_scheduler_core::endpoint::{Endpoint, EndpointMetrics, LoraState, Pool};
use shepherd_scheduler_core::plugin::{Category, CycleState, Picker, Score, Scorer};
use shepherd_scheduler_core::profile::Profile;
use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
use shepherd_scheduler_core::rng::PickRng;
use shepherd_scheduler_core::scheduler::Scheduler;
use shepherd_scheduler_core::weights::WeightTable;

/// Affinity: prefers endpoints already running the `base` adapter.
struct AdapterAffinity;

impl Scorer for AdapterAffinity {
    fn category(&self) -> Category {
        Category::Affinity
    }
    fn score(&self, _: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        for (slot, ep) in out.iter_mut().zip(candidates) {
            let running = ep.metrics().lora.is_running("base");
            *slot = Score::new(if running { 1.0 } else { 0.2 });
        }
    }
}

/// Distribution: shorter queues score higher.
struct ShortQueue;

impl Scorer for ShortQueue {
    fn category(&self) -> Category {
        Category::Distribution
    }
    fn score(&self, _: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        for (slot, ep) in out.iter_mut().zip(candidates) {
            *slot = Score::new(1.0 / (1.0 + f64::from(ep.metrics().waiting)));
        }
    }
}

/// Distribution: emptier KV caches score higher.
struct FreeKv;

impl Scorer for FreeKv {
    fn category(&self) -> Category {
        Category::Distribution
    }
    fn score(&self, _: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        for (slot, ep) in out.iter_mut().zip(candidates) {
            *slot = Score::new(1.0 - ep.metrics().kv_utilization_clamped());
        }
    }
}

/// The highest total wins (first on ties); no fallbacks.
struct MaxPicker;

impl Picker for MaxPicker {
    fn pick(&self, totals: &[f64], _count: usize, _rng: &mut PickRng) -> Vec<usize> {
        let mut best = 0;
        for (i, t) in totals.iter().enumerate() {
            if *t > totals[best] {
                best = i;
            }
        }
        if totals.is_empty() {
            Vec::new()
        } else {
            vec![best]
        }
    }
}

fn profile() -> Profile {
    Profile::builder("default")
        .scorer("adapter-affinity", Arc::new(AdapterAffinity), 3.0)
        .scorer("short-queue", Arc::new(ShortQueue), 2.0)
        .scorer("free-kv", Arc::new(FreeKv), 2.0)
        .named_picker("max", Arc::new(MaxPicker))
        .build()
}

/// A pool of `n` endpoints with varied fresh metrics at `now`; one endpoint is hot.
fn pool(n: usize, now: Timestamp) -> Arc<Pool> {
    let pool = Arc::new(Pool::with_clock(Arc::new(ManualClock::at(now))));
    pool.set_members(
        (0..n).map(|i| format!("10.{}.{}.{}:8000", i / 65536, (i / 256) % 256, i % 256)),
    );
    for (i, ep) in pool.snapshot().endpoints().iter().enumerate() {
        let hot = i == 0;
        ep.set_metrics(EndpointMetrics {
            running: 4 + (i % 5) as u32,
            waiting: if hot { 60 } else { (i % 3) as u32 },
            kv_utilization: if hot {
                0.97
            } else {
                0.3 + 0.05 * (i % 7) as f64
            },
            lora: LoraState {
                running: if i % 4 == 0 {
                    vec!["base".into()]
                } else {
                    Vec::new()
                },
                ..Default::default()
            },
            ..Default::default()
        });
    }
    pool
}

fn bench_tick(c: &mut Criterion) {
    let now = Timestamp::from_millis(1_000);
    let mut group = c.benchmark_group("adaptive/tick");
    for n in [8usize, 64, 512] {
        let pool = pool(n, now);
        let profile = Arc::new(profile());
        let controller = match AdaptiveController::new(profile, AdaptiveConfig::default()) {
            Ok(c) => c,
            Err(e) => panic!("default config rejected: {e}"),
        };
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                let snapshot = pool.load();
                black_box(controller.tick(&snapshot, now))
            })
        });
    }
    group.finish();
}

fn scheduler(now: Timestamp) -> Scheduler {
    match Scheduler::builder(pool(64, now)).profile(profile()).build() {
        Ok(s) => s,
        Err(e) => panic!("scheduler: {e}"),
    }
}

fn bench_pick(c: &mut Criterion) {
    let scheduler = scheduler(Timestamp::from_millis(1_000));
    let request = InferenceRequest::new("r", "llama", Prompt::Text("hello world".into()));
    c.bench_function("adaptive/pick/static-64", |b| {
        b.iter(|| black_box(scheduler.schedule(&request).map(|d| d.primary().id())))
    });
}

/// Nanoseconds per pick over `picks` picks.
fn time_picks(scheduler: &Scheduler, request: &InferenceRequest, picks: usize) -> f64 {
    let start = Instant::now();
    for _ in 0..picks {
        let _ = black_box(scheduler.schedule(request).map(|d| d.primary().id()));
    }
    start.elapsed().as_nanos() as f64 / picks as f64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len().is_multiple_of(2) {
        (v[m - 1] + v[m]) / 2.0
    } else {
        v[m]
    }
}

/// Pick latency with concurrent weight updates ÷ pick latency with static weights.
///
/// The updater sleeps 10 µs between stores; with `ADAPTIVE_BENCH_SPIN_UPDATER=1` it spins
/// instead, which keeps an exact 10 µs period but occupies a core.
fn update_ratio(quick: bool) {
    let spin = std::env::var_os("ADAPTIVE_BENCH_SPIN_UPDATER").is_some_and(|v| v == "1");
    let scheduler = scheduler(Timestamp::from_millis(1_000));
    let request = InferenceRequest::new("r", "llama", Prompt::Text("hello world".into()));
    let weights = Arc::clone(scheduler.profiles()[0].weights());
    let (rounds, picks) = if quick { (2, 50) } else { (120, 1_500) };

    let updating = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let stores = Arc::new(AtomicU64::new(0));
    let updater = {
        let (weights, updating, stop, stores) = (
            Arc::clone(&weights),
            Arc::clone(&updating),
            Arc::clone(&stop),
            Arc::clone(&stores),
        );
        thread::spawn(move || {
            let tables = [
                WeightTable::new(vec![3.0, 2.0, 2.0]),
                WeightTable::new(vec![0.7, 3.15, 3.15]).with_reason("burst"),
            ];
            let period = Duration::from_micros(10);
            let mut next = Instant::now();
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                if spin {
                    // Exact 10 µs pacing, at the price of a busy core.
                    while Instant::now() < next {
                        std::hint::spin_loop();
                    }
                    next = (next + period).max(Instant::now());
                } else {
                    // Sleeping keeps the updater from starving the picking thread of CPU on a
                    // small machine; timer slack stretches the period, so the achieved store
                    // rate is reported.
                    thread::sleep(period);
                }
                if updating.load(Ordering::Relaxed) {
                    weights.store(tables[i % 2].clone());
                    stores.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            }
        })
    };

    let _ = time_picks(&scheduler, &request, picks); // warm up
    let (mut fixed, mut moving, mut paired) = (Vec::new(), Vec::new(), Vec::new());
    let mut moving_time = Duration::ZERO;
    for round in 0..rounds {
        // ABBA order so slow drifts in machine load hit both phases alike; each round's two
        // adjacent batches also give one paired ratio.
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        let (mut f, mut m) = (0.0, 0.0);
        for phase in order {
            updating.store(phase, Ordering::Relaxed);
            let start = Instant::now();
            let ns = time_picks(&scheduler, &request, picks);
            if phase {
                moving_time += start.elapsed();
                m = ns;
            } else {
                f = ns;
            }
        }
        fixed.push(f);
        moving.push(m);
        paired.push(m / f);
    }
    updating.store(false, Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    let _ = updater.join();

    let stored = stores.load(Ordering::Relaxed);
    let (f, m) = (median(&mut fixed), median(&mut moving));
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    println!(
        "\nadaptive/update-ratio (64 endpoints, {rounds}×{picks} picks per phase, ABBA, {} updater):\n  \
         static weights:   median {f:.0} ns/pick (mean {:.0})\n  \
         updating weights: median {m:.0} ns/pick (mean {:.0}); {stored} stores, {:.0} stores/s\n  \
         ratio updating/static: {:.3} (median of paired batches), {:.3} (of medians), \
         {:.3} (of means)  [target ≤ 1.05]",
        if spin { "spinning" } else { "sleeping" },
        mean(&fixed),
        mean(&moving),
        stored as f64 / moving_time.as_secs_f64().max(1e-9),
        median(&mut paired),
        m / f,
        mean(&moving) / mean(&fixed),
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--test");
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(800))
        .measurement_time(Duration::from_secs(3))
        .sample_size(40)
        .configure_from_args();
    bench_tick(&mut c);
    bench_pick(&mut c);
    c.final_summary();
    update_ratio(quick);
}
