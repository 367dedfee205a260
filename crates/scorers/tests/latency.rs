//! `latency-scorer` in a scheduler: neutral while its model is cold, then, having learned from
//! finished requests how each server's load turns into TTFT, it sends requests where they
//! will start soonest.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::sync::Arc;
use std::time::Duration;

use shepherd_scheduler_core::clock::{ManualClock, Timestamp};
use shepherd_scheduler_core::config::build_scheduler_in;
use shepherd_scheduler_core::prelude::*;
use shepherd_scheduler_core::shared::SharedState;
use shepherd_scorers::builtin_registry;

const SERVERS: [&str; 2] = ["127.0.0.1:8000", "127.0.0.1:8001"];

const YAML: &str = "
plugins:
- type: latency-scorer
  parameters: {minSamples: 50}
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
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

impl Rig {
    fn new() -> Self {
        let clock = Arc::new(ManualClock::at(Timestamp::from_millis(1_000)));
        let shared = SharedState::new(Arc::new(Pool::with_clock(clock.clone())));
        shared.pool.set_members(SERVERS);
        let config = EndpointPickerConfig::from_yaml(YAML).unwrap();
        let scheduler = build_scheduler_in(&config, &builtin_registry(), &shared).unwrap();
        Rig {
            clock,
            shared,
            scheduler,
        }
    }

    fn set_waiting(&self, waiting: [u32; 2]) {
        for (ep, w) in self.shared.pool.snapshot().endpoints().iter().zip(waiting) {
            ep.set_metrics(EndpointMetrics {
                waiting: w,
                running: 4,
                ..Default::default()
            });
        }
    }

    /// Schedules one request, plays its answer out on the clock as the picked server's load
    /// says, and returns the server's index.
    fn serve(&self, id: u64, waiting: [u32; 2]) -> usize {
        self.set_waiting(waiting);
        let request = InferenceRequest::new(format!("r{id}"), "m", Prompt::Tokens(vec![1; 100]));
        let mut decision = self.scheduler.schedule(&request).unwrap();
        let server = SERVERS
            .iter()
            .position(|s| *s == decision.primary().address())
            .unwrap();
        let (ttft, tpot) = latencies(waiting[server]);
        self.advance(ttft);
        decision.handle_mut().first_token();
        self.advance(tpot * 9);
        decision.finish(Completion::success(Some(Usage {
            prompt_tokens: 100,
            completion_tokens: 10,
            cached_tokens: None,
        })));
        server
    }

    fn advance(&self, ms: u64) {
        let now = self.clock.now();
        self.clock
            .set(now.saturating_add(Duration::from_millis(ms)));
    }
}

#[test]
fn a_cold_model_leaves_the_choice_to_the_other_scorers() {
    let rig = Rig::new();
    // The slow server is picked as often as the fast one while nothing has been learned.
    let picks: Vec<usize> = (0..40).map(|i| rig.serve(i, [9, 0])).collect();
    let slow = picks.iter().filter(|&&s| s == 0).count();
    assert!((5..35).contains(&slow), "{slow} of 40 on the slow server");
}

#[test]
fn a_trained_model_sends_requests_where_they_start_soonest() {
    let rig = Rig::new();
    for i in 0..300u32 {
        let waiting = [i % 7, (i * 3 + 2) % 5];
        rig.serve(u64::from(i), waiting);
    }
    for i in 0..20 {
        assert_eq!(rig.serve(1_000 + i, [6, 1]), 1);
        assert_eq!(rig.serve(2_000 + i, [0, 4]), 0);
    }
}

#[test]
fn bad_parameters_are_refused_with_the_field() {
    for (params, field) in [
        ("{tpotWeight: -1}", "tpotWeight"),
        ("{minSamples: 0}", "minSamples"),
        ("{window: 0}", "window"),
        ("{maxError: -1}", "maxError"),
    ] {
        let yaml = YAML.replace("{minSamples: 50}", params);
        let config = EndpointPickerConfig::from_yaml(&yaml).unwrap();
        let Err(err) = build_scheduler(&config, &builtin_registry(), Arc::new(Pool::new())) else {
            panic!("{params} was accepted");
        };
        assert!(err.to_string().contains(field), "{err}");
    }
}
