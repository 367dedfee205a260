//! Predicted-latency routing in a scheduler: the `predicted-latency-producer` learns from
//! finished requests how each server's load turns into TTFT and TPOT; the `latency-scorer`
//! then sends requests where they start soonest (or, with objectives, where they just fit),
//! the `slo-headroom-tier-filter` keeps the servers predicted to meet the objectives (never
//! none), and the `latency-slo-admitter` refuses sheddable requests nobody can serve in time.
//! A cold model falls back everywhere.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use shepherd_scheduler_core::clock::{ManualClock, Timestamp};
use shepherd_scheduler_core::config::build_scheduler_in;
use shepherd_scheduler_core::prelude::*;
use shepherd_scheduler_core::request::{SLO_TPOT_HEADER, SLO_TTFT_HEADER};
use shepherd_scheduler_core::shared::SharedState;
use shepherd_scorers::builtin_registry;
use shepherd_scorers::latency::LatencyProducer;

const SERVERS: [&str; 4] = [
    "127.0.0.1:8000",
    "127.0.0.1:8001",
    "127.0.0.1:8002",
    "127.0.0.1:8003",
];

const YAML: &str = "
plugins:
- type: predicted-latency-producer
  parameters: {streamingMode: true, minSamples: 50}
- type: latency-slo-admitter
- type: slo-headroom-tier-filter
  parameters: {epsilonExploreNeg: 0}
- type: latency-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: latency-slo-admitter
  - pluginRef: slo-headroom-tier-filter
  - pluginRef: latency-scorer
  - pluginRef: max-score-picker
";

/// A server's TTFT and TPOT (ms) as a function of its waiting requests.
fn latencies(waiting: u32) -> (u64, u64) {
    (10 + 8 * u64::from(waiting), 7)
}

struct Rig {
    clock: Arc<ManualClock>,
    shared: SharedState,
    scheduler: Scheduler,
}

/// What the rig sends.
#[derive(Default, Clone, Copy)]
struct Ask {
    ttft_objective: Option<u64>,
    tpot_objective: Option<u64>,
    priority: i32,
}

impl Ask {
    /// A TTFT objective of `ms`, and a 50 ms TPOT objective every server meets.
    fn ttft(ms: u64) -> Self {
        Ask {
            ttft_objective: Some(ms),
            tpot_objective: Some(50),
            ..Ask::default()
        }
    }
}

impl Rig {
    fn new(yaml: &str) -> Self {
        let clock = Arc::new(ManualClock::at(Timestamp::from_millis(1_000)));
        let shared = SharedState::new(Arc::new(Pool::with_clock(clock.clone())));
        shared.pool.set_members(SERVERS);
        let config = EndpointPickerConfig::from_yaml(yaml).unwrap();
        let scheduler = build_scheduler_in(&config, &builtin_registry(), &shared).unwrap();
        Rig {
            clock,
            shared,
            scheduler,
        }
    }

    /// A rig whose model has learned from 300 requests over varied loads.
    fn trained(yaml: &str) -> Self {
        let rig = Rig::new(yaml);
        for i in 0..300u32 {
            let waiting = [i % 7, (i * 3 + 2) % 5, (i * 5 + 1) % 6, (i * 2) % 3];
            rig.serve(u64::from(i), waiting, Ask::default()).unwrap();
        }
        rig
    }

    fn set_load(&self, waiting: [u32; 4], running: [u32; 4]) {
        for ((ep, w), r) in self
            .shared
            .pool
            .snapshot()
            .endpoints()
            .iter()
            .zip(waiting)
            .zip(running)
        {
            ep.set_metrics(EndpointMetrics {
                waiting: w,
                running: r,
                kv_utilization: 0.5,
                ..Default::default()
            });
        }
    }

    fn request(id: u64, ask: Ask) -> InferenceRequest {
        let mut request =
            InferenceRequest::new(format!("r{id}"), "m", Prompt::Tokens(vec![1; 100]));
        request.priority = ask.priority;
        if let Some(ms) = ask.ttft_objective {
            request
                .headers
                .push((SLO_TTFT_HEADER.into(), ms.to_string()));
        }
        if let Some(ms) = ask.tpot_objective {
            request
                .headers
                .push((SLO_TPOT_HEADER.into(), ms.to_string()));
        }
        request
    }

    /// Schedules one request (without playing it out).
    fn schedule(&self, id: u64, waiting: [u32; 4], ask: Ask) -> Result<Decision, ScheduleError> {
        self.set_load(waiting, [4; 4]);
        self.scheduler.schedule(&Rig::request(id, ask))
    }

    /// Schedules one request, plays its answer out on the clock as the picked server's load
    /// says, and returns the server's index.
    fn serve(&self, id: u64, waiting: [u32; 4], ask: Ask) -> Result<usize, ScheduleError> {
        let mut decision = self.schedule(id, waiting, ask)?;
        let server = index_of(decision.primary().address());
        let (ttft, tpot) = latencies(waiting[server]);
        self.advance(ttft);
        decision.handle_mut().first_token();
        self.advance(tpot * 9);
        decision.finish(Completion::success(Some(Usage {
            prompt_tokens: 100,
            completion_tokens: 10,
            cached_tokens: None,
        })));
        Ok(server)
    }

    fn advance(&self, ms: u64) {
        let now = self.clock.now();
        self.clock
            .set(now.saturating_add(Duration::from_millis(ms)));
    }

    fn producer(&self) -> Arc<LatencyProducer> {
        self.shared
            .resources
            .get::<LatencyProducer>("predicted-latency-producer")
            .unwrap()
    }
}

fn index_of(address: &str) -> usize {
    SERVERS.iter().position(|s| *s == address).unwrap()
}

fn kept(decision: &Decision) -> Vec<usize> {
    let mut servers: Vec<usize> = decision
        .breakdown
        .rows()
        .iter()
        .map(|r| index_of(&r.address))
        .collect();
    servers.sort_unstable();
    servers
}

#[test]
fn a_cold_model_falls_back_to_the_composite_score_and_lets_everything_through() {
    let rig = Rig::new(YAML);
    let tight = Ask {
        ttft_objective: Some(1),
        priority: -1,
        ..Ask::default()
    };
    for i in 0..40 {
        // Cold: no predictions, so the admitter fails open, the filter keeps every server, and
        // the fallback (free KV, relative queue, cached share) picks the shortest queue.
        let d = rig.schedule(i, [9, 0, 5, 7], tight).unwrap();
        assert_eq!(kept(&d), [0, 1, 2, 3]);
        assert_eq!(index_of(d.primary().address()), 1);
        assert!(d.breakdown.annotations().is_empty());
        d.finish(Completion::success(None));
    }
}

#[test]
fn a_trained_model_sends_requests_where_they_start_soonest_and_shows_its_predictions() {
    let rig = Rig::trained(YAML);
    for i in 0..20 {
        assert_eq!(rig.serve(1_000 + i, [6, 1, 3, 4], Ask::default()), Ok(1));
        assert_eq!(rig.serve(2_000 + i, [0, 4, 2, 3], Ask::default()), Ok(0));
    }
    let d = rig.schedule(3_000, [6, 1, 3, 4], Ask::default()).unwrap();
    let column = "predicted-latency-producer/ttft_ms";
    let predicted: Vec<f64> = d
        .breakdown
        .rows()
        .iter()
        .map(|r| r.notes.iter().find(|(c, _)| &**c == column).unwrap().1)
        .collect();
    // TTFT is 10 + 8 × waiting: 58, 18, 34, 42 ms.
    for (p, truth) in predicted.iter().zip([58.0, 18.0, 34.0, 42.0]) {
        assert!((p - truth).abs() < 0.1 * truth, "{predicted:?}");
    }
    assert!(d.breakdown.to_string().contains(column));
    let (ttft, tpot) = rig.producer().model().recent_errors();
    assert!(
        ttft.unwrap() < 0.1 && tpot.unwrap() < 0.1,
        "{ttft:?} {tpot:?}"
    );
}

#[test]
fn the_tier_filter_keeps_the_servers_predicted_to_meet_the_objective_else_every_server() {
    let rig = Rig::trained(YAML);
    let ttft = Ask::ttft;
    // Predicted TTFT 58, 18, 34, 42 ms; TPOT 7 ms everywhere.
    let d = rig.schedule(1, [6, 1, 3, 4], ttft(38)).unwrap();
    assert_eq!(kept(&d), [1, 2]);
    // `least`: of those that meet it, the one closest to the objective (packing).
    assert_eq!(index_of(d.primary().address()), 2);
    d.finish(Completion::success(None));
    // Nobody meets 5 ms: the best-effort tier is every server, and the least late wins.
    let d = rig.schedule(2, [6, 1, 3, 4], ttft(5)).unwrap();
    assert_eq!(kept(&d), [0, 1, 2, 3]);
    assert_eq!(index_of(d.primary().address()), 1);
    d.finish(Completion::success(None));
    // A TPOT objective nobody meets moves the TTFT-feasible servers out of the positive tier.
    let strict = Ask {
        tpot_objective: Some(3),
        ..ttft(1_000)
    };
    let d = rig.schedule(3, [6, 1, 3, 4], strict).unwrap();
    assert_eq!(kept(&d), [0, 1, 2, 3]);
    d.finish(Completion::success(None));
}

#[test]
fn exploring_keeps_the_negative_tier_when_both_tiers_exist_and_never_empties_the_set() {
    let rig = Rig::trained(&YAML.replace("{epsilonExploreNeg: 0}", "{epsilonExploreNeg: 1}"));
    let ttft = Ask::ttft;
    // Predicted TTFT 58, 18, 34, 42 ms: servers 1 and 2 meet 38 ms; exploring keeps the others.
    let d = rig.schedule(1, [6, 1, 3, 4], ttft(38)).unwrap();
    assert_eq!(kept(&d), [0, 3]);
    d.finish(Completion::success(None));
    // One tier only (all meet 1 s, or none meets 5 ms): every server, exploring or not.
    for (id, ms) in [(2, 1_000), (3, 5)] {
        let d = rig.schedule(id, [6, 1, 3, 4], ttft(ms)).unwrap();
        assert_eq!(kept(&d), [0, 1, 2, 3]);
        d.finish(Completion::success(None));
    }
}

#[test]
fn a_prefill_only_server_and_the_running_requests_tpot_objectives_change_what_is_judged() {
    let yaml = YAML.replace(
        "{streamingMode: true, minSamples: 50}",
        "{streamingMode: true, minSamples: 50, endpointRoleLabel: llm-d.ai/role}",
    );
    let rig = Rig::trained(&yaml);
    let generous = Ask::ttft(10_000);
    // Nothing running and no roles: every server meets a 50 ms TPOT (7 ms predicted).
    let d = rig.schedule(1, [2, 2, 2, 2], generous).unwrap();
    assert_eq!(kept(&d), [0, 1, 2, 3]);
    d.finish(Completion::success(None));

    // A request with a 1 ms TPOT objective runs on one server (picked, not finished): a new
    // request there would break it, so that server is no longer predicted to meet the TPOT.
    let tight = Ask {
        tpot_objective: Some(1),
        ..generous
    };
    let running = rig.schedule(2, [2, 2, 2, 2], tight).unwrap();
    let busy = index_of(running.primary().address());
    let d = rig.schedule(3, [2, 2, 2, 2], generous).unwrap();
    let others: Vec<usize> = (0..4).filter(|&i| i != busy).collect();
    assert_eq!(kept(&d), others);
    d.finish(Completion::success(None));
    running.finish(Completion::success(None));

    // A TPOT objective nobody meets, and server 3 only prefills: its TPOT is not judged, so
    // it alone is predicted to meet the request's objectives.
    let endpoints = rig.shared.pool.snapshot();
    endpoints.endpoints()[3].set_labels(
        [("llm-d.ai/role".to_string(), "prefill".to_string())]
            .into_iter()
            .collect(),
    );
    let strict = Ask {
        tpot_objective: Some(3),
        ..generous
    };
    let d = rig.schedule(4, [2, 2, 2, 2], strict).unwrap();
    assert_eq!(kept(&d), [3]);
    d.finish(Completion::success(None));
}

#[test]
fn the_admitter_refuses_only_sheddable_requests_nobody_can_serve_in_time() {
    let rig = Rig::trained(YAML);
    let ask = |ttft_ms, priority| Ask {
        ttft_objective: Some(ttft_ms),
        priority,
        ..Ask::default()
    };
    let err = rig.schedule(1, [6, 1, 3, 4], ask(5, -1)).unwrap_err();
    assert!(
        matches!(err, ScheduleError::Rejected { ref plugin, .. } if plugin == "latency-slo-admitter"),
        "{err}"
    );
    assert_eq!(err.http_status(), 429);
    // Not sheddable, or an objective some server meets, or no objective: served.
    rig.schedule(2, [6, 1, 3, 4], ask(5, 0))
        .unwrap()
        .finish(Completion::success(None));
    rig.schedule(3, [6, 1, 3, 4], ask(30, -1))
        .unwrap()
        .finish(Completion::success(None));
    let none = Ask {
        priority: -1,
        ..Ask::default()
    };
    rig.schedule(4, [6, 1, 3, 4], none)
        .unwrap()
        .finish(Completion::success(None));
    // An idle server (nothing running) lets the request through.
    rig.set_load([6, 1, 3, 4], [4, 4, 0, 4]);
    rig.scheduler
        .schedule(&Rig::request(5, ask(5, -1)))
        .unwrap()
        .finish(Completion::success(None));
    assert_eq!(rig.shared.metrics.errors("rejected"), 1);
}

#[test]
fn out_of_streaming_mode_the_model_learns_the_whole_latency() {
    let yaml = YAML.replace("streamingMode: true", "streamingMode: false");
    let rig = Rig::trained(&yaml);
    let d = rig.schedule(1, [6, 1, 3, 4], Ask::default()).unwrap();
    let ttft = d
        .breakdown
        .annotations()
        .get("predicted-latency-producer/ttft_ms", d.primary().id())
        .unwrap();
    // Server 1: 18 ms to the first token + 9 × 7 ms.
    assert!((ttft - 81.0).abs() < 8.1, "{ttft}");
    assert!(
        d.breakdown
            .annotations()
            .get("predicted-latency-producer/tpot_ms", d.primary().id())
            .is_none()
    );
}

#[test]
fn a_bare_latency_scorer_gets_a_default_producer_that_learns() {
    let rig = Rig::new(
        "
plugins:
- type: latency-scorer
- type: max-score-picker
",
    );
    for i in 0..250u32 {
        let waiting = [i % 7, (i * 3 + 2) % 5, (i * 5 + 1) % 6, (i * 2) % 3];
        rig.serve(u64::from(i), waiting, Ask::default()).unwrap();
    }
    let producer = rig.producer();
    assert!(!producer.settings().streaming_mode);
    assert!(producer.model().predictor().ttft_ready());
    assert_eq!(producer.tracked(), 0);
}

#[test]
fn bad_parameters_are_refused_with_the_field() {
    for (plugin, params, field) in [
        ("latency-scorer", "{ttftWeight: -1}", "ttftWeight"),
        (
            "latency-scorer",
            "{headroomSelectionStrategy: middle}",
            "`least` or `most`",
        ),
        (
            "predicted-latency-producer",
            "{minSamples: 0}",
            "minSamples",
        ),
        (
            "predicted-latency-producer",
            "{sloBufferFactor: -1}",
            "sloBufferFactor",
        ),
        (
            "slo-headroom-tier-filter",
            "{epsilonExploreNeg: 2}",
            "epsilonExploreNeg",
        ),
        ("latency-slo-admitter", "{ttftSLO: 3}", "ttftSLO"),
    ] {
        let yaml = format!("plugins:\n- type: {plugin}\n  parameters: {params}\n");
        let config = EndpointPickerConfig::from_yaml(&yaml).unwrap();
        let Err(err) = build_scheduler(&config, &builtin_registry(), Arc::new(Pool::new())) else {
            panic!("{plugin} {params} was accepted");
        };
        assert!(err.to_string().contains(field), "{err}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the load and the objectives, the filter leaves a candidate, keeps only
    /// servers predicted to meet the objectives when there are any, and nothing panics.
    #[test]
    fn the_tier_filter_never_empties_the_set(
        waiting in proptest::array::uniform4(0u32..40),
        ttft in proptest::option::of(1u64..400),
        tpot in proptest::option::of(1u64..20),
    ) {
        let rig = TRAINED.with(Arc::clone);
        let ask = Ask { ttft_objective: ttft, tpot_objective: tpot, priority: 0 };
        let d = rig.schedule(7, waiting, ask).unwrap();
        let servers = kept(&d);
        prop_assert!(!servers.is_empty());
        let meets = |s: usize| {
            let (t, p) = latencies(waiting[s]);
            // Predictions are within 10 % of the truth: judge only clear cases.
            let t = t as f64;
            let p = p as f64;
            ttft.is_none_or(|o| t * 1.15 < o as f64) && tpot.is_none_or(|o| p * 1.15 < o as f64)
        };
        let misses = |s: usize| {
            let (t, p) = latencies(waiting[s]);
            ttft.is_some_and(|o| (t as f64) * 0.85 > o as f64) || tpot.is_some_and(|o| (p as f64) * 0.85 > o as f64)
        };
        if (0..4).any(meets) {
            prop_assert!(servers.iter().all(|&s| !misses(s)), "{servers:?} {waiting:?} {ttft:?} {tpot:?}");
        }
        d.finish(Completion::success(None));
    }
}

thread_local! {
    static TRAINED: Arc<Rig> = Arc::new(Rig::trained(YAML));
}

#[test]
fn the_affinity_filter_breaks_stickiness_when_the_predicted_ttft_penalty_is_too_high() {
    let yaml = "
plugins:
- type: predicted-latency-producer
  parameters: {streamingMode: true, minSamples: 50}
- type: prefix-cache-scorer
- type: prefix-cache-affinity-filter
  parameters: {affinityThreshold: 0.9, maxTTFTPenaltyMs: 20, ttftSource: latencyPredictor}
- type: latency-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-affinity-filter
  - pluginRef: prefix-cache-scorer
  - pluginRef: latency-scorer
  - pluginRef: max-score-picker
";
    let rig = Rig::trained(yaml);
    // A new 1,000-token prompt, served once: its server now holds it (sticky).
    let prompt = Prompt::Tokens((0..1000).map(|i| 50_000 + i).collect());
    let ask = |id: &str| InferenceRequest::new(id, "m", prompt.clone());
    rig.set_load([0; 4], [4; 4]);
    let first = rig.scheduler.schedule(&ask("p0")).unwrap();
    let home = index_of(first.primary().address());
    first.finish(Completion::success(None));
    // The home predicted 8 ms slower than the others (18 vs 10 ms): within the 20 ms
    // penalty, the filter keeps only the home.
    let mut waiting = [0; 4];
    waiting[home] = 1;
    rig.set_load(waiting, [4; 4]);
    let d = rig.scheduler.schedule(&ask("p1")).unwrap();
    assert_eq!(kept(&d), [home]);
    d.finish(Completion::success(None));
    // 72 ms slower (82 vs 10): stickiness is broken, every server is kept.
    waiting[home] = 9;
    rig.set_load(waiting, [4; 4]);
    let d = rig.scheduler.schedule(&ask("p2")).unwrap();
    assert_eq!(kept(&d), [0, 1, 2, 3]);
    d.finish(Completion::success(None));
}
