//! Scenarios on a real pool and profile, through the controller.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

use std::sync::Arc;
use std::time::Duration;

use shepherd_adaptive::{AdaptiveConfig, AdaptiveController, Mode};
use shepherd_scheduler_core::clock::{ManualClock, Timestamp};
use shepherd_scheduler_core::endpoint::{EndpointMetrics, Pool};
use shepherd_scheduler_core::plugin::Category;
use shepherd_scheduler_core::profile::Profile;

use common::{CategoryScorer, builtin_like_profile};

const TICK: Duration = Duration::from_millis(200);

struct Episode {
    pool: Pool,
    clock: Arc<ManualClock>,
    controller: AdaptiveController,
    profile: Arc<Profile>,
    now: Timestamp,
}

impl Episode {
    fn new(endpoints: usize, profile: Arc<Profile>, config: AdaptiveConfig) -> Self {
        let clock = Arc::new(ManualClock::default());
        let pool = Pool::with_clock(clock.clone());
        pool.set_members((0..endpoints).map(|i| format!("10.0.0.{i}:8000")));
        let controller = AdaptiveController::new(Arc::clone(&profile), config).unwrap();
        Episode {
            pool,
            clock,
            controller,
            profile,
            now: Timestamp::from_millis(1_000),
        }
    }

    /// Scrapes `(running, waiting, kv)` per endpoint at the current time.
    fn scrape(&self, metrics: &[(u32, u32, f64)]) {
        self.clock.set(self.now);
        for (ep, &(running, waiting, kv)) in self.pool.snapshot().endpoints().iter().zip(metrics) {
            ep.set_metrics(EndpointMetrics {
                running,
                waiting,
                kv_utilization: kv,
                ..Default::default()
            });
        }
    }

    /// `ticks` ticks with the same scraped metrics, refreshed every tick.
    fn run(&mut self, ticks: u64, metrics: &[(u32, u32, f64)]) {
        for _ in 0..ticks {
            self.scrape(metrics);
            self.controller.tick(&self.pool.snapshot(), self.now);
            self.now = self.now.saturating_add(TICK);
        }
    }

    /// `ticks` ticks without scraping anything.
    fn run_unscraped(&mut self, ticks: u64) {
        for _ in 0..ticks {
            self.controller.tick(&self.pool.snapshot(), self.now);
            self.now = self.now.saturating_add(TICK);
        }
    }

    fn live(&self) -> Vec<f64> {
        self.profile.weights().load().as_slice().to_vec()
    }

    fn bound(&self) -> u64 {
        self.controller.config().settle_bound_ticks()
    }
}

fn hot_node(n: usize) -> Vec<(u32, u32, f64)> {
    let mut m = vec![(3, 0, 0.35); n];
    m[0] = (8, 40, 0.97);
    m
}

fn balanced(n: usize) -> Vec<(u32, u32, f64)> {
    vec![(6, 1, 0.45); n]
}

#[test]
fn hot_node_raises_distribution_weight_and_balance_returns_it() {
    let mut ep = Episode::new(8, builtin_like_profile(), AdaptiveConfig::default());
    let bound = ep.bound();
    ep.run(bound, &balanced(8));
    assert_eq!(ep.live(), vec![3.0, 2.0, 2.0]);

    ep.run(bound, &hot_node(8));
    let hot = ep.live();
    assert_eq!(ep.controller.state().mode, Mode::Burst);
    assert!(hot[0] < 3.0, "affinity weight should drop: {hot:?}");
    assert!(
        hot[1] > 2.0 && hot[2] > 2.0,
        "distribution weights should rise: {hot:?}"
    );
    assert!(
        (hot[1] - hot[2]).abs() < 1e-12,
        "relative preferences kept: {hot:?}"
    );
    assert!(
        (hot.iter().sum::<f64>() - 7.0).abs() < 1e-9,
        "budget kept: {hot:?}"
    );
    let entered = ep
        .controller
        .with_history(|h| h.iter().find(|r| r.mode_changed()).cloned())
        .unwrap();
    assert_eq!(entered.mode, Mode::Burst);
    assert!(
        entered.reason.contains("entered burst"),
        "{}",
        entered.reason
    );
    assert!(entered.reading.ncv_load > 0.4);
    assert!(ep.profile.weights().load().reason().contains("burst"));

    ep.run(bound, &balanced(8));
    assert_eq!(ep.controller.state().mode, Mode::Steady);
    assert_eq!(
        ep.live(),
        vec![3.0, 2.0, 2.0],
        "back to the affinity-favouring default"
    );
    assert!(
        ep.controller
            .with_history(|h| h.iter().any(|r| r.reason.contains("left burst")))
    );
}

#[test]
fn a_single_endpoint_leaves_configured_weights_untouched() {
    let mut ep = Episode::new(1, builtin_like_profile(), AdaptiveConfig::default());
    ep.run(40, &[(50, 200, 1.0)]);
    assert_eq!(ep.live(), vec![3.0, 2.0, 2.0]);
    assert_eq!(ep.profile.weights().load().reason(), "configured");
    let last = ep.controller.latest().unwrap();
    assert_eq!(last.reading.signal, Some(0.0));
    assert!(
        last.reason.contains("fewer than 2 fresh endpoints"),
        "{}",
        last.reason
    );
}

#[test]
fn an_idle_pool_leaves_configured_weights_untouched() {
    let mut ep = Episode::new(8, builtin_like_profile(), AdaptiveConfig::default());
    // Three requests on one endpoint, nothing elsewhere: maximal spread, but nearly idle.
    let mut idle = vec![(0, 0, 0.0); 8];
    idle[0] = (3, 0, 0.2);
    ep.run(40, &idle);
    assert_eq!(ep.live(), vec![3.0, 2.0, 2.0]);
    assert_eq!(ep.profile.weights().load().reason(), "configured");
    let last = ep.controller.latest().unwrap();
    assert!(last.reading.idle);
    assert!(last.reason.contains("nearly idle"), "{}", last.reason);
}

#[test]
fn all_stale_metrics_leave_configured_weights_untouched() {
    let mut ep = Episode::new(8, builtin_like_profile(), AdaptiveConfig::default());
    // Never scraped: every endpoint is stale, even with in-flight requests piled on one.
    let snapshot = ep.pool.snapshot();
    let _guards: Vec<_> = (0..30)
        .map(|_| snapshot.endpoints()[0].start_request(1))
        .collect();
    ep.run_unscraped(40);
    assert_eq!(ep.live(), vec![3.0, 2.0, 2.0]);
    assert_eq!(ep.profile.weights().load().reason(), "configured");
    assert!(ep.controller.with_history(|h| h.iter().all(|r| r.held)));
    assert!(ep.controller.latest().unwrap().reason.starts_with("held"));
}

#[test]
fn all_stale_metrics_hold_the_weights_in_force() {
    let mut ep = Episode::new(8, builtin_like_profile(), AdaptiveConfig::default());
    ep.run(ep.bound(), &hot_node(8));
    let before = ep.live();
    let state_before = ep.controller.state();
    // Metrics stop arriving: they age past the staleness bound and the loop holds.
    ep.run_unscraped(30);
    assert_eq!(ep.live(), before);
    let state = ep.controller.state();
    assert_eq!(state.mode, Mode::Burst);
    assert_eq!(state.smoothed, state_before.smoothed);
}

#[test]
fn stale_endpoints_are_left_out_of_the_statistics() {
    let ep = Episode::new(4, builtin_like_profile(), AdaptiveConfig::default());
    // Endpoint 0 reports a huge queue but its metrics are old; the fresh three are even.
    let snapshot = ep.pool.snapshot();
    ep.clock.set(Timestamp::ZERO);
    snapshot.endpoints()[0].set_metrics(EndpointMetrics {
        waiting: 500,
        ..Default::default()
    });
    ep.clock.set(ep.now);
    for e in &snapshot.endpoints()[1..] {
        e.set_metrics(EndpointMetrics {
            running: 5,
            kv_utilization: 0.4,
            ..Default::default()
        });
    }
    let record = ep.controller.tick(&snapshot, ep.now);
    assert!(record.endpoints[0].stale);
    assert_eq!(record.reading.fresh, 3);
    assert_eq!(record.reading.signal, Some(0.0));
    assert!(
        record.reason.contains("1 stale endpoint"),
        "{}",
        record.reason
    );
}

#[test]
fn balance_scorers_keep_their_weight() {
    let profile = Arc::new(
        Profile::builder("mixed")
            .scorer("prefix", Arc::new(CategoryScorer(Category::Affinity)), 2.0)
            .scorer("lora", Arc::new(CategoryScorer(Category::Affinity)), 1.0)
            .scorer(
                "queue",
                Arc::new(CategoryScorer(Category::Distribution)),
                3.0,
            )
            .scorer("slo", Arc::new(CategoryScorer(Category::Balance)), 5.0)
            .build(),
    );
    let mut ep = Episode::new(6, profile, AdaptiveConfig::default());
    ep.run(ep.bound(), &hot_node(6));
    let w = ep.live();
    assert_eq!(w[3], 5.0);
    assert!(
        (w[0] / w[1] - 2.0).abs() < 1e-12,
        "affinity ratio kept: {w:?}"
    );
    assert!((w[0] + w[1] + w[2] - 6.0).abs() < 1e-9);
    assert!(w[2] > 3.0);
}

#[test]
fn disabled_config_keeps_configured_weights() {
    let config = AdaptiveConfig {
        enabled: false,
        ..AdaptiveConfig::default()
    };
    let mut ep = Episode::new(8, builtin_like_profile(), config);
    ep.run(30, &hot_node(8));
    assert_eq!(ep.live(), vec![3.0, 2.0, 2.0]);
    assert!(ep.controller.latest().unwrap().reason.contains("disabled"));
}

#[test]
fn history_is_bounded_and_serializable() {
    let config = AdaptiveConfig {
        history_capacity: 5,
        ..AdaptiveConfig::default()
    };
    let mut ep = Episode::new(3, builtin_like_profile(), config);
    ep.run(12, &balanced(3));
    let history = ep.controller.history();
    assert_eq!(history.len(), 5);
    let ticks: Vec<u64> = history.iter().map(|r| r.tick).collect();
    assert_eq!(ticks, vec![7, 8, 9, 10, 11]);
    let json: serde_json::Value = serde_json::to_value(&history).unwrap();
    let first = &json[0];
    assert_eq!(first["tick"], 7);
    assert_eq!(first["mode"], "steady");
    assert_eq!(first["endpoints"][0]["address"], "10.0.0.0:8000");
    assert_eq!(first["endpoints"][0]["load"], 7.0);
    assert!(first["reading"]["ncvLoad"].is_number());
    assert!(first["reason"].is_string());
}

#[test]
fn empty_pool_keeps_configured_weights() {
    let mut ep = Episode::new(0, builtin_like_profile(), AdaptiveConfig::default());
    ep.run(5, &[]);
    assert_eq!(ep.live(), vec![3.0, 2.0, 2.0]);
}
