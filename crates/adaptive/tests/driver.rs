//! The driver contract: [`ControllerDriver`] built from a config and ticked like a simulator
//! or runtime would.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

use std::sync::Arc;
use std::time::Duration;

use shepherd_adaptive::{AdaptiveSample, ControllerDriver, TickDriver};
use shepherd_scheduler_core::clock::{ManualClock, Timestamp};
use shepherd_scheduler_core::config::EndpointPickerConfig;
use shepherd_scheduler_core::endpoint::{EndpointMetrics, Pool};
use shepherd_scheduler_core::plugin::Category;
use shepherd_scheduler_core::profile::Profile;
use shepherd_scheduler_core::scheduler::Scheduler;

use common::CategoryScorer;

fn scheduler(pool: Arc<Pool>) -> Scheduler {
    let profile = Profile::builder("default")
        .scorer("prefix", Arc::new(CategoryScorer(Category::Affinity)), 3.0)
        .scorer(
            "queue",
            Arc::new(CategoryScorer(Category::Distribution)),
            2.0,
        )
        .build();
    Scheduler::builder(pool).profile(profile).build().unwrap()
}

fn config(yaml: &str) -> EndpointPickerConfig {
    EndpointPickerConfig::from_yaml(yaml).unwrap()
}

#[test]
fn no_adaptive_section_means_no_driver() {
    let s = scheduler(Arc::new(Pool::new()));
    let driver = ControllerDriver::from_config(&config("{}"), &s).unwrap();
    assert!(driver.is_none());
}

#[test]
fn an_invalid_section_is_an_error() {
    let s = scheduler(Arc::new(Pool::new()));
    let bad = config("adaptive:\n  hysteresis:\n    exit: 0.9\n");
    let err = ControllerDriver::from_config(&bad, &s).unwrap_err();
    assert!(err.to_string().contains("hysteresis.exit"), "{err}");
}

#[test]
fn samples_follow_the_controller_records() {
    let clock = Arc::new(ManualClock::default());
    let pool = Arc::new(Pool::with_clock(clock.clone()));
    pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"]);
    let s = scheduler(Arc::clone(&pool));
    let mut driver = ControllerDriver::from_config(&config("adaptive:\n  tickMs: 50\n"), &s)
        .unwrap()
        .unwrap();
    assert_eq!(driver.interval(), Duration::from_millis(50));
    assert!(Arc::ptr_eq(driver.controller().profile(), &s.profiles()[0]));

    // One hot endpoint: the controller leaves `steady`, and the sample carries its reason.
    let mut now = Timestamp::ZERO;
    let mut samples: Vec<AdaptiveSample> = Vec::new();
    for _ in 0..40 {
        clock.set(now);
        for (i, ep) in pool.snapshot().endpoints().iter().enumerate() {
            let running = if i == 0 { 60 } else { 1 };
            ep.set_metrics(EndpointMetrics {
                running,
                ..Default::default()
            });
        }
        let sample = driver.tick(&pool.snapshot(), now).unwrap();
        let record = driver.controller().latest().unwrap();
        assert_eq!(sample, AdaptiveSample::from(&record));
        assert_eq!(sample.time, now.as_nanos());
        samples.push(sample);
        now = now.saturating_add(driver.interval());
    }
    let switch = samples.iter().position(|s| s.mode == "burst").unwrap();
    assert!(samples[switch].reason.is_some());
    assert_eq!(samples.iter().filter(|s| s.reason.is_some()).count(), 1);
    assert_eq!(
        samples.last().unwrap().weights,
        driver
            .controller()
            .profile()
            .weights()
            .load()
            .as_slice()
            .to_vec()
    );
    let _controller = driver.into_controller();
}
