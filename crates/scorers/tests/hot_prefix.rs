//! `hot-prefix-scorer` in a profile: a prefix carrying most of the work in flight gets one new
//! home per request until its share is covered, a prefix with a small share stays where
//! prefix affinity puts it, and finished requests stop counting.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeSet;
use std::sync::Arc;

use shepherd_scheduler_core::prelude::*;
use shepherd_scorers::builtin_registry;

fn yaml(hot_parameters: &str) -> String {
    format!(
        "
plugins:
- type: prefix-cache-scorer
  parameters: {{blockSize: 16}}
- type: hot-prefix-scorer
  parameters: {{blockSize: 16{hot_parameters}}}
- type: active-request-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
    weight: 3
  - pluginRef: hot-prefix-scorer
    weight: 4
  - pluginRef: active-request-scorer
    weight: 1
  - pluginRef: max-score-picker
"
    )
}

fn scheduler(members: usize, hot_parameters: &str) -> Scheduler {
    let config = EndpointPickerConfig::from_yaml(&yaml(hot_parameters)).unwrap();
    let pool = Arc::new(Pool::new());
    pool.set_members((0..members).map(|i| format!("127.0.0.1:{}", 8000 + i)));
    build_scheduler(&config, &builtin_registry(), pool).unwrap()
}

/// `prefix` tokens of system prompt `group` followed by `suffix` tokens unique to `tag`.
fn request(group: u32, prefix: u32, suffix: u32, tag: u32) -> InferenceRequest {
    let tokens = (0..prefix)
        .map(|i| 10_000_000 * (group + 1) + i)
        .chain((0..suffix).map(|i| 1_000_000_000 + 1_000 * tag + i))
        .collect();
    InferenceRequest::new(format!("r{group}-{tag}"), "m", Prompt::Tokens(tokens))
}

fn address(d: &Decision) -> String {
    d.primary().address().to_string()
}

/// Schedules requests `tags` of system prompt `group`, keeping them in flight; returns the
/// decisions and the servers they went to.
fn schedule_all(
    s: &Scheduler,
    group: u32,
    tags: std::ops::Range<u32>,
) -> (Vec<Decision>, BTreeSet<String>) {
    let live: Vec<Decision> = tags
        .map(|tag| s.schedule(&request(group, 1600, 40, tag)).unwrap())
        .collect();
    let homes = live.iter().map(address).collect();
    (live, homes)
}

#[test]
fn a_prefix_with_all_the_work_opens_a_home_per_request_until_every_server_has_it() {
    let s = scheduler(4, ", minRequests: 1");
    let (_live, homes) = schedule_all(&s, 0, 0..4);
    assert_eq!(homes.len(), 4, "one new home per request: {homes:?}");
    // Every server holds it now: the scorer is neutral and affinity keeps it on a holder.
    let d = s.schedule(&request(0, 1600, 40, 9)).unwrap();
    assert!(homes.contains(&address(&d)));
}

#[test]
fn without_the_scorer_the_same_requests_stay_on_one_server() {
    // The control: the same profile with the hot scorer capped at one home.
    let s = scheduler(4, ", maxHomes: 1");
    let (_live, homes) = schedule_all(&s, 0, 0..4);
    assert_eq!(homes.len(), 1, "{homes:?}");
}

#[test]
fn max_homes_bounds_the_homes_of_a_key() {
    let s = scheduler(6, ", maxHomes: 2");
    let (_live, homes) = schedule_all(&s, 0, 0..6);
    assert_eq!(homes.len(), 2, "{homes:?}");
}

#[test]
fn a_prefix_with_a_small_share_keeps_one_home() {
    let s = scheduler(4, "");
    let mut live = Vec::new();
    // Eight other prefixes of the same size in flight.
    for group in 1..=8 {
        live.push(s.schedule(&request(group, 1600, 40, 0)).unwrap());
    }
    let first = s.schedule(&request(0, 1600, 40, 0)).unwrap();
    let home = address(&first);
    live.push(first);
    // Its second request makes its share 2/10 of the work: ceil(0.2 × 4) = 1 home.
    let second = s.schedule(&request(0, 1600, 40, 1)).unwrap();
    assert_eq!(address(&second), home);
}

#[test]
fn finished_requests_stop_counting() {
    let s = scheduler(4, "");
    let mut others = Vec::new();
    for group in 1..=8 {
        others.push(s.schedule(&request(group, 1600, 40, 0)).unwrap());
    }
    // A burst of one prefix among them opens homes while it is in flight...
    let (burst, homes) = schedule_all(&s, 0, 0..12);
    assert!(homes.len() >= 3, "{homes:?}");
    for d in burst {
        d.finish(Completion::success(None));
    }
    for d in others.drain(..) {
        d.finish(Completion::success(None));
    }
    // ...and with the pool idle again a new prefix is not hot until its own work says so:
    // its first three requests share one home (`minRequests` 4), the fourth opens another.
    let a = s.schedule(&request(20, 1600, 40, 0)).unwrap();
    let b = s.schedule(&request(20, 1600, 40, 1)).unwrap();
    let c = s.schedule(&request(20, 1600, 40, 2)).unwrap();
    assert_eq!(address(&a), address(&b));
    assert_eq!(address(&a), address(&c));
    let d = s.schedule(&request(20, 1600, 40, 3)).unwrap();
    assert_ne!(address(&a), address(&d));
}

#[test]
fn bad_parameters_are_refused_with_the_field() {
    for (params, field) in [
        (", homesPerShare: 0", "homesPerShare"),
        (", maxTracked: 0", "maxTracked"),
        (", prefixBlocks: 0", "prefixBlocks"),
        (", minRequests: 0", "minRequests"),
    ] {
        let config = EndpointPickerConfig::from_yaml(&yaml(params)).unwrap();
        let pool = Arc::new(Pool::new());
        let Err(err) = build_scheduler(&config, &builtin_registry(), pool) else {
            panic!("{params} was accepted");
        };
        let err = err.to_string();
        assert!(err.contains(field), "{err}");
    }
}
