//! What OpenTelemetry tracing costs a pick: the default profile's pick (64 endpoints, 16 KB
//! prompts, as in the `pick` bench) plain, through the tracing calls the adapters make with
//! tracing off, and with tracing on at 1 % and 100 % sampling (a request span, the scoring
//! span, a span per profile and per scorer, exported in batches to an exporter that drops
//! them; a request not sampled makes no span at all). The summary prints medians and ratios to the plain pick, measured in this run in
//! alternating rounds (the machine is shared).
//!
//! `cargo bench -p shepherd-benches --bench tracing_pick`

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider, SpanData, SpanExporter};
use shepherd_benches::workload::{grouped_prompt, pool, request};
use shepherd_runtime::telemetry::{ParentRoot, RequestTracing, SamplerKind, install_tracer};
use shepherd_scheduler_core::request::InferenceRequest;
use shepherd_scheduler_core::scheduler::{ScheduleOptions, Scheduler};
use shepherd_scorers::build_default_scheduler;
use tracing_subscriber::layer::SubscriberExt;

const DRY: ScheduleOptions<'static> = ScheduleOptions {
    subset: None,
    profile: None,
    dry_run: true,
};

/// Takes spans and drops them.
#[derive(Debug)]
struct Discard;

impl SpanExporter for Discard {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        black_box(batch);
        Ok(())
    }
}

fn warm(endpoints: usize, bytes: usize) -> (Scheduler, Vec<InferenceRequest>) {
    let (pool, _clock) = pool(endpoints);
    let scheduler = build_default_scheduler(pool).expect("default config builds");
    let groups = (endpoints * 4) as u64;
    for id in 0..2_000u64 {
        let prompt = grouped_prompt(id % groups, id, bytes / 2, bytes - bytes / 2);
        drop(scheduler.schedule(&request(id, prompt)));
    }
    let fresh = (0..64u64)
        .map(|i| {
            request(
                u64::MAX - i,
                grouped_prompt(i % groups, u64::MAX - i, bytes / 2, bytes - bytes / 2),
            )
        })
        .collect();
    (scheduler, fresh)
}

/// One traced pick, as the adapters make it.
fn traced_pick(scheduler: &Scheduler, tracing: &RequestTracing, request: &InferenceRequest) {
    let trace = tracing.start(None, None);
    let scoring = trace.scoring();
    let decision = match scoring.observer() {
        Some(observer) => scheduler.schedule_observed(request, DRY, observer),
        None => scheduler.schedule_with(request, DRY),
    };
    scoring.finish(decision.as_ref());
    drop(black_box(decision));
    drop(trace);
}

/// Median nanoseconds per call of `f` over `batch` calls.
fn time(batch: usize, mut f: impl FnMut(usize)) -> f64 {
    let start = Instant::now();
    for i in 0..batch {
        f(i);
    }
    start.elapsed().as_nanos() as f64 / batch as f64
}

fn main() {
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
        .configure_from_args();
    let (scheduler, requests) = warm(64, 16 * 1024);
    let n = requests.len();

    // Tracing installed as the binaries install it: a provider that records what it is
    // asked for (the request's sampling is decided up front), batched to an exporter that
    // drops the spans, and the tracing-opentelemetry layer for the request span.
    let provider = SdkTracerProvider::builder()
        .with_sampler(Sampler::AlwaysOn)
        .with_batch_exporter(Discard)
        .build();
    install_tracer(&provider, SamplerKind::AlwaysOff);
    let layer = tracing_opentelemetry::layer().with_tracer(
        opentelemetry::trace::TracerProvider::tracer(&provider, "shepherd"),
    );
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
        .expect("the only subscriber");
    let off = RequestTracing::disabled();
    let one_percent = RequestTracing::new()
        .with_sampler(SamplerKind::ParentBased(ParentRoot::TraceIdRatio(0.01)));
    let every = RequestTracing::new().with_sampler(SamplerKind::AlwaysOn);

    let mut group = criterion.benchmark_group("tracing_pick/64ep/16KB");
    let mut i = 0;
    group.bench_function("plain", |b| {
        b.iter(|| {
            i += 1;
            drop(black_box(scheduler.schedule_with(&requests[i % n], DRY)))
        })
    });
    group.bench_function("tracing-off", |b| {
        b.iter(|| {
            i += 1;
            traced_pick(&scheduler, &off, &requests[i % n])
        })
    });
    group.bench_function("sampled-1%", |b| {
        b.iter(|| {
            i += 1;
            traced_pick(&scheduler, &one_percent, &requests[i % n])
        })
    });
    group.bench_function("sampled-100%", |b| {
        b.iter(|| {
            i += 1;
            traced_pick(&scheduler, &every, &requests[i % n])
        })
    });
    group.finish();

    // The summary: alternating rounds, medians of the per-round ratios.
    let batch = 4_000;
    let (mut plain, mut offs, mut ones, mut alls) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut r_off, mut r_one) = (Vec::new(), Vec::new());
    for _ in 0..41 {
        let p = time(batch, |i| {
            drop(black_box(scheduler.schedule_with(&requests[i % n], DRY)))
        });
        let o = time(batch, |i| traced_pick(&scheduler, &off, &requests[i % n]));
        let s = time(batch, |i| {
            traced_pick(&scheduler, &one_percent, &requests[i % n])
        });
        let a = time(batch / 10, |i| {
            traced_pick(&scheduler, &every, &requests[i % n])
        });
        plain.push(p);
        offs.push(o);
        ones.push(s);
        alls.push(a);
        r_off.push(o / p);
        r_one.push(s / p);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    criterion.final_summary();
    println!("\n== pick with tracing, default profile, 64 endpoints, 16 KB prompts (this run) ==");
    println!("plain pick:          {:>8.2} µs", median(&mut plain) / 1e3);
    println!(
        "tracing off:         {:>8.2} µs   ratio to plain {:.3} (median of 41 paired rounds)",
        median(&mut offs) / 1e3,
        median(&mut r_off)
    );
    println!(
        "1 % sampled:         {:>8.2} µs   ratio to plain {:.3} (median of 41 paired rounds)",
        median(&mut ones) / 1e3,
        median(&mut r_one)
    );
    println!("every pick sampled:  {:>8.2} µs", median(&mut alls) / 1e3);
    let _ = provider.shutdown();
}
