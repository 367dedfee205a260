//! Pick latency with the predicted-latency scorer (issue 17), against the default profile, in
//! one run: 64 endpoints, 16 KB prompts of Shepherd's docs (one prompt per pick, its blocks
//! held by 8 endpoints), each case a dry-run `schedule` (filters, scorers, picker; no hooks).
//!
//! - `default`: the default profile (prefix 3 : queue 2 : KV 2);
//! - `default+latency`: the same plus `latency-scorer` over a `predicted-latency-producer`
//!   (streaming mode), its model trained first (ready);
//! - `default+slo`: `default+latency` plus `slo-headroom-tier-filter` and
//!   `latency-slo-admitter`, the request carrying TTFT and TPOT objectives;
//! - `adaptive`: the adaptive preset's profile (no controller ticking);
//! - `predicted-latency`: the simulator's predicted-latency profile (adaptive +
//!   `latency-scorer`), trained;
//! - `predict`: one `LatencyModel::predict` call (per candidate), in ns.
//!
//! ```text
//! cargo bench -p shepherd-benches --bench latency_pick
//! ```

use std::time::{Duration, Instant};

use shepherd_benches::docs_prompts::{completions, docs_text};
use shepherd_benches::workload::pool;
use shepherd_scheduler_core::clock::Clock;
use shepherd_scheduler_core::completion::{Completion, Usage};
use shepherd_scheduler_core::config::{EndpointPickerConfig, build_scheduler_in};
use shepherd_scheduler_core::request::{InferenceRequest, SLO_TPOT_HEADER, SLO_TTFT_HEADER};
use shepherd_scheduler_core::scheduler::{ScheduleOptions, Scheduler};
use shepherd_scheduler_core::shared::SharedState;
use shepherd_scorers::latency::LatencyProducer;
use shepherd_scorers::latency::{LatencyFeatures, LatencyModel};
use shepherd_scorers::{DEFAULT_CONFIG_YAML, builtin_registry};

const DRY: ScheduleOptions<'static> = ScheduleOptions {
    subset: None,
    profile: None,
    dry_run: true,
};
const ENDPOINTS: usize = 64;
const HOLDERS: usize = 8;

/// `yaml` with a `predicted-latency-producer` and `latency-scorer` (weight 5) added before its
/// picker, at the file's indentation; with `slo`, the tier filter and the admitter too.
fn with_latency(yaml: &str, slo: bool) -> String {
    let body = &yaml[yaml.find("apiVersion").unwrap_or(0)..];
    let mut out = String::new();
    for line in body.lines() {
        let indent = &line[..line.len() - line.trim_start().len()];
        match line.trim() {
            "- type: max-score-picker" => {
                out.push_str(&format!(
                    "{indent}- type: predicted-latency-producer\n\
                     {indent}  parameters: {{streamingMode: true, minSamples: 50}}\n\
                     {indent}- type: latency-scorer\n"
                ));
                if slo {
                    out.push_str(&format!(
                        "{indent}- type: slo-headroom-tier-filter\n{indent}- type: latency-slo-admitter\n"
                    ));
                }
            }
            "- pluginRef: max-score-picker" => {
                out.push_str(&format!(
                    "{indent}- pluginRef: latency-scorer\n{indent}  weight: 5\n"
                ));
                if slo {
                    out.push_str(&format!(
                        "{indent}- pluginRef: slo-headroom-tier-filter\n{indent}- pluginRef: latency-slo-admitter\n"
                    ));
                }
            }
            _ => {}
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// A scheduler for `yaml` over 64 endpoints, `request`'s prefix picked onto 8 of them and,
/// when `train`, 400 requests served (first token and end on the pool's clock) so that a
/// latency model is ready.
fn scheduler(yaml: &str, request: &InferenceRequest, train: bool) -> Scheduler {
    let (pool, clock) = pool(ENDPOINTS);
    let shared = SharedState::new(pool);
    let config = EndpointPickerConfig::from_yaml(yaml).expect("bench config");
    let scheduler = build_scheduler_in(&config, &builtin_registry(), &shared).expect("builds");
    for _ in 0..HOLDERS {
        drop(scheduler.schedule(request));
    }
    if train {
        for i in 0..400u64 {
            let r = InferenceRequest::new(format!("t{i}"), "m", request.prompt.clone());
            let Ok(mut d) = scheduler.schedule(&r) else {
                continue;
            };
            let waiting = u64::from(d.primary().metrics().waiting);
            let step = |ms: u64| clock.set(clock.now().saturating_add(Duration::from_millis(ms)));
            step(20 + 9 * waiting + i % 5);
            d.handle_mut().first_token();
            step(70);
            d.finish(Completion::success(Some(Usage {
                prompt_tokens: 4096,
                completion_tokens: 11,
                cached_tokens: None,
            })));
        }
        // The timed picks must use the model, not its neutral cold start.
        for (_, producer) in shared.resources.all::<LatencyProducer>() {
            let ready = producer
                .model()
                .predict(&LatencyFeatures::default())
                .ttft_ms;
            assert!(
                ready.is_some(),
                "the latency model is not ready: {:?}",
                producer.model().recent_errors()
            );
        }
    }
    scheduler
}

/// Median microseconds per call of `f` over 15 timed batches sized to about 50 ms.
fn median_us(mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    f();
    let one = start.elapsed().as_secs_f64().max(1e-8);
    let batch = ((0.05 / one) as usize).clamp(1, 1_000_000);
    let mut times: Vec<f64> = (0..15)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..batch {
                f();
            }
            start.elapsed().as_secs_f64() * 1e6 / batch as f64
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is read.
    let mut request = completions(&docs_text(16 << 10));
    // Objectives (read by the SLO plugins only).
    request.headers.push((SLO_TTFT_HEADER.into(), "200".into()));
    request.headers.push((SLO_TPOT_HEADER.into(), "50".into()));
    let adaptive = shepherd_adaptive::preset::ADAPTIVE_CONFIG_YAML;
    let cases = [
        ("default", scheduler(DEFAULT_CONFIG_YAML, &request, false)),
        (
            "default+latency",
            scheduler(&with_latency(DEFAULT_CONFIG_YAML, false), &request, true),
        ),
        ("adaptive", scheduler(adaptive, &request, false)),
        (
            "predicted-latency",
            scheduler(&with_latency(adaptive, false), &request, true),
        ),
        (
            "default+slo",
            scheduler(&with_latency(DEFAULT_CONFIG_YAML, true), &request, true),
        ),
    ];
    // Alternate the cases over three rounds; keep each case's best median.
    let mut best = [f64::INFINITY; 5];
    for _ in 0..3 {
        for (i, (_, s)) in cases.iter().enumerate() {
            best[i] = best[i].min(median_us(|| drop(s.schedule_with(&request, DRY))));
        }
    }
    let model = LatencyModel::default();
    for i in 0..400u32 {
        let f = LatencyFeatures {
            uncached_tokens: f64::from(i % 40) * 100.0,
            waiting: f64::from(i % 9),
            running: f64::from(i % 50),
            ..LatencyFeatures::default()
        };
        model.learn(
            &f,
            Some(20.0 + 0.02 * f.uncached_tokens + 9.0 * f.waiting),
            Some(7.0),
        );
    }
    let f = LatencyFeatures {
        uncached_tokens: 1234.0,
        waiting: 3.0,
        running: 17.0,
        ..LatencyFeatures::default()
    };
    let predict_ns = median_us(|| {
        std::hint::black_box(model.predict(std::hint::black_box(&f)));
    }) * 1e3;
    println!(
        "\npick latency, {ENDPOINTS} endpoints, 16 KB prompts held by {HOLDERS} (median µs, best of 3 alternating rounds):"
    );
    for (i, (name, _)) in cases.iter().enumerate() {
        println!(
            "{name:>18} | {:>7.2} µs | {:.2}× default",
            best[i],
            best[i] / best[0]
        );
    }
    println!(
        "predicted-latency vs adaptive: {:.2}×; one prediction (both targets): {predict_ns:.0} ns",
        best[3] / best[2]
    );
}
